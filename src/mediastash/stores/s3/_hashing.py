"""SHA-256 of a body that arrives in pieces, computed alongside the download.

Small bodies are hashed once at the end (one worker-thread hop, or none when
tiny); from ``PIPELINE_BYTES`` on, pieces are handed to a worker thread in
blocks while the next ones arrive, so checking a large GET costs about one
block's hashing after the last byte instead of hashing the whole blob then.
``hashlib`` releases the GIL on large inputs, so the event loop keeps running.
"""

from __future__ import annotations

import asyncio
import hashlib

from mediastash.stores._blob import OFFLOAD_BYTES

__all__ = ['PIPELINE_BYTES', 'PipelinedSha256']

PIPELINE_BYTES = 4 << 20
"""Pending bytes that start a background hash of the pieces received so far."""


def _update(hasher: hashlib._Hash, pieces: list[bytes]) -> None:
    for piece in pieces:
        hasher.update(piece)


class PipelinedSha256:
    """Feed pieces in order with ``feed``; ``hexdigest`` waits for the last block. Not thread-safe; one reader."""

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._running: asyncio.Future[None] | None = None

    async def feed(self, piece: bytes) -> None:
        self._pending.append(piece)
        self._pending_bytes += len(piece)
        if self._pending_bytes >= PIPELINE_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        """Wait for the block being hashed (order matters), then start hashing the pending pieces."""
        if self._running is not None:
            await self._running
        pieces, self._pending, self._pending_bytes = self._pending, [], 0
        self._running = asyncio.ensure_future(asyncio.to_thread(_update, self._hasher, pieces))

    async def hexdigest(self) -> str:
        if self._running is None and self._pending_bytes < OFFLOAD_BYTES:
            _update(self._hasher, self._pending)
            self._pending, self._pending_bytes = [], 0
        else:
            await self._flush()
        if self._running is not None:
            await self._running
            self._running = None
        return self._hasher.hexdigest()

    async def aclose(self) -> None:
        """Wait for a block still being hashed (a worker thread cannot be interrupted)."""
        running, self._running = self._running, None
        if running is not None:
            await asyncio.gather(running, return_exceptions=True)
