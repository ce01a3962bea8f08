"""``MemoryMediaStore``: a process-local store for tests, demos and short-lived runs."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping
from types import MappingProxyType

from mediastash.context import EMPTY_CONTEXT, MediaContextLike, context_media_type, context_metadata
from mediastash.stores.base import ChunkedMediaStore
from mediastash.uri import MEDIA_URI_SCHEME, parse_media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['MemoryMediaStore']


class MemoryMediaStore(ChunkedMediaStore):
    """Blobs in a dict. Supports listing, deleting and streaming.

    Metadata of the first ``put`` wins, as with the database-backed stores.
    """

    def __init__(self, *, public_url: PublicUrlResolver | None = None) -> None:
        super().__init__(public_url=public_url)
        self._blobs: dict[str, bytes] = {}
        self._metadata: dict[str, Mapping[str, str]] = {}
        self._media_types: dict[str, str | None] = {}

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        if digest in self._blobs:
            return
        self._blobs[digest] = data
        self._metadata[digest] = MappingProxyType(dict(context_metadata(context)))
        self._media_types[digest] = context_media_type(context)

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        try:
            return self._blobs[digest]
        except KeyError:
            raise self._not_found(digest) from None

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return digest in self._blobs

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        metadata = self._metadata.get(digest)
        if metadata is None or digest not in self._blobs:
            raise self._not_found(digest)
        return dict(metadata)

    def media_type_of(self, uri: str) -> str | None:
        """The media type recorded at ``put`` (``None`` when unknown)."""
        return self._media_types.get(parse_media_uri(uri))

    async def iter_uris(self) -> AsyncIterator[str]:
        """Every stored URI, in insertion order."""
        for digest in list(self._blobs):
            yield MEDIA_URI_SCHEME + digest

    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        """Remove the blob; ``False`` when it was not stored."""
        digest = parse_media_uri(uri)
        self._note_deleted()
        self._metadata.pop(digest, None)
        self._media_types.pop(digest, None)
        return self._blobs.pop(digest, None) is not None

    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        """Store a blob given as an async iterator of byte chunks."""
        context_metadata(context)
        digest, data = await self._digest_stream(chunks)
        await self._write(digest, data, context)
        return MEDIA_URI_SCHEME + digest

    async def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        data = await self._read(digest, context)
        view = memoryview(data)
        for start in range(0, len(data), chunk_size):
            yield bytes(view[start : start + chunk_size])

    def corrupt_for_tests(self, uri: str, data: bytes) -> None:
        """Replace stored bytes behind the store's back (used by the conformance suite)."""
        self._blobs[parse_media_uri(uri)] = data

    def raw_for_tests(self, uri: str) -> bytes | None:
        """The stored bytes without verification, or ``None`` (used by the conformance suite)."""
        return self._blobs.get(parse_media_uri(uri))

    def drop_for_tests(self, uri: str) -> None:
        """Lose the stored bytes behind the store's back, as a vanished file would (conformance suite)."""
        self._blobs.pop(parse_media_uri(uri), None)
