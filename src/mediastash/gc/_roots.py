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
import json
import logging
import os
import sqlite3
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import quote

from mediastash.errors import MediaStashError
from mediastash.gc._refs import add_references
from mediastash.markers import MARKER_KEY
from mediastash.uri import parse_media_uri

__all__ = [
    'ROOT_KINDS',
    'FileStepStoreRoot',
    'JsonFileRoot',
    'JsonTreeRoot',
    'KVRoot',
    'Root',
    'RootReadError',
    'ScannableKV',
    'SqliteStepStoreRoot',
    'StepStoreRoot',
    'UriFileRoot',
    'UriRoot',
    'as_root',
    'root_from_spec',
]

_SQLITE_HEADER: Final = b'SQLite format 3\x00'
_SQLITE_PAGE: Final = 500
_RESERVED_PREFIX: Final = MARKER_KEY[: MARKER_KEY.index('external_') + len('external_')]
"""Every reserved marker key starts with this; a KV value without it holds no marker (``OffloadingKV`` agrees)."""
_HARNESS_LOGGER: Final = 'pydantic_ai_harness.step_persistence'

ROOT_KINDS: Final = ('json', 'uris', 'file-steps', 'sqlite-steps')
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


class JsonFileRoot(Root):
    """A lean JSON file, or a folder: every ``*.json`` file below it.

    A file that vanishes while a folder is read is skipped (its references
    went with it); one that is not JSON stops the collection. A folder
    without any ``*.json`` file is refused as a likely mistake.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        if self.path.is_dir():
            files = await asyncio.to_thread(lambda: sorted(self.path.rglob('*.json')))
            if not files:
                raise RootReadError(f'{self.path}: the folder holds no *.json file')
            for file in files:
                found = await asyncio.to_thread(_json_file_references, file, True)
                if found is not None:
                    yield found
            return
        found = await asyncio.to_thread(_json_file_references, self.path, False)
        assert found is not None
        yield found

    def describe(self) -> str:
        return str(self.path)


class UriFileRoot(Root):
    """A text file of ``media+sha256://`` URIs, one per line (blank lines and ``#`` comments ignored)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        yield await asyncio.to_thread(self._read)

    def _read(self) -> set[str]:
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

    def describe(self) -> str:
        return str(self.path)


class FileStepStoreRoot(Root):
    """The folder of a pydantic-ai-harness ``FileStepStore``, read from its files (no blob restored).

    Reads every ``<run>/snapshots/<seq>.json``, whether or not the run has a
    ``run.json``, so runs the store cannot list still count. Use this (not the
    store object) when the step store externalizes into the store you collect.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        if not self.directory.is_dir():
            raise RootReadError(f'{self.directory}: not a folder (expected a FileStepStore folder)')
        files = await asyncio.to_thread(lambda: sorted(self.directory.glob('*/snapshots/*.json')))
        for file in files:
            found = await asyncio.to_thread(_json_file_references, file, True)
            if found is not None:
                yield found

    def describe(self) -> str:
        return str(self.directory)


class SqliteStepStoreRoot(Root):
    """The database of a pydantic-ai-harness ``SqliteStepStore``, read with SQL (read-only, no blob restored).

    Reads every snapshot row and every stored message (``snapshots.messages``,
    ``snapshot_messages.message``) in one read transaction.
    """

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self.database = Path(database)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        connection = await asyncio.to_thread(self._connect)
        try:
            tables = await asyncio.to_thread(_tables, connection)
            if 'snapshots' not in tables:
                raise RootReadError(f'{self.database}: no snapshots table (not a SqliteStepStore database)')
            queries = ['SELECT messages FROM snapshots']
            if 'snapshot_messages' in tables:
                queries.append('SELECT message FROM snapshot_messages')
            await asyncio.to_thread(connection.execute, 'BEGIN')
            for query in queries:
                cursor = await asyncio.to_thread(connection.execute, query)
                while True:
                    page = await asyncio.to_thread(_sqlite_page, cursor, self.database)
                    if page is None:
                        break
                    yield page
        except sqlite3.Error as error:
            raise RootReadError(f'{self.database}: cannot read the step store ({error})') from None
        finally:
            await asyncio.to_thread(connection.close)

    def _connect(self) -> sqlite3.Connection:
        if not self.database.is_file():
            raise RootReadError(f'{self.database}: no such database file')
        uri = f'file:{quote(str(self.database.resolve()))}?mode=ro'
        try:
            return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=30.0)
        except sqlite3.Error as error:
            raise RootReadError(f'{self.database}: cannot open the database ({error})') from None

    def describe(self) -> str:
        return str(self.database)


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _sqlite_page(cursor: sqlite3.Cursor, database: Path) -> set[str] | None:
    rows = cursor.fetchmany(_SQLITE_PAGE)
    if not rows:
        return None
    found: set[str] = set()
    for (text,) in rows:
        if not isinstance(text, str | bytes):
            continue
        try:
            tree = json.loads(text)
        except ValueError:
            raise RootReadError(f'{database}: a stored snapshot is not JSON') from None
        add_references(tree, found, inside_literals=True)
    return found


def _json_file_references(path: Path, may_vanish: bool) -> set[str] | None:
    """The references of one JSON file (``None`` when it vanished and that is allowed)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if may_vanish:
            return None
        raise RootReadError(f'{path}: no such file') from None
    except OSError as error:
        raise RootReadError(f'{path}: cannot read ({_reason(error)})') from None
    try:
        tree = json.loads(raw)
    except ValueError as error:
        raise RootReadError(f'{path}: not JSON ({error})') from None
    found: set[str] = set()
    add_references(tree, found, inside_literals=True)
    return found


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
        inner = _unwrap(store, 'mediastash.integrations.step_store', 'OffloadingStepStore')
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
        if kv is not None and _is_instance(kv, 'mediastash.integrations.kv', 'OffloadingKV'):
            raise TypeError(
                f'{type(inner).__name__} reads through an OffloadingKV, which restores every value: '
                'pass the OffloadingKV itself (KVRoot) as the root instead'
            )
        self.store = inner

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        watch = _SkippedSnapshots()
        logger = logging.getLogger(_HARNESS_LOGGER)
        logger.addHandler(watch)
        try:
            runs = await self.store.list_runs()
            for record in runs:
                snapshots = await self.store.list_snapshots(run_id=record.run_id, include_interrupted=True)
                watch.check(self.describe())
                for snapshot in snapshots:
                    found: set[str] = set()
                    tree = ModelMessagesTypeAdapter.dump_python(list(snapshot.messages))
                    add_references(tree, found, inside_literals=True)
                    yield found
        finally:
            logger.removeHandler(watch)
        watch.check(self.describe())

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
        inner = _unwrap(kv, 'mediastash.integrations.kv', 'OffloadingKV')
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
                yield _value_references(data)
            return
        for pk in self.partitions:
            for _sk, data in await self.kv.query(pk):
                yield _value_references(data)

    def describe(self) -> str:
        return type(self.kv).__name__


