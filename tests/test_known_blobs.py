"""KnownBlobCache: exact confirmation, LRU eviction, binding to one storage, deletions, trust age."""

from __future__ import annotations

import base64
import gc
import sys
from pathlib import Path
from typing import Any

import pytest

from mediastash import DiskMediaStore, MemoryMediaStore, externalize_media, media_uri_for, restore_media
from mediastash._lru import BoundedLRU
from mediastash.known_blobs import (
    KnownBlobCache,
    cache_for_store,
    fingerprint,
    note_deletion,
    storage_key_of,
)
from mediastash.testing import CountingMediaStore
from tests.memory_support import drop_blob


def remember(cache: KnownBlobCache, payload: str) -> str:
    uri = media_uri_for(payload.encode())
    cache.remember('text', payload, fingerprint(payload), uri, len(payload), False)
    return uri


def test_hit_requires_the_exact_string() -> None:
    cache = KnownBlobCache()
    uri = remember(cache, 'a' * 100)
    hit = cache.lookup('text', 'a' * 100, fingerprint('a' * 100))
    assert hit is not None
    assert hit.uri == uri
    # Same fingerprint bucket forced, different content: no hit.
    assert cache.lookup('text', 'b' * 100, fingerprint('a' * 100)) is None
    assert cache.lookup('base64', 'a' * 100, fingerprint('a' * 100)) is None
    assert (cache.hits, cache.misses) == (1, 2)


def test_least_recently_used_entries_are_evicted_first() -> None:
    first, second, third = ('x' * 1000, 'y' * 1000, 'z' * 1000)
    cache = KnownBlobCache(max_bytes=2 * sys.getsizeof(first))
    remember(cache, first)
    remember(cache, second)
    assert cache.lookup('text', first, fingerprint(first)) is not None  # first is now the most recent
    remember(cache, third)
    assert cache.lookup('text', second, fingerprint(second)) is None
    assert cache.lookup('text', first, fingerprint(first)) is not None
    assert cache.lookup('text', third, fingerprint(third)) is not None
    assert cache.bytes_held <= cache.max_bytes


def test_payload_larger_than_the_budget_is_not_cached() -> None:
    cache = KnownBlobCache(max_bytes=100)
    remember(cache, 'q' * 1000)
    assert len(cache) == 0
    assert cache.bytes_held == 0


def test_zero_budget_disables_and_negative_is_refused() -> None:
    cache = KnownBlobCache(max_bytes=0)
    remember(cache, 'abc')
    assert len(cache) == 0
    with pytest.raises(ValueError, match='max_bytes'):
        KnownBlobCache(max_bytes=-1)


def test_by_uri_respects_kind_and_alphabet() -> None:
    cache = KnownBlobCache()
    cache.remember('base64', 'QUJD', fingerprint('QUJD'), media_uri_for(b'ABC'), 3, False)
    assert cache.by_uri(media_uri_for(b'ABC'), 'base64', False) is not None
    assert cache.by_uri(media_uri_for(b'ABC'), 'base64', True) is None
    assert cache.by_uri(media_uri_for(b'ABC'), 'text') is None


def test_binding_and_deletion_generation() -> None:
    store = MemoryMediaStore()
    cache = KnownBlobCache()
    cache.bind(store)
    remember(cache, 'k' * 10)
    cache.bind(store)
    assert len(cache) == 1
    note_deletion(store.storage_key)
    cache.bind(store)
    assert len(cache) == 0
    with pytest.raises(ValueError, match='another media store'):
        cache.bind(MemoryMediaStore())


def test_default_cache_is_per_storage(tmp_path: Path) -> None:
    one, two = MemoryMediaStore(), MemoryMediaStore()
    assert cache_for_store(one) is cache_for_store(one)
    assert cache_for_store(one) is not cache_for_store(two)
    a, b = DiskMediaStore(tmp_path / 'media'), DiskMediaStore(tmp_path / 'media')
    assert cache_for_store(a) is cache_for_store(b)
    assert cache_for_store(a) is not cache_for_store(DiskMediaStore(tmp_path / 'other'))


class Plain:
    """A third-party store object without ``storage_key``."""


def test_a_new_store_is_never_taken_for_a_collected_one() -> None:
    """Identity is a token that is never reused, unlike ``id()`` of a garbage-collected store."""
    for make in (MemoryMediaStore, Plain):
        cache = KnownBlobCache()
        first: Any = make()
        cache.bind(first)
        old_key = storage_key_of(first)
        del first
        gc.collect()
        for _ in range(50):  # new objects often reuse the freed address
            fresh: Any = make()
            assert storage_key_of(fresh) != old_key
            with pytest.raises(ValueError, match='another media store'):
                cache.bind(fresh)


