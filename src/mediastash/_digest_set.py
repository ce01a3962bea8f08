"""``DigestSet``: a set of sha256 digests that lives on disk, so its size never weighs on the process's memory.

A private temporary SQLite database (the standard library's engine) holds the
digests as 32-byte values. They are appended to an unindexed table while the
set is built (sequential writes, whatever its size) and indexed once, before
the first lookup, by SQLite's external merge sort: inserting millions of
random keys into an index larger than the page cache would read and write a
page per key instead. SQLite keeps at most ``cache_bytes`` of its pages in
memory and the rest in its temporary file, which it unlinks as soon as it
creates it: a run killed with SIGKILL leaves nothing behind. The file goes
where SQLite puts temporary files (``SQLITE_TMPDIR``, else ``TMPDIR``, else
``/var/tmp`` or ``/tmp``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterable
from typing import Final

__all__ = ['DigestSet']

_LOOKUP_BATCH: Final = 500
"""Digests per ``IN (...)`` lookup (below SQLite's oldest limit of 999 parameters)."""
_PAGE: Final = 5000
"""Digests per page of a walk in digest order (``sorted``)."""
_ADD_BUFFER: Final = 20_000
"""Digests buffered in memory before one insert transaction (about 1 MiB)."""
DEFAULT_CACHE_BYTES: Final = 16 << 20


class DigestSet:
    """Digests (64-hex ``str``) added in bulk, then looked up in batches (adding after a lookup works, at the
    cost of index maintenance); the blocking work runs in a worker thread. Close it (``aclose``) to free the
    file."""

    def __init__(self, *, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._db = sqlite3.connect('', isolation_level=None, check_same_thread=False)
        self._db.execute(f'PRAGMA cache_size = -{max(cache_bytes // 1024, 64)}')
        self._db.execute('PRAGMA journal_mode = OFF')
        self._db.execute('PRAGMA synchronous = OFF')
        self._db.execute('CREATE TABLE digests (digest BLOB NOT NULL)')
        self._buffer: list[bytes] = []
        self._indexed = False

    async def add(self, digests: Iterable[str]) -> None:
        """Add digests (duplicates are ignored); written out once enough are buffered."""
        self._buffer.extend(bytes.fromhex(digest) for digest in digests)
        if len(self._buffer) >= _ADD_BUFFER:
            await self.flush()

    async def flush(self) -> None:
        """Write the buffered digests."""
        if self._buffer:
            buffered, self._buffer = self._buffer, []
            await asyncio.to_thread(self._insert, buffered)

    def _insert(self, digests: list[bytes]) -> None:
        digests.sort()  # in key order: cheaper for the index, if there is one already
        self._db.execute('BEGIN')
        self._db.executemany('INSERT INTO digests VALUES (?)', ((digest,) for digest in digests))
        self._db.execute('COMMIT')

    async def _ready(self) -> None:
        """Write the buffered digests and build the index the lookups need (once)."""
        await self.flush()
        if not self._indexed:
            await asyncio.to_thread(self._db.execute, 'CREATE INDEX digests_by_value ON digests (digest)')
            self._indexed = True

    async def count(self) -> int:
        """How many distinct digests the set holds (after writing the buffered ones)."""
        await self._ready()
        return await asyncio.to_thread(
            lambda: int(self._db.execute('SELECT count(DISTINCT digest) FROM digests').fetchone()[0])
        )

    async def present(self, digests: list[str]) -> set[str]:
        """The subset of ``digests`` in the set (everything added so far)."""
        if not digests:
            return set()
        await self._ready()
        return await asyncio.to_thread(self._select, digests)

    def _select(self, digests: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(digests), _LOOKUP_BATCH):
            keys = [bytes.fromhex(digest) for digest in digests[start : start + _LOOKUP_BATCH]]
            marks = ', '.join('?' * len(keys))
            rows = self._db.execute(f'SELECT digest FROM digests WHERE digest IN ({marks})', keys)
            found.update(bytes(row[0]).hex() for row in rows)
        return found

    async def sorted(self) -> AsyncIterator[str]:
        """Every distinct digest, in ascending order, read from the index a page at a time (each page its own
        query, so adding or looking up between pages is safe; memory holds one page)."""
        await self._ready()
        after = b''
        while True:
            page = await asyncio.to_thread(self._page, after)
            for digest in page:
                yield digest.hex()
            if len(page) < _PAGE:
                return
            after = page[-1]

    def _page(self, after: bytes) -> list[bytes]:
        rows = self._db.execute(
            'SELECT DISTINCT digest FROM digests WHERE digest > ? ORDER BY digest LIMIT ?', (after, _PAGE)
        )
        return [bytes(row[0]) for row in rows]

    async def aclose(self) -> None:
        """Close the database (SQLite removes its file)."""
        self._buffer = []
        await asyncio.to_thread(self._db.close)
