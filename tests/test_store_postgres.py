"""``PostgresMediaStore`` against a real PostgreSQL server: the conformance suite (caller's pool, DSN-owned
pool, small chunks), harness interoperability both ways, tampering and healing, streaming in bounded memory,
concurrent writers in several processes, and the wrappers over pydantic-ai-harness's ``PostgresStepStore``.

The server comes from ``MEDIASTASH_POSTGRES_DSN`` (see ``tests/postgres_support.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings

from mediastash import IntegrityError, MediaContext, MediaNotFoundError, media_uri_for, open_store
from mediastash.errors import (
    InvalidArgumentError,
    InvalidStoreConfiguration,
    StoreClosedError,
    StoreNotFoundError,
    StorePermissionError,
    StoreUnavailableError,
)
from mediastash.stores.postgres import MAX_CHUNK_SIZE_BYTES, PostgresMediaStore
from mediastash.stores.postgres._layout import namespace_table
from mediastash.testing.store import StoreTests, blob, collect
from mediastash.urls import PublicUrlResolver
from tests.namespace_interleaving import check_interleaving, operations
from tests.postgres_support import CountingProxy, RawTables, digest_of, postgres_dsn, raw_connection, unique_table
from tests.s3_servers import free_port

__all__ = ['postgres_dsn']  # the session fixture, imported so pytest finds it here

MiB = 1 << 20


class TestPostgresStorePool(StoreTests):
    """The suite on stores sharing one caller-owned asyncpg pool (never closed by the stores)."""

    has_namespaces: ClassVar[bool | None] = True

    chunk_size: int | None = None

    @pytest.fixture(autouse=True)
    async def _server(self, postgres_dsn: str) -> AsyncIterator[None]:
        self.dsn = postgres_dsn
        self.connection = await raw_connection(postgres_dsn)
        self.pool = await asyncpg.create_pool(postgres_dsn, min_size=0, max_size=8)
        self.raw: dict[int, RawTables] = {}
        yield
        await self.pool.close()
        for raw in {raw.table: raw for raw in self.raw.values()}.values():
            await raw.drop()
        await self.connection.close()

    def options(self) -> dict[str, Any]:
        return {} if self.chunk_size is None else {'chunk_size_bytes': self.chunk_size}

    def open(self, table: str, public_url: PublicUrlResolver | None = None) -> PostgresMediaStore:
        return PostgresMediaStore(self.pool, table=table, public_url=public_url, **self.options())

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> PostgresMediaStore:
        table = unique_table()
        store = self.open(table, public_url)
        self.raw[id(store)] = RawTables(self.connection, table)
        return store

    async def reopen_store(self, store: Any) -> PostgresMediaStore:
        again = self.open(store.table)
        self.raw[id(again)] = self.raw[id(store)]
        return again

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return await self.raw[id(store)].read(uri)

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        await self.raw[id(store)].overwrite(uri, data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        await self.raw[id(store)].delete(uri)

    async def raw_count(self, store: Any) -> int | None:
        return await self.raw[id(store)].count()

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        await self.raw[id(store)].set_written_at(uri, when)

    async def raw_storage_snapshot(self, store: Any) -> object | None:
        raw = self.raw[id(store)]
        return await raw.tables_like(raw.table), await raw.count(), await _every_row(raw)


class TestPostgresStoreSmallChunks(TestPostgresStorePool):
    """The same suite with 4 KiB chunks, so nearly every blob is split into chunk rows."""

    chunk_size = 4096


class TestPostgresStoreDsn(TestPostgresStorePool):
    """The suite on stores that open (and close) their own pool from a DSN."""

    def open(self, table: str, public_url: PublicUrlResolver | None = None) -> PostgresMediaStore:
        return PostgresMediaStore(dsn=self.dsn, table=table, public_url=public_url, **self.options())


# -- fixtures for the store-specific tests ----------------------------------------------


@pytest.fixture
async def connection(postgres_dsn: str) -> AsyncIterator[Any]:
    connection = await raw_connection(postgres_dsn)
    yield connection
    await connection.close()


@pytest.fixture
async def pool(postgres_dsn: str) -> AsyncIterator[Any]:
    pool = await asyncpg.create_pool(postgres_dsn, min_size=0, max_size=8)
    yield pool
    await pool.close()


@pytest.fixture
async def tables(connection: Any) -> AsyncIterator[list[str]]:
    """Table names handed to a test; dropped (with their side tables) afterwards."""
    created: list[str] = []
    yield created
    for name in created:
        await RawTables(connection, name).drop()


@pytest.fixture
def make(pool: Any, connection: Any, tables: list[str]) -> Any:
    """``make(table=None, **options)`` -> (store on the shared pool, raw access to its tables)."""

    def factory(*, table: str | None = None, **options: Any) -> tuple[PostgresMediaStore, RawTables]:
        if table is None:
            table = unique_table()
            tables.append(table)
        return PostgresMediaStore(pool, table=table, **options), RawTables(connection, table)

    return factory


def harness_store(pool: Any, table: str) -> Any:
    media = pytest.importorskip('pydantic_ai_harness.media')
    return media.PostgresMediaStore(pool, table=table)


# -- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize('table', ['Media', '1media', 'a' * 64, 'me-dia', 'media; DROP TABLE x', '', 7])
def test_bad_table_names_are_refused_without_echoing_them(table: object) -> None:
    with pytest.raises(InvalidStoreConfiguration, match='invalid PostgreSQL table name') as raised:
        PostgresMediaStore(dsn='postgresql://127.0.0.1/db', table=table)  # type: ignore[arg-type]
    assert str(table) not in str(raised.value) or table in ('', 7)


@pytest.mark.parametrize('size', [0, -1, True, 1.5, MAX_CHUNK_SIZE_BYTES + 1])
def test_bad_chunk_sizes_are_refused(size: object) -> None:
    with pytest.raises((InvalidArgumentError, InvalidStoreConfiguration), match='chunk_size_bytes'):
        PostgresMediaStore(dsn='postgresql://127.0.0.1/db', chunk_size_bytes=size)  # type: ignore[arg-type]


def test_exactly_one_connection_source(pool: Any) -> None:
    with pytest.raises(InvalidStoreConfiguration, match=r'exactly one of pool= .* or dsn='):
        PostgresMediaStore()
    with pytest.raises(InvalidStoreConfiguration, match='exactly one of pool='):
        PostgresMediaStore(pool, dsn='postgresql://127.0.0.1/db')
    with pytest.raises(InvalidStoreConfiguration, match='postgresql:// or postgres://') as raised:
        PostgresMediaStore(dsn='mysql://user:hunter2@host/db')
    assert 'hunter2' not in str(raised.value)


def test_password_never_appears_in_repr_or_storage_key() -> None:
    store = PostgresMediaStore(dsn='postgresql://alice:s3cr%40t-pw@db.example:6543/app?sslmode=disable', table='m')
    assert repr(store) == "PostgresMediaStore(db.example:6543/app, table='public.m')"
    assert store.storage_key == ('postgres', ('db.example', 6543, 'app'), 'public', 'm')
    assert 's3cr' not in repr(store) and 'alice' not in repr(store) and 's3cr' not in str(store.storage_key)


async def test_unreachable_server_and_wrong_password_are_store_errors_without_secrets(
    postgres_dsn: str, connection: Any
) -> None:
    port = free_port()
    store = PostgresMediaStore(dsn=f'postgresql://bob:pa55word-x@127.0.0.1:{port}/nothing', table='m')
    try:
        with pytest.raises(StoreUnavailableError) as raised:
            await store.exists(media_uri_for(b'x'))
        assert 'pa55word-x' not in str(raised.value) and 'bob' not in str(raised.value)
    finally:
        await store.aclose()
    # A role that must give a password (the test server trusts every local role, so use one that cannot log in).
    role = unique_table('r')
    await connection.execute(f'CREATE ROLE {role} NOLOGIN')
    try:
        address = postgres_dsn.split('@', 1)[1]
        denied = PostgresMediaStore(dsn=f'postgresql://{role}:pa55word-y@{address}', table='m')
        try:
            with pytest.raises(StorePermissionError) as refused:
                await denied.exists(media_uri_for(b'x'))
            assert 'pa55word-y' not in str(refused.value)
        finally:
            await denied.aclose()
    finally:
        await connection.execute(f'DROP ROLE {role}')


async def test_an_unresolvable_host_is_store_unavailable_on_every_operation() -> None:
    """Issue 28: asyncpg raised the resolver's bare ``socket.gaierror`` out of ``put``."""
    store = PostgresMediaStore(dsn='postgresql://carol:pa55word-z@no-such-host.invalid:5432/app', table='m')
    uri = media_uri_for(b'x')
    try:
        for operation in (store.put(b'x'), store.get(uri), store.exists(uri), collect(store.iter_uris())):
            with pytest.raises(StoreUnavailableError, match='gaierror') as raised:
                await operation
            assert 'pa55word-z' not in str(raised.value) and 'carol' not in str(raised.value)
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    'dsn',
    [
        'postgresql://u:pa55word-p@db.example:abc/app',
        'postgresql://u:pa55word-p@db.example:99999/app',
        'postgresql://u:pa55word-p@db.example/app?port=x5432',
        'postgres://u:pa55word-p@db.example:5432x,other:5432/app',
    ],
)
def test_a_dsn_whose_port_is_not_a_number_is_refused_at_construction(dsn: str) -> None:
    """Issue 28: the store was made and failed at its first operation with a bare ``ValueError``."""
    with pytest.raises(InvalidStoreConfiguration, match=r'port .* is not a number') as raised:
        PostgresMediaStore(dsn=dsn)
    assert 'pa55word-p' not in str(raised.value) and 'db.example' not in str(raised.value)


