"""``MemoryMediaStore`` against the conformance suite."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mediastash import BaseMediaStore, MemoryMediaStore, media_uri_for
from mediastash.context import MediaContextLike, context_metadata
from mediastash.errors import StoreClosedError
from mediastash.testing.store import ForeignContext, StoreTests, chunked, collect
from mediastash.urls import PublicUrlResolver
from tests.memory_support import drop_blob, overwrite_blob, raw_bytes, set_written_at


class TestMemoryStore(StoreTests):
    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> MemoryMediaStore:
        return MemoryMediaStore(public_url=public_url)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return raw_bytes(store, uri)

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        overwrite_blob(store, uri, data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        drop_blob(store, uri)

    async def raw_count(self, store: Any) -> int | None:
        return len([uri async for uri in store.iter_uris()])

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        set_written_at(store, uri, when)


async def test_media_type_is_recorded() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'png', context=ForeignContext(media_type='image/png'))
    assert store.media_type_of(uri) == 'image/png'
    assert store.media_type_of(media_uri_for(b'other')) is None


async def test_each_instance_is_its_own_storage() -> None:
    first, second = MemoryMediaStore(), MemoryMediaStore()
    assert first.storage_key != second.storage_key
    assert first.storage_key == first.storage_key
    uri = await first.put(b'only in the first')
    await second.put(b'only in the first')
    first_before, second_before = first.deletion_generation, second.deletion_generation
    assert await second.delete(uri)
    assert second.deletion_generation > second_before
    assert first.deletion_generation == first_before
    assert await first.exists(uri)


async def test_closed_store() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'before close')
    await store.aclose()
    await store.aclose()
    assert store.closed
    calls = (
        store.put(b'after'),
        store.get(uri),
        store.exists(uri),
        store.exists_many([uri]),
        store.get_metadata(uri),
        store.public_url(uri),
        store.delete(uri),
        store.delete_many([uri]),
        store.put_stream(chunked(b'after', 2)),
        collect(store.get_stream(uri)),
    )
    for call in calls:
        with pytest.raises(StoreClosedError):
            await call
    with pytest.raises(StoreClosedError):
        [u async for u in store.iter_uris()]
    with pytest.raises(StoreClosedError):
        store.media_type_of(uri)


class MinimalStore(BaseMediaStore):
    """Only the four primitives: no listing, deleting or streaming."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.blobs: dict[str, bytes] = {}
        self.metadata: dict[str, dict[str, str]] = {}

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        self.blobs.setdefault(digest, data)
        self.metadata.setdefault(digest, dict(context_metadata(context)))

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return self.blobs[digest]

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return digest in self.blobs

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return self.metadata[digest]


class TestMinimalStore(StoreTests):
    """The suite's optional-capability tests skip cleanly for a store without them."""

    heals_on_put = False  # an idempotent _write and no _delete: the base cannot replace a corrupt copy
    records_media_types = False  # no media_type_of: stat answers media_type=None
    stat_reads_blob = True  # no _stat: the base's default reads the blob

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> MinimalStore:
        return MinimalStore(public_url=public_url)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return store.blobs.get(uri[-64:])

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        store.blobs[uri[-64:]] = data

    async def raw_delete(self, store: Any, uri: str) -> None:
        del store.blobs[uri[-64:]]


async def test_verify_method_lists_checks_and_repairs() -> None:
    store = MemoryMediaStore()
    good = await store.put(b'good bytes')
    bad = await store.put(b'bytes about to rot')
    overwrite_blob(store, bad, b'rotten')
    report = await store.verify()
    assert (report.checked, report.ok, report.corrupt, report.repaired, report.clean) == (2, 1, [bad], [], False)
    repaired = await store.verify(repair=True, max_concurrency=1)
    assert repaired.repaired == [bad]
    assert [uri async for uri in store.iter_uris()] == [good]
    assert (await store.verify()).clean
    assert await store.put(b'bytes about to rot') == bad
    assert await store.get(bad) == b'bytes about to rot'
    await store.aclose()
    with pytest.raises(StoreClosedError):
        await store.verify()


async def test_verify_repair_needs_delete_and_listing_needs_uris() -> None:
    store = MinimalStore()
    uri = await store.put(b'minimal')
    assert (await store.verify([uri])).ok == 1
    with pytest.raises(TypeError, match='cannot list'):
        await store.verify()
    with pytest.raises(TypeError, match='cannot delete'):
        await store.verify([uri], repair=True)
