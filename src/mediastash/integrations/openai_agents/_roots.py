"""``SessionRoot``: one OpenAI Agents SDK session as a garbage-collection root (read raw, no blob restored)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from mediastash.errors import MediaStashError
from mediastash.gc import Root, RootReadError
from mediastash.gc._refs import add_references
from mediastash.integrations.openai_agents._items import item_markers
from mediastash.integrations.openai_agents.session import OffloadingSession

__all__ = ['SessionRoot']


class SessionRoot(Root):
    """Every item of one session, read from the inner session (an ``OffloadingSession``'s ``inner``).

    Every envelope is checked as a restore checks it: one this reader does
    not understand raises ``RootReadError``, so the collector deletes nothing.
    Every session of a ``SQLiteSession`` database at once: ``mediastash.gc.SQLiteSessionRoot``.
    """

    def __init__(self, session: Any) -> None:
        inner = session.inner if isinstance(session, OffloadingSession) else session
        if not callable(getattr(inner, 'get_items', None)):
            raise TypeError(f'SessionRoot needs an OpenAI Agents session, got a {type(session).__name__}')
        self.session = inner

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        items = await self.session.get_items()
        found: set[str] = set()
        try:
            markers = list(item_markers(items))
        except MediaStashError as error:
            raise RootReadError(f'{self.describe()}: {error}') from None
        add_references(markers, found, inside_literals=True)
        add_references(items, found, inside_literals=True)
        yield found

    def describe(self) -> str:
        return f'{type(self.session).__name__} session'
