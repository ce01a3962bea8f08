"""``CachedMediaStore``: the conformance suite over disk (backing) + disk (cache), and the cache over S3 on moto."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from mediastash import (
    CachedMediaStore,
    DiskMediaStore,
    KnownBlobCache,
    MediaContext,
    MediaStore,
    MemoryMediaStore,
    SqliteMediaStore,
    WrapperMediaStore,
    externalize_media,
    media_uri_for,
    restore_media,
)
from mediastash.errors import InvalidArgumentError, InvalidMediaURI, InvalidStoreConfiguration, StoreClosedError
from mediastash.open_store import open_cached_store
from mediastash.stores.protocols import StatableMediaStore
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.testing import CountingMediaStore, KiB, MiB, agent_history
from mediastash.testing.store import StoreTests, blob, collect
from mediastash.urls import PublicUrlResolver
from mediastash.walker import WalkOptions
from tests.s3_servers import S3Endpoint, moto_server, unique_bucket
from tests.test_store_s3 import RawBucket

__all__ = ['moto_server']

THRESHOLD = 16 * KiB


def _cached(folder: Path, public_url: PublicUrlResolver | None = None, **options: Any) -> CachedMediaStore:
    return CachedMediaStore(
        DiskMediaStore(folder / 'backing', public_url=public_url),
        cache=DiskMediaStore(folder / 'cache'),
        **options,
    )


class Clock:
    """A clock the test moves: ``CachedMediaStore(clock=...)``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _past_the_trust_age(store: CachedMediaStore) -> None:
    """A deletion behind the store's back shows once its last confirmation is older than the trust age."""
    assert isinstance(store.clock, Clock)
    store.clock.now += store.trust_seconds + 1


def _files(store: CachedMediaStore, uri: str) -> list[Path]:
    backing: Any = store.backing
    cache: Any = store.cache
    return [backing.path_for(uri), cache.path_for(uri)]


