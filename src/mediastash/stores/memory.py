"""``MemoryMediaStore``: a process-local store for tests, demos and short-lived runs."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from types import MappingProxyType

from mediastash.context import MediaContextLike, context_media_type, context_metadata
from mediastash.stores.base import BaseMediaStore, Ingest
from mediastash.uri import parse_media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['MemoryMediaStore']


class MemoryMediaStore(BaseMediaStore):
    """Blobs in a dict. Supports listing (in insertion order), deleting and streaming.

    Metadata of the first ``put`` wins, as with the database-backed stores. The
    dict is private to the instance, so its ``storage_key`` is too.
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
        digest = parse_media_uri(uri)
        self._check_open()
        return self._media_types.get(digest)

    async def _list_digests(self) -> AsyncIterator[str]:
        for digest in list(self._blobs):
            yield digest

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        self._metadata.pop(digest, None)
        self._media_types.pop(digest, None)
        return self._blobs.pop(digest, None) is not None

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        data = await ingest.read_all()
        await self._write(ingest.digest, data, context)

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
