"""``SqliteMediaStore``: the conformance suite plus connection, transaction and schema tests."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import mediastash.stores.sqlite._store as sqlite_module
from mediastash import MediaContext, MediaNotFoundError, SqliteMediaStore, media_uri_for
from mediastash.errors import (
    CorruptMetadataError,
    InvalidStoreConfiguration,
    MediaStashError,
    StoreClosedError,
    StoreOperationError,
    StorePermissionError,
    StoreUnavailableError,
)
from mediastash.testing.store import StoreTests, blob, chunked, collect
from mediastash.urls import PublicUrlResolver, make_static_public_url
from tests.storage_snapshots import sqlite_state


@contextmanager
def side_connection(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A second, independent connection to the store's database file (autocommit)."""
    with closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as connection:
        yield connection


def digest(uri: str) -> str:
    return uri.removeprefix('media+sha256://')


def table_exists(connection: sqlite3.Connection, table: str) -> bool:
    """Reads create no table: until the first write there may be none (issue 17, item 7)."""
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return found.fetchone() is not None


class TestSqliteStore(StoreTests):
    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> SqliteMediaStore:
        return SqliteMediaStore(database=folder / 'media.db', public_url=public_url)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        with side_connection(store.database) as connection:
            if not table_exists(connection, store.table):
                return None
            row = connection.execute(f'SELECT bytes FROM {store.table} WHERE sha256 = ?', (digest(uri),)).fetchone()
        return None if row is None else bytes(row[0])

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        with side_connection(store.database) as connection:
            connection.execute(f'UPDATE {store.table} SET bytes = ? WHERE sha256 = ?', (data, digest(uri)))

    async def raw_delete(self, store: Any, uri: str) -> None:
        with side_connection(store.database) as connection:
            connection.execute(f'DELETE FROM {store.table} WHERE sha256 = ?', (digest(uri),))

    async def raw_count(self, store: Any) -> int | None:
        with side_connection(store.database) as connection:
            if not table_exists(connection, store.table):
                return 0
            return int(connection.execute(f'SELECT COUNT(*) FROM {store.table}').fetchone()[0])

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        with side_connection(store.database) as connection:
            connection.execute(f'UPDATE {store.table} SET created_at = ? WHERE sha256 = ?', (when, digest(uri)))

    async def reopen_store(self, store: Any) -> SqliteMediaStore:
        return SqliteMediaStore(database=store.database)

    async def raw_storage_snapshot(self, store: Any) -> object | None:
        return sqlite_state(self._database_file(store))

    def _database_file(self, store: Any) -> Path:
        return Path(store.database)


class TestSqliteStoreOnCallerConnection(TestSqliteStore):
    """The same suite on a connection the test owns (default Python transaction handling)."""

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> SqliteMediaStore:
        connection = sqlite3.connect(folder / 'media.db', check_same_thread=False)
        store = SqliteMediaStore(connection=connection, table='blobs', public_url=public_url)
        self._owned = {**getattr(self, '_owned', {}), id(store): (folder / 'media.db', connection)}
        return store

    async def reopen_store(self, store: Any) -> SqliteMediaStore:
        path, _connection = self._owned[id(store)]
        connection = sqlite3.connect(path, check_same_thread=False)
        again = SqliteMediaStore(connection=connection, table='blobs')
        self._owned[id(again)] = (path, connection)
        return again

    async def close_store(self, store: Any) -> None:
        await store.aclose()
        _path, connection = self._owned[id(store)]
        connection.close()

    def _database_file(self, store: Any) -> Path:
        return Path(self._owned[id(store)][0])

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        with side_connection(self._owned[id(store)][0]) as connection:
            if not table_exists(connection, 'blobs'):
                return None
            row = connection.execute('SELECT bytes FROM blobs WHERE sha256 = ?', (digest(uri),)).fetchone()
        return None if row is None else bytes(row[0])

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        with side_connection(self._owned[id(store)][0]) as connection:
            connection.execute('UPDATE blobs SET bytes = ? WHERE sha256 = ?', (data, digest(uri)))

    async def raw_delete(self, store: Any, uri: str) -> None:
        with side_connection(self._owned[id(store)][0]) as connection:
            connection.execute('DELETE FROM blobs WHERE sha256 = ?', (digest(uri),))

    async def raw_count(self, store: Any) -> int | None:
        with side_connection(self._owned[id(store)][0]) as connection:
            if not table_exists(connection, 'blobs'):
                return 0
            return int(connection.execute('SELECT COUNT(*) FROM blobs').fetchone()[0])

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        with side_connection(self._owned[id(store)][0]) as connection:
            connection.execute('UPDATE blobs SET created_at = ? WHERE sha256 = ?', (when, digest(uri)))


# -- configuration ----------------------------------------------------------------------

BAD_TABLES: list[object] = [
    '',
    '1media',
    'me-dia',
    'a' * 64,
    'media; DROP TABLE x',
    'mé',
    'a b',
    None,
    3,
    'sqlite_master',  # reserved by SQLite: accepted before, then sqlite3.OperationalError
    'SQLITE_stat1',
    'sqlite_media',
]


@pytest.mark.parametrize('table', BAD_TABLES, ids=repr)
def test_bad_table_names_are_refused(tmp_path: Path, table: object) -> None:
    with pytest.raises(InvalidStoreConfiguration) as caught:
        SqliteMediaStore(database=tmp_path / 'x.db', table=table)  # type: ignore[arg-type]
    assert 'table name (not repeated here)' in str(caught.value)  # a value may be a pasted secret


