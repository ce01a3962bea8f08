"""A LangGraph checkpointer as a root: every checkpoint and pending write of every thread keeps its blobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from mediastash.errors import MalformedMarker, TreeDepthError, UnsupportedMarkerFormat
from mediastash.gc._refs import add_references
from mediastash.gc._roots import Root, RootReadError

__all__ = ['CheckpointerRoot']


class CheckpointerRoot(Root):
    """Every checkpoint of every thread and namespace of a LangGraph saver, with its pending writes.

    Reads ``inner.alist(None)`` of an ``OffloadingCheckpointSaver`` (or of the
    saver it wraps: the lean checkpoints, nothing restored; ``list(None)`` in a
    worker thread for a synchronous saver such as ``SqliteSaver``) and counts the
    markers of every envelope in the channel values and pending writes. An
    envelope this version cannot read, or a saver that fails while listing,
    stops the collection (``RootReadError``). Needs the ``langgraph`` extra.
    """

    def __init__(self, saver: Any) -> None:
        from mediastash.integrations.langgraph import OffloadingCheckpointSaver

        while isinstance(saver, OffloadingCheckpointSaver):
            saver = saver.inner
        if not callable(getattr(saver, 'alist', None)):
            raise TypeError(f'{type(saver).__name__} has no alist(): it is not a LangGraph checkpoint saver')
        self.saver = saver

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        from mediastash.integrations.langgraph._state import envelope_markers

        try:
            async for found in _checkpoints(self.saver):
                references: set[str] = set()
                values = [*found.checkpoint['channel_values'].values()]
                values.extend(write[2] for write in found.pending_writes or ())
                for marker in envelope_markers(values):
                    add_references(marker, references, inside_literals=True)
                yield references
        except (UnsupportedMarkerFormat, MalformedMarker, TreeDepthError) as error:
            raise RootReadError(
                f'{self.describe()}: a checkpoint holds an envelope this reader cannot read ({error})'
            ) from error
        except RootReadError:
            raise
        except Exception as error:
            raise RootReadError(
                f'{self.describe()}: listing the checkpoints failed ({type(error).__name__})'
            ) from error

    def describe(self) -> str:
        return type(self.saver).__name__


async def _checkpoints(saver: Any) -> AsyncIterator[Any]:
    """Every checkpoint tuple of ``saver``: ``alist(None)``, or ``list(None)`` off the loop for a sync-only saver."""
    started = False
    try:
        async for found in saver.alist(None):
            started = True
            yield found
        return
    except NotImplementedError:
        if started:
            raise
    for found in await asyncio.to_thread(lambda: list(saver.list(None))):
        yield found
