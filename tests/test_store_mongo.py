"""``MongoMediaStore`` against a real MongoDB-wire server: the conformance suite plus chunking,
concurrency, crash and corruption tests, and pydantic-ai-harness's ``MongoStepStore`` on top.

The server comes from ``MEDIASTASH_MONGO_URI`` or is started by ``scripts/mongo-server``
(see ``tests/mongo_support.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from pymongo import AsyncMongoClient, monitoring
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

import mediastash.stores.mongo._store as mongo_module
from mediastash import IntegrityError, MediaContext, MediaNotFoundError, media_uri_for
from mediastash.errors import (
    CorruptMetadataError,
    InvalidStoreConfiguration,
    StoreClosedError,
    StoreOperationError,
    StoreUnavailableError,
)
from mediastash.stores.mongo import MAX_CHUNK_SIZE_BYTES, MongoMediaStore
from mediastash.stores.mongo._layout import new_chunk_set
from mediastash.testing.store import StoreTests, blob, chunked, collect
from mediastash.urls import PublicUrlResolver
from tests.mongo_support import (
    TEST_DATABASE,
    Document,
    RawCollections,
    mongo_uri,
    raw_client,
    unique_name,
)
from tests.namespace_interleaving import check_interleaving, operations
from tests.s3_servers import free_port
from tests.storage_snapshots import mongo_state

__all__ = ['mongo_uri']  # the session fixture, imported so pytest finds it here

MiB = 1 << 20


class TestMongoStore(StoreTests):
    """The suite with the default chunk size: every conformance blob but one is stored inline."""

    has_namespaces: ClassVar[bool | None] = True

    chunk_size: int | None = None

    @pytest.fixture(autouse=True)
    async def _server(self, mongo_uri: str) -> AsyncIterator[None]:
        self.uri = mongo_uri
        self.client = raw_client(mongo_uri)
        self.raw: dict[int, RawCollections] = {}
        yield
        for raw in self.raw.values():
            await raw.drop()
        await self.client.close()

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> MongoMediaStore:
        collection = unique_name()
        options: dict[str, Any] = {} if self.chunk_size is None else {'chunk_size_bytes': self.chunk_size}
        store = MongoMediaStore(
            db_url=self.uri, database=TEST_DATABASE, collection=collection, public_url=public_url, **options
        )
        self.raw[id(store)] = RawCollections(self.client, TEST_DATABASE, collection)
        return store

    async def reopen_store(self, store: Any) -> MongoMediaStore:
        """A second store with its own client on the same collection."""
        return MongoMediaStore(db_url=self.uri, database=store.database, collection=store.collection)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return await self.raw[id(store)].read(uri)

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        await self.raw[id(store)].overwrite(uri, data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        await self.raw[id(store)].delete(uri)

    async def raw_count(self, store: Any) -> int | None:
        return await self.raw[id(store)].count()

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        await set_written_at(self.raw[id(store)], uri, when)

    async def raw_storage_snapshot(self, store: Any) -> object | None:
        return await mongo_state(self.client[store.database], store.collection)


class TestMongoStoreSmallChunks(TestMongoStore):
    """The same suite with 4 KiB chunks, so nearly every blob is split into chunk documents."""

    chunk_size = 4096


async def set_written_at(raw: RawCollections, uri: str, when: float | None) -> None:
    """Date a manifest behind the store's back; ``None`` removes both time fields (unknown age)."""
    digest = uri.removeprefix('media+sha256://')
    if when is None:
        await raw.manifests.update_one({'_id': digest}, {'$unset': {'written_at': '', 'created_at': ''}})
    else:
        await raw.manifests.update_one({'_id': digest}, {'$set': {'written_at': datetime.fromtimestamp(when, UTC)}})


# -- fixtures for the store-specific tests ----------------------------------------------


@pytest.fixture
async def client(mongo_uri: str) -> AsyncIterator[AsyncMongoClient[Document]]:
    client = raw_client(mongo_uri)
    yield client
    await client.close()


@pytest.fixture
async def names(client: AsyncMongoClient[Document]) -> AsyncIterator[list[str]]:
    """Collection names handed to a test; dropped (with their chunk collections) afterwards."""
    created: list[str] = []
    yield created
    for name in created:
        await RawCollections(client, TEST_DATABASE, name).drop()


@pytest.fixture
def make(client: AsyncMongoClient[Document], names: list[str]) -> Any:
    """``make(chunk_size_bytes=..., collection=None)`` -> (store on the shared client, raw access)."""

    def factory(*, collection: str | None = None, **options: Any) -> tuple[MongoMediaStore, RawCollections]:
        if collection is None:
            collection = unique_name()
            names.append(collection)
        store = MongoMediaStore(client=client, database=TEST_DATABASE, collection=collection, **options)
        return store, RawCollections(client, TEST_DATABASE, collection)

    return factory


# -- configuration ----------------------------------------------------------------------

BAD_COLLECTIONS: list[object] = ['', '1media', 'me-dia', 'me.dia', 'a' * 101, 'media$', 'mé', 'a b', None, 3]


@pytest.mark.parametrize('collection', BAD_COLLECTIONS, ids=repr)
def test_bad_collection_names_are_refused(collection: object) -> None:
    with pytest.raises(InvalidStoreConfiguration) as caught:
        MongoMediaStore(db_url='mongodb://127.0.0.1:1', database='db', collection=collection)  # type: ignore[arg-type]
    assert 'collection name (not repeated here)' in str(caught.value)  # a value may be a pasted secret


@pytest.mark.parametrize('database', [None, '', 'a.b', 'a/b', 'a b', 'a$b', 'x' * 64, 7], ids=repr)
def test_bad_database_names_are_refused(database: object) -> None:
    with pytest.raises(InvalidStoreConfiguration):
        MongoMediaStore(db_url='mongodb://127.0.0.1:1', database=database)  # type: ignore[arg-type]


