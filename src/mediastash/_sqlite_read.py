"""Opening a SQLite file only to read it, so that no file appears and none changes.

A read-only connection (``mode=ro``) to a database in WAL mode creates its
``-wal`` and ``-shm`` files when none exist (no process has it open) and, not
allowed to write, cannot remove them on close: a read leaves two files behind.
``read_only`` avoids that: such a database is opened ``immutable=1``, which
reads the file alone with no lock and no side file. That is only sound while
nobody writes, so ``ReadOnlyDatabase.unchanged`` says afterwards whether the
read was undisturbed (no ``-wal`` appeared, the file's size, time and inode
are as before); a caller that needs a consistent read refuses otherwise. Any
other database (rollback journal, or WAL with its ``-wal`` present because a
writer has it open) is opened ``mode=ro``, with SQLite's own locking: reading
it creates no file. ``docs/cli.md`` states the rule.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import quote

__all__ = ['ReadOnlyDatabase', 'read_only']

_HEADER: Final = b'SQLite format 3\x00'
_WAL_VERSION: Final = 2
"""Bytes 18 and 19 of the header (write and read format versions): 2 in WAL mode, 1 with a rollback journal."""


def _in_wal_mode(path: Path) -> bool:
    try:
        with path.open('rb') as file:
            head = file.read(20)
    except OSError:
        return False
    return len(head) == 20 and head.startswith(_HEADER) and _WAL_VERSION in (head[18], head[19])


def _fingerprint(path: Path) -> tuple[int, int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


@dataclass(frozen=True, slots=True)
class ReadOnlyDatabase:
    """A read-only connection that creates no file, and how to tell whether its read was undisturbed."""

    connection: sqlite3.Connection
    path: Path
    immutable: bool
    """Opened ``immutable=1`` (a WAL database nobody had open): a writer arriving meanwhile goes unseen."""
    before: tuple[int, int, int, int] | None

    def unchanged(self) -> bool:
        """Whether everything read so far is a consistent read of the file (always, unless ``immutable``)."""
        if not self.immutable:
            return True
        wal = Path(f'{self.path}-wal')
        return not wal.exists() and _fingerprint(self.path) == self.before


def read_only(path: str | os.PathLike[str], *, timeout: float = 30.0, threads: bool = False) -> ReadOnlyDatabase:
    """Open the database at ``path`` to read it without creating or changing any file.

    ``threads``: the connection may be used from other threads (``check_same_thread=False``).
    Autocommit (``isolation_level=None``): a caller opens its own read transaction.
    Raises ``sqlite3.Error`` as ``sqlite3.connect`` does.
    """
    database = Path(path)
    before = _fingerprint(database)
    immutable = _in_wal_mode(database) and not Path(f'{database}-wal').exists()
    uri = f'file:{quote(str(database.resolve()))}?mode=ro{"&immutable=1" if immutable else ""}'
    connection = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=not threads, isolation_level=None)
    return ReadOnlyDatabase(connection, database, immutable, before)
