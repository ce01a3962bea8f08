"""Helpers every store shares: byte coercion, hashing off the event loop, read verification."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncGenerator, AsyncIterable

from mediastash.errors import IntegrityError
from mediastash.uri import MEDIA_URI_SCHEME

__all__ = [
    'OFFLOAD_BYTES',
    'as_bytes',
    'check_digest',
    'sha256_hex',
    'verified_stream',
    'verify_digest',
]

OFFLOAD_BYTES = 1 << 20
"""Blobs at least this large are hashed in a worker thread so the event loop stays responsive."""


def as_bytes(data: object) -> bytes:
    """Accept ``bytes``, ``bytearray`` or ``memoryview``; refuse anything else with ``TypeError``."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f'media payload must be bytes, bytearray or memoryview, got {type(data).__name__}')


async def sha256_hex(data: bytes) -> str:
    """sha256 of ``data``; large inputs are hashed in a thread (hashlib releases the GIL)."""
    if len(data) >= OFFLOAD_BYTES:
        return await asyncio.to_thread(_hexdigest, data)
    return hashlib.sha256(data).hexdigest()


def _hexdigest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_digest(digest: str, data: bytes, *, where: str) -> bytes:
    """Return ``data`` if it hashes to ``digest``; raise ``IntegrityError`` otherwise (sync)."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise IntegrityError(MEDIA_URI_SCHEME + digest, actual_digest=actual, where=where)
    return data


async def verify_digest(digest: str, data: bytes, *, where: str) -> bytes:
    """Async ``check_digest`` that hashes large blobs in a worker thread."""
    actual = await sha256_hex(data)
    if actual != digest:
        raise IntegrityError(MEDIA_URI_SCHEME + digest, actual_digest=actual, where=where)
    return data


async def verified_stream(digest: str, chunks: AsyncIterable[bytes], *, where: str) -> AsyncGenerator[bytes, None]:
    """Re-yield ``chunks`` while hashing them, holding back the last one until the digest matches.

    A consumer that iterates to the end without an error has received exactly
    the bytes the URI names; a corrupt or truncated blob raises
    ``IntegrityError`` before its final chunk is handed out.
    """
    hasher = hashlib.sha256()
    pending: bytes | None = None
    async for chunk in chunks:
        if not chunk:
            continue
        hasher.update(chunk)
        if pending is not None:
            yield pending
        pending = chunk
    actual = hasher.hexdigest()
    if actual != digest:
        raise IntegrityError(MEDIA_URI_SCHEME + digest, actual_digest=actual, where=where)
    if pending is not None:
        yield pending
