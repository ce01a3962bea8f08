"""``CountingMediaStore``: a wrapper that counts the calls made to a store, for tests, demos and benchmarks.

It forwards everything to the wrapped store (including what the walks use:
``storage_key``, ``verifies_reads``, ``deletion_generation``) and advertises
exactly the inner store's optional capabilities, so the walks and the
known-blob cache treat it like the store it wraps. Does not need pytest.
Private, so production code (the demo, the CLI, tune) does not import the test
kit; ``mediastash.testing`` re-exports it unchanged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping

from mediastash.context import EMPTY_CONTEXT, MediaContextLike
from mediastash.stores.base import DEFAULT_EXISTS_CONCURRENCY, TOUCH_AFTER_SECONDS
from mediastash.stores.protocols import BlobStat, MediaStore
from mediastash.stores.wrapper import WrapperMediaStore

__all__ = ['CountingMediaStore']


class CountingMediaStore(WrapperMediaStore):
    """Counts calls per public method name in ``calls`` and the bytes handed to ``put``/``put_stream``.

    ``calls['put']``, ``calls['get']``, ``calls['exists_many']``, ``calls['touch_many']``... count calls
    made (successful or not). ``put_sizes`` maps every URI a put returned to
    the size of its bytes; ``bytes_put`` sums the bytes of every put.
    """

    def __init__(self, inner: MediaStore) -> None:
        super().__init__(inner)
        self.calls: Counter[str] = Counter()
        self.put_sizes: dict[str, int] = {}
        self.bytes_put = 0

    def reset(self) -> None:
        """Start counting from zero again."""
        self.calls.clear()
        self.put_sizes.clear()
        self.bytes_put = 0

    @property
    def total_calls(self) -> int:
        """Calls of every method together."""
        return sum(self.calls.values())

    # -- MediaStore ---------------------------------------------------------------------

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self.calls['put'] += 1
        size = memoryview(data).nbytes if isinstance(data, bytes | bytearray | memoryview) else 0
        uri = await super().put(data, context=context)
        self.bytes_put += size
        self.put_sizes[uri] = size
        return uri

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        self.calls['get'] += 1
        return await super().get(uri, context=context)

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        self.calls['exists'] += 1
        return await super().exists(uri, context=context)

    async def exists_many(
        self, uris: Iterable[str], *, max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY
    ) -> frozenset[str]:
        self.calls['exists_many'] += 1
        return await super().exists_many(uris, max_concurrency=max_concurrency)

    async def touch_many(
        self,
        uris: Iterable[str],
        *,
        touch_after: float = TOUCH_AFTER_SECONDS,
        max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY,
    ) -> frozenset[str]:
        self.calls['touch_many'] += 1
        return await super().touch_many(uris, touch_after=touch_after, max_concurrency=max_concurrency)

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        self.calls['public_url'] += 1
        return await super().public_url(uri, context=context)

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        self.calls['get_metadata'] += 1
        return await super().get_metadata(uri, context=context)

    # -- optional capabilities (None when the inner store lacks them, see WrapperMediaStore) --

    async def stat(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> BlobStat:
        self.calls['stat'] += 1
        return await super().stat(uri, context=context)

    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        self.calls['delete'] += 1
        return await super().delete(uri, context=context)

    async def delete_many(self, uris: Iterable[str]) -> int:
        self.calls['delete_many'] += 1
        return await super().delete_many(uris)

    def iter_uris(self) -> AsyncIterator[str]:
        self.calls['iter_uris'] += 1
        return super().iter_uris()

    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self.calls['put_stream'] += 1
        size = 0

        async def measured() -> AsyncIterator[bytes]:
            nonlocal size
            async for chunk in chunks:
                if isinstance(chunk, bytes | bytearray | memoryview):
                    size += memoryview(chunk).nbytes
                yield chunk

        uri = await super().put_stream(measured(), context=context)
        self.bytes_put += size
        self.put_sizes[uri] = size
        return uri

    def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        self.calls['get_stream'] += 1
        return super().get_stream(uri, context=context, chunk_size=chunk_size)