@pytest.mark.parametrize('table', ['a' * 63, '_x', 'Media_2', 'select'])
async def test_good_table_names_work(tmp_path: Path, table: str) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db', table=table) as store:
        uri = await store.put(b'table name')
        assert await store.get(uri) == b'table name'


def test_exactly_one_source(tmp_path: Path) -> None:
    with pytest.raises(InvalidStoreConfiguration, match='exactly one'):
        SqliteMediaStore()
    with closing(sqlite3.connect(':memory:')) as connection, pytest.raises(InvalidStoreConfiguration):
        SqliteMediaStore(database=tmp_path / 'x.db', connection=connection)


async def test_connection_must_allow_other_threads(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / 'x.db')) as connection:
        store = SqliteMediaStore(connection=connection)
        with pytest.raises(InvalidStoreConfiguration, match='check_same_thread=False'):
            await store.put(b'x')
        await store.aclose()


async def test_existing_table_with_another_layout_is_refused(tmp_path: Path) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute('CREATE TABLE media (sha256 TEXT PRIMARY KEY, bytes BLOB, size_bytes INTEGER)')
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        with pytest.raises(InvalidStoreConfiguration) as caught:
            await store.put(b'x')
        message = str(caught.value)
        assert "'media'" in message
        assert "['media_type', 'metadata']" in message
        assert 'pre-release' not in message
    with side_connection(tmp_path / 'x.db') as connection:
        assert [row[1] for row in connection.execute('PRAGMA table_info(media)')] == ['sha256', 'bytes', 'size_bytes']
    async with SqliteMediaStore(database=tmp_path / 'x.db', table='mediastash_media') as store:
        assert await store.get(await store.put(b'x')) == b'x'


async def test_pre_release_layout_is_refused_with_a_hint(tmp_path: Path) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute(
            'CREATE TABLE media (sha256 TEXT PRIMARY KEY, data BLOB NOT NULL, size INTEGER NOT NULL, '
            'media_type TEXT, metadata TEXT NOT NULL, created_at REAL NOT NULL)'
        )
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        with pytest.raises(InvalidStoreConfiguration, match=r"\['bytes', 'size_bytes'\].*pre-release"):
            await store.get(media_uri_for(b'x'))


HARNESS_LAYOUT = (
    'CREATE TABLE media (sha256 TEXT PRIMARY KEY, media_type TEXT, bytes BLOB NOT NULL, '
    'size_bytes INTEGER NOT NULL, metadata TEXT)'
)
"""The table pydantic-ai-harness 0.62 creates (observed with ``sqlite3``), without our ``created_at``."""


def insert_harness_row(connection: sqlite3.Connection, data: bytes, metadata: str | None = '{}') -> str:
    uri = media_uri_for(data)
    connection.execute(
        'INSERT INTO media (sha256, media_type, bytes, size_bytes, metadata) VALUES (?, ?, ?, ?, ?)',
        (digest(uri), 'image/png', data, len(data), metadata),
    )
    return uri


async def test_harness_layout_gains_created_at(tmp_path: Path) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute(HARNESS_LAYOUT)
        old = insert_harness_row(connection, b'written before', '{"k": "v"}')
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        assert await store.get(old) == b'written before'
        assert dict(await store.get_metadata(old)) == {'k': 'v'}
        assert await store.media_type_of(old) == 'image/png'
        new = await store.put(b'written after', context=MediaContext(metadata={'n': '1'}))
        streamed = await store.put_stream(chunked(blob(30_000), 7000))
        assert b''.join(await collect(store.get_stream(streamed, chunk_size=4096))) == blob(30_000)
    with side_connection(tmp_path / 'x.db') as connection:
        columns = [row[1] for row in connection.execute('PRAGMA table_info(media)')]
        created = dict(connection.execute('SELECT sha256, created_at FROM media').fetchall())
    assert columns == ['sha256', 'media_type', 'bytes', 'size_bytes', 'metadata', 'created_at']
    assert created[digest(old)] is None
    assert created[digest(new)] > 0
    assert created[digest(streamed)] > 0


async def test_created_at_added_by_another_connection_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute(HARNESS_LAYOUT)
    real_columns = SqliteMediaStore._columns

    def stale_columns(self: SqliteMediaStore, connection: sqlite3.Connection) -> set[str]:
        # Report the table as it was before another store added the column.
        with side_connection(tmp_path / 'x.db') as other:
            if 'created_at' not in {row[1] for row in other.execute('PRAGMA table_info(media)')}:
                other.execute('ALTER TABLE media ADD COLUMN created_at REAL')
        return real_columns(self, connection) - {'created_at'}

    monkeypatch.setattr(SqliteMediaStore, '_columns', stale_columns)
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        uri = await store.put(b'raced')
        assert await store.get(uri) == b'raced'
    with side_connection(tmp_path / 'x.db') as connection:
        assert connection.execute('SELECT created_at FROM media').fetchone()[0] > 0


