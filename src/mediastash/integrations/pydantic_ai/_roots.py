"""pydantic-ai and pydantic-ai-harness stores as garbage-collection roots (nothing restored, no blob read).

Objects read through their API: ``StepStoreRoot`` (any step store with
``list_runs`` and ``list_snapshots``), ``ConversationStoreRoot`` (a pydantic-ai
``ConversationStore``), ``KVRoot`` (the ``AsyncKV`` behind an ``OffloadingKV``);
each reads the lean form under a mediastash wrapper. Storage read directly:
``PostgresStepStoreRoot`` and ``MongoStepStoreRoot`` (a harness store's tables
or collections), ``SQLiteKVRoot`` (a KV table). A harness ``FileStepStore``
folder or ``SqliteStepStore`` database needs no framework to read, so
``mediastash.gc`` reads those itself (``FileStepStoreRoot``,
``SqliteStepStoreRoot``). ``root_for`` picks the root of an object.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol, runtime_checkable
from urllib.parse import unquote_plus

from mediastash.errors import InvalidArgumentError, RootReadError
from mediastash.markers import RESERVED_KEY_PREFIX
from mediastash.roots import (
    PAGE_ROWS,
    FileStepStoreRoot,
    PostgresTablesRoot,
    Root,
    SqliteStepStoreRoot,
    SQLiteTablesRoot,
    add_references,
    json_text_references,
    paged_references,
    sql_name,
)

__all__ = [
    'ConversationStoreRoot',
    'KVRoot',
    'MongoStepStoreRoot',
    'PostgresStepStoreRoot',
    'SQLiteKVRoot',
    'ScannableKV',
    'StepStoreRoot',
    'root_for',
]

_HARNESS_LOGGER: Final = 'pydantic_ai_harness.step_persistence'


_WRAPPER_HOMES: Final = {
    'OffloadingKV': 'kv',
    'OffloadingStepStore': 'step_store',
    'OffloadingConversationStore': 'conversation_store',
}


def _wrapper(name: str) -> type[Any] | None:
    """mediastash's wrapper class ``name`` (``OffloadingKV``...), or ``None`` when its framework is missing (then
    no object of it exists). Imported here, on use: the roots import no framework, and this package's
    ``__init__`` names the roots."""
    try:
        module = importlib.import_module(f'.{_WRAPPER_HOMES[name]}', __package__)
    except ImportError as error:
        if (error.name or '').startswith('mediastash'):
            raise
        return None
    found = getattr(module, name)
    return found if isinstance(found, type) else None


def _unwrap(value: Any, name: str) -> Any:
    """The innermost store of a stack of mediastash wrappers of one kind (their ``inner`` holds the lean form)."""
    cls = _wrapper(name)
    while cls is not None and isinstance(value, cls):
        value = value.inner
    return value


def _own_media_store(store: object) -> object:
    """The media store a pydantic-ai-harness step store externalizes into itself (``None`` when it keeps payloads)."""
    return getattr(store, '_media_store', None)


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
        inner = _unwrap(store, 'OffloadingStepStore')
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
        offloading_kv = _wrapper('OffloadingKV')
        if kv is not None and offloading_kv is not None and isinstance(kv, offloading_kv):
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
        inner = _unwrap(store, 'OffloadingConversationStore')
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
        inner = _unwrap(kv, 'OffloadingKV')
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


class PostgresStepStoreRoot(PostgresTablesRoot):
    """The tables of a pydantic-ai-harness ``PostgresStepStore``, read with SQL (read-only, no blob restored).

    Reads every snapshot (``{table}_snapshots.messages``) and every stored
    message (``{table}_messages.message``), as ``SqliteStepStoreRoot`` reads
    the SQLite layout. ``table``: the store's ``table=`` (default
    ``step_persistence``). ``dsn`` as for ``LangGraphPostgresRoot``.
    """

    what = 'PostgresStepStore database'

    def __init__(self, dsn: str, *, table: str = 'step_persistence') -> None:
        super().__init__(dsn)
        self.table = sql_name('table', table)

    def tables(self) -> tuple[str, ...]:
        return (f'{self.table}_snapshots', f'{self.table}_messages')

    def queries(self) -> tuple[str, ...]:
        return (
            f'SELECT \'snapshot\', messages FROM "{self.table}_snapshots"',
            f'SELECT \'message\', message FROM "{self.table}_messages"',
        )

    def references(self, kind: Any, value: Any) -> set[str]:
        return json_text_references(value, self.describe(), kind)


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
            for collection, field, what in (
                ('snapshots', 'messages', 'snapshot'),
                ('snapshot_messages', 'message', 'message'),
            ):
                if collection not in names:
                    continue
                documents = db[collection].find({}, {field: 1}, batch_size=PAGE_ROWS)
                read = functools.partial(_document_references, field=field, where=where, what=what)
                async for page in paged_references(documents, read):
                    yield page
        except PyMongoError as error:
            raise RootReadError(f'{where}: cannot read the step store ({type(error).__name__})') from None
        finally:
            await client.close()

    def describe(self) -> str:
        return f'MongoStepStore database {self.database} at {self.hosts}'


def _document_references(document: dict[str, Any], *, field: str, where: str, what: str) -> set[str]:
    return json_text_references(document.get(field), where, what)


class SQLiteKVRoot(SQLiteTablesRoot):
    """Every record of an ``AsyncKV`` kept in a SQLite table (the KV behind an ``OffloadingKV``), read with SQL.

    Reads ``column`` of every row of ``table`` (default: a ``kv`` table with a
    ``data`` column, the usual ``(pk, sk, data)`` layout) read-only, in one read
    transaction, as ``KVRoot`` reads records: a value that is not JSON holds
    no marker; a JSON one counts every marker. ``mediastash gc --roots kv-sqlite:DB``.
    """

    reading: ClassVar[str] = 'the KV table'

    def __init__(self, database: str | os.PathLike[str], *, table: str = 'kv', column: str = 'data') -> None:
        super().__init__(database)
        self.table = sql_name('table', table)
        self.column = sql_name('column', column)

    def queries(self, tables: set[str]) -> list[str]:
        if self.table not in tables:
            raise RootReadError(f'{self.database}: no {self.table} table (name the KV table with table=)')
        return [f'SELECT NULL, "{self.column}" FROM "{self.table}"']

    def references(self, kind: Any, value: Any) -> set[str]:
        return _value_references(value, str(self.database))


def root_for(value: object) -> Root | None:
    """The root of a pydantic-ai or harness object, else ``None``.

    An ``OffloadingKV`` or a ``ScannableKV``: ``KVRoot``; a pydantic-ai
    ``ConversationStore`` or ``OffloadingConversationStore``:
    ``ConversationStoreRoot``; a step store (``OffloadingStepStore`` or
    anything with ``list_runs``): ``StepStoreRoot``, except that a harness
    ``FileStepStore`` or ``SqliteStepStore`` externalizing into a media store
    of its own is read from its folder or database file.
    """
    offloading_kv = _wrapper('OffloadingKV')
    if (offloading_kv is not None and isinstance(value, offloading_kv)) or isinstance(value, ScannableKV):
        return KVRoot(value)
    if _is_conversation_store(value):
        return ConversationStoreRoot(value)
    step_store = _wrapper('OffloadingStepStore')
    if (step_store is not None and isinstance(value, step_store)) or callable(getattr(value, 'list_runs', None)):
        return _step_store_root(value)
    return None


def _is_conversation_store(value: object) -> bool:
    """Whether ``value`` is an ``OffloadingConversationStore`` or a pydantic-ai ``ConversationStore``."""
    wrapper = _wrapper('OffloadingConversationStore')
    if wrapper is not None and isinstance(value, wrapper):
        return True
    try:  # imported by name: the harness stack's pydantic-ai (before 2.66) has no such module to type-check
        module = importlib.import_module('pydantic_ai.conversation_store')
    except ImportError:  # so no such store exists
        return False
    store_class = getattr(module, 'ConversationStore', None)
    return isinstance(store_class, type) and isinstance(value, store_class)


def _step_store_root(store: object) -> Root:
    """A step store's root: from storage when the store externalizes on its own and its storage is known."""
    inner = _unwrap(store, 'OffloadingStepStore')
    if _own_media_store(inner) is not None:
        try:
            from pydantic_ai_harness.step_persistence import FileStepStore, SqliteStepStore
        except ImportError:  # no harness: the store is not one of its two
            return StepStoreRoot(inner)
        directory = getattr(inner, '_root', None)
        if isinstance(inner, FileStepStore) and isinstance(directory, Path):
            return FileStepStoreRoot(directory)
        database = getattr(inner, '_database', None)
        if isinstance(inner, SqliteStepStore) and isinstance(database, Path):
            return SqliteStepStoreRoot(database)
    return StepStoreRoot(inner)
