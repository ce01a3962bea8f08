"""``CachedMediaStore``: a local, verified cache in front of a remote store.

A ``media+sha256://`` blob never changes, so a local copy needs no
invalidation, only verification: every read from the cache is checked against
the digest, and a copy that fails is deleted and fetched again from the
backing store. The backing store stays the source of truth: writes, deletions,
listings, garbage collection, public URLs and existence all go to it. A local
copy says nothing about whether the backing store still holds a blob, so
``exists`` reuses only the backing store's own recent positive answers
(within the known-blob trust age; see ``docs/stores.md``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Hashable, Iterable
from typing import Any, Final, Literal, Self

from mediastash._checks import non_negative_int
from mediastash._lru import BoundedLRU
from mediastash.context import EMPTY_CONTEXT, MediaContextLike
from mediastash.errors import IntegrityError, MediaNotFoundError, NamespaceUnsupportedError, StoreClosedError
from mediastash.known_blobs import DEFAULT_TRUST_SECONDS, deletion_generation, storage_key_of
from mediastash.stores._blob import verify_digest
from mediastash.stores._namespaces import EraseReport
from mediastash.stores.base import DEFAULT_EXISTS_CONCURRENCY
from mediastash.stores.capabilities import (
    capabilities_of,
    close_store,
    deletion_generation_of,
)
from mediastash.stores.protocols import MediaStore, exists_in
from mediastash.stores.wrapper import WrapperMediaStore
from mediastash.uri import media_uri, parse_media_uri

__all__ = ['CachedMediaStore', 'WriteMode']

WriteMode = Literal['through', 'around']
"""``'through'``: a put stores the blob in the backing store, then in the cache. ``'around'``: only in the
backing store; the cache is filled by the first read."""

_WRITE_MODES: Final = ('through', 'around')
HIT_TOUCH_AFTER: Final = 3600.0
"""With ``max_bytes``, a cache hit refreshes the cached copy's last-write time when it is older than this,
so the eviction order another process reads back (last write or hit, to within this) follows use."""
CONFIRMED_ITEMS: Final = 1 << 16
"""Backing-store confirmations remembered for ``exists`` (least recently confirmed go first)."""

logger = logging.getLogger(__name__)


class CachedMediaStore(WrapperMediaStore):
    """``backing`` (the source of truth) with local copies of what was read or written kept in ``cache``.

    - ``get``: from ``cache`` when it holds the blob (verified; a corrupt copy is
      deleted and the blob fetched from ``backing``), else from ``backing`` and
      then kept in ``cache``.
    - ``put``: to ``backing``, then (``write='through'``) to ``cache``.
    - ``exists``/``exists_many``: ``backing``'s answer. A positive answer
      ``backing`` gave this object (a ``put``, an ``exists``, a read from it)
      less than ``trust_seconds`` ago is reused without asking again; a
      deletion through any mediastash store on the backing storage in this
      process forgets them all. A cached copy never answers: the blob may
      have been removed from ``backing`` since. ``trust_seconds=0`` asks
      every time; ``clock`` is for tests.
    - ``get_metadata``, ``public_url`` (presigned URLs point at the remote),
      listing, ``touch_many`` and garbage collection: ``backing`` only.
    - ``delete``/``delete_many``/``delete_unless_touched``: in both.
    - ``put_stream``/``get_stream`` (blobs too large to want in memory) go to
      ``backing`` and do not fill the cache; ``get_stream`` reads a copy the
      cache already holds after reading it through once to verify it (local
      reads are cheap next to a download), so a corrupt copy is discarded and
      the blob streamed from ``backing`` instead.
    - ``max_bytes``: least-recently-used eviction once the cached blobs sum
      to more. Recency is this process's reads and writes, seeded at first use
      from the cache's ``iter_blobs`` ordered by last-write time (a disk
      cache: file mtime, which a hit refreshes at most once an hour). Blobs
      larger than ``max_bytes`` are never cached.

    ``storage_key`` is the backing store's, so the walker's known-blob cache
    is shared with every other store on the same remote storage. A failing
    cache never fails a call that ``backing`` can answer. ``aclose`` closes
    both stores.
    """

    def __init__(
        self,
        backing: MediaStore,
        *,
        cache: MediaStore,
        max_bytes: int | None = None,
        write: WriteMode = 'through',
        trust_seconds: float = DEFAULT_TRUST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if write not in _WRITE_MODES:
            raise ValueError(f"write must be 'through' or 'around', got {write!r}")
        if max_bytes is not None:
            non_negative_int('max_bytes', max_bytes)
        if isinstance(trust_seconds, bool) or not isinstance(trust_seconds, int | float) or not trust_seconds >= 0:
            raise ValueError(f'trust_seconds must be a non-negative number, got {trust_seconds!r}')
        cache_can = capabilities_of(cache)
        if not cache_can.deletes:
            raise TypeError(f'the cache must be able to delete (a DeletableMediaStore), got {type(cache).__name__}')
        if max_bytes is not None and not cache_can.collection:
            raise TypeError(f'max_bytes needs a cache that lists blob sizes (iter_blobs), got {type(cache).__name__}')
        if storage_key_of(cache) == storage_key_of(backing):
            raise ValueError('the cache and the backing store are the same storage')
        super().__init__(backing)
        self.cache = cache
        both = cache_can.namespaces and self.capabilities.namespaces
        self.capabilities = dataclasses.replace(self.capabilities, namespaces=both, erase=both, verifies_reads=True)
        self.max_bytes = max_bytes
        self.write = write
        self._evicted: list[str] = []
        self._lru: BoundedLRU[str, None] | None = None
        self._index_lock: asyncio.Lock | None = None
        self.trust_seconds = float(trust_seconds)
        self.clock = clock
        self._confirmed: BoundedLRU[str, float] = BoundedLRU(max_items=CONFIRMED_ITEMS)
        self._confirmed_generation: object = self._generation()

    @property
    def backing(self) -> MediaStore:
        """The source of truth (the wrapped store)."""
        return self.inner

    @property
    def verifies_reads(self) -> bool:
        """Every ``get`` is verified: by the stores that verify, here for those that do not."""
        return True

    # -- reads --------------------------------------------------------------------------

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        digest = self._open_digest(uri)
        data = await self._cached(uri, digest, context)
        if data is not None:
            return data
        asked = self._asking()
        data = await self.inner.get(uri, context=context)
        if not capabilities_of(self.inner).verifies_reads:
            data = await verify_digest(digest, data, where=repr(self.inner))
        self._confirm([digest], asked)
        await self._keep(uri, digest, data, context)
        return data

    async def _cached(self, uri: str, digest: str, context: MediaContextLike) -> bytes | None:
        """The verified cached copy, or ``None`` (absent, unreadable, or corrupt and now discarded)."""
        try:
            data = await self.cache.get(uri, context=context)
            if not capabilities_of(self.cache).verifies_reads:
                data = await verify_digest(digest, data, where=repr(self.cache))
        except MediaNotFoundError:
            await self._forget(digest)
            return None
        except IntegrityError:
            logger.warning('discarding a corrupt cached copy of %s', uri)
            await self._discard(uri, digest)
            return None
        except (asyncio.CancelledError, StoreClosedError):
            raise
        except Exception:  # a failing cache must not fail a read the backing store can answer
            logger.warning('the cache could not be read for %s', uri, exc_info=True)
            return None
        await self._note_hit(uri, digest, len(data))
        return data

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        digest = self._open_digest(uri)
        asked = self._asking()
        if self._trusted(digest, asked[1]):
            return True
        found = await self.inner.exists(uri, context=context)
        if found:
            self._confirm([digest], asked)
        return found

    async def exists_many(
        self, uris: Iterable[str], *, max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY
    ) -> frozenset[str]:
        wanted = self._open_digests(uris)
        asked = self._asking()
        trusted = frozenset(uri for digest, uri in wanted.items() if self._trusted(digest, asked[1]))
        rest = [uri for uri in wanted.values() if uri not in trusted]
        if not rest:
            return trusted
        found = await exists_in(self.inner, rest, max_concurrency=max_concurrency)
        self._confirm((parse_media_uri(uri) for uri in found), asked)
        return trusted | found

    # -- what the backing store confirmed recently --------------------------------------

    def _generation(self) -> tuple[int, object]:
        """Deletions noted for the backing storage in this process (and the backing's own count)."""
        key: Hashable = storage_key_of(self.inner)
        return (deletion_generation(key), deletion_generation_of(self.inner))

    def _current(self) -> tuple[int, object]:
        """The deletion generation now; every confirmation is dropped when it moved since the last look."""
        generation = self._generation()
        if generation != self._confirmed_generation:
            self._confirmed.clear()
            self._confirmed_generation = generation
        return generation

    def _trusted(self, digest: str, now: float) -> bool:
        """Whether ``backing`` said it holds ``digest`` less than ``trust_seconds`` before ``now``.

        Call ``_current()`` first, so confirmations older than a noted deletion are gone.
        """
        confirmed = self._confirmed.peek(digest)
        if confirmed is None:
            return False
        if now - confirmed < self.trust_seconds:
            return True
        self._confirmed.pop(digest)
        return False

    def _unconfirm(self, digests: Iterable[str]) -> None:
        """Drop the confirmations of blobs about to be deleted."""
        for digest in digests:
            self._confirmed.pop(digest)

    def _asking(self) -> tuple[tuple[int, object], float]:
        """Taken just before a question to ``backing``: the deletion generation and the time."""
        return self._current(), self.clock()

    def _confirm(self, digests: Iterable[str], asked: tuple[tuple[int, object], float]) -> None:
        """``backing`` said it holds ``digests``; trusted from when it was asked, unless a deletion was noted since."""
        generation, when = asked
        if self._current() != generation or self.trust_seconds == 0:
            return
        for digest in digests:
            self._confirmed.put(digest, when)

    def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        return self._stream(uri, context, chunk_size)

    async def _stream(self, uri: str, context: MediaContextLike, chunk_size: int) -> AsyncIterator[bytes]:
        digest = self._open_stream(uri, chunk_size)
        cache: Any = self.cache
        if capabilities_of(self.cache).stream_reads and await self._stream_verified(uri, digest, chunk_size):
            stream = cache.get_stream(uri, context=context, chunk_size=chunk_size)
            try:
                async for chunk in stream:
                    yield chunk
                return
            except IntegrityError:  # changed since it was checked: drop it, the next read refetches
                await self._discard(uri, digest)
                raise
            finally:
                await stream.aclose()
        inner: Any = self.inner
        asked = self._asking()
        backing = inner.get_stream(uri, context=context, chunk_size=chunk_size)
        try:
            async for chunk in backing:
                yield chunk
        finally:
            await backing.aclose()
        self._confirm([digest], asked)

    async def _stream_verified(self, uri: str, digest: str, chunk_size: int) -> bool:
        """True when the cache holds a good copy, read through once (a corrupt one is discarded)."""
        if not await self.cache.exists(uri):
            return False
        cache: Any = self.cache
        stream = cache.get_stream(uri, chunk_size=max(chunk_size, 1 << 20))
        try:
            async for _ in stream:
                pass
        except MediaNotFoundError:
            return False
        except IntegrityError:
            logger.warning('discarding a corrupt cached copy of %s', uri)
            await self._discard(uri, digest)
            return False
        finally:
            await stream.aclose()
        return True

    # -- writes -------------------------------------------------------------------------

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self._check_open()
        asked = self._asking()
        uri = await self.inner.put(data, context=context)
        digest = parse_media_uri(uri)
        self._confirm([digest], asked)
        if self.write == 'through':
            await self._keep(uri, digest, data, context)
        return uri

    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self._check_open()
        asked = self._asking()
        uri = await super().put_stream(chunks, context=context)
        self._confirm([parse_media_uri(uri)], asked)
        return uri

    async def _keep(self, uri: str, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Store a verified blob in the cache (best effort), then evict what the bound requires."""
        size = memoryview(data).nbytes
        if self.max_bytes is not None and size > self.max_bytes:
            return
        if not await _best_effort(lambda: self.cache.put(data, context=context), 'the cache could not keep %s', uri):
            return
        lru = await self._index()
        if lru is not None:
            lru.put(digest, None, size)
            await self._evict()

    # -- deletions (in both stores) -----------------------------------------------------

    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        digest = self._open_digest(uri)
        self._confirmed.pop(digest)
        deleted = await super().delete(uri, context=context)
        await self._discard(uri, digest)
        return deleted

    async def delete_many(self, uris: Iterable[str]) -> int:
        wanted = self._open_digests(uris)
        listed = list(wanted.values())
        self._unconfirm(wanted)
        removed = await super().delete_many(listed)
        await self._discard_many(listed)
        return removed

    async def delete_unless_touched(self, uris: Iterable[str], *, written_before: float) -> frozenset[str]:
        wanted = self._open_digests(uris)
        listed = list(wanted.values())
        self._unconfirm(wanted)  # before: a deletion must never be hidden by a confirmation, even briefly
        deleted = await super().delete_unless_touched(listed, written_before=written_before)
        await self._discard_many(deleted)
        return deleted

    async def _discard(self, uri: str, digest: str) -> None:
        """Remove the cached copy of one blob (best effort)."""
        await self._forget(digest)
        cache: Any = self.cache
        await _best_effort(lambda: cache.delete(uri), 'the cache could not delete %s', uri)

    async def _discard_many(self, uris: Iterable[str]) -> None:
        listed = list(uris)
        if not listed:
            return
        for uri in listed:
            await self._forget(parse_media_uri(uri))
        cache: Any = self.cache
        await _best_effort(lambda: cache.delete_many(listed), 'the cache could not delete %d blobs', len(listed))

    # -- the size bound -----------------------------------------------------------------

    async def _index(self) -> BoundedLRU[str, None] | None:
        """The recency index (built from the cache's listing at first use), or ``None`` without ``max_bytes``."""
        if self.max_bytes is None:
            return None
        if self._lru is not None:
            return self._lru
        if self._index_lock is None:
            self._index_lock = asyncio.Lock()
        async with self._index_lock:
            if self._lru is None:
                lru: BoundedLRU[str, None] = BoundedLRU(max_cost=self.max_bytes, on_evict=self._on_evict)
                cache: Any = self.cache
                blobs = [info async for info in cache.iter_blobs()]
                blobs.sort(key=lambda info: info.written_at if info.written_at is not None else 0.0)
                for info in blobs:
                    lru.put(parse_media_uri(info.uri), None, info.size)
                self._lru = lru
                await self._evict()
        return self._lru

    def _on_evict(self, digest: str, value: None) -> None:
        self._evicted.append(digest)

    async def _evict(self) -> None:
        """Delete from the cache what the bound pushed out of the index."""
        if not self._evicted:
            return
        evicted, self._evicted = self._evicted, []
        cache: Any = self.cache
        uris = [media_uri(digest) for digest in evicted]
        await _best_effort(lambda: cache.delete_many(uris), 'the cache could not evict %d blobs', len(evicted))

    async def _note_hit(self, uri: str, digest: str, size: int) -> None:
        lru = await self._index()
        if lru is None:
            return
        if digest in lru:
            lru.get(digest)  # now the most recently used
        else:
            lru.put(digest, None, size)  # cached by another process since the index was built
            await self._evict()
        if capabilities_of(self.cache).touch:
            cache: Any = self.cache
            refresh = functools.partial(cache.touch_many, [uri], touch_after=HIT_TOUCH_AFTER)
            await _best_effort(refresh, 'the cache could not refresh %s', uri, level=logging.DEBUG)

    async def _forget(self, digest: str) -> None:
        if self._lru is not None:
            self._lru.pop(digest)

    @property
    def cached_bytes(self) -> int | None:
        """Bytes the size bound counts as cached (``None`` without ``max_bytes`` or before first use)."""
        return None if self._lru is None else self._lru.total_cost

    # -- the rest goes to the backing store ---------------------------------------------

    async def touch_many(self, uris: Iterable[str], **options: Any) -> frozenset[str]:
        """``WrapperMediaStore.touch_many`` (same options), remembering what the backing store holds."""
        asked = self._asking()
        found = await super().touch_many(uris, **options)
        self._confirm((parse_media_uri(uri) for uri in found), asked)
        return found

    # -- namespaces: the backing store's and the cache's of the same name ---------------

    @property
    def supports_namespaces(self) -> bool:
        """True when both the backing store and the cache have namespaces."""
        return self.capabilities.namespaces

    def _rewrap(self, inner_view: Any, name: str) -> Self:
        """A ``CachedMediaStore`` over the backing store's view and the cache's view of ``name``, same options.

        The view's size bound (``max_bytes``) counts the namespace's cached copies only.
        """
        if not capabilities_of(self.cache).namespaces:
            raise NamespaceUnsupportedError(f'{self._describe()} has a cache without namespaces')
        cache: Any = self.cache
        return type(self)(
            inner_view,
            cache=cache.namespace(name),
            max_bytes=self.max_bytes,
            write=self.write,
            trust_seconds=self.trust_seconds,
            clock=self.clock,
        )

    async def erase(
        self, *, progress: Callable[[int, int], None] | None = None, exclusive: bool = False
    ) -> EraseReport:
        """Erase the namespace in the backing store (its report), then its cached copies (best effort)."""
        report = await super().erase(progress=progress, exclusive=exclusive)
        cache: Any = self.cache
        await _best_effort(cache.erase, 'the cache could not erase namespace %s', self.namespace_name)
        self._lru = None  # rebuilt from the (now emptied) cache on next use; the backing store's deletions
        return report  # were noted, so the confirmations ``exists`` reuses are forgotten already

    async def _aclose(self) -> None:
        """Close the backing store and the cache (``aclose`` calls this once)."""
        try:
            await super()._aclose()
        finally:
            await close_store(self.cache)

    def __repr__(self) -> str:
        return f'CachedMediaStore({self.inner!r}, cache={self.cache!r})'


async def _best_effort(
    call: Callable[[], Awaitable[object]], message: str, *args: object, level: int = logging.WARNING
) -> bool:
    """Run one call to the cache; its failure is logged (``message % args``), not raised. True when it worked.

    A failing cache must never fail a call the backing store can answer; a
    cancellation or a closed store still propagates.
    """
    try:
        await call()
    except (asyncio.CancelledError, StoreClosedError):
        raise
    except Exception:
        logger.log(level, message, *args, exc_info=True)
        return False
    return True