async def test_read_only_harness_database_is_readable(tmp_path: Path) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute(HARNESS_LAYOUT)
        uri = insert_harness_row(connection, b'read only', '{"k": "v"}')
    read_only = sqlite3.connect(
        f'file:{tmp_path / "x.db"}?mode=ro', uri=True, check_same_thread=False, isolation_level=None
    )
    try:
        async with SqliteMediaStore(connection=read_only) as store:
            assert await store.get(uri) == b'read only'
            assert dict(await store.get_metadata(uri)) == {'k': 'v'}
            assert [u async for u in store.iter_uris()] == [uri]
            with pytest.raises(StorePermissionError) as caught:
                await store.put(b'cannot land')
            assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    finally:
        read_only.close()
    with side_connection(tmp_path / 'x.db') as connection:
        assert 'created_at' not in {row[1] for row in connection.execute('PRAGMA table_info(media)')}


async def test_driver_errors_reach_the_caller_as_store_errors(tmp_path: Path) -> None:
    """sqlite3's errors used to reach callers raw: a read-only database is a permission error, a locked one
    unavailable, a file that is not a database a failed operation; each a RuntimeError naming the call."""
    path = tmp_path / 'x.db'
    async with SqliteMediaStore(database=path) as store:
        uri = await store.put(b'stored')
    read_only = sqlite3.connect(f'file:{path}?mode=ro', uri=True, check_same_thread=False, isolation_level=None)
    try:
        async with SqliteMediaStore(connection=read_only) as store:
            with pytest.raises(StorePermissionError) as refused:
                await store.put(b'cannot land')
    finally:
        read_only.close()
    assert isinstance(refused.value, RuntimeError)
    assert isinstance(refused.value, MediaStashError)
    assert refused.value.operation == 'put'
    assert refused.value.reason.startswith('SQLITE_READONLY: attempt to write a readonly database')
    assert 'put' in str(refused.value)
    assert 'SqliteMediaStore(connection' in str(refused.value)

    with side_connection(path) as holder:
        holder.execute('BEGIN EXCLUSIVE')
        impatient = sqlite3.connect(path, timeout=0.05, check_same_thread=False, isolation_level=None)
        try:
            async with SqliteMediaStore(connection=impatient) as store:
                with pytest.raises(StoreUnavailableError) as locked:
                    await store.put(b'waits for the lock')
        finally:
            impatient.close()
        holder.execute('ROLLBACK')
    assert locked.value.operation == 'put'
    assert locked.value.reason == 'SQLITE_BUSY: database is locked'
    assert isinstance(locked.value.__cause__, sqlite3.OperationalError)

    garbage = tmp_path / 'garbage.db'
    garbage.write_bytes(b'not a database at all' * 100)
    async with SqliteMediaStore(database=garbage) as store:
        with pytest.raises(StoreOperationError) as broken:
            await store.exists(uri)
    assert type(broken.value) is StoreOperationError
    assert broken.value.reason == 'SQLITE_NOTADB: file is not a database'
    with pytest.raises(MediaNotFoundError):  # a missing blob keeps its meaning
        async with SqliteMediaStore(database=path) as store:
            await store.get(media_uri_for(b'never stored'))


async def test_created_at_lost_with_caller_rollback_is_added_again(tmp_path: Path) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute(HARNESS_LAYOUT)
    connection = sqlite3.connect(tmp_path / 'x.db', check_same_thread=False)
    try:
        connection.execute('CREATE TABLE app (x INTEGER)')
        connection.execute('INSERT INTO app VALUES (1)')
        async with SqliteMediaStore(connection=connection) as store:
            await store.put(b'lost with the rollback')
            connection.rollback()
            uri = await store.put(b'after the rollback')
            assert await store.get(uri) == b'after the rollback'
            connection.commit()
        with side_connection(tmp_path / 'x.db') as other:
            assert other.execute('SELECT created_at FROM media').fetchone()[0] > 0
    finally:
        connection.close()


async def test_in_memory_database() -> None:
    async with SqliteMediaStore(database=':memory:') as store:
        uri = await store.put(b'ephemeral')
        assert await store.get(uri) == b'ephemeral'


# -- connection handling ----------------------------------------------------------------


async def test_one_connection_for_the_store_lifetime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def counting_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = real_connect(*args, **kwargs)
        opened.append(connection)
        return connection

    monkeypatch.setattr(sqlite_module.sqlite3, 'connect', counting_connect)
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        uris = await asyncio.gather(*(store.put(f'{i}'.encode()) for i in range(20)))
        await asyncio.gather(*(store.get(uri) for uri in uris))
        await store.exists(uris[0])
        await store.get_metadata(uris[0])
    assert len(opened) == 1


async def test_wal_mode_and_busy_timeout(tmp_path: Path) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        await store.put(b'wal')
        with side_connection(tmp_path / 'x.db') as connection:
            assert connection.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'


async def test_caller_connection_is_not_closed(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / 'x.db', check_same_thread=False)
    try:
        async with SqliteMediaStore(connection=connection) as store:
            uri = await store.put(b'shared connection')
        row = connection.execute('SELECT bytes FROM media WHERE sha256 = ?', (digest(uri),)).fetchone()
        assert row[0] == b'shared connection'
        assert connection.execute('PRAGMA journal_mode').fetchone()[0] != 'wal'
    finally:
        connection.close()