async def test_callers_pool_stays_open_and_dsn_pool_is_closed(pool: Any, postgres_dsn: str, tables: list[str]) -> None:
    table = unique_table()
    tables.append(table)
    store = PostgresMediaStore(pool, table=table)
    uri = await store.put(b'kept in a pool the caller owns')
    await store.aclose()
    assert not pool.is_closing()
    async with pool.acquire() as conn:
        assert await conn.fetchval('SELECT 1') == 1
    owned = PostgresMediaStore(dsn=postgres_dsn, table=table)
    assert await owned.get(uri) == b'kept in a pool the caller owns'
    inner = owned._pool
    assert inner is not None
    await owned.aclose()
    assert inner.is_closing()
    with pytest.raises(StoreClosedError):
        await owned.get(uri)


async def test_stores_on_one_table_share_a_storage_key_whatever_the_pool(
    pool: Any, postgres_dsn: str, tables: list[str]
) -> None:
    table = unique_table()
    tables.append(table)
    on_pool = PostgresMediaStore(pool, table=table)
    on_dsn = PostgresMediaStore(dsn=postgres_dsn, table=table)
    try:
        assert on_pool.storage_key == on_dsn.storage_key
        assert on_pool.storage_key != PostgresMediaStore(pool, table=table, schema='other').storage_key
        assert on_pool.storage_key != PostgresMediaStore(pool, table=table + 'x').storage_key
    finally:
        await on_dsn.aclose()


def test_importing_mediastash_does_not_import_the_driver() -> None:
    code = 'import sys, mediastash, mediastash.stores; assert "asyncpg" not in sys.modules, "asyncpg imported"'
    subprocess.run([sys.executable, '-c', code], check=True)


# -- layout and harness interoperability ------------------------------------------------------


async def test_small_blob_is_one_harness_row_and_large_one_is_chunked(make: Any) -> None:
    store, raw = make(chunk_size_bytes=64 * 1024)
    small = blob(64 * 1024, seed=1)
    large = blob(64 * 1024 + 1, seed=2)
    small_uri = await store.put(small, context=MediaContext(media_type='image/png', metadata={'k': 'v'}))
    large_uri = await store.put(large)
    row = await raw.row(small_uri)
    assert row is not None and bytes(row['bytes']) == small and row['size_bytes'] == len(small)
    assert row['media_type'] == 'image/png' and row['metadata'] == '{"k": "v"}' and row['written_at'] > 0
    assert await raw.row(large_uri) is None
    manifest = await raw.manifest(large_uri)
    assert manifest is not None and manifest['size_bytes'] == len(large) and manifest['chunk_bytes'] == 64 * 1024
    assert await raw.chunk_rows() == 2
    assert await raw.columns() == [
        'sha256',
        'media_type',
        'bytes',
        'size_bytes',
        'metadata',
        'written_at',
        'checked_xid',
    ]
    assert await store.get(large_uri) == large


async def test_harness_reads_what_we_write_and_we_read_what_it_writes(make: Any, pool: Any) -> None:
    """Differential, both ways, on one table: same bytes, same columns, same metadata JSON."""
    media = pytest.importorskip('pydantic_ai_harness.media')
    ours, raw = make()
    theirs = harness_store(pool, ours.table)
    cases = [
        (blob(300_000, seed=3), media.MediaContext(media_type='image/png', metadata={'tenant': 'acme', 'é': 'ü'})),
        (b'', media.MediaContext()),
        ('tool output ✓'.encode(), media.MediaContext(media_type='text/plain')),
    ]
    for data, context in cases:
        uri = await ours.put(data, context=context)
        assert await theirs.get(uri) == data
        assert await theirs.exists(uri)
        assert dict(await theirs.get_metadata(uri)) == dict(context.metadata)
    for index, (data, context) in enumerate(cases):
        other = data + bytes([index])
        uri = await theirs.put(other, context=context)
        assert await ours.get(uri) == other
        assert dict(await ours.get_metadata(uri)) == dict(context.metadata)
        stat = await ours.stat(uri)
        assert (stat.size, stat.media_type, stat.written_at) == (len(other), context.media_type, None)
        assert b''.join(await collect(ours.get_stream(uri, chunk_size=7000))) == other
    # The rows each library wrote look the same apart from written_at.
    mine = await raw.row(media_uri_for(cases[0][0]))
    twin_uri = await theirs.put(cases[0][0] + b'\x00', context=cases[0][1])
    twin = await raw.row(twin_uri)
    assert (mine['media_type'], mine['metadata']) == (twin['media_type'], twin['metadata'])
    assert twin['written_at'] is None and mine['written_at'] is not None


async def test_harness_table_is_read_without_change_and_first_write_adds_what_it_needs(
    pool: Any, connection: Any, make: Any
) -> None:
    """Reads never run DDL (issue 17, item 7): a harness table keeps its columns and gets no side tables."""
    table = unique_table()
    store, raw = make(table=table)
    theirs = harness_store(pool, table)
    await raw.drop()
    try:
        uri = await theirs.put(b'written by the harness')
        before = await raw.columns()
        assert 'written_at' not in before
        assert await store.get(uri) == b'written by the harness'
        assert await store.exists(uri) and await store.exists_many([uri]) == {uri}
        assert (await store.stat(uri)).written_at is None
        assert [info.written_at async for info in store.iter_blobs()] == [None]
        assert await store.get_metadata(uri) == {}
        assert await store.verify() is not None
        assert await store.delete_unless_touched([uri], written_before=time.time() + 10**6) == frozenset()
        assert await raw.columns() == before
        assert await raw.tables_like(table) == [table]
        # The first write adds written_at and the side tables; the harness still reads and writes.
        new = await store.put(b'written by mediastash')
        assert await raw.columns() == [*before, 'written_at', 'checked_xid']
        assert await raw.tables_like(table) == sorted([table, f'{table}_chunked', f'{table}_chunks'])
        assert await theirs.get(new) == b'written by mediastash'
        again = await theirs.put(b'the harness, after our first write')
        assert await store.get(again) == b'the harness, after our first write'
    finally:
        await raw.drop()


