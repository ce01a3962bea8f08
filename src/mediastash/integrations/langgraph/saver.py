"""``OffloadingCheckpointSaver``: media offloading for any LangGraph checkpointer (``BaseCheckpointSaver``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Sequence
from typing import Any, Final, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from mediastash._checks import non_negative_int
from mediastash._lru import BoundedLRU
from mediastash.errors import MediaStashError
from mediastash.integrations.langgraph._state import Joined, lean_values, restore_values
from mediastash.known_blobs import KnownBlobCache
from mediastash.stores.protocols import MediaStore
from mediastash.walker import DEFAULT_MAX_CONCURRENCY, DEFAULT_THRESHOLD_BYTES, WalkOptions
from mediastash.walker.internal import WalkSetting, resolve_options

__all__ = ['OffloadingCheckpointSaver', 'SyncCallError']

T = TypeVar('T')

DEFAULT_RECENT_BYTES: Final = 64 << 20
"""Default budget for payload strings this wrapper wrote or read, so reading them again needs no walk."""

_EXTENDED: Final = ('adelete_for_runs', 'acopy_thread', 'aprune')
"""Optional saver methods: the wrapper has each one exactly when the inner saver's class overrides it."""


class SyncCallError(MediaStashError, RuntimeError):
    """A synchronous saver method was called where it cannot reach the wrapper's event loop safely."""


