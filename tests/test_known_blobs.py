"""KnownBlobCache: exact confirmation, LRU eviction under a byte budget, binding to one store."""

from __future__ import annotations

import sys

import pytest

from mediastash import MemoryMediaStore, media_uri_for
from mediastash.known_blobs import KnownBlobCache, cache_for_store, fingerprint


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
    store.deletion_generation += 1
    cache.bind(store)
    assert len(cache) == 0
    with pytest.raises(ValueError, match='another media store'):
        cache.bind(MemoryMediaStore())


def test_default_cache_is_per_store() -> None:
    one, two = MemoryMediaStore(), MemoryMediaStore()
    assert cache_for_store(one) is cache_for_store(one)
    assert cache_for_store(one) is not cache_for_store(two)


def test_fingerprint_depends_on_length_and_samples() -> None:
    assert fingerprint('a' * 20_000) != fingerprint('a' * 20_001)
    assert fingerprint('\ud800abc') == fingerprint('\ud800abc')