async def test_caller_transaction_decides_commit(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / 'x.db', check_same_thread=False)
    try:
        async with SqliteMediaStore(connection=connection) as store:
            committed = await store.put(b'outside a transaction')
            with side_connection(tmp_path / 'x.db') as other:
                assert other.execute('SELECT COUNT(*) FROM media').fetchone()[0] == 1

            connection.execute('CREATE TABLE app (x INTEGER)')
            connection.execute('INSERT INTO app VALUES (1)')
            assert connection.in_transaction
            pending = await store.put(b'inside the caller transaction')
            assert connection.in_transaction
            with side_connection(tmp_path / 'x.db') as other:
                assert other.execute('SELECT COUNT(*) FROM media').fetchone()[0] == 1
            connection.commit()
            with side_connection(tmp_path / 'x.db') as other:
                assert other.execute('SELECT COUNT(*) FROM media').fetchone()[0] == 2

            connection.execute('INSERT INTO app VALUES (2)')
            rolled_back = await store.put(b'rolled back with the caller')
            connection.rollback()
            assert not await store.exists(rolled_back)
            assert await store.exists(committed)
            assert await store.exists(pending)
    finally:
        connection.close()


async def test_caller_autocommit_connection(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / 'x.db', check_same_thread=False, isolation_level=None)
    try:
        async with SqliteMediaStore(connection=connection) as store:
            data = blob(50_000)
            uri = await store.put_stream(chunked(data, 5000))
            with side_connection(tmp_path / 'x.db') as other:
                row = other.execute('SELECT bytes FROM media WHERE sha256 = ?', (digest(uri),)).fetchone()
            assert row[0] == data
    finally:
        connection.close()


async def test_two_stores_on_one_file(tmp_path: Path) -> None:
    async with (
        SqliteMediaStore(database=tmp_path / 'x.db') as first,
        SqliteMediaStore(database=tmp_path / 'x.db') as second,
    ):
        shared = blob(100_000)
        uris = await asyncio.gather(
            *(first.put(shared) for _ in range(10)),
            *(second.put(shared) for _ in range(10)),
            *(first.put(f'a{i}'.encode()) for i in range(20)),
            *(second.put(f'b{i}'.encode()) for i in range(20)),
        )
        assert await second.get(uris[0]) == shared
        assert await first.get(uris[-1]) == b'b19'
        assert len([uri async for uri in first.iter_uris()]) == 41


async def test_closed_store(tmp_path: Path) -> None:
    store = SqliteMediaStore(database=tmp_path / 'x.db')
    uri = await store.put(b'before close')
    await store.aclose()
    await store.aclose()
    calls = (
        store.put(b'after'),
        store.get(uri),
        store.exists(uri),
        store.exists_many([uri]),
        store.get_metadata(uri),
        store.public_url(uri),
        store.media_type_of(uri),
        store.delete(uri),
        store.delete_many([uri]),
    )
    for call in calls:
        with pytest.raises(StoreClosedError) as caught:
            await call
        assert 'SqliteMediaStore' in str(caught.value)
    with pytest.raises(StoreClosedError):
        await collect(store.get_stream(uri))
    with pytest.raises(StoreClosedError):
        await store.put_stream(chunked(b'after', 2))
    with pytest.raises(StoreClosedError):
        [u async for u in store.iter_uris()]


async def test_instances_on_one_database_share_a_storage_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    caller = sqlite3.connect(tmp_path / 'x.db', check_same_thread=False)
    try:
        async with (
            SqliteMediaStore(database=tmp_path / 'x.db') as first,
            SqliteMediaStore(database='x.db') as second,
            SqliteMediaStore(connection=caller) as on_caller_connection,
            SqliteMediaStore(database=tmp_path / 'x.db', table='other') as other_table,
            SqliteMediaStore(database=tmp_path / 'y.db') as other_file,
        ):
            assert second.storage_key == first.storage_key
            assert on_caller_connection.storage_key == first.storage_key
            assert other_table.storage_key != first.storage_key
            assert other_file.storage_key != first.storage_key

            uris = [await first.put(f'{i}'.encode()) for i in range(3)]
            before, other_before = first.deletion_generation, other_file.deletion_generation
            assert await second.delete(uris[0])
            after_one = first.deletion_generation
            assert after_one > before
            assert await on_caller_connection.delete_many(uris[1:]) == 2
            assert first.deletion_generation > after_one
            assert other_file.deletion_generation == other_before
            assert [u async for u in first.iter_uris()] == []
    finally:
        caller.close()


async def test_in_memory_databases_and_storage_keys() -> None:
    shared = sqlite3.connect(':memory:', check_same_thread=False, isolation_level=None)
    lone = sqlite3.connect(':memory:', check_same_thread=False)
    try:
        own_first, own_second = SqliteMediaStore(database=':memory:'), SqliteMediaStore(database=':memory:')
        first, second = SqliteMediaStore(connection=shared), SqliteMediaStore(connection=shared)
        other_table = SqliteMediaStore(connection=shared, table='other')
        other_connection = SqliteMediaStore(connection=lone)
        stores = [own_first, own_second, first, second, other_table, other_connection]
        # Stores that open their own :memory: database are alone with it; stores on one caller connection share it.
        assert first.storage_key == second.storage_key
        keys = {store.storage_key for store in stores}
        assert len(keys) == len(stores) - 1

        uri = await first.put(b'in memory')
        before = first.deletion_generation
        assert await second.delete(uri)
        assert first.deletion_generation > before
        assert not await first.exists(uri)
        for store in stores:
            await store.aclose()
    finally:
        shared.close()
        lone.close()


