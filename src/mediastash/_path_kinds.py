"""What a path on disk is, for the commands that read roots and histories (``gc``, ``tune``).

One answer shared by every reader, so garbage collection and tuning never
disagree on what a step store looks like. ``classify`` looks at a name, at
most the first 4 KiB of a file and, for a SQLite file, its table list (opened
read-only); it never reads a blob's bytes. ``docs/gc.md`` lists the kinds and
what a root folder does with each.
"""

from __future__ import annotations

import enum
import os
import re
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from mediastash._sqlite_read import read_only

__all__ = [
    'NOT_ROOTS',
    'PathKind',
    'PathKindError',
    'classify',
    'file_step_store_runs',
    'is_file_step_store',
    'sqlite_tables',
    'walk_files',
]

_HEAD_BYTES: Final = 4096
_SQLITE_HEADER: Final = b'SQLite format 3\x00'
_BLOB_NAME: Final = re.compile(r'[0-9a-f]{64}\.bin')
"""The file name both libraries' disk media stores give a blob (default and sharded layouts)."""
_SIDECAR_NAME: Final = re.compile(r'[0-9a-f]{64}\.bin\.(?:meta\.json|mediatype)')
"""A blob's metadata sidecar, or the file where mediastash's disk store records its media type."""
_HARNESS_TEMP: Final = re.compile(r'.+\.[0-9a-f]{32}\.tmp')
"""pydantic-ai-harness writes ``<name>.<uuid4 hex>.tmp`` and renames it into place."""
_OUR_TEMP: Final = re.compile(r'\.mediastash-tmp-.*|\..+\.[A-Za-z0-9_]{8}\.tmp')
"""A disk store's ``.mediastash-tmp-*``; the CLI's output files are written as ``.<name>.<random>.tmp``."""
_SQLITE_SIDE_SUFFIXES: Final = ('-wal', '-shm', '-journal')
_JSON_LINES_SUFFIXES: Final = ('.jsonl', '.ndjson')
_JSON_STARTS: Final = frozenset(bytes([byte]) for byte in b'{["-0123456789tfn')
"""First bytes a JSON value can start with (a file named ``*.json`` or ``*.jsonl`` is taken at its word)."""
_MEDIA_PAYLOAD_COLUMNS: Final = frozenset({'bytes', 'data'})


class PathKindError(OSError):
    """A path could not be looked at (permission, I/O error); ``strerror`` says why."""


class PathKind(enum.Enum):
    """What ``classify`` found."""

    MISSING = 'missing'
    FILE_STEP_STORE = 'file-steps'
    """A folder holding pydantic-ai-harness ``FileStepStore`` runs (``<run>/run.json`` or ``<run>/snapshots/``)."""
    FOLDER = 'folder'
    SQLITE_STEP_STORE = 'sqlite-steps'
    """A SQLite database with a ``snapshots`` table (pydantic-ai-harness ``SqliteStepStore``)."""
    SQLITE_MEDIA_STORE = 'sqlite-media'
    """A SQLite database whose every table is a media table (``sha256`` and payload columns): blobs only."""
    SQLITE_OTHER = 'sqlite'
    SQLITE_SIDE_FILE = 'sqlite-side-file'
    """``<db>-wal``, ``<db>-shm`` or ``<db>-journal`` beside a SQLite database: read through the database."""
    JSON = 'json'
    JSON_LINES = 'json-lines'
    URI_LIST = 'uris'
    BLOB = 'blob'
    """A disk media store's blob (``<hex>.bin``) or a sidecar (``<hex>.bin.meta.json``, ``<hex>.bin.mediatype``)."""
    WRITER_TEMP = 'writer-temp'
    """A temporary file a writer renames into place when done (or a crash left behind)."""
    EMPTY = 'empty'
    SPECIAL = 'special'
    """A FIFO, socket or device: never opened for reading."""
    UNKNOWN = 'unknown'


NOT_ROOTS: Final = frozenset(
    {PathKind.BLOB, PathKind.WRITER_TEMP, PathKind.SQLITE_MEDIA_STORE, PathKind.SQLITE_SIDE_FILE}
)
"""Kinds that hold no references by construction: a root folder passes over them without reading them."""


