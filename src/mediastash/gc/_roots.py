"""Roots: the places whose references keep blobs alive, read without downloading any blob.

Every root yields the URIs it references, one set per item read (a snapshot,
a file, a record), so the collector can count progress. A root that cannot be
read completely raises ``RootReadError``: the collector then deletes nothing.
Roots read from storage count markers inside literal wrappers too (see
``referenced_uris(inside_literals=True)``), so data that went through two
marker layers keeps every blob it needs.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import sqlite3
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol, runtime_checkable
from urllib.parse import unquote_plus

from mediastash._path_kinds import NOT_ROOTS, PathKind, PathKindError, classify, walk_files
from mediastash._sqlite_read import ReadOnlyDatabase, read_only
from mediastash.errors import InvalidArgumentError, MediaStashError
from mediastash.gc._refs import add_references
from mediastash.markers import RESERVED_KEY_PREFIX
from mediastash.uri import parse_media_uri

__all__ = [
    'ROOT_KINDS',
    'ConversationStoreRoot',
    'FileStepStoreRoot',
    'JsonFileRoot',
    'JsonLinesFileRoot',
    'JsonTreeRoot',
    'KVRoot',
    'LangGraphPostgresRoot',
    'LangGraphSQLiteRoot',
    'MongoStepStoreRoot',
    'Root',
    'RootReadError',
    'ScannableKV',
    'SQLiteKVRoot',
    'SQLiteSessionRoot',
    'PostgresStepStoreRoot',
    'SqliteStepStoreRoot',
    'StepStoreRoot',
    'UriFileRoot',
    'UriRoot',
    'as_root',
    'root_from_spec',
]

_SQLITE_PAGE: Final = 500
_HARNESS_LOGGER: Final = 'pydantic_ai_harness.step_persistence'

ROOT_KINDS: Final = (
    'json',
    'jsonl',
    'uris',
    'file-steps',
    'sqlite-steps',
    'langgraph-sqlite',
    'agents-sqlite',
    'kv-sqlite',
    'langgraph-postgres',
    'pg-steps',
    'mongo-steps',
)
"""The ``KIND:`` prefixes ``root_from_spec`` understands (``mediastash gc --roots``)."""


class RootReadError(MediaStashError):
    """A root could not be read completely, so the collector deleted nothing."""


class Root(ABC):
    """A place that references blobs (see the module docstring)."""

    @abstractmethod
    def reference_batches(self) -> AsyncIterator[set[str]]:
        """Yield the URIs each item of the root references (one set per snapshot, file or record)."""

    @abstractmethod
    def describe(self) -> str:
        """A short, secret-free name for messages."""

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.describe()})'


# -- in memory --------------------------------------------------------------------------------


class JsonTreeRoot(Root):
    """A lean JSON tree in memory (``dict``/``list``), as ``externalize_media`` returns it."""

    def __init__(self, tree: object) -> None:
        self.tree = tree

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        found: set[str] = set()
        add_references(self.tree, found, inside_literals=True)
        yield found

    def describe(self) -> str:
        return f'a {type(self.tree).__name__} tree'


class UriRoot(Root):
    """URIs you name yourself (every one is checked to be a ``media+sha256://`` URI)."""

    def __init__(self, uris: Iterable[str]) -> None:
        if isinstance(uris, str):
            raise TypeError('UriRoot takes an iterable of URI strings, not one string')
        self.uris = frozenset(uris)
        for uri in self.uris:
            parse_media_uri(uri)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        yield set(self.uris)

    def describe(self) -> str:
        return f'{len(self.uris)} URIs'


# -- files ------------------------------------------------------------------------------------


class _FileRoot(Root):
    """A root read from one file or folder, named by its path."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def describe(self) -> str:
        return str(self.path)


class JsonFileRoot(_FileRoot):
    """A lean JSON file, or a folder: every file below it, each read as the root it is.

    In a folder, lean JSON files, JSON-lines files, URI lists and step-store
    databases are read; blobs and sidecars of a disk media store, SQLite media
    databases and writers' temporary files hold no references and are passed
    over; any other file stops the collection (``docs/gc.md``). A file that
    vanishes while a folder is read is skipped (its references went with it).
    A folder holding no root file at all is refused as a likely mistake.
    """

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        if self.path.is_dir():
            async for batch in _folder_batches(self.path, allow_empty=False):
                yield batch
            return
        found = await asyncio.to_thread(_json_file_references, self.path, False)
        assert found is not None
        yield found


class JsonLinesFileRoot(_FileRoot):
    """A JSON-lines file: one lean JSON value per line (blank lines ignored), such as an append-only log."""

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        found = await asyncio.to_thread(_json_lines_references, self.path)
        if found is None:
            raise RootReadError(f'{self.path}: no such file')
        yield found


class UriFileRoot(_FileRoot):
    """A text file of ``media+sha256://`` URIs, one per line (blank lines and ``#`` comments ignored)."""

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        yield await asyncio.to_thread(self.read)

    def read(self) -> set[str]:
        """The URIs of the file (blocking)."""
        try:
            text = self.path.read_text(encoding='utf-8')
        except (OSError, UnicodeDecodeError) as error:
            raise RootReadError(f'{self.path}: cannot read the URI list ({_reason(error)})') from None
        found: set[str] = set()
        for number, line in enumerate(text.splitlines(), start=1):
            entry = line.strip()
            if not entry or entry.startswith('#'):
                continue
            try:
                parse_media_uri(entry)
            except ValueError:
                raise RootReadError(f'{self.path}, line {number}: not a media+sha256:// URI') from None
            found.add(entry)
        return found


class FileStepStoreRoot(Root):
    """The folder of a pydantic-ai-harness ``FileStepStore``, read from its files (no blob restored).

    Reads every ``<run>/snapshots/<seq>.json``, whether or not the run has a
    ``run.json``, so runs the store cannot list still count. Use this (not the
    store object) when the step store externalizes into the store you collect.
    Every other file below the folder is read as the root it is, exactly as
    ``JsonFileRoot`` reads a folder: a step store never hides files kept beside
    its runs.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        if not self.directory.is_dir():
            raise RootReadError(f'{self.directory}: not a folder (expected a FileStepStore folder)')
        async for found in _folder_batches(self.directory, allow_empty=True):
            yield found

    def describe(self) -> str:
        return str(self.directory)


_PageReader = Callable[[sqlite3.Cursor], set[str] | None]
"""Reads the next page of a cursor's rows into the URIs they refer to; ``None`` when no rows are left."""


class SqliteStepStoreRoot(Root):
    """The database of a pydantic-ai-harness ``SqliteStepStore``, read with SQL (read-only, no blob restored).

    Reads every snapshot row and every stored message (``snapshots.messages``,
    ``snapshot_messages.message``) in one read transaction.
    """

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self.database = Path(database)

    _reading: ClassVar[str] = 'the step store'
    """What an SQLite error names as being read (``cannot read <this>``)."""

    def _queries(self, tables: set[str]) -> list[tuple[str, _PageReader]]:
        """The queries to run (each with the reader of its pages), given the database's tables; ``RootReadError``
        when the database is not of this root's kind. Subclasses override it (the read loop stays here)."""
        if 'snapshots' not in tables:
            raise RootReadError(f'{self.database}: no snapshots table (not a SqliteStepStore database)')
        queries = ['SELECT messages FROM snapshots']
        if 'snapshot_messages' in tables:
            queries.append('SELECT message FROM snapshot_messages')
        return [(query, self._json_pages('snapshot')) for query in queries]

    def _json_pages(self, what: str) -> _PageReader:
        return functools.partial(_sqlite_page, database=self.database, what=what)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        opened = await asyncio.to_thread(self._connect)
        connection = opened.connection
        try:
            queries = self._queries(await asyncio.to_thread(_tables, connection))
            await asyncio.to_thread(connection.execute, 'BEGIN')
            for query, read_page in queries:
                cursor = await asyncio.to_thread(connection.execute, query)
                while True:
                    page = await asyncio.to_thread(read_page, cursor)
                    if page is None:
                        break
                    yield page
            _check_undisturbed(opened, self.database)
        except sqlite3.Error as error:
            raise RootReadError(f'{self.database}: cannot read {self._reading} ({error})') from None
        finally:
            await asyncio.to_thread(connection.close)

    def _connect(self) -> ReadOnlyDatabase:
        if not self.database.is_file():
            raise RootReadError(f'{self.database}: no such database file')
        try:
            return read_only(self.database, threads=True)
        except sqlite3.Error as error:
            raise RootReadError(f'{self.database}: cannot open the database ({error})') from None

    def describe(self) -> str:
        return str(self.database)


class SQLiteSessionRoot(SqliteStepStoreRoot):
    """Every session of an OpenAI Agents SDK ``SQLiteSession`` database, read with SQL (read-only, no blob restored).

    Reads every row of ``messages_table`` (the SDK's default ``agent_messages``)
    in one read transaction and counts every marker, inside envelopes too.
    One session alone: ``mediastash.integrations.openai_agents.SessionRoot``.
    """

    def __init__(self, database: str | os.PathLike[str], *, messages_table: str = 'agent_messages') -> None:
        super().__init__(database)
        if not isinstance(messages_table, str) or not messages_table.isidentifier() or not messages_table.isascii():
            raise InvalidArgumentError('messages_table', 'a plain SQL table name (letters, digits, _)', messages_table)
        self.messages_table = messages_table

    _reading: ClassVar[str] = 'the session database'

    def _queries(self, tables: set[str]) -> list[tuple[str, _PageReader]]:
        if self.messages_table not in tables:
            raise RootReadError(
                f'{self.database}: no {self.messages_table} table (not an OpenAI Agents SQLiteSession database)'
            )
        return [(f'SELECT message_data FROM "{self.messages_table}"', self._json_pages('session item'))]


class LangGraphSQLiteRoot(SqliteStepStoreRoot):
    """Every checkpoint and pending write of a LangGraph ``SqliteSaver`` / ``AsyncSqliteSaver`` database, read with
    SQL (read-only, no blob restored, no LangGraph needed).

    Values are decoded as their serializer wrote them (``msgpack``, ``json``,
    ``bytes``, ``null``): LangChain objects are read as the plain data they
    were packed from, so the markers of ``OffloadingCheckpointSaver`` envelopes
    count wherever they sit. A value of any other type (``pickle``, an
    encrypted one) stops the collection. ``msgpack`` values need ``ormsgpack``
    (installed with LangGraph). Python objects: ``CheckpointerRoot(saver)``.
    """

    _reading: ClassVar[str] = 'the checkpoint database'

    def _queries(self, tables: set[str]) -> list[tuple[str, _PageReader]]:
        if not {'checkpoints', 'writes'} <= tables:
            raise RootReadError(
                f'{self.database}: no checkpoints and writes tables (not a LangGraph SqliteSaver database)'
            )
        read_page = functools.partial(_checkpoint_page, database=self.database)
        return [
            (query, read_page)
            for query in ('SELECT type, checkpoint FROM checkpoints', 'SELECT type, value FROM writes')
        ]


class _PostgresTablesRoot(Root):
    """A root read from tables of a PostgreSQL database with SQL, in one read-only repeatable-read transaction.

    Subclasses name the tables that must exist and the queries whose rows
    (``(kind, value)``) they turn into references. The DSN may not carry a
    password (``PGPASSWORD`` or ``.pgpass`` give it, as for the PostgreSQL
    store); errors name ``host:port/database`` only. Needs ``asyncpg``.
    """

    what = 'database'

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
    def tables(self) -> tuple[str, ...]:
        """The tables that must exist (else the DSN names another database)."""

    @abstractmethod
    def queries(self) -> tuple[str, ...]:
        """The queries whose ``(kind, value)`` rows hold the references."""

    @abstractmethod
    def references(self, kind: object, value: object) -> set[str]:
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
                wanted = self.tables()
                found = {
                    row[0]
                    for row in await connection.fetch(
                        'SELECT relname FROM pg_class WHERE oid IN (SELECT to_regclass(name) FROM unnest($1::text[]) '
                        'AS name)',
                        list(wanted),
                    )
                }
                if found != set(wanted):
                    raise RootReadError(
                        f'{where}: no {", ".join(wanted)} tables (not a {self.what}, or another search_path)'
                    )
                for query in self.queries():
                    page: set[str] = set()
                    count = 0
                    async for kind, value in connection.cursor(query, prefetch=_SQLITE_PAGE):
                        page |= self.references(kind, value)
                        count += 1
                        if count == _SQLITE_PAGE:
                            yield page
                            page, count = set(), 0
                    if count:
                        yield page
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            raise RootReadError(f'{where}: cannot read the {self.what} ({type(error).__name__})') from None
        finally:
            await connection.close()

    def describe(self) -> str:
        return f'{self.what} at {self.address}'


class LangGraphPostgresRoot(_PostgresTablesRoot):
    """Every checkpoint, channel value and pending write of a LangGraph ``PostgresSaver`` / ``AsyncPostgresSaver``
    database, read with SQL in one read-only transaction (no blob restored, no LangGraph code run).

    ``dsn``: a ``postgresql://`` connection string without a password (a
    ``search_path=SCHEMA`` query parameter names a schema of its own). Values
    are decoded as in ``LangGraphSQLiteRoot``. Errors name the server and
    database, never the user. Needs ``asyncpg`` (extra ``postgres``).
    """

    what = 'LangGraph PostgresSaver database'

    def tables(self) -> tuple[str, ...]:
        return ('checkpoints', 'checkpoint_blobs', 'checkpoint_writes')

    def queries(self) -> tuple[str, ...]:
        return (
            "SELECT 'json', checkpoint::text FROM checkpoints",
            'SELECT type, blob FROM checkpoint_blobs',
            'SELECT type, blob FROM checkpoint_writes',
        )

    def references(self, kind: object, value: object) -> set[str]:
        found: set[str] = set()
        add_references(_checkpoint_value(kind, value, self.describe()), found, inside_literals=True)
        return found


class PostgresStepStoreRoot(_PostgresTablesRoot):
    """The tables of a pydantic-ai-harness ``PostgresStepStore``, read with SQL (read-only, no blob restored).

    Reads every snapshot (``{table}_snapshots.messages``) and every stored
    message (``{table}_messages.message``), as ``SqliteStepStoreRoot`` reads
    the SQLite layout. ``table``: the store's ``table=`` (default
    ``step_persistence``). ``dsn`` as for ``LangGraphPostgresRoot``.
    """

    what = 'PostgresStepStore database'

    def __init__(self, dsn: str, *, table: str = 'step_persistence') -> None:
        super().__init__(dsn)
        if not isinstance(table, str) or not table.isidentifier() or not table.isascii():
            raise InvalidArgumentError('table', 'a plain SQL name (letters, digits, _)', table)
        self.table = table

    def tables(self) -> tuple[str, ...]:
        return (f'{self.table}_snapshots', f'{self.table}_messages')

    def queries(self) -> tuple[str, ...]:
        return (
            f'SELECT \'snapshot\', messages FROM "{self.table}_snapshots"',
            f'SELECT \'message\', message FROM "{self.table}_messages"',
        )

    def references(self, kind: object, value: object) -> set[str]:
        return _stored_json_references(value, self.describe(), str(kind))


class MongoStepStoreRoot(Root):
    """The collections of a pydantic-ai-harness ``MongoStepStore``, read with queries (no blob restored).

    Reads every snapshot (``snapshots.messages``) and every stored message
    (``snapshot_messages.message``) of ``database`` (default: the database the
    URL names), as ``SqliteStepStoreRoot`` reads the SQLite layout. Errors and
    descriptions name the hosts and database, never the user or password.
    Needs ``pymongo`` (extra ``mongo``).
    """

    def __init__(self, uri: str, *, database: str | None = None) -> None:
        scheme, separator, rest = uri.partition('://') if isinstance(uri, str) else ('', '', '')
        if not separator or scheme not in ('mongodb', 'mongodb+srv'):
            raise InvalidArgumentError('uri', 'a mongodb:// or mongodb+srv:// connection string', uri)
        hosts, _, tail = rest.partition('/')
        name = database if database is not None else unquote_plus(tail.partition('?')[0])
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError('uri', 'a mongodb:// URL naming the database (mongodb://host/<database>)', uri)
        self._uri = uri
        self.database = name
        self.hosts = hosts.rpartition('@')[2]

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        try:
            from pymongo import AsyncMongoClient
            from pymongo.errors import PyMongoError
        except ImportError:
            raise RootReadError('reading a MongoStepStore needs pymongo: pip install "mediastash[mongo]"') from None
        where = self.describe()
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(self._uri, serverSelectionTimeoutMS=10_000)
        try:
            db = client[self.database]
            names = set(await db.list_collection_names())
            if 'snapshots' not in names:
                raise RootReadError(f'{where}: no snapshots collection (not a MongoStepStore database)')
            for collection, field in (('snapshots', 'messages'), ('snapshot_messages', 'message')):
                if collection not in names:
                    continue
                page: set[str] = set()
                count = 0
                async for document in db[collection].find({}, {field: 1}, batch_size=_SQLITE_PAGE):
                    page |= _stored_json_references(document.get(field), where, collection)
                    count += 1
                    if count == _SQLITE_PAGE:
                        yield page
                        page, count = set(), 0
                if count:
                    yield page
        except PyMongoError as error:
            raise RootReadError(f'{where}: cannot read the step store ({type(error).__name__})') from None
        finally:
            await client.close()

    def describe(self) -> str:
        return f'MongoStepStore database {self.database} at {self.hosts}'


def _stored_json_references(value: object, where: str, what: str) -> set[str]:
    """The references of one stored JSON text (a value that is not text holds none)."""
    found: set[str] = set()
    if not isinstance(value, str):
        return found
    try:
        tree = json.loads(value)
    except RecursionError:
        raise RootReadError(f'{where}: a stored {what} value is JSON nested too deeply to read') from None
    except ValueError:
        raise RootReadError(f'{where}: a stored {what} value is not JSON') from None
    add_references(tree, found, inside_literals=True)
    return found


def _checkpoint_page(cursor: sqlite3.Cursor, database: Path) -> set[str] | None:
    rows = cursor.fetchmany(_SQLITE_PAGE)
    if not rows:
        return None
    found: set[str] = set()
    for kind, data in rows:
        add_references(_checkpoint_value(kind, data, database), found, inside_literals=True)
    return found


def _checkpoint_value(kind: object, data: object, database: object) -> object:
    """A stored LangGraph value as plain data (``ormsgpack`` extension types unpacked to their contents)."""
    if kind in (None, 'null', 'bytes', 'bytearray') or data is None:
        return None
    if not isinstance(data, bytes | str):
        raise RootReadError(f'{database}: a stored checkpoint value is not bytes or text')
    try:
        if kind == 'json':
            return json.loads(data)
        if kind == 'msgpack':
            return _unpack(data if isinstance(data, bytes) else data.encode())
    except RecursionError:
        raise RootReadError(f'{database}: a stored checkpoint value is nested too deeply to read') from None
    except (ValueError, TypeError):
        raise RootReadError(f'{database}: a stored checkpoint value is not the {kind} it claims to be') from None
    label = kind if isinstance(kind, str) and kind.isidentifier() else 'unknown'
    raise RootReadError(
        f'{database}: a checkpoint value of serializer type {label!r} cannot be read without running it'
    )


def _unpack(data: bytes) -> object:
    try:
        import ormsgpack
    except ImportError:
        raise RootReadError(
            'reading a LangGraph checkpoint database needs ormsgpack: pip install "mediastash[langgraph]"'
        ) from None

    def extension(_code: int, payload: bytes) -> object:
        return ormsgpack.unpackb(payload, ext_hook=extension, option=ormsgpack.OPT_NON_STR_KEYS)

    return ormsgpack.unpackb(data, ext_hook=extension, option=ormsgpack.OPT_NON_STR_KEYS)


class SQLiteKVRoot(SqliteStepStoreRoot):
    """Every record of an ``AsyncKV`` kept in a SQLite table (the KV behind an ``OffloadingKV``), read with SQL.

    Reads ``column`` of every row of ``table`` (default: a ``kv`` table with a
    ``data`` column, the usual ``(pk, sk, data)`` layout) read-only, in one read
    transaction, as ``KVRoot`` reads records: a value that is not JSON holds
    no marker; a JSON one counts every marker.
    """

    def __init__(self, database: str | os.PathLike[str], *, table: str = 'kv', column: str = 'data') -> None:
        super().__init__(database)
        for name, value in (('table', table), ('column', column)):
            if not isinstance(value, str) or not value.isidentifier() or not value.isascii():
                raise InvalidArgumentError(name, 'a plain SQL name (letters, digits, _)', value)
        self.table = table
        self.column = column

    _reading: ClassVar[str] = 'the KV table'

    def _queries(self, tables: set[str]) -> list[tuple[str, _PageReader]]:
        if self.table not in tables:
            raise RootReadError(f'{self.database}: no {self.table} table (name the KV table with table=)')
        return [(f'SELECT "{self.column}" FROM "{self.table}"', self._kv_page)]

    def _kv_page(self, cursor: sqlite3.Cursor) -> set[str] | None:
        rows = cursor.fetchmany(_SQLITE_PAGE)
        if not rows:
            return None
        found: set[str] = set()
        for (data,) in rows:
            found |= _value_references(data, str(self.database))
        return found


def _check_undisturbed(opened: ReadOnlyDatabase, database: Path) -> None:
    """``RootReadError`` when a writer opened a database read without locks (``immutable``) during the read."""
    if not opened.unchanged():
        raise RootReadError(f'{database}: a writer opened the database while it was read; run the collection again')


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _sqlite_page(cursor: sqlite3.Cursor, database: Path, what: str = 'snapshot') -> set[str] | None:
    rows = cursor.fetchmany(_SQLITE_PAGE)
    if not rows:
        return None
    found: set[str] = set()
    for (text,) in rows:
        if not isinstance(text, str | bytes):
            continue
        try:
            tree = json.loads(text)
        except RecursionError:
            raise RootReadError(f'{database}: a stored {what} is JSON nested too deeply to read') from None
        except ValueError:
            raise RootReadError(f'{database}: a stored {what} is not JSON') from None
        add_references(tree, found, inside_literals=True)
    return found


def _json_file_references(path: Path, may_vanish: bool) -> set[str] | None:
    """The references of one JSON file (``None`` when it vanished and that is allowed)."""
    raw = _read_file(path, may_vanish)
    if raw is None:
        return None
    found: set[str] = set()
    add_references(_parse_json(raw, path), found, inside_literals=True)
    return found


def _json_lines_references(path: Path) -> set[str] | None:
    """The references of a JSON-lines file, one JSON value per line (``None`` when it vanished).

    Blank lines are passed over. A last line without its newline that is not
    JSON is an append still being written (pydantic-ai-harness appends events
    this way) and is passed over too; any other line that is not JSON stops the
    collection.
    """
    raw = _read_file(path, True)
    if raw is None:
        return None
    found: set[str] = set()
    lines = raw.split(b'\n')
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        unfinished = number == len(lines)
        try:
            tree = _parse_json(line, path, line=number)
        except RootReadError:
            if unfinished:
                continue
            raise
        add_references(tree, found, inside_literals=True)
    return found


def _read_file(path: Path, may_vanish: bool) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if may_vanish:
            return None
        raise RootReadError(f'{path}: no such file') from None
    except OSError as error:
        raise RootReadError(f'{path}: cannot read ({_reason(error)})') from None


def _parse_json(raw: str | bytes, path: object, *, line: int | None = None) -> object:
    """``json.loads``, with every failure (nesting too deep for the parser included) a ``RootReadError``."""
    where = f'{path}' if line is None else f'{path}, line {line}'
    try:
        return json.loads(raw)
    except RecursionError:
        raise RootReadError(f'{where}: JSON nested too deeply to read (no lean tree is this deep)') from None
    except ValueError as error:
        raise RootReadError(f'{where}: not JSON ({_json_reason(error)})') from None


def _json_reason(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f'{error.msg} at line {error.lineno} column {error.colno}'
    return type(error).__name__


# -- a folder: every file read as the root it is -----------------------------------------------

_READ_AS: Final = {PathKind.JSON: 'json', PathKind.JSON_LINES: 'json-lines', PathKind.URI_LIST: 'uris'}


async def _folder_batches(folder: Path, *, allow_empty: bool) -> AsyncIterator[set[str]]:
    """Every root file below ``folder``, classified first (a file no reader understands stops everything)."""
    files = await asyncio.to_thread(_classified_files, folder)
    read = 0
    for path, kind in files:
        if kind is PathKind.SQLITE_STEP_STORE:
            async for found in SqliteStepStoreRoot(path).reference_batches():
                yield found
        elif kind is PathKind.EMPTY:
            pass  # holds no reference, whatever it was meant to be
        else:
            result = await asyncio.to_thread(_file_references, path, kind)
            if result is None:
                continue  # vanished while the folder was read
            yield result
        read += 1
    if not read and not allow_empty:
        raise RootReadError(
            f'{folder}: the folder holds no root file (lean JSON, JSON lines, a URI list or a step-store database)'
        )


def _file_references(path: Path, kind: PathKind) -> set[str] | None:
    if kind is PathKind.JSON:
        return _json_file_references(path, True)
    if kind is PathKind.JSON_LINES:
        return _json_lines_references(path)
    assert kind is PathKind.URI_LIST
    try:
        return UriFileRoot(path).read()
    except RootReadError:
        if not path.exists():
            return None
        raise


def _classified_files(folder: Path) -> list[tuple[Path, PathKind]]:
    """The files below ``folder`` that hold references, with their kind; refuses any file no reader understands."""
    found: list[tuple[Path, PathKind]] = []
    try:
        for path in walk_files(folder):
            kind = classify(path)
            if kind is PathKind.MISSING or kind in NOT_ROOTS:
                continue
            problem = _unreadable(kind)
            if problem is not None:
                raise RootReadError(
                    f'{path}: {problem}; nothing was deleted: move it out of {folder}, '
                    f'or give the roots inside {folder} one by one'
                )
            found.append((path, kind))
    except PathKindError as error:
        raise RootReadError(f'{error.filename}: cannot read ({error.strerror})') from None
    return found


def _unreadable(kind: PathKind) -> str | None:
    """Why a file under a root folder cannot be read as a root, or ``None`` when it can."""
    if kind in _READ_AS or kind is PathKind.SQLITE_STEP_STORE:
        return None
    if kind is PathKind.EMPTY:
        return None  # an empty *.json never gets here: it is read as JSON, and refused as not JSON
    if kind is PathKind.SPECIAL:
        return 'a FIFO, socket or device, not a root file'
    if kind is PathKind.SQLITE_OTHER:
        return 'a SQLite database that is neither a step store (no snapshots table) nor a media store'
    if kind is PathKind.FOLDER or kind is PathKind.FILE_STEP_STORE:
        return None
    return (
        'cannot tell what kind of root this file is (not lean JSON, JSON lines, a URI list, a step-store '
        'database, nor part of a media store)'
    )


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return type(error).__name__


# -- step stores and key-value stores ------------------------------------------------------------


class StepStoreRoot(Root):
    """Every retained snapshot of every run of a step store, through its public API.

    Uses ``list_runs()`` and ``list_snapshots(run_id=..., include_interrupted=True)``
    (every pydantic-ai-harness store has both). An ``OffloadingStepStore`` is
    read through its inner store, whose snapshots hold the envelopes: nothing
    is restored. pydantic-ai-harness skips snapshots it cannot parse with a
    logged warning; such a warning while reading stops the collection.

    A store that externalizes on its own (a harness store with a
    ``media_store``) would restore its markers while listing, hiding them, so
    it is refused here; ``as_root`` reads a ``FileStepStore`` or a
    ``SqliteStepStore`` on a database path from storage instead
    (``FileStepStoreRoot`` / ``SqliteStepStoreRoot``).
    """

    def __init__(self, store: Any) -> None:
        inner = _unwrap(store, 'mediastash.integrations.pydantic_ai.step_store', 'OffloadingStepStore')
        if not callable(getattr(inner, 'list_runs', None)):
            raise TypeError(f'{type(inner).__name__} has no list_runs(): it cannot be read as a step store root')
        if not callable(getattr(inner, 'list_snapshots', None)):
            raise TypeError(
                f'{type(inner).__name__} has no list_snapshots(): the collector cannot see every retained '
                'snapshot of a run, only the latest, so it refuses the store as a root'
            )
        if _own_media_store(inner) is not None:
            raise TypeError(
                f'{type(inner).__name__} externalizes into a media store of its own: reading it through its API '
                'would restore (and so hide) its references; read its storage with FileStepStoreRoot or '
                'SqliteStepStoreRoot instead'
            )
        kv = getattr(inner, 'kv', None)
        if kv is not None and _is_instance(kv, 'mediastash.integrations.pydantic_ai.kv', 'OffloadingKV'):
            raise TypeError(
                f'{type(inner).__name__} reads through an OffloadingKV, which restores every value: '
                'pass the OffloadingKV itself (KVRoot) as the root instead'
            )
        self.store = inner

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        watch = _SkippedSnapshots()
        logger = logging.getLogger(_HARNESS_LOGGER)
        logger.addHandler(watch)
        try:
            async for found in self._batches(watch):
                yield found
        except RecursionError:
            raise RootReadError(f'{self.describe()}: a snapshot is nested too deeply to read') from None
        finally:
            logger.removeHandler(watch)
        watch.check(self.describe())

    async def _batches(self, watch: _SkippedSnapshots) -> AsyncIterator[set[str]]:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        for record in await self.store.list_runs():
            snapshots = await self.store.list_snapshots(run_id=record.run_id, include_interrupted=True)
            watch.check(self.describe())
            for snapshot in snapshots:
                found: set[str] = set()
                tree = ModelMessagesTypeAdapter.dump_python(list(snapshot.messages))
                add_references(tree, found, inside_literals=True)
                yield found

    def describe(self) -> str:
        return type(self.store).__name__


class _SkippedSnapshots(logging.Handler):
    """Notices pydantic-ai-harness's 'Skipping ... snapshot' warnings (their references would be lost)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.skipped: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith('Skipping'):
            self.skipped.append(message)

    def check(self, where: str) -> None:
        if self.skipped:
            raise RootReadError(f'{where}: the step store skipped a snapshot it could not read ({self.skipped[0]})')


class ConversationStoreRoot(Root):
    """Every entry reachable from every record of a pydantic-ai ``ConversationStore``, and from its branches.

    Reads ``read_records()`` (every scope), then for each record the history
    of its head and of each branch it left (``read_history``), one URI set per
    record. An ``OffloadingConversationStore`` is read through its inner store,
    whose entries hold the envelopes: nothing is restored and no blob is read.
    An entry no record or branch reaches (one a backend kept after a delete)
    is not a root.
    """

    def __init__(self, store: Any) -> None:
        inner = _unwrap(store, _CONVERSATION_MODULE, 'OffloadingConversationStore')
        for method in ('read_records', 'read_history'):
            if not callable(getattr(inner, method, None)):
                raise TypeError(f'{type(inner).__name__} has no {method}(): it is not a pydantic-ai ConversationStore')
        self.store = inner

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        read: set[str] = set()
        for record in await self.store.read_records():
            found: set[str] = set()
            for tip in dict.fromkeys([record.head_id, *record.branches]):
                if tip is None or tip in read:
                    continue
                try:
                    entries = await self.store.read_history(tip)
                except LookupError:
                    raise RootReadError(
                        f'{self.describe()}: an entry of conversation {record.conversation_id!r} could not be read'
                    ) from None
                fresh = [entry for entry in entries if entry.id not in read]
                read.update(entry.id for entry in fresh)
                try:
                    tree = ModelMessagesTypeAdapter.dump_python([entry.message for entry in fresh])
                except RecursionError:
                    raise RootReadError(f'{self.describe()}: a message is nested too deeply to read') from None
                add_references(tree, found, inside_literals=True)
            yield found

    def describe(self) -> str:
        return type(self.store).__name__


_CONVERSATION_MODULE: Final = 'mediastash.integrations.pydantic_ai.conversation_store'


def _is_conversation_store(value: object) -> bool:
    """Whether ``value`` is an ``OffloadingConversationStore`` or a pydantic-ai ``ConversationStore`` (no import)."""
    return _is_instance(value, _CONVERSATION_MODULE, 'OffloadingConversationStore') or _is_instance(
        value, 'pydantic_ai.conversation_store', 'ConversationStore'
    )


@runtime_checkable
class ScannableKV(Protocol):
    """An ``AsyncKV`` that can list its records: ``scan()`` yields ``(pk, sk, data)`` for every record.

    pydantic-ai-persistence's ``AsyncKV`` has no way to list partition keys,
    so a KV root either has this method or is given its partitions.
    """

    def scan(self) -> AsyncIterator[tuple[str, str, str]]: ...


class KVRoot(Root):
    """Every record of the ``AsyncKV`` behind an ``OffloadingKV`` (the lean values, never restored).

    ``partitions``: the partition keys to read with ``query(pk)``. Without
    them the KV must be a ``ScannableKV``. For a ``KVStepStore`` layout the
    partitions are ``f'run#{run_id}'`` for every run it lists; history records
    of ``KVHistoryStore`` are ``f'hist#{conversation_id}'``. A partition you
    leave out is not a root: blobs only it references get collected.
    """

    def __init__(self, kv: Any, *, partitions: Iterable[str] | None = None) -> None:
        inner = _unwrap(kv, 'mediastash.integrations.pydantic_ai.kv', 'OffloadingKV')
        if partitions is None:
            if not isinstance(inner, ScannableKV):
                raise TypeError(
                    f'{type(inner).__name__} cannot list its records (an AsyncKV has no key listing): '
                    'give it a scan() method yielding (pk, sk, data), or name the partitions: '
                    'KVRoot(kv, partitions=[...])'
                )
            self.partitions: tuple[str, ...] | None = None
        else:
            if isinstance(partitions, str):
                raise TypeError('partitions must be an iterable of partition keys, not one string')
            self.partitions = tuple(partitions)
            if not callable(getattr(inner, 'query', None)):
                raise TypeError(f'{type(inner).__name__} has no query(pk): it is not an AsyncKV')
        self.kv = inner

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        if self.partitions is None:
            async for _pk, _sk, data in self.kv.scan():
                yield _value_references(data, self.describe())
            return
        for pk in self.partitions:
            for _sk, data in await self.kv.query(pk):
                yield _value_references(data, self.describe())

    def describe(self) -> str:
        return type(self.kv).__name__


def _value_references(data: object, where: str) -> set[str]:
    found: set[str] = set()
    if isinstance(data, str) and RESERVED_KEY_PREFIX in data:
        try:
            tree = json.loads(data)
        except RecursionError:  # OffloadingKV refuses to write such a value, so another writer did
            raise RootReadError(f'{where}: a record is JSON nested too deeply to read') from None
        except ValueError:
            return found  # not JSON: OffloadingKV stored it unchanged, it holds no marker
        add_references(tree, found, inside_literals=True)
    return found


def _is_instance(value: object, module: str, name: str) -> bool:
    """``isinstance`` against a class of an integration module, without importing the module."""
    loaded = sys.modules.get(module)
    cls = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(cls, type) and isinstance(value, cls)


def _unwrap(value: Any, module: str, name: str) -> Any:
    """The innermost store of a stack of mediastash wrappers of one kind (their ``inner`` holds the lean form)."""
    while _is_instance(value, module, name):
        value = value.inner
    return value


# -- picking a root ---------------------------------------------------------------------------


def as_root(value: object) -> Root:
    """The root for ``value``.

    A ``Root`` as is; a ``str`` or path: ``root_from_spec`` (a file or folder,
    its kind sniffed or given by a prefix); a ``set``/``frozenset`` of URIs;
    a ``dict``/``list`` lean tree; an ``OffloadingKV`` or ``ScannableKV``; a
    pydantic-ai ``ConversationStore`` or ``OffloadingConversationStore``
    (``ConversationStoreRoot``); a step store (``OffloadingStepStore`` or anything with ``list_runs``: a
    ``StepStoreRoot``, except that a harness ``FileStepStore`` or
    ``SqliteStepStore`` externalizing into a media store of its own is read
    from its folder or database file).
    """
    if isinstance(value, Root):
        return value
    if isinstance(value, str):
        return root_from_spec(value)
    if isinstance(value, os.PathLike):
        return root_from_path(Path(value))
    if isinstance(value, set | frozenset):
        return UriRoot(value)
    if isinstance(value, dict | list | tuple):
        return JsonTreeRoot(value)
    if _is_instance(value, 'mediastash.integrations.pydantic_ai.kv', 'OffloadingKV') or isinstance(value, ScannableKV):
        return KVRoot(value)
    if _is_conversation_store(value):
        return ConversationStoreRoot(value)
    if _is_instance(value, 'mediastash.integrations.pydantic_ai.step_store', 'OffloadingStepStore') or callable(
        getattr(value, 'list_runs', None)
    ):
        return _step_store_root(value)
    raise TypeError(
        f'{type(value).__name__} is not a root: give a lean tree, a path, a set of URIs, a step store, '
        'a conversation store, an OffloadingKV or a mediastash.gc Root'
    )


def _own_media_store(store: object) -> object:
    """The media store a pydantic-ai-harness step store externalizes into itself (``None`` when it keeps payloads)."""
    return getattr(store, '_media_store', None)


def _step_store_root(store: object) -> Root:
    """A step store's root: from storage when the store externalizes on its own and its storage is known."""
    inner = _unwrap(store, 'mediastash.integrations.pydantic_ai.step_store', 'OffloadingStepStore')
    if _own_media_store(inner) is not None:
        directory = getattr(inner, '_root', None)
        if type(inner).__name__ == 'FileStepStore' and isinstance(directory, Path):
            return FileStepStoreRoot(directory)
        database = getattr(inner, '_database', None)
        if type(inner).__name__ == 'SqliteStepStore' and isinstance(database, Path):
            return SqliteStepStoreRoot(database)
    return StepStoreRoot(inner)


def root_from_spec(spec: str) -> Root:
    """The root a command-line argument names: ``KIND:PATH`` or a bare path whose kind is recognised.

    Kinds: ``json`` (a lean JSON file, or a folder: every file below it read as
    the root it is), ``jsonl`` (one JSON value per line), ``uris`` (one URI per
    line), ``file-steps`` (a ``FileStepStore`` folder, every file below it read
    too), ``sqlite-steps`` (a ``SqliteStepStore`` database), ``langgraph-sqlite``
    (a LangGraph ``SqliteSaver`` database), ``agents-sqlite`` (an OpenAI Agents
    ``SQLiteSession`` database: every session), ``kv-sqlite`` (an ``AsyncKV``
    in a SQLite ``kv`` table with a ``data`` column), ``langgraph-postgres``
    (a LangGraph ``PostgresSaver`` database: a ``postgresql://`` connection
    string instead of a path), ``pg-steps`` (a pydantic-ai-harness
    ``PostgresStepStore`` with the default table prefix: a connection
    string), ``mongo-steps`` (a ``MongoStepStore``: a ``mongodb://`` URL naming
    the database). A bare path is
    recognised by ``mediastash._path_kinds.classify``, the classifier tune uses
    too: a SQLite file is a step-store database; a folder with
    ``<run>/snapshots/`` or ``<run>/run.json`` inside is a ``FileStepStore``,
    any other folder a folder of roots; a ``*.jsonl`` file starting with ``{``
    or ``[`` is JSON lines, any other such file JSON; one starting with
    ``media+sha256://`` (or ``#``) a URI list.
    """
    kind, separator, rest = spec.partition(':')
    if separator and kind in ROOT_KINDS:
        if not rest:
            raise RootReadError(f'{spec!r}: give a path after {kind}:')
        path = Path(rest).expanduser()
        if kind == 'json':
            return JsonFileRoot(path)
        if kind == 'jsonl':
            return JsonLinesFileRoot(path)
        if kind == 'uris':
            return UriFileRoot(path)
        if kind == 'file-steps':
            return FileStepStoreRoot(path)
        if kind == 'langgraph-sqlite':
            return LangGraphSQLiteRoot(path)
        if kind == 'agents-sqlite':
            return SQLiteSessionRoot(path)
        if kind == 'kv-sqlite':
            return SQLiteKVRoot(path)
        if kind == 'langgraph-postgres':
            return LangGraphPostgresRoot(rest)
        if kind == 'pg-steps':
            return PostgresStepStoreRoot(rest)
        if kind == 'mongo-steps':
            return MongoStepStoreRoot(rest)
        return SqliteStepStoreRoot(path)
    return root_from_path(Path(spec).expanduser())


def root_from_path(path: Path) -> Root:
    """A path's root, its kind recognised by the classifier gc and tune share (see ``root_from_spec``)."""
    try:
        kind = classify(path)
    except PathKindError as error:
        raise RootReadError(f'{path}: cannot read ({error.strerror})') from None
    if kind is PathKind.MISSING:
        raise RootReadError(f'{path}: no such file or folder')
    if kind is PathKind.FILE_STEP_STORE:
        return FileStepStoreRoot(path)
    if kind in (PathKind.SQLITE_STEP_STORE, PathKind.SQLITE_MEDIA_STORE, PathKind.SQLITE_OTHER):
        return SqliteStepStoreRoot(path)  # reading it says what is missing
    if kind in (PathKind.FOLDER, PathKind.JSON):
        return JsonFileRoot(path)
    if kind is PathKind.URI_LIST:
        return UriFileRoot(path)
    if kind is PathKind.JSON_LINES:
        return JsonLinesFileRoot(path)
    kinds = ', '.join(f'{name}:' for name in ROOT_KINDS)
    raise RootReadError(f'{path}: cannot tell what kind of root this is; prefix it with one of {kinds}')
