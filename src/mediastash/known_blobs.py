"""Remembers payloads this process already stored, so re-saving a history costs no I/O.

Every step snapshot repeats the whole history, so the same images and tool
outputs are externalized again and again. The cache maps a payload *string*
(the base64 or text exactly as it appears in the tree), or the raw ``bytes``
of a typed ``BinaryContent``, to the URI it was stored under. A cheap
fingerprint (xxh3 over the length and a few samples of the payload) only
nominates candidates; a hit is confirmed by comparing the whole payload with
the cached one, so a crafted payload can never be mapped to
another payload's URI. Memory is bounded by a byte budget (least recently used
entries go first) and the cache can be switched off.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Literal

import xxhash

__all__ = [
    'DEFAULT_CACHE_BYTES',
    'KnownBlob',
    'KnownBlobCache',
    'PayloadKind',
    'cache_for_store',
    'fingerprint',
    'fingerprint_bytes',
]

DEFAULT_CACHE_BYTES: Final = 256 << 20
"""Default budget: the summed size of the payload strings the cache keeps alive."""

PayloadKind = Literal['base64', 'text', 'bytes']
"""``base64`` and ``text`` sources are ``str``; ``bytes`` sources are the raw payload itself."""

_SAMPLE = 1024
_FULL_HASH_BELOW = 16 * _SAMPLE


def fingerprint(payload: str) -> int:
    """A fast 64-bit fingerprint of ``payload``: the whole string when short, else samples of it.

    It is only a candidate selector: ``KnownBlobCache`` confirms every hit by
    comparing whole strings, so collisions cost a comparison, never a wrong URI.
    """
    n = len(payload)
    if n <= _FULL_HASH_BELOW:
        sample = payload
    else:
        step = (n - _SAMPLE) // 7
        sample = ''.join(payload[i * step : i * step + _SAMPLE] for i in range(8)) + payload[-_SAMPLE:]
    return xxhash.xxh3_64_intdigest(sample.encode('utf-8', 'surrogatepass')) ^ n


def fingerprint_bytes(payload: bytes) -> int:
    """``fingerprint`` for raw bytes: the whole payload when short, else the same sampling."""
    n = len(payload)
    if n <= _FULL_HASH_BELOW:
        return xxhash.xxh3_64_intdigest(payload) ^ n
    step = (n - _SAMPLE) // 7
    hasher = xxhash.xxh3_64()
    view = memoryview(payload)
    for i in range(8):
        hasher.update(view[i * step : i * step + _SAMPLE])
    hasher.update(view[n - _SAMPLE :])
    return int(hasher.intdigest()) ^ n


@dataclass(slots=True)
class KnownBlob:
    """One remembered payload: the exact source (``str``, or ``bytes`` for kind ``bytes``), its URI, its size."""

    kind: PayloadKind
    source: str | bytes
    uri: str
    size: int
    urlsafe: bool


class KnownBlobCache:
    """Bounded LRU of payloads already stored in one particular store (thread-safe).

    The cache is bound to the first store it is used with (a cache that said
    "already stored" about a different store would silently lose media), and it
    empties itself when that store reports a deletion (mediastash stores bump
    ``deletion_generation``). A blob removed behind the store's back, or by a
    third-party store that does not report deletions, is not noticed: pass
    ``known_blobs=False`` to the walks when another process deletes blobs.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f'max_bytes must be a non-negative int, got {max_bytes!r}')
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[PayloadKind, int], list[KnownBlob]] = OrderedDict()
        self._by_uri: dict[tuple[str, PayloadKind, bool], KnownBlob] = {}
        self._bytes = 0
        self._store_ref: weakref.ref[object] | None = None
        self._store_id: int | None = None
        self._generation: object = None
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_uri)

    @property
    def bytes_held(self) -> int:
        """Approximate memory the cached strings account for."""
        return self._bytes

    def bind(self, store: object) -> None:
        """Tie the cache to ``store``; refuse a different one; drop entries after a deletion."""
        if self._store_id is None:
            try:
                self._store_ref = weakref.ref(store)
            except TypeError:
                self._store_ref = None
            self._store_id = id(store)
        elif self._store_id != id(store) or (self._store_ref is not None and self._store_ref() is not store):
            raise ValueError('this KnownBlobCache belongs to another media store; use one cache per store')
        generation = getattr(store, 'deletion_generation', None)
        if generation != self._generation:
            self.clear()
            self._generation = generation

    def clear(self) -> None:
        """Forget every payload."""
        with self._lock:
            self._entries.clear()
            self._by_uri.clear()
            self._bytes = 0

    def lookup(self, kind: PayloadKind, payload: str | bytes, fp: int) -> KnownBlob | None:
        """The entry whose source equals ``payload`` exactly, or ``None``."""
        with self._lock:
            bucket = self._entries.get((kind, fp))
            if bucket is not None:
                for entry in bucket:
                    if entry.source is payload or entry.source == payload:
                        self._entries.move_to_end((kind, fp))
                        self.hits += 1
                        return entry
            self.misses += 1
            return None

    def by_uri(self, uri: str, kind: PayloadKind, urlsafe: bool = False) -> KnownBlob | None:
        """A cached source for ``uri`` in the wanted form (used by restore)."""
        return self._by_uri.get((uri, kind, urlsafe and kind == 'base64'))

    def remember(self, kind: PayloadKind, payload: str | bytes, fp: int, uri: str, size: int, urlsafe: bool) -> None:
        """Record that ``payload`` is stored under ``uri`` (confirmed by the store's ``put``)."""
        cost = sys.getsizeof(payload)
        if cost > self.max_bytes:
            return
        key = (kind, fp)
        with self._lock:
            bucket = self._entries.get(key)
            if bucket is None:
                bucket = self._entries[key] = []
            elif any(entry.source == payload for entry in bucket):
                return
            entry = KnownBlob(kind, payload, uri, size, urlsafe)
            bucket.append(entry)
            self._entries.move_to_end(key)
            self._by_uri[_uri_key(entry)] = entry
            self._bytes += cost
            while self._bytes > self.max_bytes and self._entries:
                _, evicted = self._entries.popitem(last=False)
                for old in evicted:
                    self._bytes -= sys.getsizeof(old.source)
                    if self._by_uri.get(_uri_key(old)) is old:
                        del self._by_uri[_uri_key(old)]


def _uri_key(entry: KnownBlob) -> tuple[str, PayloadKind, bool]:
    return (entry.uri, entry.kind, entry.urlsafe and entry.kind == 'base64')


_DEFAULT_CACHES: weakref.WeakKeyDictionary[object, KnownBlobCache] = weakref.WeakKeyDictionary()


def cache_for_store(store: object) -> KnownBlobCache | None:
    """The process-wide default cache of ``store`` (``None`` when the store cannot be weakly referenced)."""
    try:
        cache = _DEFAULT_CACHES.get(store)
        if cache is None:
            cache = _DEFAULT_CACHES[store] = KnownBlobCache()
    except TypeError:
        return None
    return cache
