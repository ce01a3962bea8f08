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

import itertools
import sys
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final, Literal

import xxhash

from mediastash._lru import BoundedLRU

__all__ = [
    'DEFAULT_CACHE_BYTES',
    'DEFAULT_TRUST_SECONDS',
    'KnownBlob',
    'KnownBlobCache',
    'PayloadKind',
    'cache_for_store',
    'deletion_generation',
    'fingerprint',
    'fingerprint_bytes',
    'note_deletion',
    'storage_key_of',
]

DEFAULT_CACHE_BYTES: Final = 256 << 20
"""Default budget: the summed size of the payload strings the cache keeps alive."""

DEFAULT_TRUST_SECONDS: Final = 600.0
"""How long an entry is believed without asking the store again (changes this process cannot see).

Garbage collection's grace period must exceed it; see ``docs/known-blobs.md``."""

PayloadKind = Literal['base64', 'text', 'bytes']
"""``base64`` and ``text`` sources are ``str``; ``bytes`` sources are the raw payload itself."""

_NEVER: Final = float('-inf')
"""``KnownBlob.confirmed`` of an entry learned from a read: never trusted before a re-check."""

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
    """One remembered payload: the exact source (``str``, or ``bytes`` for kind ``bytes``), its URI, its size.

    ``confirmed`` is the cache clock's time when a write last confirmed the blob
    (minus infinity for an entry only read so far).
    """

    kind: PayloadKind
    source: str | bytes
    uri: str
    size: int
    urlsafe: bool
    confirmed: float = 0.0


# -- storage identity and deletions, process-wide ---------------------------------------

_registry_lock = threading.Lock()
_generations: dict[Hashable, int] = {}
_foreign_tokens: weakref.WeakKeyDictionary[object, tuple[str, int]] = weakref.WeakKeyDictionary()
_token_counter = itertools.count()


def storage_key_of(store: object) -> Hashable:
    """What storage ``store`` points at, as a hashable key.

    mediastash stores answer with ``storage_key`` (same folder, database file,
    bucket and prefix, or collection -> same key, whatever the instance).
    Other stores get a token unique to the instance for the life of the
    process (never an ``id()``, which a new object can inherit).
    """
    from mediastash.stores.capabilities import storage_key_or_none  # the stores package imports this module

    key = storage_key_or_none(store)
    if key is not None:
        return key
    with _registry_lock:
        try:
            token = _foreign_tokens.get(store)
            if token is None:
                token = _foreign_tokens[store] = ('instance', next(_token_counter))
        except TypeError:
            raise TypeError(
                f'{type(store).__name__} cannot be weakly referenced and has no storage_key; '
                'pass known_blobs=False or give the store a storage_key'
            ) from None
        return token


def note_deletion(key: Hashable) -> None:
    """Record that a blob of the storage ``key`` is being or was deleted: caches of it forget."""
    with _registry_lock:
        _generations[key] = _generations.get(key, 0) + 1


def deletion_generation(key: Hashable) -> int:
    """How many deletions were noted for the storage ``key`` in this process."""
    return _generations.get(key, 0)


def _generation_of(store: object, key: Hashable) -> object:
    from mediastash.stores.capabilities import deletion_generation_of  # the stores package imports this module

    own = deletion_generation_of(store)
    return (deletion_generation(key), own)