def classify(path: Path) -> PathKind:
    """What ``path`` is (symlinks followed). Raises ``PathKindError`` when it cannot be looked at."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return PathKind.MISSING
    except OSError as error:
        raise PathKindError(error.errno, error.strerror or type(error).__name__, str(path)) from None
    if stat.S_ISDIR(mode):
        return PathKind.FILE_STEP_STORE if is_file_step_store(path) else PathKind.FOLDER
    if not stat.S_ISREG(mode):
        return PathKind.SPECIAL
    name = path.name
    if _BLOB_NAME.fullmatch(name) or _SIDECAR_NAME.fullmatch(name):
        return PathKind.BLOB
    if _HARNESS_TEMP.fullmatch(name) or _OUR_TEMP.fullmatch(name):
        return PathKind.WRITER_TEMP
    if _is_sqlite_side_file(path):
        return PathKind.SQLITE_SIDE_FILE
    if name.endswith('.json'):
        return PathKind.JSON  # taken at its word, unopened: whatever else it holds, parsing it refuses it
    head = _head(path)
    if head is None:
        return PathKind.MISSING
    if not head:
        return PathKind.EMPTY
    if head.startswith(_SQLITE_HEADER):
        return _sqlite_kind(path)
    start = head.lstrip(b'\xef\xbb\xbf \t\r\n')
    if name.endswith(_JSON_LINES_SUFFIXES) and start[:1] in _JSON_STARTS:
        return PathKind.JSON_LINES  # any JSON values: the harness keeps plain strings in snapshot-keys.jsonl
    if start[:1] in (b'{', b'[') or (name.endswith('.json') and start[:1] in _JSON_STARTS):
        return PathKind.JSON
    if start.startswith(b'media+sha256://') or start.startswith(b'#'):
        return PathKind.URI_LIST
    if not start:
        return PathKind.EMPTY
    return PathKind.UNKNOWN


def is_file_step_store(folder: Path) -> bool:
    """True when ``folder`` holds at least one ``FileStepStore`` run (``<run>/run.json`` or ``<run>/snapshots/``)."""
    return any(True for _ in file_step_store_runs(folder))


def file_step_store_runs(folder: Path) -> Iterator[str]:
    """The run ids of a ``FileStepStore`` folder: sub-folders with a ``run.json`` or a ``snapshots`` folder."""
    try:
        children = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as error:
        raise PathKindError(error.errno, error.strerror or type(error).__name__, str(folder)) from None
    for child in children:
        run = Path(child.path)
        if child.is_dir() and ((run / 'run.json').is_file() or (run / 'snapshots').is_dir()):
            yield child.name


def sqlite_tables(path: Path) -> dict[str, set[str]]:
    """Every table of a SQLite database and its columns, read through a read-only connection (no file made).

    Raises ``sqlite3.Error`` when the file cannot be read as a database.
    """
    opened = read_only(path)
    connection = opened.connection
    try:
        names = [
            str(row[0])
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(row[0]).startswith('sqlite_')
        ]
        quoted = {name: '"' + name.replace('"', '""') + '"' for name in names}
        return {
            name: {str(row[1]) for row in connection.execute(f'PRAGMA table_info({quoted[name]})')} for name in names
        }
    finally:
        connection.close()


def walk_files(folder: Path) -> Iterator[Path]:
    """Every file below ``folder`` (not folders), sorted per folder, symlinked folders followed once.

    A folder reached twice (a symlink cycle, or two links to one folder) is
    walked once. A folder that vanishes while walked is passed over; one that
    cannot be listed raises ``PathKindError``.
    """
    seen: set[tuple[int, int]] = set()
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            info = current.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            raise PathKindError(error.errno, error.strerror or type(error).__name__, str(current)) from None
        identity = (info.st_dev, info.st_ino)
        if identity in seen:
            continue
        seen.add(identity)
        try:
            entries = sorted(os.scandir(current), key=lambda entry: entry.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            raise PathKindError(error.errno, error.strerror or type(error).__name__, str(current)) from None
        folders: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_folder = entry.is_dir()
            except OSError:
                is_folder = False
            if is_folder:
                folders.append(path)
            else:
                yield path
        stack.extend(reversed(folders))


def _head(path: Path) -> bytes | None:
    """The first bytes of a regular file (``None`` when it vanished); never blocks on a FIFO swapped in."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0) | getattr(os, 'O_CLOEXEC', 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise PathKindError(error.errno, error.strerror or type(error).__name__, str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b'\x00'  # swapped for a special file since the stat: no kind of root starts with NUL
        return os.read(fd, _HEAD_BYTES)
    except OSError as error:
        raise PathKindError(error.errno, error.strerror or type(error).__name__, str(path)) from None
    finally:
        os.close(fd)


def _sqlite_kind(path: Path) -> PathKind:
    try:
        tables = sqlite_tables(path)
    except sqlite3.Error:
        return PathKind.SQLITE_OTHER
    if 'snapshots' in tables:
        return PathKind.SQLITE_STEP_STORE
    if tables and all('sha256' in columns and columns & _MEDIA_PAYLOAD_COLUMNS for columns in tables.values()):
        return PathKind.SQLITE_MEDIA_STORE
    return PathKind.SQLITE_OTHER


def _is_sqlite_side_file(path: Path) -> bool:
    for suffix in _SQLITE_SIDE_SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            database = path.with_name(path.name[: -len(suffix)])
            try:
                with database.open('rb') as file:
                    return file.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
            except OSError:
                return False
    return False