def _value_references(data: object) -> set[str]:
    found: set[str] = set()
    if isinstance(data, str) and _RESERVED_PREFIX in data:
        try:
            tree = json.loads(data)
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
    step store (``OffloadingStepStore`` or anything with ``list_runs``: a
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
    if _is_instance(value, 'mediastash.integrations.kv', 'OffloadingKV') or isinstance(value, ScannableKV):
        return KVRoot(value)
    if _is_instance(value, 'mediastash.integrations.step_store', 'OffloadingStepStore') or callable(
        getattr(value, 'list_runs', None)
    ):
        return _step_store_root(value)
    raise TypeError(
        f'{type(value).__name__} is not a root: give a lean tree, a path, a set of URIs, a step store, '
        'an OffloadingKV or a mediastash.gc Root'
    )


def _own_media_store(store: object) -> object:
    """The media store a pydantic-ai-harness step store externalizes into itself (``None`` when it keeps payloads)."""
    return getattr(store, '_media_store', None)


def _step_store_root(store: object) -> Root:
    """A step store's root: from storage when the store externalizes on its own and its storage is known."""
    inner = _unwrap(store, 'mediastash.integrations.step_store', 'OffloadingStepStore')
    if _own_media_store(inner) is not None:
        directory = getattr(inner, '_root', None)
        if type(inner).__name__ == 'FileStepStore' and isinstance(directory, Path):
            return FileStepStoreRoot(directory)
        database = getattr(inner, '_database', None)
        if type(inner).__name__ == 'SqliteStepStore' and isinstance(database, Path):
            return SqliteStepStoreRoot(database)
    return StepStoreRoot(inner)


def root_from_spec(spec: str) -> Root:
    """The root a command-line argument names: ``KIND:PATH`` or a bare path whose kind is sniffed.

    Kinds: ``json`` (a lean JSON file or a folder of them), ``uris`` (one URI
    per line), ``file-steps`` (a ``FileStepStore`` folder), ``sqlite-steps``
    (a ``SqliteStepStore`` database). A bare path: a SQLite file is a
    ``SqliteStepStore``; a folder with ``<run>/snapshots/`` or
    ``<run>/run.json`` inside is a ``FileStepStore``, any other folder JSON
    files; a file starting with ``{`` or ``[`` is JSON, with ``media+sha256://``
    a URI list.
    """
    kind, separator, rest = spec.partition(':')
    if separator and kind in ROOT_KINDS:
        if not rest:
            raise RootReadError(f'{spec!r}: give a path after {kind}:')
        path = Path(rest).expanduser()
        if kind == 'json':
            return JsonFileRoot(path)
        if kind == 'uris':
            return UriFileRoot(path)
        if kind == 'file-steps':
            return FileStepStoreRoot(path)
        return SqliteStepStoreRoot(path)
    return root_from_path(Path(spec).expanduser())


def root_from_path(path: Path) -> Root:
    """A path's root, its kind sniffed (see ``root_from_spec``)."""
    if path.is_dir():
        if _looks_like_file_step_store(path):
            return FileStepStoreRoot(path)
        return JsonFileRoot(path)
    if not path.exists():
        raise RootReadError(f'{path}: no such file or folder')
    try:
        with path.open('rb') as file:
            head = file.read(4096)
    except OSError as error:
        raise RootReadError(f'{path}: cannot read ({_reason(error)})') from None
    if head.startswith(_SQLITE_HEADER):
        return SqliteStepStoreRoot(path)
    start = head.lstrip(b'\xef\xbb\xbf \t\r\n')
    if start[:1] in (b'{', b'['):
        return JsonFileRoot(path)
    if start.startswith(b'media+sha256://') or start.startswith(b'#'):
        return UriFileRoot(path)
    kinds = ', '.join(f'{kind}:' for kind in ROOT_KINDS)
    raise RootReadError(f'{path}: cannot tell what kind of root this is; prefix it with one of {kinds}')


def _looks_like_file_step_store(path: Path) -> bool:
    for child in path.iterdir():
        if child.is_dir() and ((child / 'snapshots').is_dir() or (child / 'run.json').is_file()):
            return True
    return False


def roots_of(values: Sequence[object]) -> list[Root]:
    """``as_root`` of each value (before anything is read)."""
    return [as_root(value) for value in values]
