"""``OffloadingCheckpointSaver``: media offloading for any LangGraph checkpointer (``BaseCheckpointSaver``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Sequence
from functools import partial
from typing import Any, Final, Self, TypeVar, Unpack

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
from mediastash.integrations._loop_thread import LoopThread, LoopThreadClosedError
from mediastash.integrations.kit.host_slots import PayloadRoute
from mediastash.integrations.langgraph._state import Joined, lean_values, restore_values
from mediastash.reference_keys import ReferenceKey, reference_key_of
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import WalkKeywords, WalkSettings, options_from_keywords

__all__ = ['OffloadingCheckpointSaver', 'SyncCallError']

T = TypeVar('T')

DEFAULT_RECENT_BYTES: Final = 64 << 20
"""Default budget for payload strings this wrapper wrote or read, so reading them again needs no walk."""


class SyncCallError(MediaStashError, RuntimeError):
    """A synchronous saver method was called where waiting for an event loop would deadlock, or after ``close()``."""


def _overrides(inner: type, name: str) -> bool:
    """Whether the saver class ``inner`` implements ``name`` itself (``BaseCheckpointSaver``'s raise or bridge)."""
    return getattr(inner, name, None) is not getattr(BaseCheckpointSaver, name)


class OffloadingCheckpointSaver(WalkSettings, BaseCheckpointSaver[Any]):
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

    Sync methods (``graph.invoke``, ``graph.stream``, ``graph.get_state``)
    call ``inner``'s sync methods on the calling thread and run the store I/O
    on an event loop: the one the wrapper was last used on (or ``loop``) when
    it runs in another thread, else one the wrapper starts in a background
    thread on first need, shared by every calling thread. ``close()`` (or
    ``with``) stops that thread; so does interpreter exit. A sync call on the
    thread of the loop the wrapper was used on raises ``SyncCallError``.

    ``options``: the walk settings as one ``WalkOptions`` (``threshold_bytes``,
    ``known_blobs``, ``max_concurrency`` and ``structured`` as for
    ``externalize_media``). The separate ``threshold_bytes=`` /
    ``known_blobs=`` / ``max_concurrency=`` keywords still work for one
    release, with a ``DeprecationWarning``.
    ``recent_bytes`` bounds a memory of the payload strings this wrapper wrote
    or read (0, or ``known_blobs=False``, turns it off): a checkpoint read
    again (``aget_state_history`` reads every one) takes them from there.

    ``reference_key`` (bytes of at least 32, or a ``ReferenceKey``; ``None``:
    this process's random key) seals every envelope written. A save handed
    an envelope (a plain read of ``inner`` written back, or a message dict a
    client sent) keeps it only if this key sealed it for ``media_store``'s
    namespace, else it raises ``UnvouchedEnvelopeError`` (``docs/security.md``).
    """

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
        options: WalkOptions | None = None,
        recent_bytes: int = DEFAULT_RECENT_BYTES,
        loop: asyncio.AbstractEventLoop | None = None,
        reference_key: ReferenceKey | bytes | None = None,
        **walk_keywords: Unpack[WalkKeywords],
    ) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise TypeError(f'inner must be a LangGraph BaseCheckpointSaver, got a {type(inner).__name__}')
        self._walk_options = options_from_keywords('OffloadingCheckpointSaver', options, walk_keywords)
        self.reference_key = reference_key_of(reference_key)
        """Seals the envelopes written; an envelope handed to a save must carry its seal."""
        non_negative_int('recent_bytes', recent_bytes)
        self.recent_bytes = recent_bytes
        self._joined: Joined | None = (
            BoundedLRU(max_cost=recent_bytes) if recent_bytes and self.known_blobs is not False else None
        )
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.media_store = media_store
        self.loop = loop
        self._loop_thread = LoopThread('mediastash-langgraph-sync')

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
            reference_key=self.reference_key,
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
        return await self.inner.aput(config, await self._lean_checkpoint(checkpoint), metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = '',
    ) -> None:
        self._bind_loop()
        await self.inner.aput_writes(config, await self._lean_writes(writes), task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self._bind_loop()
        await self.inner.adelete_thread(thread_id)

    def _route(self) -> PayloadRoute:
        return PayloadRoute(self.media_store, self._walk_options, self._joined, self.reference_key)

    async def _lean_checkpoint(self, checkpoint: Checkpoint) -> Checkpoint:
        """``checkpoint`` with the payloads of its channel values moved out (itself when nothing moved)."""
        values = checkpoint['channel_values']
        lean = await lean_values(list(values.values()), self._route())
        if any(new is not old for new, old in zip(lean, values.values(), strict=True)):
            checkpoint = checkpoint.copy()
            checkpoint['channel_values'] = dict(zip(values, lean, strict=True))
        return checkpoint

    async def _lean_writes(self, writes: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """``writes`` with the payloads of their values moved out."""
        lean = await lean_values([value for _, value in writes], self._route())
        return [(channel, value) for (channel, _), value in zip(writes, lean, strict=True)]

    async def _restored(self, found: CheckpointTuple) -> CheckpointTuple:
        """``found`` with the payloads of its channel values and pending writes read back, in one batch."""
        values = found.checkpoint['channel_values']
        writes = found.pending_writes or []
        roots: list[Any] = [*values.values(), *(write[2] for write in writes)]
        full = await restore_values(roots, self._route())
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

    # -- sync: the inner saver's sync methods, store I/O on an event loop -------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if not self._inner_has('get_tuple'):
            return self._on_loop('get_tuple', 'aget_tuple', lambda: self.aget_tuple(config))
        found = self.inner.get_tuple(config)
        if found is None:
            return None
        return self._on_loop('get_tuple', 'aget_tuple', lambda: self._restored(found))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        if not self._inner_has('list'):

            async def collect() -> list[CheckpointTuple]:
                return [found async for found in self.alist(config, filter=filter, before=before, limit=limit)]

            yield from self._on_loop('list', 'alist', collect)
            return
        for found in self.inner.list(config, filter=filter, before=before, limit=limit):
            yield self._on_loop('list', 'alist', partial(self._restored, found))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if not self._inner_has('put'):
            return self._on_loop('put', 'aput', lambda: self.aput(config, checkpoint, metadata, new_versions))
        lean = self._on_loop('put', 'aput', lambda: self._lean_checkpoint(checkpoint))
        return self.inner.put(config, lean, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = '',
    ) -> None:
        if not self._inner_has('put_writes'):
            return self._on_loop(
                'put_writes', 'aput_writes', lambda: self.aput_writes(config, writes, task_id, task_path)
            )
        lean = self._on_loop('put_writes', 'aput_writes', lambda: self._lean_writes(writes))
        self.inner.put_writes(config, lean, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._delegate('delete_thread', thread_id)

    def close(self) -> None:
        """Stop the event loop this wrapper started for sync calls (if any) and join its thread.

        Closes neither ``inner`` nor ``media_store`` (they are the caller's). Idempotent; a sync call that
        needs the loop afterwards raises ``SyncCallError``. At interpreter exit the loop is stopped anyway.
        """
        self._loop_thread.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _inner_has(self, name: str) -> bool:
        return _overrides(type(self.inner), name)

    def _delegate(self, name: str, *args: Any, **kwargs: Any) -> None:
        """The inner saver's sync ``name`` when its class has one, else its async one run on an event loop."""
        if self._inner_has(name):
            getattr(self.inner, name)(*args, **kwargs)
        else:
            self._on_loop(name, f'a{name}', lambda: getattr(self, f'a{name}')(*args, **kwargs))

    def _bind_loop(self) -> None:
        self.loop = asyncio.get_running_loop()

    def _on_loop(self, name: str, async_name: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call()`` to completion from this synchronous caller, on the right event loop.

        The loop the wrapper was last used on (or ``loop=``) when it runs in another thread, so a store
        whose connections belong to that loop keeps them; a sync call on that loop's own thread would
        deadlock and raises ``SyncCallError``. With no such loop running, a loop of the wrapper's own in a
        background thread (``close()`` stops it).
        """

        async def run() -> T:
            return await call()

        loop = self.loop
        if loop is not None and not loop.is_closed() and loop.is_running():
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                raise SyncCallError(
                    f'OffloadingCheckpointSaver.{name} was called on the thread of the event loop the saver is '
                    f'used on, where waiting for that loop would block it: use `await saver.{async_name}(...)` '
                    f'(graph.ainvoke, graph.aget_state), or call {name} from another thread'
                )
            return asyncio.run_coroutine_threadsafe(run(), loop).result()
        if self._loop_thread.owns_current_thread():
            raise SyncCallError(
                f"OffloadingCheckpointSaver.{name} was called from a coroutine on the saver's own event loop: "
                f'use `await saver.{async_name}(...)`'
            )
        try:
            return self._loop_thread.run(run)
        except LoopThreadClosedError:
            raise SyncCallError(
                f'OffloadingCheckpointSaver.{name} needs the event loop the saver runs sync calls on, '
                'and close() has stopped it: use a new OffloadingCheckpointSaver'
            ) from None


# -- optional capabilities, mirrored from the inner saver's class --------------------------------------


async def _adelete_for_runs(self: OffloadingCheckpointSaver, run_ids: Sequence[str]) -> None:
    self._bind_loop()
    await self.inner.adelete_for_runs(run_ids)


def _delete_for_runs(self: OffloadingCheckpointSaver, run_ids: Sequence[str]) -> None:
    self._delegate('delete_for_runs', run_ids)


async def _acopy_thread(self: OffloadingCheckpointSaver, source_thread_id: str, target_thread_id: str) -> None:
    self._bind_loop()
    await self.inner.acopy_thread(source_thread_id, target_thread_id)


def _copy_thread(self: OffloadingCheckpointSaver, source_thread_id: str, target_thread_id: str) -> None:
    self._delegate('copy_thread', source_thread_id, target_thread_id)


async def _aprune(self: OffloadingCheckpointSaver, thread_ids: Sequence[str], *, strategy: str = 'keep_latest') -> None:
    self._bind_loop()
    await self.inner.aprune(thread_ids, strategy=strategy)


def _prune(self: OffloadingCheckpointSaver, thread_ids: Sequence[str], *, strategy: str = 'keep_latest') -> None:
    self._delegate('prune', thread_ids, strategy=strategy)


_OPTIONAL: Final[dict[str, tuple[tuple[str, Callable[..., Any]], tuple[str, Callable[..., Any]]]]] = {
    'delete_for_runs': (('adelete_for_runs', _adelete_for_runs), ('delete_for_runs', _delete_for_runs)),
    'copy_thread': (('acopy_thread', _acopy_thread), ('copy_thread', _copy_thread)),
    'prune': (('aprune', _aprune), ('prune', _prune)),
}
"""Each optional capability: its async method (offered when ``inner``'s class has it) and its sync method
(offered when ``inner``'s class has either: the sync one delegates, or runs the async one on a loop)."""
for _pair in _OPTIONAL.values():
    for _name, _method in _pair:
        _method.__name__ = _method.__qualname__ = _name
_CLASSES: dict[frozenset[str], type[OffloadingCheckpointSaver]] = {frozenset(): OffloadingCheckpointSaver}


def _with_capabilities_of(inner: type) -> type[OffloadingCheckpointSaver]:
    """The wrapper class offering exactly the optional methods ``inner`` offers (one class per set)."""
    offered: set[str] = set()
    for (async_name, _), (sync_name, _) in _OPTIONAL.values():
        if _overrides(inner, async_name):
            offered.update((async_name, sync_name))
        elif _overrides(inner, sync_name):
            offered.add(sync_name)
    key = frozenset(offered)
    cls = _CLASSES.get(key)
    if cls is None:
        methods = {name: method for pair in _OPTIONAL.values() for name, method in pair if name in key}
        cls = _CLASSES[key] = type(
            'OffloadingCheckpointSaver', (OffloadingCheckpointSaver,), {'__module__': __name__, **methods}
        )
    return cls
