"""``BaseMediaStore``: the shared skeleton of every mediastash store.

Subclasses implement a handful of digest-level primitives; the base class does
URI parsing, context checks, hashing and read verification once, so no store
can forget to verify what it returns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import ClassVar, Self

from mediastash.context import EMPTY_CONTEXT, MediaContextLike, context_metadata
from mediastash.errors import MediaNotFoundError
from mediastash.stores._blob import as_bytes, sha256_hex, verified_stream, verify_digest
from mediastash.uri import MEDIA_URI_SCHEME, parse_media_uri
from mediastash.urls import PublicUrlResolver, resolve_public_url

__all__ = ['BaseMediaStore', 'ChunkedMediaStore']


class BaseMediaStore(ABC):
    """Template for content-addressed stores.

    Subclasses implement ``_write``, ``_read``, ``_contains`` and ``_read_metadata``
    over a validated hex digest. Every ``get`` is checked against the digest and
    raises ``IntegrityError`` on mismatch.
    """

    verifies_reads: ClassVar[bool] = True
    """Tells the walker that ``get`` already checks sha256, so it need not hash again."""

    def __init__(self, *, public_url: PublicUrlResolver | None = None) -> None:
        self._public_url = public_url
        self.deletion_generation = 0
        """Bumped on every deletion so caches of "already stored" payloads know to forget."""

    def _note_deleted(self) -> None:
        """Call after removing a blob: invalidates known-blob caches bound to this store."""
        self.deletion_generation += 1

    # -- primitives a backend provides -------------------------------------------------

    @abstractmethod
    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Store ``data`` (already known to hash to ``digest``) idempotently."""

    @abstractmethod
    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        """Return the raw stored bytes, or raise ``MediaNotFoundError``. No verification here."""

    @abstractmethod
    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        """True when a blob is stored under ``digest``."""

    @abstractmethod
    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        """The user metadata stored with the blob, or raise ``MediaNotFoundError``."""

    def _describe(self) -> str:
        """Short, secret-free description used in error messages."""
        return type(self).__name__

    # -- the MediaStore protocol -------------------------------------------------------

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        """Store ``data`` and return its ``media+sha256://`` URI (a no-op write when already stored)."""
        payload = as_bytes(data)
        context_metadata(context)
        digest = await sha256_hex(payload)
        await self._write(digest, payload, context)
        return MEDIA_URI_SCHEME + digest

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        """Return the bytes stored under ``uri``, verified against its sha256."""
        digest = parse_media_uri(uri)
        data = await self._read(digest, context)
        return await verify_digest(digest, data, where=self._describe())

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        """True when a blob is stored under ``uri``."""
        return await self._contains(parse_media_uri(uri), context)

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        """A URL a model provider can fetch, from the configured resolver, or ``None``."""
        return await resolve_public_url(self._public_url, uri, context)

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        """The user metadata passed with the blob's ``put``."""
        return await self._read_metadata(parse_media_uri(uri), context)

    # -- helpers for the optional capabilities -----------------------------------------

    def _not_found(self, digest: str) -> MediaNotFoundError:
        return MediaNotFoundError(MEDIA_URI_SCHEME + digest, where=self._describe())

    async def delete_many(self, uris: Iterable[str]) -> int:
        """Delete each URI (see ``delete``); returns how many blobs were removed."""
        delete = getattr(self, 'delete', None)
        if delete is None:
            raise NotImplementedError(f'{type(self).__name__} does not support deleting blobs')
        removed = 0
        for uri in uris:
            if await delete(uri):
                removed += 1
        return removed

    async def _digest_stream(self, chunks: AsyncIterable[bytes]) -> tuple[str, bytes]:
        """Collect a stream into memory (fallback for stores without native streaming)."""
        parts = [as_bytes(chunk) async for chunk in chunks]
        data = b''.join(parts)
        return await sha256_hex(data), data

    def _verified(self, digest: str, chunks: AsyncIterable[bytes]) -> AsyncGenerator[bytes, None]:
        """Wrap a raw chunk stream so it is checked against ``digest`` (last chunk withheld until it matches)."""
        return verified_stream(digest, chunks, where=self._describe())

    # -- lifecycle ---------------------------------------------------------------------

    async def aclose(self) -> None:
        """Release what the store owns (connections, clients). Safe to call twice."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f'{self._describe()}()'


class ChunkedMediaStore(BaseMediaStore):
    """A store that can hand out its raw bytes piece by piece; provides a verified ``get_stream``.

    Subclasses implement ``_raw_chunks``; ``get_stream`` validates the call,
    checks the pieces against the URI's sha256 (withholding the last one until
    it matches) and closes both generators however the consumer stops.
    """

    @abstractmethod
    def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        """Yield the stored bytes unverified, at most ``chunk_size`` at a time; raise ``MediaNotFoundError``."""

    async def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        """Yield the blob in pieces of at most ``chunk_size`` bytes, verified (see ``StreamingMediaStore``)."""
        digest = parse_media_uri(uri)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f'chunk_size must be a positive int, got {chunk_size!r}')
        raw = self._raw_chunks(digest, context, chunk_size)
        verified = verified_stream(digest, raw, where=self._describe())
        try:
            async for chunk in verified:
                yield chunk
        finally:
            await verified.aclose()
            await raw.aclose()
