"""``WrapperMediaStore``: forward every call to another store; subclasses override what they need.

Counting, logging, latency-injecting or caching stores are wrappers. The
wrapper forwards the walker's extras (``verifies_reads``, ``storage_key``,
``deletion_generation``, ``exists_many``) and advertises exactly the optional
capabilities of the store it wraps.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterable, AsyncIterator, Hashable, Iterable, Mapping
from typing import Any

from mediastash.context import EMPTY_CONTEXT, MediaContextLike
from mediastash.known_blobs import storage_key_of
from mediastash.stores.base import DEFAULT_EXISTS_CONCURRENCY, TOUCH_AFTER_SECONDS, AsyncClosing, BlobInfo
from mediastash.stores.protocols import (
    CollectableMediaStore,
    DeletableMediaStore,
    ListableMediaStore,
    MediaStore,
    StreamingMediaStore,
    exists_in,
)

__all__ = ['WrapperMediaStore']

_OPTIONAL_METHODS = (
    (CollectableMediaStore, ('iter_blobs', 'delete_unless_touched')),
    (DeletableMediaStore, ('delete', 'delete_many')),
    (ListableMediaStore, ('iter_uris',)),
    (StreamingMediaStore, ('put_stream', 'get_stream')),
)


_variants: dict[tuple[type, tuple[str, ...]], type] = {}
_variants_lock = threading.Lock()


def _without(cls: type, missing: tuple[str, ...]) -> type:
    """``cls`` with the ``missing`` methods set to ``None`` on the class (one cached variant per combination)."""
    with _variants_lock:
        variant = _variants.get((cls, missing))
        if variant is None:
            namespace: dict[str, object] = {name: None for name in missing}
            namespace.update(__module__=cls.__module__, __qualname__=cls.__qualname__, __doc__=cls.__doc__)
            variant = _variants[(cls, missing)] = type(cls.__name__, (cls,), namespace)
        return variant


class WrapperMediaStore(AsyncClosing):
    """A ``MediaStore`` that hands every call to ``inner``.

    Override a method and call ``super()`` to observe or change one call. A
    wrapper that changes the bytes ``get`` returns must set
    ``verifies_reads = False`` so the walks check them again.
    """

    def __init__(self, inner: MediaStore) -> None:
        self.inner = inner
        missing = tuple(
            name for protocol, names in _OPTIONAL_METHODS if not isinstance(inner, protocol) for name in names
        )
        if missing:
            # Protocols look at the class before the instance: switch to a variant of this
            # class with the missing methods set to None, which is how a protocol is told "absent".
            object.__setattr__(self, '__class__', _without(type(self), missing))

    # -- what the walks use beyond MediaStore -----------------------------------------

    @property
    def verifies_reads(self) -> bool:
        return bool(getattr(self.inner, 'verifies_reads', False))

    @property
    def storage_key(self) -> Hashable:
        return storage_key_of(self.inner)

    @property
    def public_url_lifetime(self) -> float | None:
        lifetime = getattr(self.inner, 'public_url_lifetime', None)
        return float(lifetime) if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) else None

    @property
    def deletion_generation(self) -> object:
        return getattr(self.inner, 'deletion_generation', None)

    async def touch_many(
        self,
        uris: Iterable[str],
        *,
        touch_after: float = TOUCH_AFTER_SECONDS,
        max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY,
    ) -> frozenset[str]:
        touch = getattr(self.inner, 'touch_many', None)
        if touch is None:
            return await exists_in(self.inner, uris, max_concurrency=max_concurrency)
        return frozenset(await touch(uris, touch_after=touch_after, max_concurrency=max_concurrency))

    def iter_blobs(self) -> AsyncIterator[BlobInfo]:
        inner: Any = self.inner
        return inner.iter_blobs()  # type: ignore[no-any-return]

    async def delete_unless_touched(self, uris: Iterable[str], *, written_before: float) -> frozenset[str]:
        inner: Any = self.inner
        return frozenset(await inner.delete_unless_touched(uris, written_before=written_before))

    async def exists_many(
        self, uris: Iterable[str], *, max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY
    ) -> frozenset[str]:
        return await exists_in(self.inner, uris, max_concurrency=max_concurrency)

    # -- MediaStore ---------------------------------------------------------------------

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        return await self.inner.put(data, context=context)

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        return await self.inner.get(uri, context=context)

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        return await self.inner.exists(uri, context=context)

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        return await self.inner.public_url(uri, context=context)

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        return await self.inner.get_metadata(uri, context=context)

    # -- optional capabilities (set to None in __init__ when ``inner`` lacks them) -------

    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        inner: Any = self.inner
        return bool(await inner.delete(uri, context=context))

    async def delete_many(self, uris: Iterable[str]) -> int:
        inner: Any = self.inner
        return int(await inner.delete_many(uris))

    def iter_uris(self) -> AsyncIterator[str]:
        inner: Any = self.inner
        return inner.iter_uris()  # type: ignore[no-any-return]

    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        inner: Any = self.inner
        return str(await inner.put_stream(chunks, context=context))

    def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        inner: Any = self.inner
        return inner.get_stream(uri, context=context, chunk_size=chunk_size)  # type: ignore[no-any-return]

    # -- lifecycle ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the wrapped store (when it can be closed)."""
        close = getattr(self.inner, 'aclose', None)
        if close is not None:
            await close()

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.inner!r})'