@pytest.mark.parametrize('size', [0, -1, MAX_CHUNK_SIZE_BYTES + 1, 16 * MiB, 1.5, True, '1024'], ids=repr)
def test_bad_chunk_sizes_are_refused(size: object) -> None:
    with pytest.raises(InvalidStoreConfiguration, match='chunk_size_bytes'):
        MongoMediaStore(db_url='mongodb://127.0.0.1:1', database='db', chunk_size_bytes=size)  # type: ignore[arg-type]


def test_exactly_one_connection_source(client: AsyncMongoClient[Document]) -> None:
    with pytest.raises(InvalidStoreConfiguration, match='exactly one'):
        MongoMediaStore(database='db')
    with pytest.raises(InvalidStoreConfiguration, match='exactly one') as caught:
        MongoMediaStore(client=client, db_url='mongodb://user:secret@127.0.0.1:1', database='db')
    assert 'secret' not in str(caught.value)


@pytest.mark.parametrize(
    'url', ['', 'http://user:secret@host', 'mongodb://user:secret@', 'mongodb://user:secret@host:notaport']
)
def test_bad_db_url_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(InvalidStoreConfiguration) as caught:
        MongoMediaStore(db_url=url, database='db')
    assert 'secret' not in str(caught.value)
    assert caught.value.__cause__ is None


async def test_largest_chunk_size_fits_a_document(make: Any) -> None:
    store, raw = make(chunk_size_bytes=MAX_CHUNK_SIZE_BYTES)
    data = os.urandom(MAX_CHUNK_SIZE_BYTES + 10)
    uri = await store.put(data, context=MediaContext(metadata={'k': 'v' * 1000}))
    assert await store.get(uri) == data
    manifest = await raw.manifest(uri)
    assert manifest is not None
    assert manifest['chunk_count'] == 2


async def test_closed_store_refuses_calls_and_leaves_callers_client_open(
    make: Any, client: AsyncMongoClient[Document]
) -> None:
    store, _raw = make()
    uri = await store.put(b'before close')
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreClosedError):
        await store.get(uri)
    with pytest.raises(StoreClosedError):
        await store.put(b'after close')
    assert await client[TEST_DATABASE].command('ping')


async def test_store_owned_client_is_closed(mongo_uri: str, names: list[str]) -> None:
    names.append(collection := unique_name())
    async with MongoMediaStore(db_url=mongo_uri, database=TEST_DATABASE, collection=collection) as store:
        uri = await store.put(b'owned client')
        assert await store.get(uri) == b'owned client'
    with pytest.raises(StoreClosedError):
        await store.exists(uri)


# -- storage identity (the known-blob caches' key) --------------------------------------


def test_storage_key_names_the_seed_hosts_without_credentials() -> None:
    url = 'mongodb://app:pa55-w0rd@DB2.example:27018,db1.example/?replicaSet=rs&authSource=admin'
    store = MongoMediaStore(db_url=url, database='prod', collection='media')
    assert store.storage_key == ('mongo', ('db1.example:27017', 'db2.example:27018'), 'prod', 'media')
    for text in (repr(store), str(store), repr(store.storage_key)):
        assert 'pa55-w0rd' not in text
        assert 'app:' not in text
    srv = MongoMediaStore(db_url='mongodb+srv://app:pa55-w0rd@cluster0.example.net/', database='prod')
    assert srv.storage_key == ('mongo', ('cluster0.example.net',), 'prod', 'media')


async def test_instances_on_one_collection_share_their_storage_key(mongo_uri: str, make: Any, names: list[str]) -> None:
    shared, _raw = make()
    own_client = MongoMediaStore(db_url=mongo_uri, database=TEST_DATABASE, collection=shared.collection)
    other_collection, _ = make()
    other_database = MongoMediaStore(db_url=mongo_uri, database=f'{TEST_DATABASE}_other', collection=shared.collection)
    try:
        assert own_client.storage_key == shared.storage_key
        assert other_collection.storage_key != shared.storage_key
        assert other_database.storage_key != shared.storage_key
        uri = await shared.put(b'shared')
        before = (shared.deletion_generation, other_collection.deletion_generation)
        assert await own_client.delete(uri) is True
        assert shared.deletion_generation > before[0]
        assert other_collection.deletion_generation == before[1]
        generation = shared.deletion_generation
        assert await own_client.delete_many([uri]) == 0
        assert shared.deletion_generation > generation
    finally:
        await own_client.aclose()
        await other_database.aclose()


async def test_exists_many_pages_its_queries(make: Any) -> None:
    store, _raw = make()
    stored = [await store.put(f'blob {i}'.encode()) for i in range(3)]
    absent = [media_uri_for(f'absent {i}'.encode()) for i in range(2500)]
    assert await store.exists_many([*absent[:1200], stored[0], *absent[1200:], *stored[1:]]) == frozenset(stored)
    assert await store.exists_many(absent, max_concurrency=1) == frozenset()


def test_importing_mediastash_does_not_import_the_driver() -> None:
    code = (
        'import sys, mediastash, mediastash.stores\n'
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'pymongo', 'bson'})\n"
        'assert not loaded, loaded\n'
        'from mediastash.stores import MongoMediaStore\n'
        'import mediastash.stores.mongo as package\n'
        'assert MongoMediaStore is package.MongoMediaStore\n'
        "assert 'pymongo' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


# -- layout and chunking ----------------------------------------------------------------


