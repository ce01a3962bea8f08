"""``SqliteMediaStore``: one row per blob in a SQLite table.

The store keeps one connection for its whole life and runs every statement on
its own single worker thread, which both keeps the event loop free and
serialises access to the connection (``sqlite3`` connections are not safe for
concurrent use).

The table uses pydantic-ai-harness's ``media`` columns (``sha256``,
``media_type``, ``bytes``, ``size_bytes``, ``metadata``) plus a nullable
``created_at``, so either library reads and writes the other's rows, and a
database created by the harness's ``SqliteStepStore`` can be opened as is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

from mediastash.context import MediaContextLike, context_media_type
from mediastash.errors import (
    InvalidStoreConfiguration,
    StoreClosedError,
    StoreNotFoundError,
    StoreOperationError,
    StorePermissionError,
    StoreUnavailableError,
)
from mediastash.stores._blob import OFFLOAD_BYTES
from mediastash.stores._metadata import decode_metadata_json, encode_metadata_json
from mediastash.stores._namespaces import namespace_segment
from mediastash.stores._range import DigestRange
from mediastash.stores._tokens import ObjectToken, token_for
from mediastash.stores.base import TOUCH_AFTER_SECONDS, BaseMediaStore, DriverError, Ingest
from mediastash.stores.protocols import BlobInfo, BlobStat
from mediastash.stores.sqlite._options import SqliteOptions
from mediastash.uri import DIGEST_PATTERN, media_uri, parse_media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['SqliteMediaStore']

_T = TypeVar('_T')
_SHARED_COLUMNS = ('sha256', 'media_type', 'bytes', 'size_bytes', 'metadata')
"""The columns pydantic-ai-harness's SQLite media table has; every table we use needs them."""
_CREATED_AT = 'created_at'
_RANGE_PAGE = 5000
"""Rows per page of a range listing (a shard of garbage collection reads many: fewer trips to the worker thread)."""
_PAST_HEX = 'g'
"""Sorts after every lowercase hex string: the end of a range with no upper bound."""
_EARLY_LAYOUT = frozenset({'data', 'size'})
"""Column names of mediastash's pre-release layout, recognised only to give a better error."""
_BUSY_TIMEOUT_SECONDS = 30.0
_SPOOL_IN_MEMORY_BYTES = 8 << 20
_COPY_CHUNK = 1 << 20
_STREAM_WINDOW = 8 << 20
_LIST_PAGE = 1000
_EXISTS_BATCH = 500
_PERMISSION_CODES = frozenset({sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_AUTH})
_UNAVAILABLE_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN})
"""Digests per ``IN (...)`` existence query (below every SQLite build's bound-parameter limit)."""
_PRIVATE_DATABASES = frozenset({'', ':memory:'})
_SAVEPOINT = 'mediastash_write'
_HAS_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)
"""``DELETE ... RETURNING`` (SQLite 3.35+); older builds select and delete in one transaction instead."""


