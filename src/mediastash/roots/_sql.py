"""Roots read from database tables with SQL: one read loop for SQLite, one for PostgreSQL, no framework code.

A root of this kind names the tables it needs, the queries whose rows hold
references (each row ``(kind, value)``: the kind a label the query chose or a
column, the value what was stored) and how one row becomes URIs. The loop
here owns the rest, the same for every such root: a read-only connection, one
read transaction, rows fetched a page at a time, errors that name the
database and never a credential, and ``RootReadError`` on anything partial.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from abc import abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final, TypeVar

from mediastash._sqlite_read import ReadOnlyDatabase, read_only
from mediastash.errors import InvalidArgumentError, RootReadError
from mediastash.roots._protocol import Root
from mediastash.roots._references import add_references

__all__ = [
    'PAGE_ROWS',
    'PostgresTablesRoot',
    'SQLiteTablesRoot',
    'json_text_references',
    'paged_references',
    'sql_name',
]

T = TypeVar('T')

PAGE_ROWS: Final = 500
"""Rows read (and references yielded) at a time."""


def sql_name(parameter: str, value: object) -> str:
    """``value`` if it is a plain SQL name (ASCII letters, digits, ``_``), else ``InvalidArgumentError``."""
    if not isinstance(value, str) or not value.isidentifier() or not value.isascii():
        raise InvalidArgumentError(parameter, 'a plain SQL name (letters, digits, _)', value)
    return value


def json_text_references(value: object, where: str, what: str) -> set[str]:
    """The references of one stored JSON text; a value that is not text (``NULL``) holds none.

    A text that is not JSON, or is nested deeper than the parser reads, is a
    ``RootReadError``: the root cannot tell what it references.
    """
    found: set[str] = set()
    if not isinstance(value, str | bytes):
        return found
    try:
        tree = json.loads(value)
    except RecursionError:
        raise RootReadError(f'{where}: a stored {what} is JSON nested too deeply to read') from None
    except ValueError:
        raise RootReadError(f'{where}: a stored {what} is not JSON') from None
    add_references(tree, found, inside_literals=True)
    return found


async def paged_references(rows: AsyncIterable[T], references: Callable[[T], set[str]]) -> AsyncIterator[set[str]]:
    """The references of ``rows``, one set per ``PAGE_ROWS`` rows (what a root reading records yields)."""
    page: set[str] = set()
    count = 0
    async for row in rows:
        page |= references(row)
        count += 1
        if count == PAGE_ROWS:
            yield page
            page, count = set(), 0
    if count:
        yield page


class SQLiteTablesRoot(Root):
    """A root read from tables of a SQLite database file, read-only (no file is created or changed).

    Subclasses write ``queries`` and ``references``; ``reading`` says what an
    SQLite error was reading. A database opened without locks (a WAL database
    nobody had open) that a writer opens meanwhile is refused afterwards (see
    ``mediastash._sqlite_read``).
    """

    reading: ClassVar[str] = 'the database'

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self.database = Path(database)

    @abstractmethod
    def queries(self, tables: set[str]) -> Sequence[str]:
        """The queries whose ``(kind, value)`` rows hold the references, given the database's tables;
        ``RootReadError`` when the tables say the database is not of this root's kind."""

    @abstractmethod
    def references(self, kind: Any, value: Any) -> set[str]:
        """The URIs one row references."""

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        opened = await asyncio.to_thread(self._connect)
        connection = opened.connection
        try:
            queries = self.queries(await asyncio.to_thread(_tables, connection))
            await asyncio.to_thread(connection.execute, 'BEGIN')
            for query in queries:
                cursor = await asyncio.to_thread(connection.execute, query)
                while True:
                    page = await asyncio.to_thread(self._page, cursor)
                    if page is None:
                        break
                    yield page
            if not opened.unchanged():
                raise RootReadError(
                    f'{self.database}: a writer opened the database while it was read; run the collection again'
                )
        except sqlite3.Error as error:
            raise RootReadError(f'{self.database}: cannot read {self.reading} ({error})') from None
        finally:
            await asyncio.to_thread(connection.close)

    def _page(self, cursor: sqlite3.Cursor) -> set[str] | None:
        rows = cursor.fetchmany(PAGE_ROWS)
        if not rows:
            return None
        found: set[str] = set()
        for kind, value in rows:
            found |= self.references(kind, value)
        return found

    def _connect(self) -> ReadOnlyDatabase:
        if not self.database.is_file():
            raise RootReadError(f'{self.database}: no such database file')
        try:
            return read_only(self.database, threads=True)
        except sqlite3.Error as error:
            raise RootReadError(f'{self.database}: cannot open the database ({error})') from None

    def describe(self) -> str:
        return str(self.database)


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


class PostgresTablesRoot(Root):
    """A root read from tables of a PostgreSQL database with SQL, in one read-only repeatable-read transaction.

    Subclasses name the tables that must exist, the queries whose rows
    (``(kind, value)``) hold references and how a row becomes URIs. The DSN
    may not carry a password (``PGPASSWORD`` or ``.pgpass`` give it, as for
    the PostgreSQL store); errors name ``host:port/database`` only. Needs
    ``asyncpg`` (extra ``postgres``).
    """

    what: ClassVar[str] = 'database'
    """What the tables are, for messages (``a LangGraph PostgresSaver database``)."""

    def __init__(self, dsn: str) -> None:
        from mediastash.stores.postgres._address import parse_dsn_address

        address = parse_dsn_address(dsn) if isinstance(dsn, str) else None
        if address is None:
            raise InvalidArgumentError('dsn', 'a postgresql:// or postgres:// connection string', dsn)
        if ':' in dsn.partition('://')[2].rpartition('@')[0] or 'password=' in dsn.partition('?')[2]:
            raise InvalidArgumentError(
                'dsn', 'a connection string without a password (give it in PGPASSWORD or a .pgpass file)', dsn
            )
        self._dsn = dsn
        self.address = str(address)

    @abstractmethod
    def tables(self) -> Sequence[str]:
        """The tables that must exist (else the DSN names another database)."""

    @abstractmethod
    def queries(self) -> Sequence[str]:
        """The queries whose ``(kind, value)`` rows hold the references."""

    @abstractmethod
    def references(self, kind: Any, value: Any) -> set[str]:
        """The URIs one row references."""

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        try:
            import asyncpg
        except ImportError:
            raise RootReadError(
                f'reading a {self.what} in PostgreSQL needs asyncpg: pip install "mediastash[postgres]"'
            ) from None
        where = self.describe()
        try:
            connection = await asyncpg.connect(self._dsn)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            raise RootReadError(f'{where}: cannot connect ({type(error).__name__})') from None
        try:
            async with connection.transaction(isolation='repeatable_read', readonly=True):
                wanted = list(self.tables())
                found = {
                    row[0]
                    for row in await connection.fetch(
                        'SELECT relname FROM pg_class WHERE oid IN (SELECT to_regclass(name) FROM unnest($1::text[]) '
                        'AS name)',
                        wanted,
                    )
                }
                if found != set(wanted):
                    raise RootReadError(
                        f'{where}: no {", ".join(wanted)} tables (not a {self.what}, or another search_path)'
                    )
                for query in self.queries():
                    rows = connection.cursor(query, prefetch=PAGE_ROWS)
                    async for page in paged_references(rows, lambda row: self.references(row[0], row[1])):
                        yield page
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            raise RootReadError(f'{where}: cannot read the {self.what} ({type(error).__name__})') from None
        finally:
            await connection.close()

    def describe(self) -> str:
        return f'{self.what} at {self.address}'