async def test_reads_of_a_missing_table_create_nothing(make: Any) -> None:
    store, raw = make()
    uri = media_uri_for(b'never stored')
    assert not await store.exists(uri)
    with pytest.raises(MediaNotFoundError):
        await store.get(uri)
    with pytest.raises(MediaNotFoundError):
        await store.stat(uri)
    assert [info async for info in store.iter_blobs()] == []
    assert await store.delete_many([uri]) == 0
    assert await raw.tables_like(raw.table) == []


async def test_harness_row_tampered_with_sql_raises_then_heals_on_put(make: Any, pool: Any, connection: Any) -> None:
    store, raw = make()
    theirs = harness_store(pool, store.table)
    data = blob(200_000, seed=4)
    uri = await theirs.put(data)
    await connection.execute(
        f'UPDATE {raw.main} SET bytes = overlay(bytes placing $2 from 1000) WHERE sha256 = $1',
        uri.removeprefix('media+sha256://'),
        b'\x00\x01',
    )
    with pytest.raises(IntegrityError):
        await store.get(uri)
    with pytest.raises(IntegrityError):
        await collect(store.get_stream(uri))
    # A fresh instance heals it too: the server hashes the small stored copy before skipping the write.
    fresh, _ = make(table=store.table)
    assert await fresh.put(data) == uri
    assert await store.get(uri) == data and await theirs.get(uri) == data


async def test_chunked_blob_tampered_with_sql_raises_then_heals_on_put(make: Any, connection: Any) -> None:
    store, raw = make(chunk_size_bytes=1 << 20)
    data = blob(3 * (1 << 20) + 5, seed=5)
    uri = await store.put(data)
    manifest = await raw.manifest(uri)
    await connection.execute(
        f'UPDATE {raw.chunks} SET bytes = $2 WHERE chunk_set = $1 AND seq = 1',
        manifest['chunk_set'],
        b'\x07' * (1 << 20),
    )
    with pytest.raises(IntegrityError):
        await store.get(uri)
    assert await store.put(data) == uri  # this instance saw it fail: the copy is replaced
    assert await store.get(uri) == data
    assert await raw.chunk_rows() == 4  # the old chunk set went with the old manifest


async def _two_copies_with_a_damaged_inline_row(make: Any, pool: Any, connection: Any, size: int) -> Any:
    """A blob stored twice, chunked by a store of 64 KiB chunks and inline by the harness, whose inline row is then
    damaged (same length): returns the chunked store, its tables, the blob and its URI."""
    store, raw = make(chunk_size_bytes=64 * 1024)
    data = blob(size, seed=size % 251)
    uri = await store.put(data)
    assert await harness_store(pool, store.table).put(data) == uri
    await connection.execute(
        f'UPDATE {raw.main} SET bytes = overlay(bytes placing $2 from 1000) WHERE sha256 = $1',
        digest_of(uri),
        b'\x00\x01',
    )
    assert await raw.row(uri) is not None and await raw.manifest(uri) is not None
    return store, raw, data, uri


async def _every_row(raw: Any) -> list[list[tuple[Any, ...]]]:
    """Every row of the store's three tables with its row version (``xmin``, ``ctid``): any write, even an
    ``UPDATE`` that sets a column to its own value, changes it."""
    return [
        [
            tuple(row)
            for row in await raw.connection.fetch(f'SELECT xmin::text, ctid::text, * FROM {name} ORDER BY 3, 4')
        ]
        for name in (raw.main, raw.chunked, raw.chunks)
    ]


@pytest.mark.parametrize('size', [100_000, 9 * MiB])  # the inline row comes with the look / is hashed by the server
@pytest.mark.parametrize('how', ['get', 'get_stream', 'stat', 'verify'])
async def test_a_damaged_inline_row_beside_a_sound_chunked_copy_is_read_around_and_left_in_place(
    make: Any, pool: Any, connection: Any, how: str, size: int
) -> None:
    """Issue 28: either copy serves reads (docs/postgres.md), yet a damaged inline row made ``get`` raise. And a
    read never writes: the fallback deleted the damaged row, so ``verify`` without repair changed the database."""
    store, raw, data, uri = await _two_copies_with_a_damaged_inline_row(make, pool, connection, size)
    before = await _every_row(raw)
    if how == 'get':
        assert await store.get(uri) == data
    elif how == 'get_stream':
        assert b''.join(await collect(store.get_stream(uri, chunk_size=50_000))) == data
    elif how == 'stat':
        assert (await store.stat(uri)).size == size
    else:
        report = await store.verify()
        assert (report.checked, report.ok, report.corrupt, report.damaged_copies, report.healed) == (
            1,
            1,
            [],
            [uri],
            [],
        )
        assert report.bytes == size and not report.clean
    assert await _every_row(raw) == before  # nothing deleted, dated or stamped
    fresh, _ = make(table=store.table)
    assert await fresh.get(uri) == data and b''.join(await collect(fresh.get_stream(uri))) == data
    assert await _every_row(raw) == before


@pytest.mark.parametrize('size', [100_000, 9 * MiB])
async def test_a_put_through_the_instance_that_read_around_a_damaged_inline_row_heals_it(
    make: Any, pool: Any, connection: Any, size: int
) -> None:
    store, raw, data, uri = await _two_copies_with_a_damaged_inline_row(make, pool, connection, size)
    assert await store.get(uri) == data  # served from the chunked copy; the digest is now suspect here
    assert await store.put(data) == uri
    assert await raw.row(uri) is None and await raw.manifest(uri) is not None  # one sound (chunked) copy
    assert (await store.verify()).clean


@pytest.mark.parametrize('damaged', ['inline', 'chunked'])
async def test_a_put_in_a_fresh_process_replaces_a_small_blob_with_one_damaged_copy(
    make: Any, pool: Any, connection: Any, damaged: str
) -> None:
    """Rule 2 of healing (a put checks a stored copy of at most 1 MiB) for each copy: a sound other copy used to
    make the put skip, leaving the damaged one for the harness's reader to meet."""
    store, raw, data, uri = await _two_copies_with_a_damaged_inline_row(make, pool, connection, 100_000)
    if damaged == 'chunked':
        await connection.execute(f'UPDATE {raw.main} SET bytes = $2 WHERE sha256 = $1', digest_of(uri), data)
        manifest = await raw.manifest(uri)
        await connection.execute(
            f'UPDATE {raw.chunks} SET bytes = $2 WHERE chunk_set = $1 AND seq = 0', manifest['chunk_set'], b'\x07' * 9
        )
    fresh, _ = make(table=store.table, chunk_size_bytes=64 * 1024)  # never read the blob: nothing is suspect
    assert await fresh.put(data) == uri
    assert (await fresh.verify()).clean
    assert await fresh.get(uri) == data


@pytest.mark.parametrize('size', [100_000, 9 * MiB])
async def test_verify_repair_removes_a_damaged_inline_row_and_keeps_the_sound_chunked_copy(
    make: Any, pool: Any, connection: Any, size: int
) -> None:
    store, raw, data, uri = await _two_copies_with_a_damaged_inline_row(make, pool, connection, size)
    fresh, _ = make(table=store.table)  # a process that never read the blob
    report = await fresh.verify(repair=True)
    assert (report.ok, report.corrupt, report.repaired, report.damaged_copies, report.healed) == (
        1,
        [],
        [],
        [uri],
        [uri],
    )
    assert await raw.row(uri) is None and await raw.manifest(uri) is not None
    assert await fresh.get(uri) == data
    again = await fresh.verify()
    assert again.clean and again.as_json()['damaged_copies'] == [] and again.ok == 1