class SqliteMediaStore(BaseMediaStore):
    """Content-addressed blobs in the table ``table`` of a SQLite database.

    Pass exactly one of ``database`` (a path; the store opens it with a 30 s
    busy timeout, switches the file to WAL at its first write, and closes the
    connection) or ``connection`` (yours; it must be opened with
    ``check_same_thread=False``, is never closed by the store and keeps its
    journal mode). Writes are ``INSERT OR IGNORE``: the first ``put`` of a
    blob fixes its metadata.

    Layout: the columns of pydantic-ai-harness's media table plus a nullable
    ``created_at REAL`` (Unix time of the first ``put`` or of the latest touch
    that marked the blob in use; ``NULL`` for rows the harness wrote). The
    first write creates the table, or gives an existing harness table
    ``created_at`` through ``ALTER TABLE ... ADD COLUMN`` (skipped on a
    read-only database); a table lacking any harness column is refused with
    ``InvalidStoreConfiguration``. Reads never change the database: no file,
    table, column or journal mode is created or switched by them, a harness
    table is read as it is (ages unknown), and a database without the table
    holds no blobs.

    Transactions: each write runs inside a savepoint. When no transaction was
    open before it, releasing the savepoint commits; inside a transaction you
    opened on your own ``connection``, the write lands when you commit (and a
    Python 3.12 ``autocommit=False`` connection always has one open).

    Capabilities: listing, deleting, streaming, garbage collection (a row's
    age is its ``created_at``; rows with ``NULL`` are never collected until a
    writer's ``put`` or ``touch_many`` dates them). Streams use SQLite incremental
    blob I/O; ``put_stream`` spools to a temporary file first because the row
    size must be known before the blob is written. SQLite limits a blob to
    about 1 GB by default.

    Two instances on the same database file and table share one
    ``storage_key``; a ``:memory:`` or temporary database is private to its
    instance.

    The settings are one ``SqliteOptions``: pass ``options=SqliteOptions(...)``
    or the keywords (given keywords replace fields of ``options``).
    """

    options_class = SqliteOptions

    def __init__(
        self,
        *,
        database: str | os.PathLike[str] | None = None,
        connection: sqlite3.Connection | None = None,
        table: str = 'media',
        public_url: PublicUrlResolver | None = None,
        options: SqliteOptions | None = None,
    ) -> None:
        self._options = options = SqliteOptions.settled(options, locals())  # the keywords above, by name
        super().__init__(public_url=options.public_url)
        database, connection, table = options.database, options.connection, options.table
        self._database = None if database is None else os.fspath(database)
        self._connection = connection
        self._owns_connection = connection is None
        self._table = table
        self._quoted = f'"{table}"'
        self._schema_ready = False  # set up for writing (the first write does it)
        self._table_seen = False  # layout checked by a read or a write
        self._wal_set = False
        self._has_created_at = False
        self._identity, self._private_database = _identity_of(self._database, connection, table)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix='mediastash-sqlite')
        self._shared_from: SqliteMediaStore | None = None

    def _open_namespace(self, name: str) -> SqliteMediaStore:
        """A store on the table ``<table>@<name>`` of the same database, on this store's connection and thread.

        ``@`` never occurs in a table name the constructor accepts, so no
        table of the store's own (or another namespace's) is reached; capital
        letters are escaped (``namespace_segment``) because SQLite folds the case
        of table names. The table is created by the namespace's first write.
        """
        view = object.__new__(type(self))
        BaseMediaStore.__init__(view)
        view._options = self._options
        view._database = self._database
        view._connection = None if self._owns_connection else self._connection  # else this store's once open
        view._owns_connection = self._owns_connection
        view._table = f'{self._table}@{namespace_segment(name)}'
        view._quoted = f'"{view._table}"'
        view._schema_ready = view._table_seen = view._wal_set = view._has_created_at = False
        view._identity, view._private_database = self._identity, self._private_database
        view._executor = self._executor
        view._shared_from = self
        return view

    @property
    def database(self) -> str | None:
        """The database path given at construction (``None`` with ``connection=``)."""
        return self._database

    @property
    def table(self) -> str:
        """The table holding the blobs."""
        return self._table

    def _describe(self) -> str:
        source = repr(self._database) if self._database is not None else 'connection'
        return f'SqliteMediaStore({source}, table={self._table!r})'

    def _storage_identity(self) -> Hashable | None:
        return self._identity

    def _classify_error(self, exc: Exception) -> DriverError | None:
        """sqlite3 errors by their result code: read-only or denied is a permission error, a busy, locked or
        unopenable database unavailable, anything else (a corrupt file, a full disk) a failed operation."""
        if not isinstance(exc, sqlite3.Error):
            return super()._classify_error(exc)
        code = getattr(exc, 'sqlite_errorcode', None)
        name = getattr(exc, 'sqlite_errorname', None) or type(exc).__name__
        reason = f'{name}: {exc}'  # SQLite's own text ('database is locked'): it names no path and no secret
        primary = code & 0xFF if isinstance(code, int) else None
        kind: type[StoreOperationError] = StoreOperationError
        if primary in _PERMISSION_CODES:
            kind = StorePermissionError
        elif primary in _UNAVAILABLE_CODES:
            kind = StoreUnavailableError
        return DriverError(kind, reason)

    # -- running on the store's thread -------------------------------------------------

    async def _run(self, function: Callable[..., _T], /, *args: Any) -> _T:
        """Run the write ``function(connection, *args)`` on the store's worker thread, the schema ready for it."""
        return await self._submit(functools.partial(self._call, function, *args))

    async def _run_read(self, function: Callable[..., _T], absent: _T, /, *args: Any) -> _T:
        """Run the read ``function(connection, *args)`` on the worker thread without changing the database.

        ``absent`` is the answer while there is no database file or no table: a
        read creates neither (nor switches the journal mode, nor adds a column).
        """
        return await self._submit(functools.partial(self._call_read, function, absent, *args))

    async def _submit(self, call: Callable[[], _T]) -> _T:
        self._check_open()
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, call)
        except RuntimeError as exc:  # the executor was shut down by a concurrent aclose()
            raise StoreClosedError(f'{self._describe()} is closed') from exc
        return await future

    def _call(self, function: Callable[..., _T], *args: Any) -> _T:
        self._check_open()  # work queued before aclose() must not reopen the connection
        connection = self._ready()
        try:
            return function(connection, *args)
        except sqlite3.OperationalError as exc:
            # A caller's rolled-back transaction can take our freshly created table (or
            # the created_at column we added) with it: set the schema up again, once.
            if self._schema_ready and _is_schema_loss(exc):
                self._forget_schema()
                return function(self._ready(), *args)
            raise

    def _call_read(self, function: Callable[..., _T], absent: _T, *args: Any) -> _T:
        self._check_open()
        connection = self._readable()
        if connection is None:
            return absent
        try:
            return function(connection, *args)
        except sqlite3.OperationalError as exc:
            if not _is_schema_loss(exc):
                raise
            # The table or its created_at went away since it was looked at (a caller's rollback, another
            # process): look again, once.
            self._forget_schema()
            connection = self._readable()
            return absent if connection is None else function(connection, *args)

    def _forget_schema(self) -> None:
        self._schema_ready = False
        self._table_seen = False

    def _connect(self) -> sqlite3.Connection:
        """The connection, opened on first use (worker thread only); opening changes nothing in the file."""
        if self._connection is None and self._shared_from is not None:
            self._connection = self._shared_from._connect()  # a namespace runs on its store's connection
        if self._connection is None:
            assert self._database is not None
            self._connection = sqlite3.connect(
                self._database, timeout=_BUSY_TIMEOUT_SECONDS, check_same_thread=False, isolation_level=None
            )
        return self._connection

    def _readable(self) -> sqlite3.Connection | None:
        """The connection with the table's layout checked, or ``None`` when there is no file or no table yet.

        Nothing is written: a missing file is not opened (opening would create
        it), and a table found without ``created_at`` is read as it is.
        """
        if self._connection is None:
            assert self._database is not None
            if self._database not in _PRIVATE_DATABASES and not os.path.exists(self._database):
                return None
        connection = self._connect()
        if not self._table_seen:
            with _needs_shared_connection():
                columns = self._columns(connection)
            if not columns:  # no such table
                return None
            self._check_layout(columns)
            self._has_created_at = _CREATED_AT in columns
            self._table_seen = True
        return connection

    def _ready(self) -> sqlite3.Connection:
        """The connection, set up for writing on the first write (worker thread only): the store's own file
        switched to WAL, once; the table created, or a harness table given ``created_at``."""
        connection = self._connect()
        if not self._schema_ready:
            with _needs_shared_connection():
                if self._owns_connection and not self._wal_set:
                    _switch_to_wal(connection)
                    self._wal_set = True
                self._create_schema(connection)
            self._schema_ready = True
            self._table_seen = True
        return connection

    def _create_schema(self, connection: sqlite3.Connection) -> None:
        with _write_transaction(connection):
            connection.execute(
                f'CREATE TABLE IF NOT EXISTS {self._quoted} ('
                'sha256 TEXT PRIMARY KEY, media_type TEXT, bytes BLOB NOT NULL, '
                'size_bytes INTEGER NOT NULL, metadata TEXT, created_at REAL)'
            )
        columns = self._columns(connection)
        self._check_layout(columns)
        self._has_created_at = _CREATED_AT in columns or self._add_created_at(connection)

    def _check_layout(self, columns: set[str]) -> None:
        """Refuse a table lacking any of the harness's columns."""
        missing = [name for name in _SHARED_COLUMNS if name not in columns]
        if missing:
            hint = (
                ' (it looks like the pre-release mediastash layout: rename data to bytes and size to size_bytes)'
                if columns >= _EARLY_LAYOUT
                else ''
            )
            raise InvalidStoreConfiguration(
                f'SQLite table {self._table!r} already exists without the columns {missing} '
                f'(it has {sorted(columns)}){hint}; SqliteMediaStore needs the pydantic-ai-harness media '
                f'columns {list(_SHARED_COLUMNS)}; pass another table= name'
            )

    def _columns(self, connection: sqlite3.Connection) -> set[str]:
        return {str(row[1]) for row in connection.execute(f'PRAGMA table_info({self._quoted})')}

    def _add_created_at(self, connection: sqlite3.Connection) -> bool:
        """Add ``created_at`` to a table the harness created; ``False`` when the database is read-only."""
        try:
            with _write_transaction(connection):
                connection.execute(f'ALTER TABLE {self._quoted} ADD COLUMN {_CREATED_AT} REAL')
        except sqlite3.OperationalError as exc:
            if 'duplicate column name' in str(exc):  # another connection added it meanwhile
                return True
            if getattr(exc, 'sqlite_errorcode', 0) & 0xFF == sqlite3.SQLITE_READONLY:
                return False
            raise
        return True

    def _insert_sql(self, bytes_value: str) -> str:
        """``INSERT OR IGNORE`` of one row (sha256, media_type, bytes, size_bytes, metadata[, created_at])."""
        if self._has_created_at:
            return (
                f'INSERT OR IGNORE INTO {self._quoted} (sha256, media_type, bytes, size_bytes, metadata, created_at) '
                f'VALUES (?, ?, {bytes_value}, ?, ?, ?)'
            )
        return (
            f'INSERT OR IGNORE INTO {self._quoted} (sha256, media_type, bytes, size_bytes, metadata) '
            f'VALUES (?, ?, {bytes_value}, ?, ?)'
        )

    def _insert_parameters(self, *values: object) -> tuple[object, ...]:
        return (*values, time.time()) if self._has_created_at else values

    # -- primitives --------------------------------------------------------------------

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        row = _row_facts(context)
        await self._run(self._insert, digest, data, *row)

    async def _rewrite(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Replace the row's bytes in one transaction (its metadata and media type stay)."""
        row = _row_facts(context)
        await self._run(self._insert, digest, data, *row, True)

    def _insert(
        self,
        connection: sqlite3.Connection,
        digest: str,
        data: bytes,
        media_type: str | None,
        metadata: str,
        force: bool = False,
    ) -> None:
        with _write_transaction(connection):
            cursor = connection.execute(
                self._insert_sql('?'), self._insert_parameters(digest, media_type, data, len(data), metadata)
            )
            if cursor.rowcount != 0:
                return
            if force or not self._row_is_sound(connection, digest, len(data)):
                self._replace_bytes(connection, digest, data, len(data))
            else:  # already stored: mark it in use
                self._refresh(connection, [digest], time.time() - TOUCH_AFTER_SECONDS)

    def _row_is_sound(self, connection: sqlite3.Connection, digest: str, size: int) -> bool:
        """The base's cheap check on a stored row: a BLOB of ``size`` bytes, hashed when small."""
        row = connection.execute(
            f'SELECT typeof(bytes), length(bytes) FROM {self._quoted} WHERE sha256 = ?', (digest,)
        ).fetchone()
        stored_size = row[1] if row is not None and row[0] == 'blob' else -1
        return self._stored_copy_is_sound(
            digest, size, stored_size, lambda: self._select_data(connection, digest) or b''
        )

    def _replace_bytes(self, connection: sqlite3.Connection, digest: str, value: bytes | int, size: int) -> None:
        """Overwrite a row's bytes (``value``: the bytes, or a size for a ``zeroblob`` filled later)."""
        bytes_value = 'zeroblob(?)' if isinstance(value, int) else '?'
        written = f', {_CREATED_AT} = ?' if self._has_created_at else ''
        parameters: tuple[object, ...] = (value, size, time.time()) if written else (value, size)
        connection.execute(
            f'UPDATE {self._quoted} SET bytes = {bytes_value}, size_bytes = ?{written} WHERE sha256 = ?',
            (*parameters, digest),
        )

    def _refresh(self, connection: sqlite3.Connection, digests: list[str], touch_before: float) -> None:
        """Set ``created_at`` to now on the rows older than ``touch_before`` or of unknown age (in the caller's
        transaction). A row of unknown age a writer uses is in use, so it becomes known-young."""
        if not self._has_created_at:
            return
        marks = ', '.join('?' * len(digests))
        connection.execute(
            f'UPDATE {self._quoted} SET {_CREATED_AT} = ? WHERE sha256 IN ({marks}) '
            f'AND ({_CREATED_AT} IS NULL OR {_CREATED_AT} < ?)',
            (time.time(), *digests, touch_before),
        )

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        data = await self._run_read(self._select_data, None, digest)
        if data is None:
            raise self._not_found(digest)
        return data

    def _select_data(self, connection: sqlite3.Connection, digest: str) -> bytes | None:
        row = connection.execute(f'SELECT bytes FROM {self._quoted} WHERE sha256 = ?', (digest,)).fetchone()
        if row is None:
            return None
        value = row[0]
        # Anything but a BLOB was written behind our back; hand its bytes to verification.
        if isinstance(value, bytes):
            return value
        return str(value).encode() if value is not None else b''

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return await self._run_read(self._select_exists, False, digest)

    def _select_exists(self, connection: sqlite3.Connection, digest: str) -> bool:
        return connection.execute(f'SELECT 1 FROM {self._quoted} WHERE sha256 = ?', (digest,)).fetchone() is not None

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        row = await self._run_read(self._select_metadata, None, digest)
        if row is None:
            raise self._not_found(digest)
        return decode_metadata_json(row[0], uri=media_uri(digest), where=self._describe())

    def _select_metadata(self, connection: sqlite3.Connection, digest: str) -> tuple[object] | None:
        row = connection.execute(f'SELECT metadata FROM {self._quoted} WHERE sha256 = ?', (digest,)).fetchone()
        return None if row is None else (row[0],)

    async def _contains_many(self, digests: list[str], max_concurrency: int) -> set[str]:
        """One ``IN (...)`` query per batch of at most 500 digests."""
        found: set[str] = set()
        for start in range(0, len(digests), _EXISTS_BATCH):
            found.update(await self._run_read(self._select_present, [], digests[start : start + _EXISTS_BATCH]))
        return found

    def _select_present(self, connection: sqlite3.Connection, digests: list[str]) -> list[str]:
        marks = ', '.join('?' * len(digests))
        rows = connection.execute(f'SELECT sha256 FROM {self._quoted} WHERE sha256 IN ({marks})', digests)
        return [str(row[0]) for row in rows]

    async def media_type_of(self, uri: str) -> str | None:
        """The media type recorded at the first ``put`` (``None`` when unknown or not stored)."""
        digest = parse_media_uri(uri)
        return await self._run_read(self._select_media_type, None, digest)

    def _select_media_type(self, connection: sqlite3.Connection, digest: str) -> str | None:
        row = connection.execute(f'SELECT media_type FROM {self._quoted} WHERE sha256 = ?', (digest,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        """``length(bytes)`` (read from the record header, not the bytes), ``media_type`` and ``created_at``."""
        found = await self._run_read(self._select_stat, None, digest)
        if found is None:
            raise self._not_found(digest)
        return found

    async def require_storage(self) -> None:
        """``StoreNotFoundError`` when the database file has no table yet (nothing is created); what read-only
        openers such as ``mediastash stats`` call. A caller's connection or a private database may lack it; a
        namespace's table is made by its first write, so a namespace without one is empty, not missing."""
        if self._shared_from is not None:
            self._check_open()
            return
        if self._database is None or self._database in _PRIVATE_DATABASES or self._database.startswith('file:'):
            return
        if not await self._run_read(_has_table, False):
            raise StoreNotFoundError(
                'SQLite table', self._table, hint=f'the database {self._database!r} has none; nothing was created'
            )

    def _select_stat(self, connection: sqlite3.Connection, digest: str) -> BlobStat | None:
        created_at = _CREATED_AT if self._has_created_at else 'NULL'
        row = connection.execute(
            f'SELECT length(bytes), media_type, {created_at} FROM {self._quoted} WHERE sha256 = ?', (digest,)
        ).fetchone()
        if row is None:
            return None
        size, media_type, written_at = row
        return BlobStat(int(size or 0), None if media_type is None else str(media_type), _unix_time(written_at))

    # -- optional capabilities ---------------------------------------------------------

    async def _list_digests(self) -> AsyncIterator[str]:
        """Every stored digest in order, fetched a page at a time (no long-lived cursor)."""
        after = ''
        no_page: list[str] = []
        while page := await self._run_read(self._select_page, no_page, after):
            for digest in page:
                if DIGEST_PATTERN.fullmatch(digest):
                    yield digest
            after = page[-1]

    def _select_page(self, connection: sqlite3.Connection, after: str) -> list[str]:
        rows = connection.execute(
            f'SELECT sha256 FROM {self._quoted} WHERE sha256 > ? ORDER BY sha256 LIMIT ?', (after, _LIST_PAGE)
        )
        return [str(row[0]) for row in rows]

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        """Every stored blob in digest order, a page at a time: ``length(bytes)`` and ``created_at``, no blob read."""
        after = ''
        no_page: list[tuple[str, int, float | None]] = []
        while page := await self._run_read(self._select_blob_page, no_page, after):
            for digest, size, written_at in page:
                if DIGEST_PATTERN.fullmatch(digest):
                    yield BlobInfo(media_uri(digest), size, written_at)
            after = page[-1][0]

    def _select_blob_page(self, connection: sqlite3.Connection, after: str) -> list[tuple[str, int, float | None]]:
        created_at = _CREATED_AT if self._has_created_at else 'NULL'
        rows = connection.execute(
            f'SELECT sha256, length(bytes), {created_at} FROM {self._quoted} WHERE sha256 > ? ORDER BY sha256 LIMIT ?',
            (after, _LIST_PAGE),
        )
        return [(str(digest), int(size or 0), _unix_time(written_at)) for digest, size, written_at in rows]

    async def _list_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        """The blobs of the range in digest order, read from the primary-key index a page at a time."""
        after = ''
        end = digest_range.end if digest_range.end is not None else _PAST_HEX
        no_page: list[tuple[str, int, float | None]] = []
        while page := await self._run_read(self._select_range_page, no_page, digest_range.start, after, end):
            for digest, size, written_at in page:
                if DIGEST_PATTERN.fullmatch(digest):
                    yield BlobInfo(media_uri(digest), size, written_at)
            after = page[-1][0]

    def _select_range_page(
        self, connection: sqlite3.Connection, start: str, after: str, end: str
    ) -> list[tuple[str, int, float | None]]:
        created_at = _CREATED_AT if self._has_created_at else 'NULL'
        rows = connection.execute(
            f'SELECT sha256, length(bytes), {created_at} FROM {self._quoted} '
            'WHERE sha256 >= ? AND sha256 > ? AND sha256 < ? ORDER BY sha256 LIMIT ?',
            (start, after, end, _RANGE_PAGE),
        )
        return [(str(digest), int(size or 0), _unix_time(written_at)) for digest, size, written_at in rows]

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        """Per batch of 500, one transaction: date the old rows, then select which rows exist."""
        found: set[str] = set()
        for start in range(0, len(digests), _EXISTS_BATCH):
            found.update(await self._run(self._touch_rows, digests[start : start + _EXISTS_BATCH], touch_before))
        return found

    def _touch_rows(self, connection: sqlite3.Connection, digests: list[str], touch_before: float) -> list[str]:
        try:
            with _write_transaction(connection):
                self._refresh(connection, digests, touch_before)
                return self._select_present(connection, digests)
        except sqlite3.OperationalError as exc:
            if getattr(exc, 'sqlite_errorcode', 0) & 0xFF != sqlite3.SQLITE_READONLY:
                raise
        # A read-only database cannot be written by anyone through this file: just say what is there.
        return self._select_present(connection, digests)

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        """``DELETE ... WHERE created_at < ?`` per batch of 500: the age check and the delete are one statement."""
        deleted: list[str] = []
        for start in range(0, len(digests), _EXISTS_BATCH):
            deleted.extend(
                await self._run(self._delete_old_rows, digests[start : start + _EXISTS_BATCH], written_before)
            )
        return deleted

    def _delete_old_rows(self, connection: sqlite3.Connection, digests: list[str], written_before: float) -> list[str]:
        if not self._has_created_at:
            return []  # every row's age is unknown
        marks = ', '.join('?' * len(digests))
        condition = f'FROM {self._quoted} WHERE sha256 IN ({marks}) AND {_CREATED_AT} IS NOT NULL AND {_CREATED_AT} < ?'
        parameters = (*digests, written_before)
        with _write_transaction(connection):
            if _HAS_RETURNING:
                return [str(row[0]) for row in connection.execute(f'DELETE {condition} RETURNING sha256', parameters)]
            # Older SQLite: the select and the delete share one transaction, so they see the same rows.
            doomed = [str(row[0]) for row in connection.execute(f'SELECT sha256 {condition}', parameters)]
            connection.execute(f'DELETE {condition}', parameters)
            return doomed

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        return await self._run(self._delete_rows, [digest]) > 0

    async def _delete_many(self, digests: list[str]) -> int:
        """All in one transaction."""
        return await self._run(self._delete_rows, digests)

    def _delete_rows(self, connection: sqlite3.Connection, digests: list[str]) -> int:
        removed = 0
        with _write_transaction(connection):
            for digest in digests:
                removed += connection.execute(f'DELETE FROM {self._quoted} WHERE sha256 = ?', (digest,)).rowcount
        return removed

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        """Spool the pieces to a temporary file (memory up to 8 MiB), then insert the row from it."""
        media_type, metadata = _row_facts(context)
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY_BYTES) as spool:
            async for piece in ingest:
                if len(piece) >= OFFLOAD_BYTES:
                    await asyncio.to_thread(spool.write, piece)
                else:
                    spool.write(piece)
            await self._run(self._insert_from_spool, ingest.digest, spool, ingest.size, media_type, metadata)

    def _insert_from_spool(
        self,
        connection: sqlite3.Connection,
        digest: str,
        spool: IO[bytes],
        size: int,
        media_type: str | None,
        metadata: str,
    ) -> None:
        with _write_transaction(connection):
            cursor = connection.execute(
                self._insert_sql('zeroblob(?)'), self._insert_parameters(digest, media_type, size, size, metadata)
            )
            rowid = cursor.lastrowid
            if cursor.rowcount != 1:
                if self._row_is_sound(connection, digest, size):  # already stored: mark it in use
                    self._refresh(connection, [digest], time.time() - TOUCH_AFTER_SECONDS)
                    return
                self._replace_bytes(connection, digest, size, size)
                found = connection.execute(f'SELECT rowid FROM {self._quoted} WHERE sha256 = ?', (digest,)).fetchone()
                rowid = found[0]
            if size == 0:
                return
            assert rowid is not None
            spool.seek(0)
            with connection.blobopen(self._table, 'bytes', rowid) as blob:
                while piece := spool.read(_COPY_CHUNK):
                    blob.write(piece)

    def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        return self._blob_chunks(digest, chunk_size)

    async def _blob_chunks(self, digest: str, chunk_size: int) -> AsyncGenerator[bytes, None]:
        # Reopening a blob at an offset walks its overflow pages from the start, so read
        # a window of several chunks per call to keep that cost small for big blobs.
        window = max(chunk_size, _STREAM_WINDOW // chunk_size * chunk_size)
        offset = 0
        while True:
            piece = await self._run_read(self._read_piece, None, digest, offset, window)
            if piece is None:
                raise self._not_found(digest)
            total, data = piece
            view = memoryview(data)
            for start in range(0, len(data), chunk_size):
                yield bytes(view[start : start + chunk_size])
            offset += len(data)
            if not data or offset >= total:
                return

    def _read_piece(
        self, connection: sqlite3.Connection, digest: str, offset: int, size: int
    ) -> tuple[int, bytes] | None:
        row = connection.execute(f'SELECT rowid FROM {self._quoted} WHERE sha256 = ?', (digest,)).fetchone()
        if row is None:
            return None
        with connection.blobopen(self._table, 'bytes', row[0], readonly=True) as blob:
            total = len(blob)
            if offset >= total:
                return total, b''
            blob.seek(offset)
            return total, blob.read(size)

    async def _remove_namespace_storage(self) -> None:
        """Drop the emptied namespace's table (when it is still empty); its next write creates it again."""
        await self._run_read(self._drop_if_empty, None)

    def _drop_if_empty(self, connection: sqlite3.Connection) -> None:
        with _write_transaction(connection):
            if connection.execute(f'SELECT 1 FROM {self._quoted} LIMIT 1').fetchone() is None:
                connection.execute(f'DROP TABLE {self._quoted}')
        self._forget_schema()

    # -- lifecycle ---------------------------------------------------------------------

    async def _aclose(self) -> None:
        """Close the connection if the store opened it (after work already running), then stop the thread."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close_connection)
        finally:
            self._executor.shutdown(wait=False)

    def _close_connection(self) -> None:
        if self._owns_connection and self._connection is not None:
            self._connection.close()
        self._connection = None


@contextlib.contextmanager
def _needs_shared_connection() -> Iterator[None]:
    """Turn sqlite3's wrong-thread error on a caller's connection into a configuration error saying what to do."""
    try:
        yield
    except sqlite3.ProgrammingError as exc:
        if 'thread' in str(exc):
            raise InvalidStoreConfiguration(
                'SqliteMediaStore(connection=...) needs a connection opened with check_same_thread=False, '
                'because the store uses it from its own worker thread'
            ) from exc
        raise


def _switch_to_wal(connection: sqlite3.Connection) -> None:
    """Put the store's own database file in WAL mode (persistent in the file); a read-only file stays as it is."""
    try:
        connection.execute('PRAGMA journal_mode=WAL')
    except sqlite3.OperationalError as exc:
        if getattr(exc, 'sqlite_errorcode', 0) & 0xFF != sqlite3.SQLITE_READONLY:
            raise


@contextlib.contextmanager
def _write_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """Run writes in a savepoint: commits on release unless the caller already had a transaction open."""
    connection.execute(f'SAVEPOINT {_SAVEPOINT}')
    try:
        yield
    except BaseException:
        connection.execute(f'ROLLBACK TO {_SAVEPOINT}')
        connection.execute(f'RELEASE {_SAVEPOINT}')
        raise
    connection.execute(f'RELEASE {_SAVEPOINT}')


def _has_table(connection: sqlite3.Connection) -> bool:
    """Asked through ``_run_read``, which answers ``False`` itself when there is no table."""
    return True


def _unix_time(value: object) -> float | None:
    """A ``created_at`` value as Unix time; ``None`` for ``NULL`` (or anything else written behind our back)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _row_facts(context: MediaContextLike) -> tuple[str | None, str]:
    """The ``media_type`` and ``metadata`` column values for a put (metadata as the shared codec encodes it)."""
    return context_media_type(context), encode_metadata_json(context)


def _identity_of(
    database: str | None, connection: sqlite3.Connection | None, table: str
) -> tuple[Hashable | None, ObjectToken | None]:
    """The store's storage identity, and the private-database token the store must keep alive.

    A database file: ``('sqlite', <real path>, table)``; for a caller's
    connection the file comes from ``PRAGMA database_list``, asked once here,
    before the store uses the connection from its thread. A ``:memory:`` or
    temporary database the store opens is private to it (``None``); one behind
    a caller's connection is shared by every store on that connection.
    """
    if connection is not None:
        try:
            rows = connection.execute('PRAGMA database_list').fetchall()
        except sqlite3.Error:
            return None, None  # unusable here (e.g. another thread's); the store reports it on first use
        file = next((str(row[2] or '') for row in rows if row[1] == 'main'), '')
        if file not in _PRIVATE_DATABASES:
            return ('sqlite', os.path.realpath(file), table), None
        private = token_for(connection)  # names the connection's private database while the store lives
        return ('sqlite', ('connection', private.number), table), private
    if database is None or database in _PRIVATE_DATABASES:
        return None, None
    return ('sqlite', os.path.realpath(database), table), None


def _is_schema_loss(exc: sqlite3.OperationalError) -> bool:
    """True for errors saying the table or the ``created_at`` column is gone."""
    message = str(exc)
    gone = ('no such table', f'no column named {_CREATED_AT}', f'no such column: {_CREATED_AT}')
    return any(words in message for words in gone)
