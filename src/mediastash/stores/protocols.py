"""The ``MediaStore`` protocol and the optional capabilities a store can opt into.

``MediaStore`` has the same method names and signatures as pydantic-ai-harness's,
so any mediastash store can be handed to its step stores as ``media_store=``.
Optional capabilities are separate protocols; test for them with ``isinstance``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from mediastash.context import EMPTY_CONTEXT, MediaContextLike
from mediastash.stores.capabilities import capabilities_of, taken_keywords

__all__ = [
    'BlobCheck',
    'BlobInfo',
    'BlobStat',
    'CacheAwareMediaStore',
    'CheckableMediaStore',
    'CollectableMediaStore',
    'DeletableMediaStore',
    'ListableMediaStore',
    'MediaStore',
    'S3AddressableMediaStore',
    'StatableMediaStore',
    'StreamingMediaStore',
    'confirm_in',
    'exists_in',
]


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """One stored blob as a collector sees it: no bytes read.

    ``written_at``: Unix time of the last write or touch; ``None`` when the
    store cannot tell (rows pydantic-ai-harness wrote without ``created_at``).
    """

    uri: str
    size: int
    written_at: float | None


@dataclass(frozen=True, slots=True)
class BlobStat:
    """What a store knows about one blob, answered without reading its bytes where the backend allows.

    ``size``: bytes stored; ``media_type``: the media type ``put`` recorded,
    ``None`` when none was recorded or the backend cannot record one;
    ``written_at``: Unix time of the last write or touch, ``None`` when the
    store cannot tell.
    """

    size: int
    media_type: str | None
    written_at: float | None


@dataclass(frozen=True, slots=True)
class BlobCheck:
    """What ``BaseMediaStore.check_blob`` found for one blob whose read verified.

    ``size``: bytes of the blob as read; ``damaged_copies``: further stored
    copies of it (a store that keeps more than one, such as PostgreSQL's inline
    row beside a chunked copy) that do not hash to its URI; ``removed_copies``:
    how many of those a repair removed (the sound copy stays, so the blob stays
    readable).
    """

    size: int
    damaged_copies: int = 0
    removed_copies: int = 0


@runtime_checkable
class MediaStore(Protocol):
    """Async content-addressed blob store: ``put`` returns the blob's ``media+sha256://`` URI.

    ``get`` and ``get_metadata`` raise ``MediaNotFoundError`` (a ``FileNotFoundError``)
    for a blob that is not stored, and ``InvalidMediaURI`` (a ``ValueError``) for a
    malformed URI.
    """

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str: ...

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes: ...

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool: ...

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None: ...

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]: ...


@runtime_checkable
class CheckableMediaStore(Protocol):
    """A store that checks one blob and every further copy it keeps of it (what ``verify`` asks per blob).

    ``BaseMediaStore`` has it; ``verify`` reads a store without it whole instead.
    """

    async def check_blob(self, uri: str, *, repair: bool = False) -> BlobCheck: ...


@runtime_checkable
class StatableMediaStore(Protocol):
    """A store that answers size, media type and age of one blob (``MediaNotFoundError`` when it is not stored)."""

    async def stat(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> BlobStat: ...


@runtime_checkable
class ListableMediaStore(Protocol):
    """A store that can enumerate the URIs it holds (needed by garbage collection)."""

    def iter_uris(self) -> AsyncIterator[str]: ...


@runtime_checkable
class DeletableMediaStore(Protocol):
    """A store that can delete blobs. Only garbage collection should call this: blobs are shared."""

    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool: ...

    async def delete_many(self, uris: Iterable[str]) -> int: ...


@runtime_checkable
class StreamingMediaStore(Protocol):
    """A store that can write and read a blob without holding it whole in memory.

    ``get_stream`` verifies the sha256 as it goes and withholds the final chunk
    until the digest matches, so a consumer that reads to the end without an
    error has received exactly the stored bytes.
    """

    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str: ...

    def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]: ...


@runtime_checkable
class CacheAwareMediaStore(Protocol):
    """What the walks use beyond ``MediaStore`` when a store offers it (every mediastash store does).

    * ``verifies_reads``: ``get`` already checks sha256, so the walk does not hash again.
    * ``storage_key``: hashable identity of the storage (folder, database file,
      bucket and prefix, collection); store instances with equal keys share one
      known-blob cache and see each other's deletions.
    * ``deletion_generation``: changes whenever a blob of that storage is deleted
      through any store in this process; the known-blob cache empties itself then.
    * ``exists_many``: one batched existence check, used to re-confirm cache
      entries older than their trust age.

    A store without these still works: the walks verify reads themselves,
    give it a cache of its own, and check existence one URI at a time.
    """

    @property
    def verifies_reads(self) -> bool: ...

    @property
    def storage_key(self) -> Hashable: ...

    @property
    def deletion_generation(self) -> int: ...

    async def exists_many(self, uris: Iterable[str], *, max_concurrency: int = ...) -> frozenset[str]: ...


async def exists_in(store: MediaStore, uris: Iterable[str], *, max_concurrency: int = 16) -> frozenset[str]:
    """The subset of ``uris`` stored in ``store``: its ``exists_many`` when it has one, else ``exists`` calls."""
    if capabilities_of(store).exists_many:
        batched = cast(CacheAwareMediaStore, store)
        return frozenset(
            await batched.exists_many(uris, **taken_keywords(store, 'exists_many', max_concurrency=max_concurrency))
        )
    wanted = list(dict.fromkeys(uris))
    gate = asyncio.Semaphore(max_concurrency)

    async def one(uri: str) -> bool:
        async with gate:
            return await store.exists(uri)

    answers = await asyncio.gather(*(one(uri) for uri in wanted))
    return frozenset(uri for uri, present in zip(wanted, answers, strict=True) if present)


@runtime_checkable
class CollectableMediaStore(Protocol):
    """A store garbage collection can sweep: blobs listed with size and age, deleted only when still old."""

    def iter_blobs(self) -> AsyncIterator[BlobInfo]: ...

    async def delete_unless_touched(self, uris: Iterable[str], *, written_before: float) -> frozenset[str]: ...

    async def touch_many(
        self, uris: Iterable[str], *, touch_after: float = ..., max_concurrency: int = ...
    ) -> frozenset[str]: ...


@runtime_checkable
class S3AddressableMediaStore(Protocol):
    """A store whose blobs are S3 objects a provider can read in place (Bedrock takes ``s3://bucket/key``).

    ``s3_uri(uri, context)`` is where the blob ``uri`` is (or would be) stored,
    as ``s3://<bucket>/<key>``; it makes no request. ``MediaUrls(provider_files=...)``
    sends that address to Bedrock instead of uploading the bytes.
    """

    def s3_uri(self, uri: str, context: MediaContextLike = EMPTY_CONTEXT) -> str: ...


async def confirm_in(
    store: MediaStore, uris: Iterable[str], *, touch_after: float | None = None, max_concurrency: int = 16
) -> frozenset[str]:
    """The subset of ``uris`` stored in ``store``, marking them as in use where the store keeps ages
    (``touch_many``, with ``touch_after`` when given, else the store's default); a plain existence check
    otherwise. What a writer calls before re-trusting a cached blob."""
    if capabilities_of(store).touch:
        touching = cast(CollectableMediaStore, store)
        wanted: dict[str, Any] = {'max_concurrency': max_concurrency}
        if touch_after is not None:
            wanted['touch_after'] = touch_after
        return frozenset(await touching.touch_many(uris, **taken_keywords(store, 'touch_many', **wanted)))
    return await exists_in(store, uris, max_concurrency=max_concurrency)