async def test_exists_many_asks_once_per_batch_of_500(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / 'x.db', check_same_thread=False, isolation_level=None)
    connection.execute('PRAGMA synchronous=OFF')  # 1200 single-row commits, no flush each
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        async with SqliteMediaStore(connection=connection) as store:
            stored = {await store.put(f'{i}'.encode()) for i in range(1200)}
            missing = {media_uri_for(f'missing {i}'.encode()) for i in range(300)}
            statements.clear()
            assert await store.exists_many([*stored, *missing]) == stored
            assert len(statements) == 3
            assert all(' IN (' in statement for statement in statements)
            assert await store.exists_many(missing) == frozenset()
    finally:
        connection.close()


async def test_close_waits_for_queued_work(tmp_path: Path) -> None:
    store = SqliteMediaStore(database=tmp_path / 'x.db')
    puts = [asyncio.ensure_future(store.put(f'{i}'.encode())) for i in range(10)]
    await asyncio.sleep(0)
    await store.aclose()
    results = await asyncio.gather(*puts, return_exceptions=True)
    assert all(isinstance(result, str | StoreClosedError) for result in results)


# -- rows -------------------------------------------------------------------------------


async def test_row_columns(tmp_path: Path) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        context = MediaContext(media_type='image/png', filename='x.png', metadata={'k': 'ü'})
        uri = await store.put(b'columns', context=context)
        assert await store.media_type_of(uri) == 'image/png'
        assert await store.media_type_of(media_uri_for(b'missing')) is None
    with side_connection(tmp_path / 'x.db') as connection:
        row = connection.execute('SELECT size_bytes, media_type, metadata, created_at FROM media').fetchone()
        columns = [(info[1], info[2], info[3], info[5]) for info in connection.execute('PRAGMA table_info(media)')]
    assert row[0] == len(b'columns')
    assert row[1] == 'image/png'
    assert row[2] == '{"k": "\\u00fc"}'
    assert row[3] > 0
    assert columns == [
        ('sha256', 'TEXT', 0, 1),
        ('media_type', 'TEXT', 0, 0),
        ('bytes', 'BLOB', 1, 0),
        ('size_bytes', 'INTEGER', 1, 0),
        ('metadata', 'TEXT', 0, 0),
        ('created_at', 'REAL', 0, 0),
    ]


async def test_metadata_encoding_keeps_key_order_and_writes_empty_object(tmp_path: Path) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        ordered = await store.put(b'ordered', context=MediaContext(metadata={'z': '1', 'a': '2'}))
        empty = await store.put(b'no metadata')
    with side_connection(tmp_path / 'x.db') as connection:
        rows = dict(connection.execute('SELECT sha256, metadata FROM media').fetchall())
    assert rows == {digest(ordered): '{"z": "1", "a": "2"}', digest(empty): '{}'}


async def test_null_metadata_reads_as_empty(tmp_path: Path) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute(HARNESS_LAYOUT)
        uri = insert_harness_row(connection, b'null metadata', None)
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        assert dict(await store.get_metadata(uri)) == {}


async def test_first_metadata_wins(tmp_path: Path) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        uri = await store.put(b'blob', context=MediaContext(metadata={'v': '1'}))
        await store.put(b'blob', context=MediaContext(metadata={'v': '2'}))
        await store.put_stream(chunked(b'blob', 2), context=MediaContext(metadata={'v': '3'}))
        assert dict(await store.get_metadata(uri)) == {'v': '1'}


@pytest.mark.parametrize(
    'stored',
    ['{"n": 1}', 'not json', '[1, 2]', '', 5, '[' * 100_000 + ']' * 100_000, '{"a":' * 50_000],
    ids=lambda value: repr(value)[:24],
)
async def test_corrupt_metadata(tmp_path: Path, stored: object) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        uri = await store.put(b'blob')
        with side_connection(tmp_path / 'x.db') as connection:
            connection.execute('UPDATE media SET metadata = ?', (stored,))
        with pytest.raises(CorruptMetadataError) as caught:
            await store.get_metadata(uri)
        assert uri in str(caught.value)


async def test_put_stream_larger_than_the_in_memory_spool(tmp_path: Path) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        data = blob(9 << 20)
        uri = await store.put_stream(chunked(data, 1 << 20))
        assert uri == media_uri_for(data)
        assert await store.get(uri) == data


async def test_failed_put_stream_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        await store.put(b'warm up')

        class BrokenSpool:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                self.written = b''

            def __enter__(self) -> BrokenSpool:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def write(self, data: bytes) -> int:
                self.written += data
                return len(data)

            def seek(self, offset: int) -> int:
                return 0

            def read(self, size: int) -> bytes:
                raise OSError('spool lost')

        monkeypatch.setattr(sqlite_module.tempfile, 'SpooledTemporaryFile', BrokenSpool)
        with pytest.raises(OSError, match='spool lost'):
            await store.put_stream(chunked(b'never lands', 3))
        assert not await store.exists(media_uri_for(b'never lands'))
        with pytest.raises(MediaNotFoundError):
            await store.get(media_uri_for(b'never lands'))


async def test_table_dropped_by_caller_rollback_is_recreated(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / 'x.db', check_same_thread=False)
    try:
        connection.execute('CREATE TABLE app (x INTEGER)')
        connection.execute('INSERT INTO app VALUES (1)')
        async with SqliteMediaStore(connection=connection) as store:
            await store.put(b'lost with the rollback')
            connection.rollback()
            uri = await store.put(b'after the rollback')
            assert await store.get(uri) == b'after the rollback'
    finally:
        connection.close()


