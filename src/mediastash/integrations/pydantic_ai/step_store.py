"""``OffloadingStepStore``: media offloading for any pydantic-ai-harness ``StepStore``."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

from pydantic_ai_harness.step_persistence import ContinuableSnapshot

from mediastash.integrations.pydantic_ai._store_wrapper import MessageStoreWrapper
from mediastash.integrations.pydantic_ai._typed import RestoreMode

__all__ = ['OffloadingStepStore', 'RestoreMode']


class OffloadingStepStore(MessageStoreWrapper[Any]):
    """Wraps a step store so snapshot payloads at or above ``threshold_bytes`` live in ``media_store``.

    ``save_snapshot`` stores the payloads first, then hands ``inner`` a snapshot
    whose payload-carrying messages are envelopes: valid ``ModelMessage``s that
    keep every part, each stored payload shown as a placeholder naming its URI,
    so a reader without mediastash sees the whole history (``docs/integrations.md``).
    ``latest_snapshot``, ``list_snapshots`` and any other inner coroutine method
    that returns snapshots give back the original messages. Every other attribute is ``inner``'s own.

    ``restore``: ``'bytes'`` (the default) gives every ``BinaryContent`` back
    with its bytes. ``'references'`` reads no blob for the media of user
    prompts and tool returns: each comes back as the matching URL part
    (``ImageUrl``, ``DocumentUrl``, ...) whose URL is the blob's
    ``media+sha256://`` URI, for ``MediaUrls`` to resolve per request (a
    model reached without it refuses the part). Saving such a history writes
    exactly the markers the bytes would have (``docs/model-urls.md``).

    ``reference_key``: the key that seals each reference part a restore
    makes (bytes of at least 32, or a ``ReferenceKey`` for rotation); give
    ``MediaUrls`` the same one. ``None`` uses this process's random key, so
    references made here resolve here only. A save writes markers only for
    references this key vouches for, and keeps an envelope handed to it (a
    plain read of ``inner`` written back) only if this key sealed it
    (``UnvouchedEnvelopeError`` otherwise; ``docs/security.md``).

    ``options``: the walk settings as one ``WalkOptions`` (``threshold_bytes``,
    ``known_blobs``, ``max_concurrency`` and ``structured`` as for
    ``externalize_media``). The separate ``threshold_bytes=`` /
    ``known_blobs=`` / ``max_concurrency=`` keywords still work for one
    release, with a ``DeprecationWarning``.
    Structured payloads (a tool return's large JSON ``content``) move too,
    unless ``options=WalkOptions(structured=False)``.
    """

    _wrapper_name = 'OffloadingStepStore'

    async def save_snapshot(self, snapshot: ContinuableSnapshot) -> None:
        """Store the snapshot's payloads, then save the lean snapshot in ``inner``."""
        lean = await self._offloader.offload(list(snapshot.messages))
        await self.inner.save_snapshot(dataclasses.replace(snapshot, messages=lean))

    async def latest_snapshot(self, *, run_id: str, include_interrupted: bool = False) -> ContinuableSnapshot | None:
        """``inner.latest_snapshot`` with the original messages."""
        snapshot = await self.inner.latest_snapshot(run_id=run_id, include_interrupted=include_interrupted)
        if snapshot is None:
            return None
        return await self._restore_one(snapshot)

    async def _restore_one(self, snapshot: ContinuableSnapshot) -> ContinuableSnapshot:
        messages = await self._offloader.restore(
            list(snapshot.messages),
            run_id=snapshot.run_id,
            step_index=snapshot.step_index,
            references=self.restore_mode == 'references',
        )
        return dataclasses.replace(snapshot, messages=messages)

    async def _restored(self, value: Any) -> Any:
        """Restore a snapshot, or every snapshot of a list or tuple; anything else is returned as is."""
        if isinstance(value, ContinuableSnapshot):
            return await self._restore_one(value)
        if isinstance(value, list | tuple) and any(isinstance(item, ContinuableSnapshot) for item in value):
            restored = [await self._restored(item) for item in value]
            return restored if isinstance(value, list) else tuple(restored)
        return value

    def __getattr__(self, name: str) -> Any:
        """Pass ``inner``'s attributes through; coroutine methods get snapshots in their results restored."""
        if name == 'inner':
            raise AttributeError(name)
        attribute = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute
        return self._restoring(attribute)

    def _restoring(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._restored(await method(*args, **kwargs))

        return call

    def __repr__(self) -> str:
        mode = '' if self.restore_mode == 'bytes' else f', restore={self.restore_mode!r}'
        return f'OffloadingStepStore({self.inner!r}, media_store={self.media_store!r}{mode})'
