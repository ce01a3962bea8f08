"""Coalesce look-ups made in one event-loop turn into one statement (the DataLoader pattern).

The look before a put costs the server one statement and the pool one reset,
whatever the blob: eight concurrent puts that each send their own cost
sixteen statements, one ``= ANY($1)`` statement for all eight costs two.
``Coalescer.load(key)`` queues ``key``; the first key of a turn schedules a
flush with ``call_soon``, so every call already runnable in that turn joins
the batch, and a batch that finishes together wakes its callers together (the
next batch forms from them). Nothing waits for a timer: a lone call is sent in
the next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Final, Generic, TypeVar

__all__ = ['Coalescer', 'fail']

K = TypeVar('K', bound=Hashable)
V = TypeVar('V')
A = TypeVar('A')

_MAX_KEYS: Final = 64


class Coalescer(Generic[K, A, V]):
    """Calls ``run({key: argument, ...})`` once per event-loop turn for every ``load(key, argument)`` of that turn.

    ``run`` answers a mapping from (some of) the keys to their values; a key it
    leaves out gets ``missing``. A failure of ``run`` is raised in every caller
    of the batch. The first argument given for a key wins within a batch.
    """

    def __init__(self, run: Callable[[dict[K, A]], Awaitable[Mapping[K, V]]], missing: V, max_keys: int = _MAX_KEYS):
        self._run = run
        self._missing = missing
        self._max_keys = max_keys
        self._pending: dict[asyncio.AbstractEventLoop, dict[K, tuple[A, asyncio.Future[V]]]] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def load(self, key: K, argument: A) -> V:
        loop = asyncio.get_running_loop()
        pending = self._pending.get(loop)
        if pending is None or len(pending) >= self._max_keys:
            pending = self._pending[loop] = {}
            loop.call_soon(self._flush, loop, pending)
        entry = pending.get(key)
        if entry is None:
            entry = pending[key] = (argument, loop.create_future())
        # A cancelled caller must not cancel the batch's answer for the others waiting on the same key.
        return await asyncio.shield(entry[1])

    def _flush(self, loop: asyncio.AbstractEventLoop, pending: dict[K, tuple[A, asyncio.Future[V]]]) -> None:
        if self._pending.get(loop) is pending:
            del self._pending[loop]
        task = loop.create_task(self._answer(pending))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _answer(self, pending: dict[K, tuple[A, asyncio.Future[V]]]) -> None:
        try:
            found = await self._run({key: argument for key, (argument, _) in pending.items()})
        except BaseException as exc:  # every caller of the batch sees the failure
            for _, future in pending.values():
                fail(future, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for key, (_, future) in pending.items():
            if not future.done():
                future.set_result(found.get(key, self._missing))


def fail(future: asyncio.Future[V], exc: BaseException) -> None:
    """Hand ``exc`` to whoever waits on ``future`` (cancel it for a cancellation); nothing once it is settled."""
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
