"""A chunked blob being written: its chunk rows go in one transaction that commits only with its manifest row.

The bytes arrive before their digest is known (a stream), so chunks are
written under a fresh chunk-set id; the manifest row that names the set is
inserted last, in the same transaction. A failure or a crash anywhere before
the commit leaves nothing behind, and of several writers of one blob only the
first manifest commits: the others roll their chunks back.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

__all__ = ['ChunkUpload']


class ChunkUpload:
    """Chunk rows of one new chunk set, inserted on a connection held for the upload, in an open transaction."""

    def __init__(self, connection: Any, insert_chunk: str) -> None:
        self.connection = connection
        self.chunk_set = uuid.uuid4().hex
        self.count = 0
        self._insert = insert_chunk
        self._transaction: Any = None

    async def __aenter__(self) -> ChunkUpload:
        self._transaction = self.connection.transaction()
        await self._transaction.start()
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._transaction is not None:  # not finished: nothing of it stays
            with contextlib.suppress(Exception):
                await self._transaction.rollback()
            self._transaction = None

    async def add(self, piece: bytes) -> None:
        """Insert the next chunk."""
        await self.connection.execute(self._insert, self.chunk_set, self.count, piece)
        self.count += 1

    async def commit(self) -> None:
        """Make the chunks (and whatever else the transaction wrote) visible."""
        transaction, self._transaction = self._transaction, None
        await transaction.commit()

    async def rollback(self) -> None:
        """Drop the chunks: the blob is stored already."""
        transaction, self._transaction = self._transaction, None
        await transaction.rollback()
