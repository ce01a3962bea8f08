"""``WrapperMediaStore``: forward every call to another store; subclasses override what they need.

Counting, logging, latency-injecting or caching stores are wrappers. The
wrapper forwards the walker's extras (``verifies_reads``, ``storage_key``,
``deletion_generation``, ``exists_many``) and advertises exactly the optional
capabilities of the store it wraps. It keeps the rules of every mediastash
store (``StoreRules``, shared with ``BaseMediaStore``): its own closed state,
and URIs and chunk sizes checked before a call is handed on.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Hashable, Iterable, Mapping
from typing import Any, Final, Self

from mediastash.context import EMPTY_CONTEXT, MediaContextLike
from mediastash.errors import NamespaceUnsupportedError
from mediastash.known_blobs import storage_key_of
from mediastash.stores._namespaces import EraseReport, check_namespace_name
from mediastash.stores._range import DigestRange, blobs_in_range
from mediastash.stores._rules import StoreRules
from mediastash.stores.base import DEFAULT_EXISTS_CONCURRENCY, TOUCH_AFTER_SECONDS
from mediastash.stores.capabilities import (
    StoreCapabilities,
    as_class_declares,
    capabilities_of,
    close_store,
    deletion_generation_of,
    namespace_name_of,
    public_url_lifetime_of,
    unknown_media_type_reason_of,
)
from mediastash.stores.protocols import BlobInfo, BlobStat, MediaStore, confirm_in, exists_in

__all__ = ['WrapperMediaStore']

_FORWARDED: Final = (
    ('blob_listing', ('iter_blobs', 'iter_blobs_in_range')),
    ('guarded_deletes', ('delete_unless_touched',)),
    ('deletes', ('delete', 'delete_many')),
    ('listing', ('iter_uris',)),
    ('stream_writes', ('put_stream',)),
    ('stream_reads', ('get_stream',)),
    ('stat', ('stat',)),
)
"""The optional methods a wrapper forwards, by the capability of the wrapped store that they need."""


_ORIGIN = '_wrapper_origin'
"""Attribute of a variant class made by ``_without``: the class it was made from."""

_variants: dict[tuple[type, tuple[str, ...]], type] = {}
_variants_lock = threading.Lock()


def _without(cls: type, missing: tuple[str, ...]) -> type:
    """``cls`` with the ``missing`` methods set to ``None`` on the class (one cached variant per combination)."""
    with _variants_lock:
        variant = _variants.get((cls, missing))
        if variant is None:
            namespace: dict[str, object] = {name: None for name in missing}
            namespace.update(__module__=cls.__module__, __qualname__=cls.__qualname__, __doc__=cls.__doc__)
            namespace[_ORIGIN] = vars(cls).get(_ORIGIN, cls)
            variant = _variants[(cls, missing)] = type(cls.__name__, (cls,), namespace)
        return variant


class WrapperMediaStore(StoreRules):
    """A ``MediaStore`` that hands every call to ``inner``.

    Override a method and call ``super()`` to observe or change one call. A
    wrapper that changes the bytes ``get`` returns must set
    ``verifies_reads = False`` so the walks check them again. ``aclose``
    closes the wrapper (every later call raises ``StoreClosedError``) and
    ``inner``; override ``_aclose`` to release more.
    """

    def __init__(self, inner: MediaStore) -> None:
        self.inner = inner
        wrapped = capabilities_of(inner)
        self.capabilities = as_class_declares(self._capabilities_over(wrapped), type(self))
        """What this wrapper can do: its wrapped store's capabilities (see ``capabilities_of``)."""
        missing = tuple(name for flag, names in _FORWARDED if not getattr(wrapped, flag) for name in names)
        if missing:
            # Protocols look at the class before the instance: switch to a variant of this
            # class with the missing methods set to None, which is how a protocol is told "absent".
            object.__setattr__(self, '__class__', _without(type(self), missing))

    def _capabilities_over(self, wrapped: StoreCapabilities) -> StoreCapabilities:
        """This wrapper's capabilities given the wrapped store's; a subclass that adds or drops one overrides it."""
        return StoreCapabilities(
            listing=wrapped.listing,
            deletes=wrapped.deletes,
            stream_writes=wrapped.stream_writes,
            stream_reads=wrapped.stream_reads,
            blob_listing=wrapped.blob_listing,
            ranged_listing=wrapped.blob_listing,  # the wrapped store's own, or its listing filtered
            guarded_deletes=wrapped.guarded_deletes,
            touch=True,  # the wrapped store's touch_many, or its existence check
            exists_many=True,
            stat=wrapped.stat,
            namespaces=wrapped.namespaces,
            erase=wrapped.erase,
            verifies_reads=wrapped.verifies_reads,
        )

    # -- what the walks use beyond MediaStore -----------------------------------------

    @property
    def verifies_reads(self) -> bool:
        return self.capabilities.verifies_reads

    @property
    def storage_key(self) -> Hashable:
        return storage_key_of(self.inner)

    @property
    def public_url_lifetime(self) -> float | None:
        return public_url_lifetime_of(self.inner)

    @property
    def deletion_generation(self) -> object:
        return deletion_generation_of(self.inner)

    @property
    def unknown_media_type_reason(self) -> str:
        """The wrapped store's reason (see ``BaseMediaStore.unknown_media_type_reason``)."""
        return unknown_media_type_reason_of(self.inner)

    async def touch_many(
        self,
        uris: Iterable[str],
        *,
        touch_after: float = TOUCH_AFTER_SECONDS,
        max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY,
    ) -> frozenset[str]:
        """The wrapped store's ``touch_many``, or its existence check where it keeps no ages (``confirm_in``)."""
        wanted = list(self._open_digests(uris).values())
        return await confirm_in(self.inner, wanted, touch_after=touch_after, max_concurrency=max_concurrency)

    def iter_blobs(self) -> AsyncIterator[BlobInfo]:
        self._check_open()
        inner: Any = self.inner
        return inner.iter_blobs()  # type: ignore[no-any-return]

    def iter_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        self._check_open()
        return blobs_in_range(self.inner, digest_range)

    async def delete_unless_touched(self, uris: Iterable[str], *, written_before: float) -> frozenset[str]:
        wanted = list(self._open_digests(uris).values())
        inner: Any = self.inner
        return frozenset(await inner.delete_unless_touched(wanted, written_before=written_before))

    async def exists_many(
        self, uris: Iterable[str], *, max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY
    ) -> frozenset[str]:
        wanted = list(self._open_digests(uris).values())
        return await exists_in(self.inner, wanted, max_concurrency=max_concurrency)

    # -- namespaces ---------------------------------------------------------------------

    @property
    def supports_namespaces(self) -> bool:
        """The wrapped store's (see ``BaseMediaStore.supports_namespaces``)."""
        return self.capabilities.namespaces

    @property
    def namespace_name(self) -> str | None:
        """The wrapped store's namespace; ``None`` for a store that is not a namespace view."""
        return namespace_name_of(self.inner)

    def namespace(self, name: str) -> Self:
        """This wrapper around ``inner.namespace(name)`` (see ``BaseMediaStore.namespace``).

        The view's wrapper is closed with this one; closing it closes only the inner view.
        """
        check_namespace_name(name)
        self._check_open()
        if not capabilities_of(self.inner).namespaces:
            raise NamespaceUnsupportedError(f'{self._describe()} wraps a store without namespaces')
        inner: Any = self.inner
        view = self._rewrap(inner.namespace(name), name)
        view._namespace_parent = self
        return view

    def _rewrap(self, inner_view: Any, name: str) -> Self:
        """A wrapper like this one around ``inner_view``; override when the constructor takes more than ``inner``."""
        origin: type[Self] = getattr(type(self), _ORIGIN, type(self))
        return origin(inner_view)

    async def erase(
        self, *, progress: Callable[[int, int], None] | None = None, exclusive: bool = False
    ) -> EraseReport:
        """The wrapped view's ``erase`` (see ``BaseMediaStore.erase``)."""
        self._check_open()
        if not capabilities_of(self.inner).erase:
            raise NamespaceUnsupportedError(f'{self._describe()} wraps a store that cannot erase')
        extra = {'exclusive': True} if exclusive else {}  # a wrapped store of before ``exclusive`` still erases
        inner: Any = self.inner
        report: EraseReport = await inner.erase(progress=progress, **extra)
        return report

    # -- MediaStore ---------------------------------------------------------------------

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self._check_open()
        return await self.inner.put(data, context=context)

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        self._open_digest(uri)
        return await self.inner.get(uri, context=context)

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        self._open_digest(uri)
        return await self.inner.exists(uri, context=context)

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        self._open_digest(uri)
        return await self.inner.public_url(uri, context=context)

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        self._open_digest(uri)
        return await self.inner.get_metadata(uri, context=context)

    # -- optional capabilities (set to None in __init__ when ``inner`` lacks them) -------

    async def stat(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> BlobStat:
        self._open_digest(uri)
        inner: Any = self.inner
        found: BlobStat = await inner.stat(uri, context=context)
        return found

    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        self._open_digest(uri)
        inner: Any = self.inner
        return bool(await inner.delete(uri, context=context))

    async def delete_many(self, uris: Iterable[str]) -> int:
        wanted = list(self._open_digests(uris).values())
        inner: Any = self.inner
        return int(await inner.delete_many(wanted))

    def iter_uris(self) -> AsyncIterator[str]:
        self._check_open()
        inner: Any = self.inner
        return inner.iter_uris()  # type: ignore[no-any-return]

    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self._check_open()
        inner: Any = self.inner
        return str(await inner.put_stream(chunks, context=context))

    def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        self._open_stream(uri, chunk_size)
        inner: Any = self.inner
        return inner.get_stream(uri, context=context, chunk_size=chunk_size)  # type: ignore[no-any-return]

    # -- lifecycle ----------------------------------------------------------------------

    async def _aclose(self) -> None:
        """Close the wrapped store (when it can be closed)."""
        await close_store(self.inner)

    def _describe(self) -> str:
        return repr(self)

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.inner!r})'