class TestCachedStore(StoreTests):
    """The suite with the backing store as the raw backend; tampering and removal reach the cached copy too."""

    later_metadata_replaces = True  # metadata comes from the backing disk store (sidecar semantics)

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> CachedMediaStore:
        return _cached(folder, public_url, clock=Clock())

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        path = store.backing.path_for(uri)
        return path.read_bytes() if path.exists() else None

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        for path in _files(store, uri):
            if path.exists() or path == store.backing.path_for(uri):
                path.write_bytes(data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        for path in _files(store, uri):
            path.unlink(missing_ok=True)
        _past_the_trust_age(store)

    async def raw_count(self, store: Any) -> int | None:
        return sum(1 for path in store.backing.directory.rglob('*.bin'))

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        if when is None:
            raise NotImplementedError('a file always has an mtime')
        os.utime(store.backing.path_for(uri), (when, when))

    async def reopen_store(self, store: Any) -> CachedMediaStore:
        return CachedMediaStore(DiskMediaStore(store.backing.directory), cache=DiskMediaStore(store.cache.directory))


class TestCachedStoreMemoryCacheWriteAround(TestCachedStore):
    """An in-memory cache filled only by reads."""

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> CachedMediaStore:
        return CachedMediaStore(
            DiskMediaStore(folder / 'backing', public_url=public_url),
            cache=MemoryMediaStore(),
            write='around',
            clock=Clock(),
        )

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        store.backing.path_for(uri).write_bytes(data)
        await store.cache.delete(uri)  # the memory store offers no bypass; corruption is tested on disk

    async def raw_delete(self, store: Any, uri: str) -> None:
        store.backing.path_for(uri).unlink(missing_ok=True)
        await store.cache.delete(uri)
        _past_the_trust_age(store)

    async def reopen_store(self, store: Any) -> CachedMediaStore:
        return CachedMediaStore(DiskMediaStore(store.backing.directory), cache=MemoryMediaStore())


# -- behaviour of the cache ------------------------------------------------------------------


async def test_corrupt_cached_copy_is_refetched_and_healed(tmp_path: Path) -> None:
    backing = CountingMediaStore(DiskMediaStore(tmp_path / 'backing'))
    cache = DiskMediaStore(tmp_path / 'cache')
    async with CachedMediaStore(backing, cache=cache) as store:
        data = blob(50_000, seed=1)
        uri = await store.put(data)
        assert cache.path_for(uri).read_bytes() == data
        cache.path_for(uri).write_bytes(data[:-1] + b'\x00')
        backing.reset()
        assert await store.get(uri) == data
        assert backing.calls['get'] == 1
        assert cache.path_for(uri).read_bytes() == data, 'the corrupt copy is replaced by the verified one'
        assert await store.get(uri) == data
        assert backing.calls['get'] == 1, 'the healed copy serves the next read'


async def test_corrupt_cached_copy_is_never_streamed(tmp_path: Path) -> None:
    async with _cached(tmp_path) as store:
        data = blob(3 * MiB, seed=2)
        uri = await store.put(data)
        cache: Any = store.cache
        cache.path_for(uri).write_bytes(data[:-1] + b'\x00')
        assert b''.join(await collect(store.get_stream(uri, chunk_size=MiB))) == data
        assert not cache.path_for(uri).exists(), 'the corrupt copy is discarded, the stream came from the backing store'
        assert b''.join(await collect(store.get_stream(uri))) == data


async def test_reads_fill_the_cache_and_exists_reuses_the_backings_recent_answers(tmp_path: Path) -> None:
    backing = CountingMediaStore(DiskMediaStore(tmp_path / 'backing'))
    uri = await backing.put(b'written before the cache existed')
    cache = DiskMediaStore(tmp_path / 'cache')
    async with CachedMediaStore(backing, cache=cache, write='around') as store:
        assert not await cache.exists(uri)
        backing.reset()
        assert await store.exists(uri)
        assert backing.calls['exists'] == 1
        assert await store.get(uri) == b'written before the cache existed'
        assert await cache.exists(uri)
        backing.reset()
        assert await store.exists(uri)
        assert await store.exists_many([uri, media_uri_for(b'nowhere')]) == {uri}
        assert await store.get(uri) == b'written before the cache existed'
        assert backing.calls['get'] == 0 and backing.calls['exists'] == 0, 'confirmed by the backing moments ago'
        assert backing.calls['exists_many'] == 1, 'a blob the backing never confirmed is asked about'
        written = await store.put(b'around the cache')
        assert not await cache.exists(written), "write='around' leaves the cache to the first read"


# -- existence is the backing store's answer ---------------------------------------------------


@dataclass
class Backend:
    """A backing store kind: how to open it, and how to delete a blob behind every store object's back."""

    open: Callable[[], MediaStore]
    delete_by_hand: Callable[[str], Awaitable[None]]


@pytest.fixture(params=['disk', 'sqlite', 's3'])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == 'disk':
        folder = tmp_path / 'backing'

        async def unlink(uri: str) -> None:
            DiskMediaStore(folder).path_for(uri).unlink()

        yield Backend(lambda: DiskMediaStore(folder), unlink)
    elif request.param == 'sqlite':
        database = str(tmp_path / 'backing.db')

        async def delete_row(uri: str) -> None:
            with closing(sqlite3.connect(database)) as connection, connection:
                connection.execute('DELETE FROM media WHERE sha256 = ?', (uri.removeprefix('media+sha256://'),))

        yield Backend(lambda: SqliteMediaStore(database=database), delete_row)
    else:
        moto: S3Endpoint = request.getfixturevalue('moto_server')
        raw = await RawBucket(moto, unique_bucket('cached-exists')).open()
        await raw.create()

        async def delete_object(uri: str) -> None:
            await raw.delete(f'{uri.removeprefix("media+sha256://")}.bin')

        yield Backend(lambda: S3MediaStore(bucket=raw.bucket, **moto.client_options()), delete_object)
        await raw.close()


async def test_a_blob_deleted_behind_the_caches_back_does_not_exist(tmp_path: Path, backend: Backend) -> None:
    """Another process or a hand deletion: a new cached store (a CLI run, a restart) asks the backing store."""
    async with CachedMediaStore(backend.open(), cache=DiskMediaStore(tmp_path / 'cache')) as writer:
        gone = await writer.put(b'deleted from the backing store by hand later')
        kept = await writer.put(b'still in the backing store')
    await backend.delete_by_hand(gone)
    async with CachedMediaStore(backend.open(), cache=DiskMediaStore(tmp_path / 'cache')) as store:
        assert await store.cache.exists(gone), 'the local copy is still there'
        assert await store.exists(gone) is False
        assert await store.exists_many([gone, kept]) == {kept}
        assert await store.exists(kept) is True
        assert await store.get(gone) == b'deleted from the backing store by hand later', 'reads may use the copy'
        assert await store.exists(gone) is False, 'a read served by the cache confirms nothing'


async def test_a_confirmation_is_trusted_for_the_trust_age_only(tmp_path: Path, backend: Backend) -> None:
    """A long-lived cached store: a hand deletion is seen once the backing's last answer is older than the age."""
    clock = Clock()
    backing = CountingMediaStore(backend.open())
    cached = CachedMediaStore(backing, cache=DiskMediaStore(tmp_path / 'cache'), trust_seconds=60, clock=clock)
    async with cached as store:
        uri = await store.put(b'confirmed by the put')
        backing.reset()
        assert await store.exists(uri) and await store.exists_many([uri]) == {uri}
        assert backing.calls['exists'] + backing.calls['exists_many'] == 0, 'the put confirmed it moments ago'
        await backend.delete_by_hand(uri)
        clock.now += 59
        assert await store.exists(uri), 'within the trust age the last answer stands (documented)'
        clock.now += 2
        assert await store.exists_many([uri]) == frozenset()
        assert await store.exists(uri) is False
        assert backing.calls['exists'] + backing.calls['exists_many'] == 2


async def test_a_deletion_through_another_store_object_is_seen_at_once(tmp_path: Path) -> None:
    async with _cached(tmp_path) as store:
        uris = [await store.put(blob(1000, seed=seed)) for seed in range(3)]
        assert await store.exists_many(uris) == set(uris)
        other = DiskMediaStore(tmp_path / 'backing')  # same storage, another object (a collector, say)
        assert await other.delete(uris[0])
        assert await store.exists(uris[0]) is False
        assert await store.exists_many(uris) == set(uris[1:])


async def test_trust_seconds_zero_asks_the_backing_every_time(tmp_path: Path) -> None:
    backing = CountingMediaStore(DiskMediaStore(tmp_path / 'backing'))
    async with CachedMediaStore(backing, cache=DiskMediaStore(tmp_path / 'cache'), trust_seconds=0) as store:
        uri = await store.put(b'asked about every time')
        backing.reset()
        for _ in range(3):
            assert await store.exists(uri)
        assert backing.calls['exists'] == 3
    with pytest.raises(ValueError, match='trust_seconds'):
        CachedMediaStore(DiskMediaStore(tmp_path / 'b'), cache=MemoryMediaStore(), trust_seconds=-1)


async def test_eviction_keeps_the_cache_under_max_bytes(tmp_path: Path) -> None:
    cache = DiskMediaStore(tmp_path / 'cache')
    seeded = await cache.put(blob(30_000, seed=99))  # from an earlier session: the oldest entry
    backing = CountingMediaStore(DiskMediaStore(tmp_path / 'backing'))
    limit = 100_000
    async with CachedMediaStore(backing, cache=cache, max_bytes=limit) as store:
        uris = [await store.put(blob(30_000, seed=seed)) for seed in range(3)]

        def cached_bytes() -> int:
            return sum(path.stat().st_size for path in Path(cache.directory).rglob('*.bin'))

        assert cached_bytes() <= limit
        assert not await cache.exists(seeded), 'the least recently used blob goes first'
        await store.get(uris[0])  # now the most recent
        uris.append(await store.put(blob(30_000, seed=3)))
        assert cached_bytes() <= limit
        assert await cache.exists(uris[0])
        assert not await cache.exists(uris[1])
        assert store.cached_bytes == cached_bytes()
        huge = await store.put(blob(limit + 1, seed=4))
        assert not await cache.exists(huge), 'a blob larger than the bound is never cached'
        backing.reset()
        for uri in [*uris, huge]:
            assert await store.get(uri) == await backing.get(uri)
            assert cached_bytes() <= limit
        assert await store.get(seeded) == blob(30_000, seed=99) if await backing.exists(seeded) else True


async def test_deletions_reach_both_stores(tmp_path: Path) -> None:
    async with _cached(tmp_path) as store:
        uris = [await store.put(blob(1000, seed=seed)) for seed in range(3)]
        assert await store.delete(uris[0]) is True
        assert await store.delete_many(uris[1:]) == 2
        for uri in uris:
            assert not await store.backing.exists(uri)
            assert not await store.cache.exists(uri)
            assert not await store.exists(uri)


async def test_refuses_a_cache_on_the_backing_storage_or_unable_to_delete(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match='same storage'):
        CachedMediaStore(DiskMediaStore(tmp_path / 'one'), cache=DiskMediaStore(tmp_path / 'one'))
    with pytest.raises(TypeError, match='delete'):
        CachedMediaStore(DiskMediaStore(tmp_path / 'one'), cache=_NoDelete(MemoryMediaStore()))
    with pytest.raises(ValueError, match='write'):
        CachedMediaStore(DiskMediaStore(tmp_path / 'one'), cache=MemoryMediaStore(), write='back')  # type: ignore[arg-type]


class _NoDelete(WrapperMediaStore):
    delete = None  # type: ignore[assignment]
    delete_many = None  # type: ignore[assignment]


async def test_storage_key_is_the_backing_stores(tmp_path: Path) -> None:
    async with _cached(tmp_path) as store:
        assert store.storage_key == store.backing.storage_key  # type: ignore[attr-defined]
        assert store.storage_key != store.cache.storage_key  # type: ignore[attr-defined]


async def test_composes_with_the_known_blob_cache(tmp_path: Path) -> None:
    history = agent_history(steps=4, image_bytes_total=600 * KiB, seed=5)
    backing = CountingMediaStore(DiskMediaStore(tmp_path / 'backing'))
    known = KnownBlobCache()
    async with CachedMediaStore(backing, cache=DiskMediaStore(tmp_path / 'cache')) as store:
        lean = await externalize_media(history, media_store=store, threshold_bytes=THRESHOLD, known_blobs=known)
        puts = backing.calls['put']
        assert puts > 0
        again = await externalize_media(history, media_store=store, threshold_bytes=THRESHOLD, known_blobs=known)
        assert again == lean
        assert backing.calls['put'] == puts, 'known blobs are not stored again'
        # A deletion through the backing store (same storage key) makes the cache forget.
        some_uri = next(iter(backing.put_sizes))
        other = DiskMediaStore(tmp_path / 'backing')
        assert await other.delete(some_uri)
        await externalize_media(history, media_store=store, threshold_bytes=THRESHOLD, known_blobs=known)
        assert await other.exists(some_uri), 'the deleted blob was written again'
        assert await restore_media(lean, media_store=store) == history


async def test_composes_with_offloading_step_store(tmp_path: Path) -> None:
    from pydantic_ai_harness.step_persistence import InMemoryStepStore

    from mediastash.integrations import OffloadingStepStore
    from tests.test_integrations_step_store import history, roundtrip, snapshot

    backing = CountingMediaStore(DiskMediaStore(tmp_path / 'backing'))
    async with CachedMediaStore(backing, cache=DiskMediaStore(tmp_path / 'cache'), write='around') as media:
        # known_blobs=False: the known-blob cache would serve the restores from the bytes it saw saved
        steps = OffloadingStepStore(
            InMemoryStepStore(), media_store=media, options=WalkOptions(threshold_bytes=1024, known_blobs=False)
        )
        messages = history()
        await steps.save_snapshot(snapshot(messages))
        first = await steps.latest_snapshot(run_id='run-1')
        fetched = backing.calls['get']
        assert fetched > 0
        second = await steps.latest_snapshot(run_id='run-1')
        assert first is not None and second is not None
        assert first.messages == second.messages == roundtrip(messages)
        assert backing.calls['get'] == fetched, 'the second restore is served by the cache'


# -- over S3 on moto ---------------------------------------------------------------------------


@pytest.fixture
async def bucket(moto_server: S3Endpoint) -> AsyncIterator[RawBucket]:
    raw = await RawBucket(moto_server, unique_bucket('cached')).open()
    await raw.create()
    yield raw
    await raw.close()


async def test_restores_fetch_each_blob_from_s3_once(
    tmp_path: Path, moto_server: S3Endpoint, bucket: RawBucket
) -> None:
    history = agent_history(steps=6, image_bytes_total=2 * MiB, seed=3)
    s3 = CountingMediaStore(S3MediaStore(bucket=bucket.bucket, **moto_server.client_options()))
    async with CachedMediaStore(s3, cache=DiskMediaStore(tmp_path / 'cache'), write='around') as store:
        lean = await externalize_media(history, media_store=store, threshold_bytes=THRESHOLD)
        blobs = len(s3.put_sizes)
        assert blobs >= 5
        s3.reset()
        for _ in range(3):
            assert await restore_media(lean, media_store=store, known_blobs=False) == history
        assert s3.calls['get'] == blobs, 'each blob is downloaded once across the three restores'
        assert s3.calls['get_stream'] == 0


async def test_public_url_points_at_s3(tmp_path: Path, moto_server: S3Endpoint, bucket: RawBucket) -> None:
    s3 = S3MediaStore(bucket=bucket.bucket, public_url=PresignedUrls(expires_in=600), **moto_server.client_options())
    async with CachedMediaStore(s3, cache=DiskMediaStore(tmp_path / 'cache')) as store:
        uri = await store.put(b'shown to a model provider', context=MediaContext(media_type='text/plain'))
        url = await store.public_url(uri)
        assert url is not None
        parts = urlsplit(url)
        assert f'{parts.scheme}://{parts.netloc}' == moto_server.url
        assert bucket.bucket in parts.path and 'X-Amz-Signature' in parts.query
        assert store.public_url_lifetime == 600
        assert str(tmp_path) not in url
        assert await asyncio.wait_for(store.get(uri), 10) == b'shown to a model provider'


# -- open_cached_store -------------------------------------------------------------------------


async def test_open_cached_store_over_s3(tmp_path: Path, moto_server: S3Endpoint, bucket: RawBucket) -> None:
    store = open_cached_store(
        f's3://{bucket.bucket}/runs', cache=tmp_path / 'cache', cache_max_bytes=MiB, **moto_server.client_options()
    )
    async with store:
        assert isinstance(store.backing, S3MediaStore) and isinstance(store.cache, DiskMediaStore)
        assert store.max_bytes == MiB
        uri = await store.put(b'kept locally too')
        assert await store.cache.exists(uri)
        assert await bucket.read(f'runs/{uri.removeprefix("media+sha256://")}.bin') == b'kept locally too'
    assert store.closed


async def test_open_cached_store_takes_a_store_object_and_checks_its_options(tmp_path: Path) -> None:
    cache = MemoryMediaStore()
    async with open_cached_store(tmp_path / 'remote', cache=cache, cache_write='around') as store:
        assert store.cache is cache and store.write == 'around'
    with pytest.raises(InvalidStoreConfiguration, match='write'):
        open_cached_store(tmp_path / 'remote', cache='memory://', cache_write='back')  # type: ignore[arg-type]
    with pytest.raises(InvalidStoreConfiguration, match='max_bytes'):
        open_cached_store(tmp_path / 'remote', cache='memory://', cache_max_bytes=-1)
    with pytest.raises(InvalidStoreConfiguration):
        open_cached_store(tmp_path / 'remote', cache='nosuch://x')


# -- the store rules come from the same place as BaseMediaStore's ----------------------------------


async def test_a_bad_uri_is_named_before_the_closed_state(tmp_path: Path) -> None:
    """As on every BaseMediaStore: an invalid URI is the caller's mistake, whatever the store's state."""
    store = _cached(tmp_path)
    uri = await store.put(b'stored before closing')
    await store.aclose()
    calls: dict[str, Callable[[str], Awaitable[object]]] = {
        'get': store.get,
        'exists': store.exists,
        'delete': store.delete,
        'get_metadata': store.get_metadata,
        'public_url': store.public_url,
        'stat': store.stat,
        'delete_many': lambda one: store.delete_many([one]),
        'exists_many': lambda one: store.exists_many([one]),
        'get_stream': lambda one: collect(store.get_stream(one)),
    }
    for call in calls.values():
        with pytest.raises(InvalidMediaURI):
            await call('not a media uri')
        with pytest.raises(StoreClosedError, match='CachedMediaStore'):
            await call(uri)
    assert (tmp_path / 'backing').exists()


async def test_a_bad_chunk_size_is_refused_like_the_base_refuses_it(tmp_path: Path) -> None:
    async with _cached(tmp_path) as store:
        uri = await store.put(b'streamed')
        with pytest.raises(InvalidArgumentError, match='chunk_size'):
            await collect(store.get_stream(uri, chunk_size=0))


def test_a_bad_max_bytes_is_named_without_its_value(tmp_path: Path) -> None:
    for bad in (-98765, 1.5, True):
        with pytest.raises(InvalidArgumentError, match='max_bytes') as caught:
            _cached(tmp_path, max_bytes=bad)
        assert '98765' not in str(caught.value)


async def test_stat_is_the_backing_store_s(tmp_path: Path) -> None:
    async with _cached(tmp_path) as store:
        uri = await store.put(b'\x89PNG cached', context=MediaContext(media_type='image/png'))
        assert isinstance(store, StatableMediaStore)
        assert await store.stat(uri) == await store.backing.stat(uri)  # type: ignore[attr-defined]
        assert (await store.stat(uri)).media_type == 'image/png'