class KnownBlobCache:
    """Bounded LRU of payloads already stored in one storage (thread-safe).

    The cache belongs to the storage of the first store it is used with
    (``storage_key_of``): any store instance on that same storage may use it,
    a store on other storage is refused. It empties itself when a deletion
    is noted for that storage through any mediastash store in the process.
    Changes it cannot see (another process, a hand deletion) are bounded by
    ``trust_seconds``: an older entry is re-checked with the store before
    the walks trust it again. ``clock`` is for tests.
    """

    def __init__(
        self,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        *,
        trust_seconds: float = DEFAULT_TRUST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f'max_bytes must be a non-negative int, got {max_bytes!r}')
        if isinstance(trust_seconds, bool) or not isinstance(trust_seconds, int | float) or not trust_seconds >= 0:
            raise ValueError(f'trust_seconds must be a non-negative number, got {trust_seconds!r}')
        self.max_bytes = max_bytes
        self.trust_seconds = float(trust_seconds)
        self.clock = clock
        self._entries: BoundedLRU[tuple[PayloadKind, int], list[KnownBlob]] = BoundedLRU(
            max_cost=max_bytes, on_evict=self._evicted
        )
        self._by_uri: dict[tuple[str, PayloadKind, bool], KnownBlob] = {}
        self._storage: Hashable | None = None
        self._generation: object = None
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_uri)

    @property
    def bytes_held(self) -> int:
        """Approximate memory the cached strings account for."""
        return self._entries.total_cost

    @property
    def storage_key(self) -> Hashable | None:
        """The storage this cache belongs to (``None`` until first used)."""
        return self._storage

    def bind(self, store: object) -> None:
        """Tie the cache to ``store``'s storage; refuse other storage; forget everything after a deletion."""
        key = storage_key_of(store)
        with self._lock:
            if self._storage is None:
                self._storage = key
            elif self._storage != key:
                raise ValueError(
                    'this KnownBlobCache belongs to the storage of another media store; use one cache per storage'
                )
        generation = _generation_of(store, key)
        if generation != self._generation:
            self.clear()
            self._generation = generation

    def clear(self) -> None:
        """Forget every payload."""
        with self._lock:
            self._entries.clear()
            self._by_uri.clear()

    def is_trusted(self, entry: KnownBlob) -> bool:
        """Whether ``entry`` was confirmed by the store recently enough to skip asking again."""
        return self.clock() - entry.confirmed <= self.trust_seconds

    def confirm(self, entry: KnownBlob) -> None:
        """The store just said ``entry``'s blob is stored: trust it for another ``trust_seconds``."""
        entry.confirmed = self.clock()

    def forget(self, entry: KnownBlob) -> None:
        """Drop one entry (its blob turned out to be missing)."""
        with self._lock:
            key = (entry.kind, fingerprint_of(entry))
            bucket = self._entries.peek(key)
            if bucket is not None and entry in bucket:
                bucket.remove(entry)
                if not bucket:
                    self._entries.pop(key)
            if self._by_uri.get(_uri_key(entry)) is entry:
                del self._by_uri[_uri_key(entry)]

    def lookup(self, kind: PayloadKind, payload: str | bytes, fp: int) -> KnownBlob | None:
        """The entry whose source equals ``payload`` exactly, or ``None`` (trusted or not: see ``is_trusted``)."""
        with self._lock:
            bucket = self._entries.get((kind, fp))
            if bucket is not None:
                for entry in bucket:
                    if entry.source is payload or entry.source == payload:
                        self.hits += 1
                        return entry
            self.misses += 1
            return None

    def by_uri(self, uri: str, kind: PayloadKind, urlsafe: bool = False) -> KnownBlob | None:
        """A cached source for ``uri`` in the wanted form (used by restore)."""
        return self._by_uri.get((uri, kind, urlsafe and kind == 'base64'))

    def remember(
        self,
        kind: PayloadKind,
        payload: str | bytes,
        fp: int,
        uri: str,
        size: int,
        urlsafe: bool,
        *,
        written: bool = True,
    ) -> None:
        """Record that ``payload`` is stored under ``uri``.

        ``written=True``: a ``put`` just stored or confirmed it (which also
        marks the blob as in use), so it is trusted for ``trust_seconds``.
        ``written=False``: it was only read (a restore); a save re-confirms it
        with the store (``touch_many``) before relying on it, so garbage
        collection sees the blob in use.
        """
        cost = sys.getsizeof(payload)
        if cost > self.max_bytes:
            return
        key = (kind, fp)
        now = self.clock() if written else _NEVER
        with self._lock:
            bucket = self._entries.get(key)
            if bucket is not None:
                for entry in bucket:
                    if entry.source == payload:
                        if written:
                            entry.confirmed = now
                        return
            entry = KnownBlob(kind, payload, uri, size, urlsafe, now)
            self._by_uri[_uri_key(entry)] = entry
            if bucket is None:
                self._entries.put(key, [entry], cost)
            else:
                bucket.append(entry)
                self._entries.add_cost(key, cost)

    def _evicted(self, key: tuple[PayloadKind, int], bucket: list[KnownBlob]) -> None:
        for old in bucket:
            if self._by_uri.get(_uri_key(old)) is old:
                del self._by_uri[_uri_key(old)]


def fingerprint_of(entry: KnownBlob) -> int:
    """The fingerprint ``entry`` is filed under."""
    source = entry.source
    return fingerprint_bytes(source) if isinstance(source, bytes) else fingerprint(source)


def _uri_key(entry: KnownBlob) -> tuple[str, PayloadKind, bool]:
    return (entry.uri, entry.kind, entry.urlsafe and entry.kind == 'base64')


# One default cache per storage, alive while any store instance on that storage is.
_caches_by_store: weakref.WeakKeyDictionary[object, KnownBlobCache] = weakref.WeakKeyDictionary()
_caches_by_storage: weakref.WeakValueDictionary[Hashable, KnownBlobCache] = weakref.WeakValueDictionary()


def cache_for_store(store: object) -> KnownBlobCache | None:
    """The process-wide default cache of ``store``'s storage (``None`` when the store cannot be weakly referenced).

    Two instances on the same folder, database, bucket and prefix, or
    collection share one cache, so a deletion through either is seen by both.
    """
    with _registry_lock:
        try:
            cache = _caches_by_store.get(store)
        except TypeError:
            return None
    if cache is not None:
        return cache
    try:
        key = storage_key_of(store)
    except TypeError:
        return None
    with _registry_lock:
        cache = _caches_by_storage.get(key)
        if cache is None:
            cache = KnownBlobCache()
            _caches_by_storage[key] = cache
        _caches_by_store[store] = cache
    return cache