async def test_verify_reports_and_repair_removes_a_damaged_chunked_copy_beside_a_sound_inline_row(
    make: Any, pool: Any, connection: Any
) -> None:
    """A read serves the sound inline row and never meets the chunked copy: only verify checks it."""
    store, raw = make(chunk_size_bytes=64 * 1024)
    data = blob(100_000, seed=9)
    uri = await store.put(data)
    assert await harness_store(pool, store.table).put(data) == uri
    manifest = await raw.manifest(uri)
    await connection.execute(
        f'UPDATE {raw.chunks} SET bytes = $2 WHERE chunk_set = $1 AND seq = 1', manifest['chunk_set'], b'\x07' * 10
    )
    before = await _every_row(raw)
    report = await store.verify()
    assert (report.ok, report.corrupt, report.damaged_copies, report.healed) == (1, [], [uri], [])
    assert await _every_row(raw) == before
    repaired = await store.verify(repair=True)
    assert (repaired.damaged_copies, repaired.healed) == ([uri], [uri])
    assert await raw.manifest(uri) is None and await raw.chunk_rows() == 0
    assert bytes((await raw.row(uri))['bytes']) == data
    assert (await store.verify()).clean and await store.get(uri) == data


async def test_cli_verify_without_repair_leaves_a_damaged_copy_and_every_row_as_it_was(
    make: Any, pool: Any, connection: Any, postgres_dsn: str
) -> None:
    store, raw, data, uri = await _two_copies_with_a_damaged_inline_row(make, pool, connection, 100_000)
    url = f'{postgres_dsn}?table={store.table}&chunk_size_bytes=65536'
    before = await _every_row(raw)
    for command in (['verify', url], ['verify', '--json', url], ['stats', url], ['ls', '--long', url]):
        done = run_cli(*command)
        assert await _every_row(raw) == before, command
        if command[0] == 'verify':
            assert done.returncode == 1, done.stderr  # a damaged copy is a problem found
    shown = run_cli('verify', url)
    assert f'damaged copy  {uri}' in shown.stdout and '1 with a damaged copy' in shown.stdout
    assert '--repair removes the damaged one' in shown.stderr
    report = json.loads(run_cli('verify', '--json', url).stdout)
    assert (report['ok'], report['corrupt'], report['damaged_copies'], report['healed']) == (1, [], [uri], [])
    repaired = run_cli('verify', url, '--repair')
    assert repaired.returncode == 1 and f'damaged copy removed  {uri}' in repaired.stdout
    assert await raw.row(uri) is None and await raw.manifest(uri) is not None
    clean = run_cli('verify', url)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert await store.get(uri) == data


async def test_two_damaged_copies_still_raise(make: Any, pool: Any, connection: Any) -> None:
    store, raw, data, uri = await _two_copies_with_a_damaged_inline_row(make, pool, connection, 100_000)
    manifest = await raw.manifest(uri)
    await connection.execute(
        f'UPDATE {raw.chunks} SET bytes = $2 WHERE chunk_set = $1 AND seq = 0', manifest['chunk_set'], b'\x07' * 65536
    )
    with pytest.raises(IntegrityError):
        await store.get(uri)
    with pytest.raises(IntegrityError):
        await collect(store.get_stream(uri))
    assert await store.put(data) == uri  # the instance saw it fail: the put replaces both copies
    assert await store.get(uri) == data


async def test_put_of_a_stored_blob_sends_no_body_and_dates_it(make: Any, postgres_dsn: str) -> None:
    """Counted at a TCP proxy: a fresh store's put of stored bytes sends the server no body, yet dates the row."""
    store, raw = make()
    data = blob(256 * 1024, seed=6)
    uri = await store.put(data)
    await raw.set_written_at(uri, 1000.0)
    async with CountingProxy(postgres_dsn) as proxy:
        proxied = await asyncpg.create_pool(proxy.dsn, min_size=1, max_size=1)
        try:
            fresh = PostgresMediaStore(proxied, table=store.table)
            assert await fresh.exists(uri)  # connect and look at the tables first
            sent = proxy.sent
            assert await fresh.put(data) == uri
            assert proxy.sent - sent < 4096, f'{proxy.sent - sent} bytes sent for a put of stored bytes'
            other = blob(256 * 1024, seed=7)
            sent = proxy.sent
            await fresh.put(other)
            assert proxy.sent - sent > len(other)  # a new blob's body does travel
        finally:
            await proxied.close()
    assert (await raw.row(uri))['written_at'] > time.time() - 60


async def test_a_stamped_row_is_trusted_without_hashing_and_any_other_update_voids_the_stamp(
    make: Any, connection: Any
) -> None:
    """``checked_xid``: a put of stored bytes skips hashing a row whose stamp holds; an UPDATE voids the stamp."""
    store, raw = make()
    data = blob(200_000, seed=8)
    uri = await store.put(data)
    assert await raw.stamped(uri) is True  # the insert stamps what the client hashed
    digest = uri.removeprefix('media+sha256://')
    # An UPDATE that leaves the bytes alone still makes a new row version: the stamp no longer holds, so the next
    # put (a fresh instance) has the server hash the copy once and stamps it again.
    await connection.execute(f'UPDATE {raw.main} SET metadata = metadata WHERE sha256 = $1', digest)
    assert await raw.stamped(uri) is False
    fresh, _ = make(table=store.table)
    assert await fresh.put(data) == uri
    assert await raw.stamped(uri) is True
    # A forged stamp (bytes changed by SQL that also sets checked_xid to its own transaction) is what the stamp
    # cannot see: the fresh put trusts it and sends nothing, a get still refuses the bytes, and that instance heals.
    await connection.execute(
        f'UPDATE {raw.main} SET bytes = overlay(bytes placing $2 from 10), '
        'checked_xid = txid_current() % 4294967296 WHERE sha256 = $1',
        digest,
        b'\xff\xfe',
    )
    forged = bytes((await raw.row(uri))['bytes'])
    other, _ = make(table=store.table)
    assert await other.put(data) == uri
    assert bytes((await raw.row(uri))['bytes']) == forged, 'the stamp was trusted: no hash, no body'
    with pytest.raises(IntegrityError):
        await other.get(uri)
    assert await other.put(data) == uri
    assert await other.get(uri) == data and await raw.stamped(uri) is True


async def test_a_harness_row_is_hashed_once_then_stamped_and_touch_keeps_the_stamp(
    make: Any, pool: Any, connection: Any
) -> None:
    store, raw = make()
    theirs = harness_store(pool, store.table)
    await store.put(b'our first write adds the columns')
    data = blob(150_000, seed=9)
    uri = await theirs.put(data)
    assert await raw.stamped(uri) is False  # the harness knows no stamp
    assert await store.put(data) == uri  # the server hashes it, finds it sound and stamps it
    row = await raw.row(uri)
    assert await raw.stamped(uri) is True and row['written_at'] is not None
    await raw.set_written_at(uri, 1000.0)  # an outside UPDATE: the stamp is void again
    assert await raw.stamped(uri) is False
    assert await store.put(data) == uri
    assert await raw.stamped(uri) is True
    await connection.execute(f'UPDATE {raw.main} SET written_at = 1000 WHERE sha256 = $1', digest_of(uri))
    assert await store.put(data) == uri  # hashed again (the update voided the stamp), dated and stamped
    await connection.execute(
        f'UPDATE {raw.main} SET written_at = 1000, checked_xid = txid_current() % 4294967296 WHERE sha256 = $1',
        digest_of(uri),
    )
    assert await raw.stamped(uri) is True
    assert await store.touch_many([uri]) == {uri}  # touching dates the row and carries the holding stamp over
    row = await raw.row(uri)
    assert row['written_at'] > time.time() - 60 and await raw.stamped(uri) is True