async def test_small_blob_is_one_inline_document(make: Any) -> None:
    store, raw = make(chunk_size_bytes=1000)
    uri = await store.put(b'x' * 1000, context=MediaContext(media_type='text/plain', metadata={'k': 'v'}))
    manifest = await raw.manifest(uri)
    assert manifest is not None
    assert manifest['data'] == b'x' * 1000
    assert (manifest['size'], manifest['media_type'], manifest['metadata']) == (1000, 'text/plain', [['k', 'v']])
    assert await raw.chunks.count_documents({}) == 0
    assert await store.media_type_of(uri) == 'text/plain'


@pytest.mark.parametrize('via', ['put', 'put_stream'])
async def test_exactly_one_chunk_and_one_byte_more(make: Any, via: str) -> None:
    size = 1000
    store, raw = make(chunk_size_bytes=size)
    one_chunk, one_more = blob(size, seed=1), blob(size + 1, seed=2)
    for data in (one_chunk, one_more):
        uri = await store.put(data) if via == 'put' else await store.put_stream(chunked(data, 333))
        assert uri == media_uri_for(data)
        assert await store.get(uri) == data
        assert b''.join(await collect(store.get_stream(uri, chunk_size=250))) == data
    assert 'data' in (await raw.manifest(media_uri_for(one_chunk)) or {})
    manifest = await raw.manifest(media_uri_for(one_more))
    assert manifest is not None
    assert (manifest['size'], manifest['chunk_size'], manifest['chunk_count']) == (size + 1, size, 2)
    assert 'data' not in manifest
    assert [len(doc['data']) for doc in await raw.chunk_docs(manifest['chunk_set'])] == [size, 1]
    assert [doc['n'] for doc in await raw.chunk_docs(manifest['chunk_set'])] == [0, 1]


async def test_64_mib_blob_in_1_mib_chunks(make: Any) -> None:
    store, raw = make(chunk_size_bytes=MiB)
    data = os.urandom(64 * MiB)
    uri = await store.put(data, context=MediaContext(media_type='video/mp4'))
    assert uri == media_uri_for(data)
    manifest = await raw.manifest(uri)
    assert manifest is not None
    assert (manifest['size'], manifest['chunk_count']) == (64 * MiB, 64)
    assert await raw.chunks.count_documents({'set': manifest['chunk_set']}) == 64
    assert await store.get(uri) == data
    digest = hashlib.sha256()
    async for piece in store.get_stream(uri, chunk_size=3 * MiB):
        assert 0 < len(piece) <= 3 * MiB
        digest.update(piece)
    assert digest.hexdigest() == uri.removeprefix('media+sha256://')


class ChunkCommands(monitoring.CommandListener):
    """The ``find`` and ``aggregate`` commands a client sends to one collection (pymongo's command monitoring)."""

    def __init__(self, collection: str) -> None:
        self.collection = collection
        self.commands: list[Document] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in ('find', 'aggregate') and event.command.get(event.command_name) == self.collection:
            self.commands.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def winning_plans(explained: Any) -> list[Any]:
    """Every ``winningPlan`` in an explain answer (an aggregate nests its query's under its stages)."""
    if isinstance(explained, dict):
        found = [explained['winningPlan']] if 'winningPlan' in explained else []
        return found + [plan for value in explained.values() for plan in winning_plans(value)]
    if isinstance(explained, list):
        return [plan for value in explained for plan in winning_plans(value)]
    return []


async def test_chunk_reads_are_answered_from_an_index(mongo_uri: str, names: list[str]) -> None:
    """Regression (issue 32): reads asked for chunks by ``set``, which only the partial ``(set, n)`` index covers;
    the test server's planner never uses a partial index, so every get scanned the whole chunk collection and
    slowed down with each blob stored. Each chunk query a get, a stream and a repeated put send must be planned
    on an index."""
    collection = unique_name()
    names.append(collection)
    listener = ChunkCommands(f'{collection}_chunks')
    client = AsyncMongoClient[Document](mongo_uri, event_listeners=[listener])
    try:
        store = MongoMediaStore(client=client, database=TEST_DATABASE, collection=collection, chunk_size_bytes=1000)
        blobs = [blob(4500, seed=seed) for seed in range(70, 74)]
        uris = [await store.put(data) for data in blobs]
        listener.commands.clear()
        assert await store.get(uris[1]) == blobs[1]
        assert b''.join(await collect(store.get_stream(uris[2], chunk_size=700))) == blobs[2]
        assert await store.put(blobs[3]) == uris[3]  # stored: the stored size is summed over its chunks
        assert {command['find' if 'find' in command else 'aggregate'] for command in listener.commands} == {
            f'{collection}_chunks'
        }
        assert len(listener.commands) >= 3
        for command in listener.commands:
            kind = 'find' if 'find' in command else 'aggregate'
            keep = ('find', 'filter', 'projection', 'sort') if kind == 'find' else ('aggregate', 'pipeline')
            query = {key: command[key] for key in keep if key in command}
            if kind == 'aggregate':
                query['cursor'] = {}
            explained = await client[TEST_DATABASE].command('explain', query)
            plans = winning_plans(explained)
            assert plans, explained
            assert 'COLLSCAN' not in repr(plans), (query, plans)
    finally:
        await client.close()


