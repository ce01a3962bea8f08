"""The ``MediaStore`` protocol and the optional capabilities a store can opt into.

``MediaStore`` has the same method names and signatures as pydantic-ai-harness's,
so any mediastash store can be handed to its step stores as ``media_store=``.
Optional capabilities are separate protocols; test for them with ``isinstance``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from typing import Protocol, runtime_checkable

from mediastash.context import EMPTY_CONTEXT, MediaContextLike

__all__ = ['DeletableMediaStore', 'ListableMediaStore', 'MediaStore', 'StreamingMediaStore']


@runtime_checkable
class MediaStore(Protocol):
    """Async content-addressed blob store: ``put`` returns the blob's ``media+sha256://`` URI.

    ``get`` and ``get_metadata`` raise ``MediaNotFoundError`` (a ``FileNotFoundError``)
    for a blob that is not stored, and ``InvalidMediaURI`` (a ``ValueError``) for a
    malformed URI.
    """

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str: ...

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes: ...

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool: ...

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None: ...

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]: ...


@runtime_checkable
class ListableMediaStore(Protocol):
    """A store that can enumerate the URIs it holds (needed by garbage collection)."""

    def iter_uris(self) -> AsyncIterator[str]: ...


@runtime_checkable
class DeletableMediaStore(Protocol):
    """A store that can delete blobs. Only garbage collection should call this: blobs are shared."""

    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool: ...

    async def delete_many(self, uris: Iterable[str]) -> int: ...


@runtime_checkable
class StreamingMediaStore(Protocol):
    """A store that can write and read a blob without holding it whole in memory.

    ``get_stream`` verifies the sha256 as it goes and withholds the final chunk
    until the digest matches, so a consumer that reads to the end without an
    error has received exactly the stored bytes.
    """

    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str: ...

    def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]: ...
