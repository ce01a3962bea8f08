"""OpenAI Agents SDK sessions as garbage-collection roots: one session object, or every session of a database.

``SessionRoot`` reads one session through the SDK (raw, nothing restored);
``SQLiteSessionRoot`` and ``PostgresSessionRoot`` read every session of a
``SQLiteSession`` / ``SQLAlchemySession`` database with SQL (read-only, no SDK
code run). Every marker counts, inside envelopes too.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from mediastash.errors import MediaStashError, RootReadError
from mediastash.integrations.openai_agents._items import item_markers
from mediastash.roots import PostgresTablesRoot, Root, SQLiteTablesRoot, add_references, json_text_references, sql_name

__all__ = ['PostgresSessionRoot', 'SQLiteSessionRoot', 'SessionRoot', 'root_for']

_MESSAGES_TABLE = 'agent_messages'
"""The SDK's default ``messages_table`` (``SQLiteSession`` and ``SQLAlchemySession`` alike)."""


class SessionRoot(Root):
    """Every item of one session, read from the inner session (an ``OffloadingSession``'s ``inner``).

    Every envelope is checked as a restore checks it: one this reader does
    not understand raises ``RootReadError``, so the collector deletes nothing.
    Every session of a database at once: ``SQLiteSessionRoot``, ``PostgresSessionRoot``.
    """

    def __init__(self, session: Any) -> None:
        inner = session.inner if _is_offloading(session) else session
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


class SQLiteSessionRoot(SQLiteTablesRoot):
    """Every session of an OpenAI Agents SDK ``SQLiteSession`` database, or of a ``SQLAlchemySession`` one on
    SQLite (same table), read with SQL (read-only, no blob restored).

    Reads every row of ``messages_table`` (the SDK's default ``agent_messages``)
    in one read transaction and counts every marker, inside envelopes too.
    ``mediastash gc --roots agents-sqlite:DB``. One session alone: ``SessionRoot``.
    """

    reading: ClassVar[str] = 'the session database'

    def __init__(self, database: str | os.PathLike[str], *, messages_table: str = _MESSAGES_TABLE) -> None:
        super().__init__(database)
        self.messages_table = sql_name('messages_table', messages_table)

    def queries(self, tables: set[str]) -> list[str]:
        if self.messages_table not in tables:
            raise RootReadError(
                f'{self.database}: no {self.messages_table} table (not an OpenAI Agents SQLiteSession database)'
            )
        return [f'SELECT \'session item\', message_data FROM "{self.messages_table}"']

    def references(self, kind: Any, value: Any) -> set[str]:
        return json_text_references(value, str(self.database), kind)


class PostgresSessionRoot(PostgresTablesRoot):
    """Every session of an OpenAI Agents SDK ``SQLAlchemySession`` database on PostgreSQL, read with SQL in one
    read-only transaction (no blob restored, no SDK or SQLAlchemy code run).

    ``dsn``: a ``postgresql://`` connection string without a password (the
    ``+asyncpg`` / ``+psycopg`` driver suffix of a SQLAlchemy URL is not part
    of it); ``messages_table`` as given to the session. Errors name the server
    and database, never the user. Needs ``asyncpg`` (extra ``postgres``).
    ``mediastash gc --roots agents-postgres:postgresql://...``.
    """

    what = 'session database of the OpenAI Agents SDK'

    def __init__(self, dsn: str, *, messages_table: str = _MESSAGES_TABLE) -> None:
        super().__init__(dsn)
        self.messages_table = sql_name('messages_table', messages_table)

    def tables(self) -> tuple[str, ...]:
        return (self.messages_table,)

    def queries(self) -> tuple[str, ...]:
        return (f'SELECT \'session item\', message_data FROM "{self.messages_table}"',)

    def references(self, kind: Any, value: Any) -> set[str]:
        return json_text_references(value, self.describe(), kind)


def root_for(value: object) -> Root | None:
    """The root of an ``OffloadingSession`` (its inner session, read raw), else ``None``."""
    return SessionRoot(value) if _is_offloading(value) else None


def _is_offloading(value: object) -> bool:
    """Whether ``value`` is an ``OffloadingSession`` (imported here: the roots import without the SDK)."""
    try:
        from mediastash.integrations.openai_agents.session import OffloadingSession
    except ImportError:  # no SDK: no such session exists
        return False
    return isinstance(value, OffloadingSession)