class AllCommands(monitoring.CommandListener):
    """Every command a client sends, by name and target collection (pymongo's command monitoring)."""

    def __init__(self) -> None:
        self.commands: list[Document] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name not in ('hello', 'isMaster', 'endSessions', 'ping'):
            self.commands.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def test_a_repeated_put_of_a_small_stored_blob_is_one_command(mongo_uri: str, names: list[str]) -> None:
    """Issue 32: a re-put of a blob the base verifies on put (at most 1 MiB) sent the manifest lookup, then a
    second read of the same manifest for the bytes to hash. The lookup now reads them: one command, and a
    stored copy that fails the check is still replaced (issue 28 item 4)."""
    collection = unique_name()
    names.append(collection)
    listener = AllCommands()
    client = AsyncMongoClient[Document](mongo_uri, event_listeners=[listener])
    try:
        store = MongoMediaStore(client=client, database=TEST_DATABASE, collection=collection)
        small, large = blob(3000, seed=80), blob((1 << 20) + 10, seed=81)  # inline, both
        uris = [await store.put(data) for data in (small, large)]
        listener.commands.clear()
        assert await store.put(small) == uris[0]
        assert [(command.get('find'), 'data' in command.get('projection', {})) for command in listener.commands] == [
            (collection, True)
        ]
        listener.commands.clear()
        assert await store.put(large) == uris[1]  # above 1 MiB: measured on the server, not read
        assert [(command.get('find'), 'data' in command.get('projection', {})) for command in listener.commands] == [
            (collection, False)
        ]
        tampered = bytes([small[0] ^ 1]) + small[1:]
        await client[TEST_DATABASE][collection].update_one({'_id': uris[0][-64:]}, {'$set': {'data': tampered}})
        assert await store.put(small) == uris[0]
        assert await store.get(uris[0]) == small  # the unsound copy was replaced, not skipped
    finally:
        await client.close()


async def test_chunk_deletes_are_answered_from_an_index(mongo_uri: str, names: list[str]) -> None:
    """Issue 32: deletes removed a blob's chunks by ``set``, which only the partial ``(set, n)`` index covers, so
    the test server scanned the whole chunk collection for every delete. Each chunk delete that ``delete``,
    ``delete_many``, ``delete_unless_touched`` and the replacement of an unsound copy send must be planned on an
    index, and the chunks must be gone."""
    collection = unique_name()
    names.append(collection)
    listener = AllCommands()
    client = AsyncMongoClient[Document](mongo_uri, event_listeners=[listener])
    chunks = f'{collection}_chunks'
    try:
        store = MongoMediaStore(client=client, database=TEST_DATABASE, collection=collection, chunk_size_bytes=1000)
        blobs = [blob(4500, seed=seed) for seed in range(90, 95)]
        uris = [await store.put(data) for data in blobs]
        inline = await store.put(blob(700, seed=95))
        raw = client[TEST_DATABASE][chunks]
        assert await raw.count_documents({}) == 25
        listener.commands.clear()
        assert await store.delete(inline)  # no chunks: none looked for
        assert [command for command in listener.commands if command.get('delete') == chunks] == []
        assert await store.delete(uris[0])
        assert await store.delete_many(uris[1:3]) == 2
        assert await store.delete_unless_touched([uris[3]], written_before=time.time() + 3600) == {uris[3]}
        manifest = await client[TEST_DATABASE][collection].find_one({'_id': uris[4][-64:]})
        assert manifest is not None
        await raw.update_one({'set': manifest['chunk_set'], 'n': 0}, {'$set': {'data': b'x' * 1000}})
        with pytest.raises(IntegrityError):
            await store.get(uris[4])
        assert await store.put(blobs[4]) == uris[4]  # the unsound copy is replaced: its old chunks go
        assert await store.get(uris[4]) == blobs[4]
        assert await raw.count_documents({}) == 5  # only the replacement's chunks are left
        deletes = [
            statement['q']
            for command in listener.commands
            if command.get('delete') == chunks
            for statement in command['deletes']
        ]
        assert len(deletes) >= 4
        for query in deletes:
            explained = await client[TEST_DATABASE].command('explain', {'find': chunks, 'filter': query})
            plans = winning_plans(explained)
            assert plans, explained
            assert 'COLLSCAN' not in repr(plans), (query, plans)
    finally:
        await client.close()


async def test_streamed_64_mib_blob_in_1_mib_chunks(make: Any) -> None:
    store, raw = make(chunk_size_bytes=MiB)
    data = os.urandom(64 * MiB + 5)
    uri = await store.put_stream(chunked(data, 700_000))
    manifest = await raw.manifest(uri)
    assert manifest is not None
    assert manifest['chunk_count'] == 65
    assert await store.get(uri) == data


async def test_metadata_keys_with_dots_and_dollars(make: Any) -> None:
    store, _raw = make(chunk_size_bytes=100)
    metadata = {'a.b': '1', '$set': '2', '$': '', '.': '.', 'x.$y': 'z'}
    small = await store.put(b'inline', context=MediaContext(metadata=metadata))
    big = await store.put(blob(1000), context=MediaContext(metadata=metadata))
    assert dict(await store.get_metadata(small)) == metadata
    assert dict(await store.get_metadata(big)) == metadata


async def test_corrupt_metadata_is_reported(make: Any) -> None:
    store, raw = make()
    uri = await store.put(b'meta', context=MediaContext(metadata={'k': 'v'}))
    deep = '[' * 100_000 + ']' * 100_000
    for bad in ('not json', '["k"]', '{"k": 1}', [['k']], [['k', 1]], {'k': 'v'}, 7, deep):
        await raw.manifests.update_one({'_id': uri[-64:]}, {'$set': {'metadata': bad}})
        with pytest.raises(CorruptMetadataError, match=re.escape(uri)):
            await store.get_metadata(uri)


# -- concurrency ------------------------------------------------------------------------


async def test_thirty_concurrent_puts_store_one_manifest_and_one_chunk_set(make: Any) -> None:
    store, raw = make(chunk_size_bytes=64 * 1024)
    data = blob(1 * MiB + 123, seed=30)
    uris = await asyncio.gather(*(store.put(data) for _ in range(30)))
    assert set(uris) == {media_uri_for(data)}
    assert await raw.count() == 1
    manifest = await raw.manifest(uris[0])
    assert manifest is not None
    assert await raw.chunk_sets() == {manifest['chunk_set']}
    assert await raw.chunks.count_documents({}) == manifest['chunk_count'] == 17
    assert await store.get(uris[0]) == data