def image_tree(*seeds: int) -> dict[str, Any]:
    return {
        'parts': [
            {'kind': 'binary', 'data': base64.b64encode(bytes([seed]) * 50_000).decode(), 'media_type': 'image/png'}
            for seed in seeds
        ]
    }


async def test_a_deletion_through_a_second_instance_is_seen(tmp_path: Path) -> None:
    writer, cleaner = DiskMediaStore(tmp_path), DiskMediaStore(tmp_path)
    tree = image_tree(1)
    lean = await externalize_media(tree, media_store=writer, threshold_bytes=1024)
    uri = lean['parts'][0]['uri']
    assert await cleaner.delete(uri)
    again = await externalize_media(tree, media_store=writer, threshold_bytes=1024)
    assert again == lean
    assert await writer.exists(uri)
    assert await restore_media(again, media_store=DiskMediaStore(tmp_path), known_blobs=False) == tree


async def test_entries_past_their_trust_age_are_rechecked_in_one_batch() -> None:
    now = [0.0]
    cache = KnownBlobCache(trust_seconds=60, clock=lambda: now[0])
    inner = MemoryMediaStore()
    store = CountingMediaStore(inner)
    tree = image_tree(1, 2, 3)
    lean = await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024)
    assert store.calls['put'] == 3
    lost = lean['parts'][1]['uri']
    drop_blob(inner, lost)  # gone behind the store's back

    store.reset()
    now[0] = 59.0  # still trusted: no store call at all
    assert await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024) == lean
    assert sum(store.calls.values()) == 0
    assert not await inner.exists(lost)

    now[0] = 61.0  # past the trust age: one batched check, one put for the lost blob
    assert await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024) == lean
    assert store.calls == {'touch_many': 1, 'put': 1}
    assert await inner.exists(lost)

    store.reset()
    now[0] = 100.0  # re-confirmed at 61: trusted again
    await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024)
    assert sum(store.calls.values()) == 0


async def test_trust_age_zero_always_asks_the_store() -> None:
    cache = KnownBlobCache(trust_seconds=0, clock=iter(range(100)).__next__)
    store = CountingMediaStore(MemoryMediaStore())
    tree = image_tree(7)
    await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024)
    await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024)
    assert store.calls == {'put': 1, 'touch_many': 1}


def test_bad_trust_age_is_refused() -> None:
    with pytest.raises(ValueError, match='trust_seconds'):
        KnownBlobCache(trust_seconds=-1)


def test_bounded_lru_by_count_and_cost() -> None:
    evicted: list[str] = []
    lru: BoundedLRU[str, int] = BoundedLRU(max_items=2, max_cost=10, on_evict=lambda key, value: evicted.append(key))
    lru.put('a', 1, cost=4)
    lru.put('b', 2, cost=4)
    assert lru.get('a') == 1  # a is now the most recent
    lru.put('c', 3, cost=1)
    assert evicted == ['b']
    lru.put('d', 4, cost=6)  # cost 11 > 10: the oldest (a) goes
    assert evicted == ['b', 'a']
    assert list(lru) == ['c', 'd']
    lru.put('huge', 5, cost=11)
    assert 'huge' not in lru
    assert lru.total_cost == 7
    with pytest.raises(ValueError, match='max_items'):
        BoundedLRU(max_items=-1)


def test_fingerprint_depends_on_length_and_samples() -> None:
    assert fingerprint('a' * 20_000) != fingerprint('a' * 20_001)
    assert fingerprint('\ud800abc') == fingerprint('\ud800abc')


async def test_entries_learned_from_a_read_are_reconfirmed_before_use() -> None:
    """A restore knows the bytes but did not mark the blob in use: the next save touches it first, once."""
    now = [0.0]
    cache = KnownBlobCache(trust_seconds=600, clock=lambda: now[0])
    inner = MemoryMediaStore()
    tree = image_tree(4)
    lean = await externalize_media(tree, media_store=inner, known_blobs=False, threshold_bytes=1024)
    store = CountingMediaStore(inner)
    assert await restore_media(lean, media_store=store, known_blobs=cache) == tree
    store.reset()
    assert await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024) == lean
    assert store.calls == {'touch_many': 1}
    store.reset()
    await externalize_media(tree, media_store=store, known_blobs=cache, threshold_bytes=1024)
    assert sum(store.calls.values()) == 0  # confirmed now: trusted for its trust age
