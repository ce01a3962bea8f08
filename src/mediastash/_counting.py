"""``CountingMediaStore``: a wrapper that counts the calls made to a store, for tests, demos and benchmarks.

It forwards everything to the wrapped store (including what the walks use:
``storage_key``, ``verifies_reads``, ``deletion_generation``) and advertises
exactly the inner store's optional capabilities, so the walks and the
known-blob cache treat it like the store it wraps. Does not need pytest.
Private, so production code (the demo, the CLI, tune) does not import the test
kit; ``mediastash.testing`` re-exports it unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, Final

from mediastash.context import EMPTY_CONTEXT, MediaContextLike
from mediastash.stores.protocols import MediaStore
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

    # -- the writes, which also measure their bytes (every other call is counted below) ----

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self.calls['put'] += 1
        size = memoryview(data).nbytes if isinstance(data, bytes | bytearray | memoryview) else 0
        uri = await super().put(data, context=context)
        self.bytes_put += size
        self.put_sizes[uri] = size
        return uri

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


_COUNTED: Final = (
    'get',
    'exists',
    'exists_many',
    'touch_many',
    'public_url',
    'get_metadata',
    'stat',
    'delete',
    'delete_many',
    'iter_uris',
    'get_stream',
)
"""The calls counted as they are forwarded unchanged (``put`` and ``put_stream`` also measure their bytes)."""


def _counting(name: str) -> Callable[..., Any]:
    """``WrapperMediaStore``'s method ``name``, counting each call in ``calls[name]`` first (failed ones too)."""
    forward = getattr(WrapperMediaStore, name)
    if inspect.iscoroutinefunction(forward):

        async def counted_call(self: CountingMediaStore, /, *args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await forward(self, *args, **kwargs)

        return functools.wraps(forward)(counted_call)

    def counted(self: CountingMediaStore, /, *args: Any, **kwargs: Any) -> Any:
        self.calls[name] += 1
        return forward(self, *args, **kwargs)

    return functools.wraps(forward)(counted)


for _name in _COUNTED:  # set after the class: type checkers keep WrapperMediaStore's signatures
    setattr(CountingMediaStore, _name, _counting(_name))
