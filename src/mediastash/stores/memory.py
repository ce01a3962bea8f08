"""``MemoryMediaStore``: a process-local store for tests, demos and short-lived runs."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any, Self

from mediastash.context import EMPTY_CONTEXT, MediaContextLike, context_media_type, context_metadata
from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores._plan import StorePlan
from mediastash.stores._url import merged_options, split_url, url_scheme
from mediastash.stores.base import TOUCH_AFTER_SECONDS, BaseMediaStore, BlobInfo, BlobStat, Ingest
from mediastash.uri import media_uri, parse_media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['MemoryMediaStore']


class MemoryMediaStore(BaseMediaStore):
    """Blobs in a dict. Supports listing (in insertion order), deleting, streaming and garbage collection.

    Metadata of the first ``put`` wins, as with the database-backed stores. The
    dict is private to the instance, so its ``storage_key`` is too. Namespaces
    (``namespace(name)``) are dicts of their own that the instance keeps. Each blob's
    last-write time (``time.time()`` of its first ``put`` or latest touch) is
    kept for ``iter_blobs``.
    """

    @classmethod
    def plan_from_url(cls, url: str, *, create: bool = True, **overrides: Any) -> StorePlan[Self]:
        """``memory://`` (no host, path or parameters): a new, empty store, not built yet (see ``StorePlan``)."""
        parts = split_url(url, url_scheme(url, cls.__name__, ('memory',)))
        if parts.netloc or parts.path or parts.query:
            raise InvalidStoreConfiguration('memory:// takes no host, path or parameters')
        merged = merged_options(cls, {}, overrides)
        return StorePlan(lambda: cls(**merged))

    def __init__(self, *, public_url: PublicUrlResolver | None = None) -> None:
        super().__init__(public_url=public_url)
        self._blobs: dict[str, bytes] = {}
        self._metadata: dict[str, Mapping[str, str]] = {}
        self._media_types: dict[str, str | None] = {}
        self._written_at: dict[str, float | None] = {}
        self._namespaces: dict[str, MemoryMediaStore] = {}

    def _open_namespace(self, name: str) -> MemoryMediaStore:
        """A store on the dicts of namespace ``name``, which this instance keeps (created on first use)."""
        first = self._namespaces.get(name)
        if first is None:
            first = self._namespaces[name] = MemoryMediaStore()
        view = object.__new__(type(self))  # a subclass's view is of the subclass, whatever its constructor takes
        MemoryMediaStore.__init__(view)
        view._blobs, view._metadata = first._blobs, first._metadata
        view._media_types, view._written_at = first._media_types, first._written_at
        return view

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        now = time.time()
        stored = self._blobs.get(digest)
        if stored is not None and self._stored_copy_is_sound(digest, len(data), len(stored), lambda: stored):
            self._refresh(digest, now - TOUCH_AFTER_SECONDS, now)
            return
        if stored is not None:
            await self._rewrite(digest, data, context)
            return
        self._blobs[digest] = data
        self._metadata[digest] = MappingProxyType(dict(context_metadata(context)))
        self._media_types[digest] = context_media_type(context)
        self._written_at[digest] = now

    async def _rewrite(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Replace the stored bytes in place (metadata of the first ``put`` stays)."""
        self._blobs[digest] = data
        self._written_at[digest] = time.time()
        self._metadata.setdefault(digest, MappingProxyType(dict(context_metadata(context))))
        self._media_types.setdefault(digest, context_media_type(context))

    def _refresh(self, digest: str, touch_before: float, now: float) -> None:
        """Set the blob's last-write time to ``now`` when it is older than ``touch_before`` or unknown."""
        written_at = self._written_at.get(digest)
        if written_at is None or written_at < touch_before:
            self._written_at[digest] = now

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

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        data = self._blobs.get(digest)
        if data is None:
            raise self._not_found(digest)
        return BlobStat(len(data), self._media_types.get(digest), self._written_at.get(digest))

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
        self._written_at.pop(digest, None)
        return self._blobs.pop(digest, None) is not None

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        for digest in list(self._blobs):
            data = self._blobs.get(digest)
            if data is not None:
                yield BlobInfo(media_uri(digest), len(data), self._written_at.get(digest))

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        now = time.time()
        present = {digest for digest in digests if digest in self._blobs}
        for digest in present:
            self._refresh(digest, touch_before, now)
        return present

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        """Atomic by construction: nothing else runs between the check and the delete."""
        deleted: list[str] = []
        for digest in digests:
            written_at = self._written_at.get(digest)
            if digest in self._blobs and written_at is not None and written_at < written_before:
                await self._delete(digest, EMPTY_CONTEXT)
                deleted.append(digest)
        return deleted

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        data = await ingest.read_all()
        await self._write(ingest.digest, data, context)

    async def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        data = await self._read(digest, context)
        view = memoryview(data)
        for start in range(0, len(data), chunk_size):
            yield bytes(view[start : start + chunk_size])