# -- streaming in bounded memory -------------------------------------------------------------

STREAM_PROBE = """
import asyncio, hashlib, json, random, sys
from mediastash.stores.postgres import PostgresMediaStore

def status(field):
    for line in open('/proc/self/status'):
        if line.startswith(field + ':'):
            return int(line.split()[1]) * 1024
    raise LookupError(field)

def reset_peak():  # VmHWM restarts from the current RSS
    with open('/proc/self/clear_refs', 'w') as file:
        file.write('5')

async def main(dsn, table, mib):
    store = PostgresMediaStore(dsn=dsn, table=table)
    await store.put(b'warm up: the pool and the tables exist')
    piece = random.Random(0).randbytes(1 << 20)

    async def chunks():
        for index in range(mib):
            yield index.to_bytes(8, 'big') + piece[8:]

    base = status('VmRSS'); reset_peak()
    uri = await store.put_stream(chunks())
    put_peak = status('VmHWM') - base
    base = status('VmRSS'); reset_peak()
    hasher, size = hashlib.sha256(), 0
    async for chunk in store.get_stream(uri):
        hasher.update(chunk)
        size += len(chunk)
    get_peak = status('VmHWM') - base
    await store.aclose()
    print(json.dumps({'uri': uri, 'digest': hasher.hexdigest(), 'size': size, 'put': put_peak, 'get': get_peak}))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_256_mib_stream_in_bounded_memory(postgres_dsn: str, tables: list[str], connection: Any) -> None:
    """put_stream and get_stream of 256 MiB in a fresh process: each stays within 64 MiB over its baseline
    (about 34 MiB and 20 MiB measured with 4 MiB chunks). Takes a few seconds on a loaded machine."""
    mib = 256
    table = unique_table()
    tables.append(table)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, '-c', STREAM_PROBE, postgres_dsn, table, str(mib)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found['size'] == mib << 20 and found['uri'] == 'media+sha256://' + found['digest']
    assert found['put'] < 64 * MiB, f'put_stream peaked {found["put"] / MiB:.1f} MiB over its baseline'
    assert found['get'] < 64 * MiB, f'get_stream peaked {found["get"] / MiB:.1f} MiB over its baseline'
    raw = RawTables(connection, table)
    manifest = await raw.manifest(found['uri'])
    assert manifest['size_bytes'] == mib << 20 and await raw.chunk_rows() == mib // 4


# -- concurrent writers in several processes -------------------------------------------------------

WRITER = """
import asyncio, random, sys, time
from mediastash.stores.postgres import PostgresMediaStore

