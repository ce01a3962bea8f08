"""The checks every mediastash store makes before it works: the closed state, URIs, chunk sizes.

``BaseMediaStore`` (a backend) and ``WrapperMediaStore`` (a store over another
store: counting, caching) both inherit ``StoreRules``, so stores of either
family refuse the same calls with the same errors, checked in the same order
(a bad URI before a closed store).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Self

from mediastash._checks import positive_int
from mediastash.errors import StoreClosedError
from mediastash.uri import parse_media_uri

__all__ = ['AsyncClosing', 'StoreRules']


class AsyncClosing:
    """``async with`` for anything with an ``aclose`` coroutine: the block's end closes it."""

    async def aclose(self) -> None:
        """Release what the object owns."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class StoreRules(AsyncClosing):
    """Lifecycle and argument checks shared by every store family.

    ``aclose`` closes once (``_aclose`` releases what the store owns); after it
    every call refuses with ``StoreClosedError`` and so does ``async with``.
    Subclasses call the ``_open_*`` checks at the top of each public method.
    """

    _closed: bool = False
    _namespace_parent: StoreRules | None = None
    """On a namespace view: the store it was made from, whose closing closes the view too."""
    _closes_store: bool = False
    """On a namespace view that ``open_store`` made: closing the view closes its store (nobody else holds it)."""

    @property
    def closed(self) -> bool:
        """True once ``aclose`` was called (on a namespace view: on it or on its store)."""
        parent = self._namespace_parent
        return self._closed or (parent is not None and parent.closed)

    def _describe(self) -> str:
        """Short, secret-free description used in error messages."""
        return type(self).__name__

    def _check_open(self) -> None:
        if self.closed:
            raise StoreClosedError(f'{self._describe()} is closed')

    def _open_digest(self, uri: str) -> str:
        """The digest of ``uri`` (``InvalidMediaURI`` first), once the store is known to be open."""
        digest = parse_media_uri(uri)
        self._check_open()
        return digest

    def _open_digests(self, uris: Iterable[str]) -> dict[str, str]:
        """Digest -> URI for every URI (all validated before anything else; duplicates once, in order)."""
        digests = {parse_media_uri(uri): uri for uri in uris}
        self._check_open()
        return digests

    def _open_stream(self, uri: str, chunk_size: int) -> str:
        """The digest of ``uri`` for a streamed read of ``chunk_size`` pieces (both checked), the store open."""
        digest = parse_media_uri(uri)
        positive_int('chunk_size', chunk_size)
        self._check_open()
        return digest

    async def aclose(self) -> None:
        """Close the store and release what it owns (``_aclose``, called once). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._aclose()
        finally:
            await self._close_owned_store()

    async def _close_owned_store(self) -> None:
        """Close the store this view was made from when the view owns it (``open_store(url, namespace=...)``)."""
        parent = self._namespace_parent
        if self._closes_store and parent is not None:
            await parent.aclose()

    async def _aclose(self) -> None:
        """Release what the store owns (connections, clients, threads, a wrapped store). Called once."""

    async def __aenter__(self) -> Self:
        self._check_open()
        return self
