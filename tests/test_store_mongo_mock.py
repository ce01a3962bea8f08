"""``MongoMediaStore`` on mongomock-motor's in-memory client, as users' own tests run it.

pydantic-ai-harness's ``MongoMediaStore`` supports ``AsyncMongoMockClient`` for
tests; ours takes any client with the async collection methods it uses. The
conformance suite runs on it (with the storage identity of a client that is not
pymongo's), plus the cases where the double differs from a server: no
``$binarySize`` operator, and a cursor from ``aggregate`` without awaiting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mongomock_motor import AsyncMongoMockClient

from mediastash import MediaContext, media_uri_for
from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores.mongo import MongoMediaStore
from mediastash.testing.store import StoreTests
from mediastash.urls import PublicUrlResolver
from tests.mongo_support import RawCollections
from tests.test_store_mongo import set_written_at

DATABASE = 'mediastash_mock'


def mock_client() -> Any:
    return AsyncMongoMockClient()


class TestMongoStoreOnMongomock(StoreTests):
    """The conformance suite on an in-memory client (256 KiB chunks, so the larger blobs are chunked)."""

    @pytest.fixture(autouse=True)
    def _client(self) -> None:
        self.client = mock_client()
        self.raw: dict[int, RawCollections] = {}

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> MongoMediaStore:
        collection = f'media_{len(self.raw)}'
        store = MongoMediaStore(
            client=self.client,
            database=DATABASE,
            collection=collection,
            chunk_size_bytes=256 << 10,
            public_url=public_url,
        )
        self.raw[id(store)] = RawCollections(self.client, DATABASE, collection)
        return store

    async def reopen_store(self, store: Any) -> MongoMediaStore:
        return MongoMediaStore(client=self.client, database=store.database, collection=store.collection)

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


# -- what failed on a mock client before ------------------------------------------------


async def test_a_mock_client_is_accepted_the_way_the_harness_store_accepts_it() -> None:
    """It used to fail at construction: the storage key read the client's topology description."""
    store = MongoMediaStore(client=mock_client(), database='t')
    uri = await store.put(b'hello mongo bytes', context=MediaContext(media_type='application/octet-stream'))
    assert uri == media_uri_for(b'hello mongo bytes')
    assert await store.get(uri) == b'hello mongo bytes'
    assert await store.exists(uri) is True
    assert await store.media_type_of(uri) == 'application/octet-stream'


def test_storage_key_of_a_mock_client_names_the_client_object() -> None:
    """Stores on one mock client share a key; another client (or collection) gets another one."""
    client = mock_client()
    first = MongoMediaStore(client=client, database='t')
    second = MongoMediaStore(client=client, database='t')
    other_client = MongoMediaStore(client=mock_client(), database='t')
    other_collection = MongoMediaStore(client=client, database='t', collection='blobs')
    assert first.storage_key == second.storage_key
    assert other_client.storage_key != first.storage_key
    assert other_collection.storage_key != first.storage_key
    assert first.storage_key[0] == 'mongo'


def test_a_mock_client_without_a_default_database_needs_database() -> None:
    with pytest.raises(InvalidStoreConfiguration, match='database='):
        MongoMediaStore(client=mock_client())


@pytest.mark.parametrize('size', [100, 5000], ids=['inline', 'chunked'])
async def test_put_of_stored_bytes_on_a_client_without_binary_size(size: int) -> None:
    """A re-put measures the stored copy; the mock has no ``$binarySize``, so the bytes are read instead
    (it used to fail with ``ValueError: Unsupported projection option``). A wrong copy is still healed."""
    client = mock_client()
    store = MongoMediaStore(client=client, database='t', chunk_size_bytes=1000)
    raw = RawCollections(client, 't', 'media')
    data = bytes(range(256)) * (size // 256) + b'x' * (size % 256)
    uri = await store.put(data)
    assert await store.put(data) == uri
    assert await raw.count() == 1
    await raw.overwrite(uri, data[:-1])  # truncated behind the store's back
    fresh = MongoMediaStore(client=client, database='t', chunk_size_bytes=1000)
    assert await fresh.put(data) == uri
    assert await raw.read(uri) == data


async def test_sweep_orphan_chunks_on_a_motor_style_aggregate() -> None:
    """``aggregate`` of a motor-style client returns the cursor itself, not a coroutine."""
    client = mock_client()
    store = MongoMediaStore(client=client, database='t', chunk_size_bytes=1000)
    raw = RawCollections(client, 't', 'media')
    uri = await store.put(b'k' * 3000)
    await raw.chunks.insert_one({'_id': '00000001aa:0', 'set': '00000001aa', 'n': 0, 'data': b'orphan'})
    assert await store.sweep_orphan_chunks(older_than_seconds=0) == 1
    assert await store.get(uri) == b'k' * 3000