# -- garbage collection -----------------------------------------------------------------

HOUR = 3600.0


def created_at(path: Path, uri: str) -> float | None:
    with side_connection(path) as connection:
        row = connection.execute('SELECT created_at FROM media WHERE sha256 = ?', (digest(uri),)).fetchone()
    return None if row is None else row[0]


def set_created_at(path: Path, uri: str, when: float | None) -> None:
    with side_connection(path) as connection:
        connection.execute('UPDATE media SET created_at = ? WHERE sha256 = ?', (when, digest(uri)))


async def test_rows_the_harness_wrote_have_unknown_age_and_are_never_collected(tmp_path: Path) -> None:
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    database = tmp_path / 'media.db'
    async with SqliteMediaStore(database=database) as ours:
        mine = await ours.put(b'ours')
        theirs = harness_media.SqliteMediaStore(database=database)
        by_harness = await theirs.put(
            b'written by the harness', context=harness_media.MediaContext(metadata={'k': 'v'})
        )
        used = await theirs.put(b'harness row a writer uses')
        assert created_at(database, by_harness) is None
        listed = {info.uri: info async for info in ours.iter_blobs()}
        assert listed[by_harness].written_at is None
        assert listed[by_harness].size == len(b'written by the harness')
        assert listed[mine].written_at is not None
        assert await ours.delete_unless_touched([mine, by_harness, used], written_before=time.time() + HOUR) == {mine}
        assert await ours.get(by_harness) == b'written by the harness'
        assert await theirs.get(by_harness) == b'written by the harness'

        # A writer that uses a row of unknown age dates it (it is in use), with a put or a touch.
        before = time.time()
        await ours.put(b'harness row a writer uses')
        assert (created_at(database, used) or 0) >= before
        assert await ours.touch_many([by_harness]) == {by_harness}
        assert (created_at(database, by_harness) or 0) >= before
        assert await ours.delete_unless_touched([by_harness, used], written_before=before - 1) == frozenset()
        assert await theirs.get(used) == b'harness row a writer uses'