async def main(dsn, table, start, streamed):
    small = random.Random(1).randbytes(30_000)
    large = random.Random(2).randbytes(5 * 64 * 1024 + 17)
    store = PostgresMediaStore(dsn=dsn, table=table, chunk_size_bytes=64 * 1024)
    await store.exists('media+sha256://' + '0' * 64)  # connected before the start line
    await asyncio.sleep(max(0.0, start - time.time()))

    async def pieces():
        for offset in range(0, len(large), 10_000):
            yield large[offset : offset + 10_000]

    uris = await asyncio.gather(
        *(store.put(small) for _ in range(4)),
        *(store.put_stream(pieces()) if streamed else store.put(large) for _ in range(4)),
    )
    assert await store.get(uris[0]) == small and await store.get(uris[-1]) == large
    await store.aclose()
    print(uris[0], uris[-1])

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == 'stream'))
"""


async def test_concurrent_writers_in_several_processes_store_one_row(
    postgres_dsn: str, tables: list[str], connection: Any
) -> None:
    table = unique_table()
    tables.append(table)
    start = time.time() + 3.0
    writers = [
        asyncio.create_subprocess_exec(
            sys.executable,
            '-c',
            WRITER,
            postgres_dsn,
            table,
            str(start),
            'stream' if index % 2 else 'put',
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for index in range(4)
    ]
    processes = [await writer for writer in writers]
    outputs = [await process.communicate() for process in processes]
    assert all(process.returncode == 0 for process in processes), [err.decode() for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1, 'every writer got the same two URIs'
    raw = RawTables(connection, table)
    assert await connection.fetchval(f'SELECT count(*) FROM {raw.main}') == 1
    assert await connection.fetchval(f'SELECT count(*) FROM {raw.chunked}') == 1
    assert await raw.chunk_rows() == 6, 'one chunk set: every other writer rolled its chunks back'
    small_uri, large_uri = outputs[0][0].decode().split()
    store = PostgresMediaStore(dsn=postgres_dsn, table=table)
    try:
        assert len(await store.get(small_uri)) == 30_000 and len(await store.get(large_uri)) == 5 * 64 * 1024 + 17
    finally:
        await store.aclose()


# -- pydantic-ai-harness's PostgresStepStore: under our wrapper, and with our store as its media_store= -----


def _history() -> tuple[list[Any], list[bytes]]:
    m = pytest.importorskip('pydantic_ai.messages')
    image = b'\x89PNG\r\n\x1a\n' + blob(600 * 1024, seed=50)
    photo = b'\xff\xd8\xff\xe0' + blob(90 * 1024, seed=51)
    tool_text = 'Ünïcode tool output — ' + 'y' * 120_000
    messages = [
        m.ModelRequest(
            parts=[
                m.UserPromptPart(
                    content=[
                        'Compare these pictures.',
                        m.BinaryContent(data=image, media_type='image/png'),
                        m.BinaryContent(data=photo, media_type='image/jpeg'),
                    ]
                )
            ]
        ),
        m.ModelResponse(parts=[m.ToolCallPart(tool_name='ocr', args={'page': 1}, tool_call_id='c1')]),
        m.ModelRequest(parts=[m.ToolReturnPart(tool_name='ocr', content=tool_text, tool_call_id='c1')]),
        m.ModelResponse(parts=[m.TextPart(content='The first is a chart, the second a cat.')]),
    ]
    return messages, [image, photo, tool_text.encode()]


def _dumped(messages: Any) -> Any:
    m = pytest.importorskip('pydantic_ai.messages')
    return m.ModelMessagesTypeAdapter.dump_python(messages, mode='json')


@pytest.mark.parametrize('wrapped', [True, False], ids=['OffloadingStepStore', 'harness-media_store'])
async def test_harness_postgres_step_store_round_trips_with_our_store(
    wrapped: bool, pool: Any, make: Any, tables: list[str], connection: Any
) -> None:
    steps = pytest.importorskip('pydantic_ai_harness.step_persistence')
    from mediastash.integrations import OffloadingStepStore

    media, raw = make(chunk_size_bytes=256 * 1024)
    steps_table = unique_table('steps')
    tables.append(steps_table)
    if wrapped:
        inner = steps.PostgresStepStore(pool, table=steps_table, media_store=None)
        step_store: Any = OffloadingStepStore(inner, media_store=media)
    else:
        step_store = steps.PostgresStepStore(pool, table=steps_table, media_store=media)
    messages, payloads = _history()
    await step_store.register_run(steps.RunRecord(run_id='run-pg', agent_name='interop'))
    snapshot = steps.ContinuableSnapshot(run_id='run-pg', step_index=3, messages=messages, agent_name='interop')
    await step_store.save_snapshot(snapshot)
    await step_store.save_snapshot(snapshot)  # every step re-saves the history: no new blobs
    restored = await step_store.latest_snapshot(run_id='run-pg')
    assert restored is not None
    assert _dumped(restored.messages) == _dumped(messages)
    expected = {media_uri_for(payload) for payload in payloads}
    assert {uri async for uri in media.iter_uris()} == expected
    assert await raw.count() == 3
    assert await media.get(media_uri_for(payloads[0])) == payloads[0]  # 600 KiB: chunked
    assert await raw.manifest(media_uri_for(payloads[0])) is not None
    # The snapshot rows hold markers, not the payloads.
    stored = await connection.fetch(
        'SELECT table_name FROM information_schema.tables WHERE table_name LIKE $1', f'{steps_table}%'
    )
    names = sorted(str(row[0]) for row in stored)
    assert names, 'the step store made its tables'
    for name in names:
        size = await connection.fetchval(f'SELECT coalesce(max(length(t::text)), 0) FROM "{name}" AS t')
        assert size < 20_000, f'{name} holds a row of {size} characters: a payload was not offloaded'


# -- URLs, the registry and the CLI ----------------------------------------------------------------


def test_from_url_reads_table_schema_and_options() -> None:
    store = PostgresMediaStore.from_url(
        'postgresql://alice@db.example:6543/app?table=blobs&schema=media_schema&chunk_size_bytes=65536&sslmode=disable'
    )
    assert (store.table, store.schema, store.chunk_size_bytes) == ('blobs', 'media_schema', 65536)
    assert store.storage_key == ('postgres', ('db.example', 6543, 'app'), 'media_schema', 'blobs')
    assert store._dsn == 'postgresql://alice@db.example:6543/app?sslmode=disable'
    alias = open_store('postgres://db.example/app')
    assert isinstance(alias, PostgresMediaStore)
    assert alias.storage_key == ('postgres', ('db.example', 5432, 'app'), 'public', 'media')


@pytest.mark.parametrize(
    ('url', 'needle'),
    [
        ('postgresql://bob:hunter2-pw@db/app', 'must not carry a password'),
        ('postgresql://db/app?password=hunter2-pw', 'must not carry the credential parameter'),
        ('postgresql://db/app?sslpassword=hunter2-pw', 'must not carry the credential parameter'),
        ('postgresql://db/app?hunter2-pw=1', 'unknown postgresql:// URL parameter (name not shown)'),
        ('postgresql://db/app?table=Hunter2_pw', 'invalid PostgreSQL table name'),
        ('postgresql://db/app?chunk_size_bytes=hunter2-pw', 'must be a byte count'),
        ('postgresql:///app', 'names no host'),
        ('postgresql://db', 'names no database'),
        ('postgresql://db:hunter2/app', 'port that is not a number'),
    ],
)
def test_bad_urls_are_refused_without_echoing_them(url: str, needle: str) -> None:
    with pytest.raises(InvalidStoreConfiguration) as raised:
        open_store(url)
    assert needle in str(raised.value)
    assert 'hunter2' not in str(raised.value).lower()


async def test_from_url_with_a_callers_pool(pool: Any, make: Any, postgres_dsn: str) -> None:
    store, _ = make()
    uri = await store.put(b'through the URL')
    again = PostgresMediaStore.from_url(f'{postgres_dsn}?table={store.table}', pool=pool)
    assert again._dsn is None and again.storage_key == store.storage_key
    assert await again.get(uri) == b'through the URL'
    await again.aclose()
    assert not pool.is_closing()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m mediastash ARGS`` with a password in the environment that must never be printed."""
    env = {**os.environ, 'PGPASSWORD': CLI_SECRET}
    env.pop('COLUMNS', None)
    done = subprocess.run(
        [sys.executable, '-m', 'mediastash', *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert CLI_SECRET not in done.stdout and CLI_SECRET not in done.stderr
    return done


CLI_SECRET = 'pg-secret-5e1d'


async def test_cli_ls_stats_verify_gc_sync_on_a_postgresql_url(
    make: Any, pool: Any, postgres_dsn: str, tmp_path: Path
) -> None:
    store, raw = make(chunk_size_bytes=64 * 1024)
    url = f'{postgres_dsn}?table={store.table}&chunk_size_bytes=65536'
    kept = await store.put(blob(100_000, seed=60), context=MediaContext(media_type='image/png'))  # chunked
    old = await store.put(b'an orphan, written long ago', context=MediaContext(media_type='text/plain'))
    young = await store.put(b'an orphan, written just now')
    harness = await harness_store(pool, store.table).put(b'the harness wrote me: unknown age')
    await raw.set_written_at(kept, 1000.0)
    await raw.set_written_at(old, 1000.0)
    everything = sorted([kept, old, young, harness])

    listing = run_cli('ls', url)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.split() == everything
    long = json.loads(run_cli('ls', '--long', '--json', url).stdout)
    by_uri = {entry['uri']: entry for entry in long}
    assert by_uri[kept]['size'] == 100_000 and by_uri[kept]['media_type'] == 'image/png'
    stats = run_cli('stats', '--json', url)
    assert stats.returncode == 0, stats.stderr
    report = json.loads(stats.stdout)
    assert report['blobs'] == 4, report

    verified = run_cli('verify', url)
    assert verified.returncode == 0, verified.stderr + verified.stdout
    await raw.overwrite(old, b'AN ORPHAN, WRITTEN LONG AGO')
    broken = run_cli('verify', url)
    assert broken.returncode != 0 and old in broken.stdout + broken.stderr
    await raw.overwrite(old, b'an orphan, written long ago')

    copy = tmp_path / 'copy.db'
    synced = run_cli('sync', url, f'sqlite:///{copy}')
    assert synced.returncode == 0, synced.stderr
    back_table = unique_table()
    back = f'{postgres_dsn}?table={back_table}'
    try:
        assert run_cli('sync', f'sqlite:///{copy}', back).returncode == 0
        assert run_cli('ls', back).stdout.split() == everything
        copied = {entry['uri']: entry for entry in json.loads(run_cli('ls', '--long', '--json', back).stdout)}
        assert copied[kept]['media_type'] == 'image/png' and copied[old]['media_type'] == 'text/plain'
    finally:
        await RawTables(raw.connection, back_table).drop()

    roots = tmp_path / 'roots.txt'
    roots.write_text(kept + '\n')
    swept = tmp_path / 'swept.txt'
    collected = run_cli(
        'gc',
        '--store',
        url,
        '--roots',
        f'uris:{roots}',
        '--grace',
        '1h',
        '--delete',
        '--json',
        '--uris-file',
        str(swept),
    )
    assert collected.returncode == 0, collected.stderr
    assert json.loads(collected.stdout)['deleted'] == 1 and swept.read_text() == f'deleted {old}\n'
    assert run_cli('ls', url).stdout.split() == sorted([kept, young, harness])


async def test_cli_on_a_missing_table_creates_nothing(postgres_dsn: str, connection: Any) -> None:
    table = unique_table()
    done = run_cli('stats', f'{postgres_dsn}?table={table}')
    assert done.returncode == 1 and 'does not exist' in done.stderr, done.stderr
    assert await RawTables(connection, table).tables_like(table) == []


async def test_tune_measures_in_a_namespace_and_drops_its_tables(
    make: Any, connection: Any, postgres_dsn: str, tmp_path: Path
) -> None:
    messages_module = pytest.importorskip('pydantic_ai.messages')
    messages, _ = _history()
    history = tmp_path / 'history.json'
    history.write_bytes(messages_module.ModelMessagesTypeAdapter.dump_json(messages))
    store, raw = make()
    kept = await store.put(b'user data, there before')
    tables = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1 ORDER BY 1"
    before = await connection.fetch(tables, f'{store.table[:20]}%')
    done = run_cli('tune', str(history), '--store', f'{postgres_dsn}?table={store.table}', '--thresholds', '4KiB,1MiB')
    assert done.returncode == 0, done.stderr
    assert await connection.fetch(tables, f'{store.table[:20]}%') == before  # the namespace's tables are dropped
    assert await store.get(kept) == b'user data, there before'
    assert await raw.count() == 1


class WrappedPool:
    """An asyncpg-compatible pool whose address the store cannot read (only ``acquire()``)."""

    def __init__(self, pool: Any) -> None:
        self._inner = pool

    def acquire(self) -> Any:
        return self._inner.acquire()


async def test_a_pool_of_unknown_address_is_named_by_the_pool_object(pool: Any, make: Any) -> None:
    store, _ = make()
    wrapped = WrappedPool(pool)
    first = PostgresMediaStore(wrapped, table=store.table)
    second = PostgresMediaStore(wrapped, table=store.table)
    other = PostgresMediaStore(WrappedPool(pool), table=store.table)
    assert first.storage_key == second.storage_key != other.storage_key
    assert (
        first.storage_key[1][0] == 'pool' and repr(first) == f"PostgresMediaStore(pool, table='public.{store.table}')"
    )
    uri = await first.put(b'through a wrapped pool')
    assert await store.get(uri) == b'through a wrapped pool'


async def test_delete_unless_touched_keeps_a_blob_while_either_of_its_two_copies_is_young(
    make: Any, pool: Any, connection: Any
) -> None:
    """A blob with both an inline row (here the harness's) and a chunked copy is collected only when both are old."""
    store, raw = make(chunk_size_bytes=64 * 1024)
    data = blob(100_000, seed=12)
    uri = await store.put(data)  # chunked: above the chunk size
    assert await harness_store(pool, store.table).put(data) == uri  # and an inline row beside it
    digest = digest_of(uri)

    async def date(inline: float | None, chunked: float | None) -> None:
        await connection.execute(f'UPDATE {raw.main} SET written_at = $2 WHERE sha256 = $1', digest, inline)
        await connection.execute(f'UPDATE {raw.chunked} SET written_at = $2 WHERE sha256 = $1', digest, chunked)

    async def copies() -> tuple[bool, bool]:
        return await raw.row(uri) is not None, await raw.manifest(uri) is not None

    cutoff = time.time() - 600
    for inline, chunked in [(1000.0, time.time()), (time.time(), 1000.0), (None, 1000.0)]:
        await date(inline, chunked)
        assert await store.delete_unless_touched([uri], written_before=cutoff) == frozenset()
        assert await copies() == (True, True), (inline, chunked)
        assert await store.get(uri) == data
    await date(1000.0, 1000.0)
    assert await store.delete_unless_touched([uri], written_before=cutoff) == {uri}
    assert await copies() == (False, False)
    assert await raw.chunk_rows() == 0 and not await store.exists(uri)


async def test_put_of_a_stored_chunked_blob_sends_no_chunk(make: Any, postgres_dsn: str) -> None:
    store, raw = make(chunk_size_bytes=64 * 1024)
    data = blob(600 * 1024, seed=8)
    uri = await store.put(data)
    chunks = await raw.chunk_rows()
    async with CountingProxy(postgres_dsn) as proxy:
        proxied = await asyncpg.create_pool(proxy.dsn, min_size=1, max_size=1)
        try:
            fresh = PostgresMediaStore(proxied, table=store.table, chunk_size_bytes=64 * 1024)
            assert await fresh.exists(uri)
            sent = proxy.sent
            assert await fresh.put(data) == uri
            assert proxy.sent - sent < 4096, f'{proxy.sent - sent} bytes sent for a put of a stored chunked blob'
        finally:
            await proxied.close()
    assert await raw.chunk_rows() == chunks


async def test_large_harness_row_is_streamed_in_slices_and_verified(make: Any, pool: Any, connection: Any) -> None:
    """A harness row larger than the read window (8 MiB) is read a slice at a time, verified at the end."""
    store, raw = make()
    data = blob(9 * MiB + 123, seed=9)
    uri = await harness_store(pool, store.table).put(data)
    pieces = await collect(store.get_stream(uri, chunk_size=3 * MiB))
    assert b''.join(pieces) == data and max(len(piece) for piece in pieces) == 3 * MiB
    assert await store.get(uri) == data
    await connection.execute(
        f'UPDATE {raw.main} SET bytes = overlay(bytes placing $2 from $3) WHERE sha256 = $1',
        uri.removeprefix('media+sha256://'),
        b'\xff',
        9 * MiB,
    )
    with pytest.raises(IntegrityError):
        await collect(store.get_stream(uri))


# -- round trips -------------------------------------------------------------------------------


async def test_a_dsn_owned_pool_skips_the_reset_round_trip(postgres_dsn: str, tables: list[str]) -> None:
    """The store's own pool sends no reset statement when a connection goes back (it leaves no session state)."""
    table = unique_table()
    tables.append(table)
    store = PostgresMediaStore(dsn=postgres_dsn, table=table, max_connections=1)
    statements: list[str] = []
    try:
        uri = await store.put(b'owned pool')
        pool = store._pool
        assert pool is not None
        async with pool.acquire() as connection:
            connection.add_query_logger(lambda record: statements.append(record.query))
        statements.clear()
        assert await store.get(uri) == b'owned pool'
        assert statements and not any('RESET ALL' in query for query in statements)
    finally:
        await store.aclose()


# -- the look before a put, shared by the puts of one event-loop turn ----------------------------


async def test_concurrent_puts_share_one_look_and_heal_only_the_tampered_blob(
    postgres_dsn: str, tables: list[str], connection: Any
) -> None:
    """Eight concurrent puts of new blobs send one look and eight inserts; a fresh store's eight puts of the
    same bytes, one look and nothing else; with one row tampered with, that row alone is replaced; a put alone
    in its turn looks and inserts on one connection. Counted with asyncpg's query logger on every connection."""
    statements: list[str] = []
    used: list[tuple[int, str]] = []

    async def log_queries(new: Any) -> None:
        def log(record: Any, connection: int = id(new)) -> None:
            statements.append(record.query)
            used.append((connection, record.query))

        new.add_query_logger(log)

    table = unique_table()
    tables.append(table)
    pool = await asyncpg.create_pool(postgres_dsn, min_size=0, max_size=8, init=log_queries)
    try:
        store = PostgresMediaStore(pool, table=table)
        await store.put(b'the tables first')
        data = [blob(64 * 1024, seed=seed) for seed in range(8)]

        def counts() -> tuple[int, int]:
            looks = sum(query.startswith('SELECT sha256, octet_length(bytes)') for query in statements)
            inserts = sum(query.startswith('INSERT') for query in statements)
            return looks, inserts

        statements.clear()
        uris = await asyncio.gather(*(store.put(payload) for payload in data))
        assert counts() == (1, 8)
        fresh = PostgresMediaStore(pool, table=table)
        await fresh.exists(uris[0])
        statements.clear()
        assert await asyncio.gather(*(fresh.put(payload) for payload in data)) == uris
        assert counts() == (1, 0)
        raw = RawTables(connection, table)
        await raw.overwrite(uris[5], blob(64 * 1024, seed=99))
        other = PostgresMediaStore(pool, table=table)
        await other.exists(uris[0])
        statements.clear()
        assert await asyncio.gather(*(other.put(payload) for payload in data)) == uris
        assert counts() == (1, 1)  # the tampered row, hashed by the server once, is replaced
        assert await asyncio.gather(*(other.get(uri) for uri in uris)) == data
        statements.clear()
        used.clear()
        await other.put(b'alone in its turn')
        assert counts() == (1, 1)
        assert len({connection for connection, query in used if not query.startswith(('RESET', 'SELECT pg_'))}) == 1
    finally:
        await pool.close()


async def test_puts_on_a_pool_of_one_connection_and_closing_right_after(postgres_dsn: str, tables: list[str]) -> None:
    """A look hands its answer over before its connection goes back to the pool: on a pool of one connection
    concurrent puts still finish, and closing the pool (or a dsn= store) right after the puts waits for it."""
    table = unique_table()
    tables.append(table)
    pool = await asyncpg.create_pool(postgres_dsn, min_size=0, max_size=1)
    data = [blob(10_000, seed=seed) for seed in range(6)]
    store = PostgresMediaStore(pool, table=table)
    uris = await asyncio.wait_for(asyncio.gather(*(store.put(payload) for payload in data)), 60)
    again = PostgresMediaStore(pool, table=table)
    assert await asyncio.wait_for(asyncio.gather(*(again.put(payload) for payload in data)), 60) == uris
    await asyncio.wait_for(pool.close(), 60)
    owned = PostgresMediaStore(dsn=postgres_dsn, table=table, max_connections=1)
    assert await asyncio.gather(*(owned.put(payload) for payload in data)) == uris
    await asyncio.wait_for(owned.aclose(), 60)
    assert not owned._releasing


async def test_coalescer_shares_a_failure_and_survives_a_cancelled_caller() -> None:
    from mediastash.stores.postgres._batch import Coalescer

    batches: list[list[str]] = []
    gate = asyncio.Event()

    async def run(keys: dict[str, int]) -> dict[str, int]:
        batches.append(sorted(keys))
        await gate.wait()
        if 'bad' in keys:
            raise ValueError('the batch failed')
        return {key: value * 10 for key, value in keys.items() if key != 'gone'}

    coalescer: Coalescer[str, int, int] = Coalescer(run, -1)
    first = asyncio.ensure_future(coalescer.load('a', 1))
    cancelled = asyncio.ensure_future(coalescer.load('a', 1))
    other = asyncio.ensure_future(coalescer.load('gone', 2))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    gate.set()
    assert await first == 10  # the other caller of the same key still gets its answer
    assert await other == -1  # a key the batch leaves out gets the missing value
    assert batches == [['a', 'gone']]
    failing = [asyncio.ensure_future(coalescer.load(key, 0)) for key in ('bad', 'b')]
    for task in failing:
        with pytest.raises(ValueError, match='the batch failed'):
            await task
    assert batches[-1] == ['b', 'bad']


# -- tenant namespaces ------------------------------------------------------------------------


async def test_namespaces_live_in_tables_of_their_own_beside_the_harness_table(
    make: Any, pool: Any, connection: Any
) -> None:
    """A namespace's blobs are in three tables of its own; the store's table (the harness's) never holds them,
    and no other namespace reads, lists or deletes them."""
    store, raw = make(chunk_size_bytes=64 * 1024)
    theirs = harness_store(pool, store.table)
    acme, other = store.namespace('Acme.corp-1'), store.namespace('acme.corp-1')  # names are case-sensitive
    assert acme.table == namespace_table(store.table, 'Acme.corp-1') and acme.table.startswith(f'{store.table}_ns_')
    assert other.table != acme.table and acme.schema == store.schema
    small, large = b'a tenant blob', blob(100_000, seed=71)
    small_uri, large_uri = await acme.put(small), await acme.put(large)
    harness_uri = await theirs.put(b'written into the store table by the harness')

    tenant = RawTables(connection, acme.table)
    assert await tenant.count() == 2 and await tenant.row(small_uri) is not None and await tenant.manifest(large_uri)
    assert await tenant.chunk_rows() == 2  # 100,000 bytes in 64 KiB chunks
    assert await raw.count() == 1 and not await raw.exists(f'{raw.table}_chunked')  # the harness's row only
    assert [uri async for uri in store.iter_uris()] == [harness_uri]
    assert sorted([uri async for uri in acme.iter_uris()]) == sorted([small_uri, large_uri])
    assert not await theirs.exists(small_uri) and not await acme.exists(harness_uri)
    for view in (other, store):
        assert await view.exists_many([small_uri, large_uri]) == frozenset()
        with pytest.raises(MediaNotFoundError):
            await view.get(large_uri)
        with pytest.raises(MediaNotFoundError):
            await view.stat(small_uri)
        assert await view.delete_many([small_uri, large_uri]) == 0
    assert [uri async for uri in other.iter_uris()] == []
    await other.require_storage()  # nothing put in it: an empty namespace of a store that exists

    report = await acme.erase()
    assert (report.count, report.bytes) == (2, len(small) + len(large))
    assert await tenant.count() == 0 and await tenant.chunk_rows() == 0
    assert (await acme.erase()).count == 0
    assert await theirs.get(harness_uri) == b'written into the store table by the harness'


async def test_namespace_tables_of_the_longest_names_are_identifiers(
    make: Any, connection: Any, tables: list[str]
) -> None:
    """A 63-byte table and a 64-character namespace still give tables PostgreSQL does not cut; a namespace of a
    store whose table does not exist is not found either."""
    store, _ = make(table='t' * 47 + unique_table()[-16:], chunk_size_bytes=4096)
    view = store.namespace('N' * 64)
    tables.append(view.table)
    assert len(view.table) + len('_chunked') <= 63
    with pytest.raises(StoreNotFoundError):
        await view.require_storage()
    data = blob(10_000, seed=72)
    uri = await view.put(data)
    tenant = RawTables(connection, view.table)
    assert await view.get(uri) == data and await tenant.manifest(uri) is not None
    assert await tenant.chunk_rows() == 3
    assert not await store.exists(uri)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_random_interleavings_leave_each_namespace_exactly_its_blobs(
    postgres_dsn: str, steps: list[tuple[str, int, int]]
) -> None:
    async def run() -> None:
        table = unique_table()
        connection = await raw_connection(postgres_dsn)
        store = PostgresMediaStore(dsn=postgres_dsn, table=table, chunk_size_bytes=32)
        try:
            await check_interleaving(store, steps)
        finally:
            await store.aclose()
            await RawTables(connection, table).drop()
            await connection.close()

    asyncio.run(run())


async def test_cli_lists_and_erases_a_namespace_of_a_postgresql_url(make: Any, postgres_dsn: str) -> None:
    """``?namespace=`` and ``--namespace`` reach the namespace's tables through the CLI; ``erase`` counts, then
    deletes, then finds nothing; the store's own rows stay."""
    store, _ = make()
    url = f'{postgres_dsn}?table={store.table}'
    async with open_store(f'{url}&namespace=acme') as acme:
        assert acme.namespace_name == 'acme' and acme.table == store.namespace('acme').table
        tenant = sorted([await acme.put(b'tenant one'), await acme.put(blob(5000, seed=73))])
    own = await store.put(b'the store itself')
    assert run_cli('ls', url).stdout.split() == [own]
    assert run_cli('ls', '--namespace', 'acme', url).stdout.split() == tenant
    assert run_cli('ls', f'{url}&namespace=other').stdout.split() == []
    dry = json.loads(run_cli('erase', '--store', url, '--namespace', 'acme', '--json').stdout)
    assert (dry['dry_run'], dry['blobs'], dry['bytes']) == (True, 2, 5010)
    assert run_cli('ls', '--namespace', 'acme', url).stdout.split() == tenant
    done = json.loads(run_cli('erase', '--store', url, '--namespace', 'acme', '--yes', '--json').stdout)
    assert (done['dry_run'], done['blobs'], done['bytes']) == (False, 2, 5010)
    again = json.loads(run_cli('erase', '--store', url, '--namespace', 'acme', '--yes', '--json').stdout)
    assert (again['blobs'], again['bytes']) == (0, 0)
    assert run_cli('ls', '--namespace', 'acme', url).stdout.split() == []
    assert run_cli('ls', url).stdout.split() == [own]