def _bridged(async_name: str) -> Any:
    """The sync method for ``async_name``: the async one run on the wrapper's event loop (see ``_bridge``)."""
    name = async_name[1:]

    def method(self: OffloadingCheckpointSaver, *args: Any, **kwargs: Any) -> Any:
        return self._bridge(name, async_name, lambda: getattr(self, async_name)(*args, **kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f'``{async_name}``, run from another thread on the event loop the wrapper is used on.'
    return method


class OffloadingCheckpointSaver(BaseCheckpointSaver[Any]):
    """Wraps a LangGraph checkpointer so large message payloads in its checkpoints live in ``media_store``.

    ``aput`` and ``aput_writes`` move payloads out of the channel values and
    pending writes (base64 media blocks in the LangChain, OpenAI and Anthropic
    styles, ``data:`` URLs, and large text: ``docs/langgraph.md`` lists them)
    before ``inner`` serializes them; ``aget_tuple`` and ``alist`` put them
    back, so a read returns the original state (same message classes, blocks
    and ids). A payload's place holds a visible placeholder and the host an
    envelope, so ``inner`` read on its own shows what is missing.

    ``adelete_thread``, ``adelete_for_runs``, ``acopy_thread`` and ``aprune``
    delegate (blobs stay: they may be shared; ``mediastash.gc`` collects them
    with ``CheckpointerRoot``). The wrapper offers an optional method only when
    ``inner``'s class does, so LangGraph and the conformance suite see the same
    capabilities.

    Sync methods run the async ones on the event loop the wrapper was last
    used on (or ``loop``), from another thread, as LangGraph's own async
    savers do; on that loop's thread, or with no loop running, they raise
    ``SyncCallError`` naming the async method.

    ``threshold_bytes``, ``known_blobs`` and ``max_concurrency`` are those of
    ``externalize_media``; or pass them as one ``options=WalkOptions(...)``.
    ``recent_bytes`` bounds a memory of the payload strings this wrapper wrote
    or read (0, or ``known_blobs=False``, turns it off): a checkpoint read
    again (``aget_state_history`` reads every one) takes them from there.
    """

    threshold_bytes = WalkSetting()
    known_blobs = WalkSetting()
    max_concurrency = WalkSetting()

    def __new__(
        cls, inner: BaseCheckpointSaver[Any] | None = None, *args: Any, **kwargs: Any
    ) -> OffloadingCheckpointSaver:
        if cls is OffloadingCheckpointSaver and inner is not None:  # (copy.copy calls it with the class alone)
            cls = _with_capabilities_of(type(inner))
        return super().__new__(cls)

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        media_store: MediaStore,
        threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
        known_blobs: KnownBlobCache | bool = True,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        options: WalkOptions | None = None,
        recent_bytes: int = DEFAULT_RECENT_BYTES,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise TypeError(f'inner must be a LangGraph BaseCheckpointSaver, got a {type(inner).__name__}')
        self._walk_options = resolve_options(options, threshold_bytes, known_blobs, max_concurrency)
        non_negative_int('recent_bytes', recent_bytes)
        self.recent_bytes = recent_bytes
        self._joined: Joined | None = (
            BoundedLRU(max_cost=recent_bytes) if recent_bytes and known_blobs is not False else None
        )
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.media_store = media_store
        self.loop = loop

    # -- what LangGraph asks of a saver besides reads and writes --------------------------------

    @property
    def config_specs(self) -> list[Any]:
        specs: list[Any] = self.inner.config_specs
        return specs

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BaseCheckpointSaver[Any]:
        """The wrapper around ``inner.with_allowlist(...)`` (the serializer that matters is ``inner``'s)."""
        inner = self.inner.with_allowlist(extra_allowlist)
        if inner is self.inner:
            return self
        return OffloadingCheckpointSaver(
            inner,
            media_store=self.media_store,
            options=self._walk_options,
            recent_bytes=self.recent_bytes,
            loop=self.loop,
        )

    # -- async: the real work -----------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._bind_loop()
        found = await self.inner.aget_tuple(config)
        return None if found is None else await self._restored(found)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        self._bind_loop()
        async for found in self.inner.alist(config, filter=filter, before=before, limit=limit):
            yield await self._restored(found)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._bind_loop()
        values = checkpoint['channel_values']
        lean = await lean_values(list(values.values()), self.media_store, self._walk_options, self._joined)
        if any(new is not old for new, old in zip(lean, values.values(), strict=True)):
            checkpoint = checkpoint.copy()
            checkpoint['channel_values'] = dict(zip(values, lean, strict=True))
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = '',
    ) -> None:
        self._bind_loop()
        lean = await lean_values([value for _, value in writes], self.media_store, self._walk_options, self._joined)
        leaned = [(channel, value) for (channel, _), value in zip(writes, lean, strict=True)]
        await self.inner.aput_writes(config, leaned, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self._bind_loop()
        await self.inner.adelete_thread(thread_id)

    async def _restored(self, found: CheckpointTuple) -> CheckpointTuple:
        """``found`` with the payloads of its channel values and pending writes read back, in one batch."""
        values = found.checkpoint['channel_values']
        writes = found.pending_writes or []
        roots: list[Any] = [*values.values(), *(write[2] for write in writes)]
        full = await restore_values(roots, self.media_store, self._walk_options, self._joined)
        if all(new is old for new, old in zip(full, roots, strict=True)):
            return found
        checkpoint = found.checkpoint.copy()
        checkpoint['channel_values'] = dict(zip(values, full[: len(values)], strict=True))
        pending = found.pending_writes
        if pending is not None:
            pending = [
                (task, channel, value) for (task, channel, _), value in zip(writes, full[len(values) :], strict=True)
            ]
        return found._replace(checkpoint=checkpoint, pending_writes=pending)

    # -- sync: bridged to the wrapper's event loop --------------------------------------------

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [found async for found in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._bridge('list', 'alist', collect)

    get_tuple = _bridged('aget_tuple')
    put = _bridged('aput')
    put_writes = _bridged('aput_writes')
    delete_thread = _bridged('adelete_thread')

    def _bind_loop(self) -> None:
        self.loop = asyncio.get_running_loop()

    def _bridge(self, name: str, async_name: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call()`` on the wrapper's loop from this (other) thread, or raise ``SyncCallError``."""
        loop = self.loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            raise SyncCallError(
                f'OffloadingCheckpointSaver.{name} was called on a running event loop, where it would block it: '
                f'use `await saver.{async_name}(...)` (graph.ainvoke, graph.aget_state), or call {name} from '
                'another thread'
            )
        if loop is None or loop.is_closed() or not loop.is_running():
            raise SyncCallError(
                f'OffloadingCheckpointSaver.{name} runs {async_name} on the event loop the saver is used on, '
                'and no such loop is running: use the async method (graph.ainvoke, graph.aget_state), or call '
                f'{name} from another thread while that loop runs (or pass loop=)'
            )

        async def run() -> T:
            return await call()

        return asyncio.run_coroutine_threadsafe(run(), loop).result()


# -- optional capabilities, mirrored from the inner saver's class --------------------------------------


class _DeleteForRuns(OffloadingCheckpointSaver):
    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._bind_loop()
        await self.inner.adelete_for_runs(run_ids)

    delete_for_runs = _bridged('adelete_for_runs')


class _CopyThread(OffloadingCheckpointSaver):
    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._bind_loop()
        await self.inner.acopy_thread(source_thread_id, target_thread_id)

    copy_thread = _bridged('acopy_thread')


class _Prune(OffloadingCheckpointSaver):
    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = 'keep_latest') -> None:
        self._bind_loop()
        await self.inner.aprune(thread_ids, strategy=strategy)

    prune = _bridged('aprune')


_MIXINS: Final[dict[str, type[OffloadingCheckpointSaver]]] = {
    'adelete_for_runs': _DeleteForRuns,
    'acopy_thread': _CopyThread,
    'aprune': _Prune,
}
_CLASSES: dict[tuple[str, ...], type[OffloadingCheckpointSaver]] = {(): OffloadingCheckpointSaver}


def _with_capabilities_of(inner: type) -> type[OffloadingCheckpointSaver]:
    """The wrapper class offering exactly the optional methods ``inner`` overrides (one class per set)."""
    offered = tuple(name for name in _EXTENDED if getattr(inner, name, None) is not getattr(BaseCheckpointSaver, name))
    cls = _CLASSES.get(offered)
    if cls is None:
        bases = tuple(_MIXINS[name] for name in offered)
        cls = _CLASSES[offered] = type('OffloadingCheckpointSaver', bases, {'__module__': __name__})
    return cls