async def test_put_stream_of_stored_bytes_refreshes_an_old_row(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    async with SqliteMediaStore(database=database) as store:
        data = blob(20_000, seed=3)
        uri = await store.put(data)
        set_created_at(database, uri, time.time() - 2 * HOUR)
        before = time.time()
        assert await store.put_stream(chunked(data, 3000)) == uri
        assert (created_at(database, uri) or 0) >= before
        set_created_at(database, uri, before - 60)
        await store.put_stream(chunked(data, 3000))
        assert created_at(database, uri) == before - 60, 'a young row keeps its time'


async def test_delete_unless_touched_without_returning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite before 3.35 has no ``DELETE ... RETURNING``: select and delete in one transaction."""
    monkeypatch.setattr(sqlite_module, '_HAS_RETURNING', False)
    database = tmp_path / 'media.db'
    async with SqliteMediaStore(database=database) as store:
        old, young, unknown = await store.put(b'old'), await store.put(b'young'), await store.put(b'unknown')
        set_created_at(database, old, time.time() - 2 * HOUR)
        set_created_at(database, unknown, None)
        deleted = await store.delete_unless_touched([old, young, unknown], written_before=time.time() - HOUR)
        assert deleted == {old}
        assert sorted([u async for u in store.iter_uris()]) == sorted([young, unknown])


async def test_delete_unless_touched_in_batches(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    async with SqliteMediaStore(database=database) as store:
        uris = [await store.put(f'row {i}'.encode()) for i in range(1200)]
        with side_connection(database) as connection:
            connection.execute('UPDATE media SET created_at = ?', (time.time() - 2 * HOUR,))
        kept = uris[::7]
        assert await store.touch_many(kept) == set(kept)
        deleted = await store.delete_unless_touched(uris, written_before=time.time() - HOUR)
        assert deleted == set(uris) - set(kept)
        assert sorted([u async for u in store.iter_uris()]) == sorted(kept)


async def test_iter_blobs_reports_the_stored_length(tmp_path: Path) -> None:
    """Sizes come from ``length(bytes)``, not from ``size_bytes`` (which could be wrong)."""
    database = tmp_path / 'media.db'
    async with SqliteMediaStore(database=database) as store:
        uri = await store.put(b'12345')
        with side_connection(database) as connection:
            connection.execute('UPDATE media SET size_bytes = 99')
        assert [(info.uri, info.size) async for info in store.iter_blobs()] == [(uri, 5)]


async def test_read_only_database_lists_and_touches_without_writing(tmp_path: Path) -> None:
    with side_connection(tmp_path / 'x.db') as connection:
        connection.execute(HARNESS_LAYOUT)
        harness_row = insert_harness_row(connection, b'harness row', '{}')
    read_only = sqlite3.connect(
        f'file:{tmp_path / "x.db"}?mode=ro', uri=True, check_same_thread=False, isolation_level=None
    )
    try:
        async with SqliteMediaStore(connection=read_only) as store:
            assert [(i.uri, i.size, i.written_at) async for i in store.iter_blobs()] == [(harness_row, 11, None)]
            assert await store.touch_many([harness_row, media_uri_for(b'absent')]) == {harness_row}
            assert await store.delete_unless_touched([harness_row], written_before=time.time() + HOUR) == frozenset()
    finally:
        read_only.close()

    # The column exists, the file is read-only: touching cannot write, and says what is there.
    async with SqliteMediaStore(database=tmp_path / 'x.db') as store:
        await store.touch_many([harness_row])
    read_only = sqlite3.connect(
        f'file:{tmp_path / "x.db"}?mode=ro', uri=True, check_same_thread=False, isolation_level=None
    )
    try:
        async with SqliteMediaStore(connection=read_only) as store:
            set_created_at(tmp_path / 'x.db', harness_row, time.time() - 2 * HOUR)
            assert await store.touch_many([harness_row]) == {harness_row}
            assert (created_at(tmp_path / 'x.db', harness_row) or 0) < time.time() - HOUR
    finally:
        read_only.close()


# -- reads change nothing (issue 17, item 7) ----------------------------------------------


@dataclass(frozen=True)
class FileState:
    """What a read must leave as it was: the database's bytes, the folder's file names, the schema, the journal mode."""

    sha256: str
    files: tuple[str, ...]
    journal_mode: str
    tables: tuple[tuple[str, tuple[str, ...]], ...]


def file_state(database: Path) -> FileState:
    """Hash and list first, then ask a separate connection (whose own -wal/-shm go when it closes)."""
    sha = hashlib.sha256(database.read_bytes()).hexdigest() if database.exists() else 'absent'
    files = tuple(sorted(path.name for path in database.parent.iterdir()))
    if not database.exists():
        return FileState(sha, files, 'absent', ())
    with side_connection(database) as connection:
        mode = str(connection.execute('PRAGMA journal_mode').fetchone()[0])
        names = [str(row[0]) for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        tables = tuple(
            (name, tuple(str(row[1]) for row in connection.execute(f'PRAGMA table_info("{name}")')))
            for name in sorted(names)
        )
    return FileState(sha, files, mode, tables)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m mediastash ARGS`` as a user runs it."""
    return subprocess.run(
        [sys.executable, '-m', 'mediastash', *args], capture_output=True, text=True, timeout=120, check=False
    )


async def harness_database(folder: Path, *, connection_owned: bool) -> tuple[Path, list[str]]:
    """A database only pydantic-ai-harness wrote: through ``database=`` (WAL, like the harness's step store), or
    through a caller's connection (rollback journal). Three blobs, with media types and metadata."""
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    database = folder / 'harness.db'
    payloads = [(b'harness text', 'text/plain', {'k': 'v'}), (blob(40_000, seed=5), 'image/png', {}), (b'x', None, {})]
    uris: list[str] = []
    if connection_owned:
        with closing(sqlite3.connect(database, check_same_thread=False)) as connection:
            store = harness_media.SqliteMediaStore(connection=connection)
            for data, media_type, metadata in payloads:
                context = harness_media.MediaContext(media_type=media_type, metadata=metadata)
                uris.append(await store.put(data, context=context))
    else:
        store = harness_media.SqliteMediaStore(database=database)
        for data, media_type, metadata in payloads:
            context = harness_media.MediaContext(media_type=media_type, metadata=metadata)
            uris.append(await store.put(data, context=context))
    return database, uris


async def read_everything(store: SqliteMediaStore, uris: list[str]) -> None:
    """Every read the store offers, each answering as the harness's rows say."""
    absent = media_uri_for(b'never stored')
    assert await store.get(uris[0]) == b'harness text'
    assert b''.join(await collect(store.get_stream(uris[1], chunk_size=4096))) == blob(40_000, seed=5)
    assert await store.exists(uris[2])
    assert not await store.exists(absent)
    assert await store.exists_many([*uris, absent]) == set(uris)
    assert dict(await store.get_metadata(uris[0])) == {'k': 'v'}
    assert await store.media_type_of(uris[1]) == 'image/png'
    assert await store.media_type_of(uris[2]) is None
    assert await store.public_url(uris[0]) == f'https://cdn.example/{digest(uris[0])}.bin'
    assert sorted([uri async for uri in store.iter_uris()]) == sorted(uris)
    assert {(info.uri, info.written_at) async for info in store.iter_blobs()} == {(uri, None) for uri in uris}
    report = await store.verify()
    assert (report.checked, report.corrupt, report.missing) == (3, [], [])
    with pytest.raises(MediaNotFoundError):
        await store.get(absent)


@pytest.mark.parametrize('connection_owned', [False, True], ids=['harness-file', 'harness-connection'])
async def test_reads_leave_a_harness_database_unchanged(tmp_path: Path, connection_owned: bool) -> None:
    """Reads used to switch the file to WAL and add created_at on first use (issue 17, item 7); the first write does."""
    database, uris = await harness_database(tmp_path, connection_owned=connection_owned)
    before = file_state(database)
    assert file_state(database) == before, 'the oracle itself changes nothing'
    assert ('media', ('sha256', 'media_type', 'bytes', 'size_bytes', 'metadata')) in before.tables
    resolver = make_static_public_url('https://cdn.example/')

    async with SqliteMediaStore(database=database, public_url=resolver) as store:
        await read_everything(store, uris)
    assert file_state(database) == before
    with closing(sqlite3.connect(database, check_same_thread=False)) as connection:
        async with SqliteMediaStore(connection=connection, public_url=resolver) as store:
            await read_everything(store, uris)
        assert not connection.in_transaction
    assert file_state(database) == before

    # The first write adds created_at (and switches a file the store opened to WAL); the harness reads on.
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    async with SqliteMediaStore(database=database, public_url=resolver) as store:
        await read_everything(store, uris)
        new = await store.put(b'written by mediastash', context=MediaContext(media_type='text/plain'))
        assert await store.exists_many([*uris, new]) == {*uris, new}
    after = file_state(database)
    assert dict(after.tables)['media'] == ('sha256', 'media_type', 'bytes', 'size_bytes', 'metadata', 'created_at')
    assert after.journal_mode == 'wal'
    assert created_at(database, new) is not None
    assert all(created_at(database, uri) is None for uri in uris)
    theirs = harness_media.SqliteMediaStore(database=database)
    assert await theirs.get(new) == b'written by mediastash'
    assert await theirs.get(uris[0]) == b'harness text'
    assert dict(await theirs.get_metadata(uris[0])) == {'k': 'v'}
    assert await theirs.put(b'the harness writes after us')
    async with SqliteMediaStore(database=database) as store:
        listed = {info.uri: info.written_at async for info in store.iter_blobs()}
        assert listed[media_uri_for(b'the harness writes after us')] is None
        assert listed[new] is not None
        # Rows of unknown age are never collected, however old the cut.
        doomed = [*uris, media_uri_for(b'the harness writes after us')]
        assert await store.delete_unless_touched(doomed, written_before=time.time() + HOUR) == frozenset()
        assert await store.exists_many(doomed) == set(doomed)


async def test_reads_create_no_file_and_no_table(tmp_path: Path) -> None:
    """A read of a missing file creates nothing; of a database without the table, answers 'not stored'."""
    missing = tmp_path / 'missing.db'
    uri = media_uri_for(b'never stored')
    async with SqliteMediaStore(database=missing) as store:
        assert not await store.exists(uri)
        assert await store.exists_many([uri]) == frozenset()
        assert [u async for u in store.iter_uris()] == []
        with pytest.raises(MediaNotFoundError):
            await store.get(uri)
    assert not missing.exists()
    assert not [name for name in os.listdir(tmp_path) if name.startswith('missing.db')]

    app = tmp_path / 'app.db'
    with side_connection(app) as connection:
        connection.execute('CREATE TABLE app (x INTEGER)')
    before = file_state(app)
    async with SqliteMediaStore(database=app) as store:
        assert not await store.exists(uri)
        assert [info async for info in store.iter_blobs()] == []
        with pytest.raises(MediaNotFoundError):
            await collect(store.get_stream(uri))
        with pytest.raises(MediaNotFoundError):
            await store.get_metadata(uri)
        assert await store.media_type_of(uri) is None
        assert file_state(app) == before
        # Another process creates the table meanwhile: the next read sees it.
        async with SqliteMediaStore(database=app) as writer:
            stored = await writer.put(b'now stored')
        assert await store.get(stored) == b'now stored'
        # The first write of this store takes the table as it is.
        assert await store.put(b'second') == media_uri_for(b'second')
    assert [name for name, _ in file_state(app).tables] == ['app', 'media']


def test_read_only_commands_leave_a_harness_database_unchanged(tmp_path: Path) -> None:
    """ls, stats, verify (no --repair) and diff on sqlite:// URLs change nothing (issue 17, item 7)."""
    database, uris = asyncio.run(harness_database(tmp_path, connection_owned=True))
    other = tmp_path / 'other'
    other.mkdir()
    other_database, _ = asyncio.run(harness_database(other, connection_owned=False))
    before = file_state(database), file_state(other_database)
    url, other_url = f'sqlite:///{database}', f'sqlite:///{other_database}'
    commands = [
        ['ls', url],
        ['ls', '--long', url],
        ['stats', url],
        ['stats', url, '--json'],
        ['verify', url],
        ['verify', url, uris[0]],
        ['diff', url, other_url],
        ['diff', other_url, url],
    ]
    for command in commands:
        result = run_cli(*command, '--quiet')
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        assert 'Traceback' not in result.stderr
    listed = run_cli('ls', url).stdout.split()
    assert sorted(listed) == sorted(uris)
    assert (file_state(database), file_state(other_database)) == before


def test_tune_media_leaves_a_harness_database_unchanged(tmp_path: Path) -> None:
    """``tune --media sqlite://...`` restores lean histories from the database and changes nothing in it."""
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    messages_module = pytest.importorskip('pydantic_ai.messages')
    image = blob(30_000, seed=9)
    history = [
        messages_module.ModelRequest(
            parts=[
                messages_module.UserPromptPart(
                    content=['look', messages_module.BinaryContent(data=image, media_type='image/png')]
                )
            ]
        ),
        messages_module.ModelResponse(parts=[messages_module.TextPart(content='a picture')]),
    ]
    full = messages_module.ModelMessagesTypeAdapter.dump_python(history, mode='json')
    database = tmp_path / 'harness.db'

    async def externalize() -> object:
        store = harness_media.SqliteMediaStore(database=database)
        return await harness_media.externalize_media(full, media_store=store, threshold_bytes=1024)

    lean = asyncio.run(externalize())
    (tmp_path / 'lean.json').write_text(json.dumps(lean))
    before = file_state(database)
    result = run_cli(
        'tune', str(tmp_path / 'lean.json'), '--store', 'memory://', '--media', f'sqlite:///{database}',
        '--thresholds', '4KiB', '--json', '--quiet',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)['rows'][0]['blobs'] == 1
    assert file_state(database) == before
