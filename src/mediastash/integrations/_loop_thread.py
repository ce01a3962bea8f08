"""``LoopThread``: an event loop in a daemon thread of its own, for integrations a framework calls synchronously.

A synchronous framework method (LangGraph's ``graph.invoke`` calling a saver's
``put``) still has to reach an asynchronous media store. ``LoopThread`` starts
one loop in one thread on first use and runs coroutines there from any number
of calling threads, so the store's connections live on a single loop. It stops
on ``close()``, when its owner is garbage collected, or at interpreter exit
(``weakref.finalize``), draining async generators and the default executor and
joining the thread, so no thread outlives the interpreter's shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

__all__ = ['LoopThread', 'LoopThreadClosedError']

T = TypeVar('T')

_DRAIN_SECONDS: Final = 10.0
"""How long ``close()`` waits for tasks still running on the loop to finish cancelling."""


class LoopThreadClosedError(RuntimeError):
    """``run`` was called after ``close()``."""


class LoopThread:
    """One event loop in one daemon thread, started on first ``run`` and stopped by ``close()`` (or at exit)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._finalizer: weakref.finalize[Any, LoopThread] | None = None
        self._closed = False

    @property
    def started(self) -> bool:
        """Whether the loop's thread is running now."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def closed(self) -> bool:
        return self._closed

    def owns_current_thread(self) -> bool:
        """Whether the caller runs on this loop's thread (where waiting for the loop would deadlock)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``call()`` run to completion on the loop, from a thread other than the loop's own; its result or error."""
        loop = self._started()
        return asyncio.run_coroutine_threadsafe(call(), loop).result()

    def close(self) -> None:
        """Cancel what still runs on the loop, stop it and join its thread; idempotent."""
        with self._lock:
            self._closed = True
            finalizer, self._finalizer = self._finalizer, None
            self._loop = self._thread = None
        if finalizer is not None:
            finalizer()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise LoopThreadClosedError(f'{self.name} was closed')
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=_serve, args=(loop, ready), name=self.name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
                self._finalizer = weakref.finalize(self, _stop, loop, thread)
            return self._loop


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Cancel the loop's tasks, shut down its async generators and executor, stop it, join the thread, close it."""
    if loop.is_closed():
        return
    if threading.current_thread() is thread:  # only reachable if the owner is collected on its own loop
        loop.call_soon(loop.stop)
        return

    async def drain() -> None:
        here = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not here]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await loop.shutdown_asyncgens()
        await loop.shutdown_default_executor()

    if thread.is_alive():
        with contextlib.suppress(TimeoutError, RuntimeError, asyncio.CancelledError):  # stopped below either way
            asyncio.run_coroutine_threadsafe(drain(), loop).result(timeout=_DRAIN_SECONDS)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    loop.close()