async def test_concurrent_writers_with_different_chunk_sizes(make: Any) -> None:
    small, raw = make(chunk_size_bytes=1000)
    large, _ = make(chunk_size_bytes=3000, collection=raw.manifests.name)
    data = blob(20_000, seed=31)
    uris = await asyncio.gather(*(store.put(data) for _ in range(5) for store in (small, large)))
    assert set(uris) == {media_uri_for(data)}
    manifest = await raw.manifest(uris[0])
    assert manifest is not None
    assert await raw.chunk_sets() == {manifest['chunk_set']}
    assert await small.get(uris[0]) == data
    assert await large.get(uris[0]) == data


async def test_streamed_copy_of_a_stored_blob_leaves_no_chunks_behind(make: Any) -> None:
    store, raw = make(chunk_size_bytes=1000)
    data = blob(10_000, seed=32)
    uri = await store.put(data)
    sets = await raw.chunk_sets()
    assert await store.put_stream(chunked(data, 4096)) == uri
    assert await raw.chunk_sets() == sets
    assert await store.get(uri) == data


# -- crashes and corruption -------------------------------------------------------------


async def _cancel_before_manifest(store: MongoMediaStore, data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start a put, wait until its chunks are written, cancel it before the manifest lands."""
    chunks_written = asyncio.Event()
    never = asyncio.Event()

    async def stalled_manifest(self: MongoMediaStore, manifest: Document) -> bool:
        chunks_written.set()
        await never.wait()
        raise AssertionError('unreachable')

    monkeypatch.setattr(MongoMediaStore, '_insert_manifest', stalled_manifest)
    task = asyncio.create_task(store.put(data))
    await asyncio.wait_for(chunks_written.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()


async def test_put_cancelled_between_chunks_and_manifest(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store, raw = make(chunk_size_bytes=1000)
    data = blob(5000, seed=40)
    await _cancel_before_manifest(store, data, monkeypatch)
    uri = media_uri_for(data)
    assert not await store.exists(uri)
    with pytest.raises(MediaNotFoundError):
        await store.get(uri)
    assert await raw.chunks.count_documents({}) == 0  # the cancelled put removed its chunk set
    assert await store.put(data) == uri
    assert await store.get(uri) == data


async def test_put_killed_between_chunks_and_manifest(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that dies cannot clean up: its chunks stay, unreachable, and never shadow a later put."""

    async def no_cleanup(self: Any) -> None:
        return None

    store, raw = make(chunk_size_bytes=1000)
    data = blob(5000, seed=41)
    with monkeypatch.context() as patch:
        patch.setattr(mongo_module._OwnedChunkSet, 'discard', no_cleanup)
        patch.setattr(mongo_module, 'new_chunk_set', lambda: new_chunk_set(time.time() - 7200))  # two hours ago
        await _cancel_before_manifest(store, data, monkeypatch)
    uri = media_uri_for(data)
    orphans = await raw.chunk_sets()
    assert len(orphans) == 1
    assert not await store.exists(uri)
    with pytest.raises(MediaNotFoundError):
        await store.get(uri)
    assert [u async for u in store.iter_uris()] == []
    # Corrupt the orphan: a later put must not pick it up.
    await raw.chunks.update_many({}, {'$set': {'data': b'garbage'}})
    assert await store.put(data) == uri
    assert await store.get(uri) == data
    manifest = await raw.manifest(uri)
    assert manifest is not None
    assert manifest['chunk_set'] not in orphans
    # A sweep removes the orphan once it is older than the grace period, and nothing else.
    assert await store.sweep_orphan_chunks() == 0  # younger than the default grace of one day
    assert await store.sweep_orphan_chunks(older_than_seconds=3600) == 1
    assert await raw.chunk_sets() == {manifest['chunk_set']}
    assert await store.get(uri) == data


async def test_deleted_manifest_leaves_no_readable_blob(make: Any) -> None:
    store, raw = make(chunk_size_bytes=1000)
    data = blob(5000, seed=42)
    uri = await store.put(data)
    await raw.manifests.delete_one({'_id': uri[-64:]})
    assert not await store.exists(uri)
    with pytest.raises(MediaNotFoundError):
        await store.get(uri)
    with pytest.raises(MediaNotFoundError):
        await collect(store.get_stream(uri))
    with pytest.raises(MediaNotFoundError):
        await store.get_metadata(uri)
    assert await store.put(data) == uri
    assert await store.get(uri) == data


@pytest.mark.parametrize('damage', ['flipped byte', 'missing chunk', 'extra chunk', 'short chunk', 'not bytes'])
async def test_damaged_chunks_are_detected(make: Any, damage: str) -> None:
    store, raw = make(chunk_size_bytes=1000)
    data = blob(5000, seed=43)
    uri = await store.put(data)
    manifest = await raw.manifest(uri)
    assert manifest is not None
    chunk_set = manifest['chunk_set']
    second = {'_id': f'{chunk_set}:1'}
    if damage == 'flipped byte':
        stored = bytearray(data[1000:2000])
        stored[500] ^= 0x01
        await raw.chunks.update_one(second, {'$set': {'data': bytes(stored)}})
    elif damage == 'missing chunk':
        await raw.chunks.delete_one(second)
    elif damage == 'extra chunk':
        await raw.chunks.insert_one({'_id': f'{chunk_set}:5', 'set': chunk_set, 'n': 5, 'data': b'!'})
    elif damage == 'short chunk':
        await raw.chunks.update_one(second, {'$set': {'data': data[1000:1999]}})
    else:
        await raw.chunks.update_one(second, {'$set': {'data': 'text, not binary'}})
    with pytest.raises(IntegrityError, match=re.escape(uri)):
        await store.get(uri)
    received: list[bytes] = []

    async def consume() -> None:
        async for piece in store.get_stream(uri, chunk_size=1000):
            received.append(piece)

    with pytest.raises(IntegrityError, match=re.escape(uri)):
        await consume()
    if damage == 'extra chunk':
        assert b''.join(received) == data  # the bogus tail is the withheld final piece
    else:
        assert len(b''.join(received)) < len(data)
    if damage == 'missing chunk':
        assert received == []  # the stream stops at the gap; the chunk before it is the withheld last one


async def test_corrupt_inline_blob_is_detected(make: Any) -> None:
    store, raw = make()
    uri = await store.put(b'inline bytes')
    await raw.manifests.update_one({'_id': uri[-64:]}, {'$set': {'data': b'inline bytez'}})
    with pytest.raises(IntegrityError):
        await store.get(uri)


# -- pydantic-ai-harness's MongoStepStore with our store as media_store= ---------------


async def test_our_store_under_harness_mongo_step_store(
    make: Any, client: AsyncMongoClient[Document], mongo_uri: str
) -> None:
    steps = pytest.importorskip('pydantic_ai_harness.step_persistence')
    messages_module = pytest.importorskip('pydantic_ai.messages')
    m = messages_module
    media, raw = make(chunk_size_bytes=256 * 1024)
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
    database = unique_name('steps')
    step_store = steps.MongoStepStore(client=client, database=database, media_store=media)
    try:
        await step_store.register_run(steps.RunRecord(run_id='run-mongo', agent_name='interop'))
        snapshot = steps.ContinuableSnapshot(run_id='run-mongo', step_index=3, messages=messages, agent_name='interop')
        await step_store.save_snapshot(snapshot)
        await step_store.save_snapshot(snapshot)  # every step re-saves the history: no new blobs
        restored = await step_store.latest_snapshot(run_id='run-mongo')
        assert restored is not None
        adapter = m.ModelMessagesTypeAdapter
        assert adapter.dump_python(restored.messages, mode='json') == adapter.dump_python(messages, mode='json')
        expected = {media_uri_for(image), media_uri_for(photo), media_uri_for(tool_text.encode())}
        assert {uri async for uri in media.iter_uris()} == expected
        assert await raw.count() == 3
        assert await media.get(media_uri_for(image)) == image
        harness_collections = await client[database].list_collection_names()
        assert 'media' not in harness_collections  # nothing went to the harness's own media store
        sizes = [len(str(doc)) async for doc in client[database]['snapshot_messages'].find({})]
        assert sizes
        assert max(sizes) < 10_000
    finally:
        await client.drop_database(database)


# -- driver errors ----------------------------------------------------------------------


async def test_server_refusals_and_unreachable_servers_are_store_errors(
    client: AsyncMongoClient[Document], names: list[str]
) -> None:
    """pymongo's exceptions used to reach callers raw; now a ``StoreOperationError`` (a ``RuntimeError``)
    names the call and the server's error code, with pymongo's exception as the cause."""
    names.append(collection := unique_name())
    await client[TEST_DATABASE].create_collection(collection, validator={'$jsonSchema': {'required': ['nope']}})
    store = MongoMediaStore(client=client, database=TEST_DATABASE, collection=collection)
    with pytest.raises(StoreOperationError) as refused:
        await store.put(b'refused by the validator')
    assert type(refused.value) is StoreOperationError
    assert isinstance(refused.value, RuntimeError)
    assert (refused.value.operation, refused.value.status) == ('put', 121)
    assert isinstance(refused.value.__cause__, OperationFailure)

    nobody = f'mongodb://app:pa55-w0rd@127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=200'
    async with MongoMediaStore(db_url=nobody, database='t') as unreachable:
        with pytest.raises(StoreUnavailableError) as caught:
            await unreachable.exists(media_uri_for(b'anything'))
    assert (caught.value.operation, caught.value.reason) == ('exists', 'ServerSelectionTimeoutError')
    assert isinstance(caught.value.__cause__, ServerSelectionTimeoutError)
    assert 'pa55-w0rd' not in str(caught.value)


# -- blobs pydantic-ai-harness's MongoMediaStore wrote ---------------------------------


async def test_chunked_writes_into_a_collection_the_harness_filled(
    make: Any, client: AsyncMongoClient[Document]
) -> None:
    """Chunks the harness wrote have no ``set``: two of them used to make our unique chunk index
    impossible to build (``(null, 0)`` twice), so every chunked put failed with ``DuplicateKeyError``."""
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    ours, raw = make(chunk_size_bytes=1000)
    theirs = harness_media.MongoMediaStore(
        client=client, database=TEST_DATABASE, collection=raw.manifests.name, chunk_size_bytes=700
    )
    old = [await theirs.put(blob(3000, seed=seed)) for seed in (61, 62)]
    data = blob(4500, seed=63)
    uri = await ours.put(data)
    assert await ours.get(uri) == data
    assert [await ours.get(u) for u in old] == [blob(3000, seed=61), blob(3000, seed=62)]
    assert [await theirs.get(u) for u in old] == [blob(3000, seed=61), blob(3000, seed=62)]
    indexes = await raw.chunks.index_information()
    assert indexes['mediastash_set_n'].get('unique') is True


async def test_chunk_index_of_an_earlier_release_is_kept(make: Any) -> None:
    """A collection whose ``mediastash_set_n`` index was built without the partial filter keeps it."""
    ours, raw = make(chunk_size_bytes=1000)
    await raw.chunks.create_index([('set', 1), ('n', 1)], unique=True, name='mediastash_set_n')
    data = blob(2500, seed=64)
    uri = await ours.put(data)
    assert await ours.get(uri) == data
    assert 'partialFilterExpression' not in (await raw.chunks.index_information())['mediastash_set_n']


async def test_reads_blobs_the_harness_mongo_store_wrote(make: Any, client: AsyncMongoClient[Document]) -> None:
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    ours, raw = make(chunk_size_bytes=1000)
    theirs = harness_media.MongoMediaStore(
        client=client, database=TEST_DATABASE, collection=raw.manifests.name, chunk_size_bytes=700
    )
    context = harness_media.MediaContext(media_type='image/png', metadata={'written_by': 'harness', 'a.b': '$'})
    data = blob(5000, seed=60)
    uri = await theirs.put(data, context=context)
    assert await ours.get(uri) == data
    assert b''.join(await collect(ours.get_stream(uri, chunk_size=300))) == data
    assert dict(await ours.get_metadata(uri)) == {'written_by': 'harness', 'a.b': '$'}
    assert await ours.media_type_of(uri) == 'image/png'
    assert [u async for u in ours.iter_uris()] == [uri]
    assert await ours.put(data) == uri  # already stored: nothing written
    assert await raw.chunks.count_documents({'set': {'$exists': True}}) == 0
    await raw.chunks.update_one({'files_id': uri[-64:], 'n': 3}, {'$set': {'data': b'x' * 700}})
    with pytest.raises(IntegrityError):
        await ours.get(uri)
    assert await ours.delete(uri) is True
    assert await raw.chunks.count_documents({}) == 0
    assert await ours.put(data) == uri
    assert await ours.get(uri) == data


async def test_stream_pieces_larger_and_smaller_than_a_chunk(make: Any) -> None:
    store, raw = make(chunk_size_bytes=64 * 1024)
    data = os.urandom(3 * MiB + 17)

    async def uneven() -> AsyncIterator[bytes]:
        yield data[:10]
        yield data[10 : 2 * MiB]  # one piece spanning 32 chunks
        yield data[2 * MiB :]

    uri = await store.put_stream(uneven(), context=MediaContext(media_type='audio/wav'))
    manifest = await raw.manifest(uri)
    assert manifest is not None
    assert manifest['chunk_count'] == 49
    assert [len(doc['data']) for doc in await raw.chunk_docs(manifest['chunk_set'])][-2:] == [64 * 1024, 17]
    assert await store.get(uri) == data
    assert await store.media_type_of(uri) == 'audio/wav'


# -- garbage collection -----------------------------------------------------------------

HOUR = 3600.0


async def test_manifest_records_written_at(make: Any) -> None:
    store, raw = make(chunk_size_bytes=1000)
    before = time.time()
    uri = await store.put(blob(3000, seed=70))
    manifest = await raw.manifest(uri)
    assert manifest is not None
    written_at = manifest['written_at'].replace(tzinfo=UTC).timestamp()
    assert before - 0.001 <= written_at <= time.time() + 0.001
    assert manifest['created_at'] <= manifest['written_at']


async def test_put_of_an_old_blob_updates_its_manifest_only(make: Any) -> None:
    store, raw = make(chunk_size_bytes=1000)
    data = blob(5000, seed=71)
    uri = await store.put(data)
    sets = await raw.chunk_sets()
    await set_written_at(raw, uri, time.time() - 2 * HOUR)
    before = time.time()
    assert await store.put(data) == uri
    manifest = await raw.manifest(uri)
    assert manifest is not None and manifest['written_at'].replace(tzinfo=UTC).timestamp() >= before - 0.001
    await set_written_at(raw, uri, time.time() - 2 * HOUR)
    assert await store.put_stream(chunked(data, 1500)) == uri
    manifest = await raw.manifest(uri)
    assert manifest is not None and manifest['written_at'].replace(tzinfo=UTC).timestamp() >= before - 0.001
    assert await raw.chunk_sets() == sets, 'no chunk set is written or left behind'
    assert await store.get(uri) == data


async def test_deleted_manifests_lose_their_chunks_and_survivors_keep_theirs(make: Any) -> None:
    store, raw = make(chunk_size_bytes=1000)
    old, touched, young = [await store.put(blob(4000, seed=72 + i)) for i in range(3)]
    inline = await store.put(b'inline and old')
    sets = {uri: (await raw.manifest(uri) or {}).get('chunk_set') for uri in (old, touched, young)}
    for uri in (old, touched, inline):
        await set_written_at(raw, uri, time.time() - 2 * HOUR)
    cutoff = time.time() - HOUR
    assert await store.touch_many([touched]) == {touched}
    deleted = await store.delete_unless_touched([old, touched, young, inline], written_before=cutoff)
    assert deleted == {old, inline}
    assert await raw.chunk_sets() == {sets[touched], sets[young]}
    assert await store.get(touched) == blob(4000, seed=73)
    assert await store.get(young) == blob(4000, seed=74)
    assert await raw.count() == 2


async def test_changes_between_the_lookup_and_the_delete(make: Any) -> None:
    """The delete's own age filter decides: a blob touched after the lookup survives with its chunks; one
    deleted and stored again under a new chunk set loses only its old set."""
    store, raw = make(chunk_size_bytes=1000)
    data = [blob(3000, seed=80 + i) for i in range(3)]
    old, touched, again = [await store.put(item) for item in data]
    sets = {uri: (await raw.manifest(uri) or {})['chunk_set'] for uri in (old, touched, again)}
    for uri in (old, touched, again):
        await set_written_at(raw, uri, time.time() - 2 * HOUR)
    cutoff = time.time() - HOUR
    candidates = await store._old_manifests([old[-64:], touched[-64:], again[-64:]], cutoff)
    assert set(candidates) == {old[-64:], touched[-64:], again[-64:]}

    assert await store.touch_many([touched]) == {touched}  # a writer confirms it
    await raw.manifests.delete_one({'_id': again[-64:]})  # another collector took it ...
    await store.put(data[2])  # ... and a writer stored it again
    new_set = (await raw.manifest(again) or {})['chunk_set']
    assert new_set != sets[again]

    await raw.manifests.delete_many(
        {'_id': {'$in': list(candidates)}, 'written_at': {'$lt': datetime.fromtimestamp(cutoff, UTC)}}
    )
    assert sorted(await store._drop_chunks_of_gone(candidates)) == sorted([old[-64:], again[-64:]])
    assert await raw.chunk_sets() == {sets[touched], new_set}
    assert await store.get(touched) == data[1]
    assert await store.get(again) == data[2]
    assert not await store.exists(old)


async def test_manifests_with_only_created_at_use_it_as_their_age(make: Any) -> None:
    """Manifests written before ``written_at`` existed are dated by ``created_at``."""
    store, raw = make(chunk_size_bytes=1000)
    old, young = await store.put(blob(2000, seed=90)), await store.put(blob(2000, seed=91))
    long_ago = datetime.fromtimestamp(time.time() - 2 * HOUR, UTC)
    await raw.manifests.update_many({}, {'$unset': {'written_at': ''}})
    await raw.manifests.update_one({'_id': old[-64:]}, {'$set': {'created_at': long_ago}})
    listed = {info.uri: info.written_at async for info in store.iter_blobs()}
    assert listed[old] == pytest.approx(long_ago.timestamp(), abs=0.002)
    assert listed[young] is not None and listed[young] > time.time() - 60
    assert await store.delete_unless_touched([old, young], written_before=time.time() - HOUR) == {old}
    assert await raw.chunk_sets() == {(await raw.manifest(young) or {})['chunk_set']}


async def test_harness_manifests_have_unknown_age_until_a_writer_uses_them(
    make: Any, client: AsyncMongoClient[Document]
) -> None:
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    ours, raw = make(chunk_size_bytes=1000)
    theirs = harness_media.MongoMediaStore(
        client=client, database=TEST_DATABASE, collection=raw.manifests.name, chunk_size_bytes=700
    )
    data = blob(3000, seed=92)
    uri = await theirs.put(data)
    (listed,) = [info async for info in ours.iter_blobs()]
    assert (listed.uri, listed.size, listed.written_at) == (uri, 3000, None)
    assert await ours.delete_unless_touched([uri], written_before=time.time() + HOUR) == frozenset()
    assert await theirs.get(uri) == data

    before = time.time()
    assert await ours.touch_many([uri]) == {uri}
    (listed,) = [info async for info in ours.iter_blobs()]
    assert listed.written_at is not None and listed.written_at >= before - 0.001
    assert await theirs.get(uri) == data, 'the harness still reads a manifest we dated'
    assert await ours.delete_unless_touched([uri], written_before=time.time() + HOUR) == {uri}
    assert await raw.chunks.count_documents({}) == 0, "the harness's chunks went with its manifest"


# -- tenant namespaces ------------------------------------------------------------------------


async def test_namespaces_live_in_collections_of_their_own(make: Any, client: AsyncMongoClient[Document]) -> None:
    """A namespace's manifests and chunks are two collections of its own; the store's collections (which
    pydantic-ai-harness shares) never hold them, and no other namespace reads, lists or deletes them."""
    harness_media = pytest.importorskip('pydantic_ai_harness.media')
    store, raw = make(chunk_size_bytes=4096)
    theirs = harness_media.MongoMediaStore(client=client, database=TEST_DATABASE, collection=store.collection)
    acme, other = store.namespace('Acme.corp-1'), store.namespace('acme.corp-1')  # names are case-sensitive
    small, large = b'a tenant blob', blob(10_000, seed=71)
    small_uri, large_uri = await acme.put(small), await acme.put(large)
    harness_uri = await theirs.put(b'written into the store collection by the harness')

    manifests, chunks = f'{store.collection}.ns.Acme.corp-1', f'{store.collection}_chunks.ns.Acme.corp-1'
    assert await raw.namespace_collections() == sorted([manifests, chunks])
    assert (acme.collection, acme.chunks_collection) == (manifests, chunks)
    database = client[TEST_DATABASE]
    assert await database[manifests].count_documents({}) == 2
    assert await database[chunks].count_documents({}) == 3  # 10,000 bytes in 4 KiB chunks
    assert await raw.count() == 1  # the harness's blob only, and none of the store's chunks:
    assert await raw.chunks.count_documents({'set': {'$exists': True}}) == 0

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

    orphan = {'_id': 'orphan:0', 'set': new_chunk_set(), 'n': 0, 'data': b'left by an interrupted write'}
    await database[chunks].insert_one(orphan)
    report = await acme.erase()
    assert (report.count, report.bytes) == (2, len(small) + len(large))
    assert await raw.namespace_collections() == [], "an erased namespace leaves no collection (nor the tenant's name)"
    assert (await acme.erase()).count == 0
    assert await theirs.get(harness_uri) == b'written into the store collection by the harness'
    assert await acme.put(large) == large_uri  # the next write makes the collections again, with the chunk index
    assert await acme.get(large_uri) == large
    assert 'mediastash_set_n' in {index['name'] async for index in await database[chunks].list_indexes()}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_random_interleavings_leave_each_namespace_exactly_its_blobs(
    mongo_uri: str, steps: list[tuple[str, int, int]]
) -> None:
    async def run() -> None:
        collection = unique_name()
        store = MongoMediaStore(db_url=mongo_uri, database=TEST_DATABASE, collection=collection, chunk_size_bytes=32)
        client = raw_client(mongo_uri)
        try:
            await check_interleaving(store, steps)
        finally:
            await store.aclose()
            await RawCollections(client, TEST_DATABASE, collection).drop()
            await client.close()

    asyncio.run(run())
