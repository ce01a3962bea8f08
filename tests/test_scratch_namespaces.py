"""``scratch_namespace`` of every built-in store, on real storage: what each leaves behind (nothing) and what it
never touches (anything that was there before). ``StoreTests`` checks the behaviour every backend shares."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mediastash import (
    DiskMediaStore,
    InvalidArgumentError,
    MediaContext,
    MemoryMediaStore,
    ScratchableMediaStore,
    SqliteMediaStore,
    WrapperMediaStore,
)
from mediastash.tuning import NamespacesUnsupportedError, StoreNamespaces
from tests.s3_servers import S3Endpoint, unique_bucket

LARGE = bytes(range(256)) * 400  # 100 KiB


def tree_of(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (``None`` for a folder)."""
    return {
        path.relative_to(folder).as_posix(): (path.read_bytes() if path.is_file() else None)
        for path in sorted(folder.rglob('*'))
    }


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 7000):
        yield data[start : start + 7000]


async def fill(store: Any, tag: str) -> list[str]:
    """Write a small blob, a large one and a streamed one; return their URIs."""
    return [
        await store.put(f'small {tag}'.encode(), context=MediaContext(media_type='text/plain')),
        await store.put(LARGE + tag.encode()),
        await store.put_stream(chunks(LARGE + b'streamed ' + tag.encode())),
    ]


def test_every_built_in_store_has_the_capability(tmp_path: Path) -> None:
    for store in (MemoryMediaStore(), DiskMediaStore(tmp_path / 'd'), SqliteMediaStore(database=tmp_path / 'x.db')):
        assert isinstance(store, ScratchableMediaStore)


async def test_disk_namespaces_leave_the_folder_exactly_as_it_was(tmp_path: Path) -> None:
    async with DiskMediaStore(tmp_path / 'media') as base:
        kept = await base.put(b'user blob', context=MediaContext(media_type='image/png', metadata={'k': 'v'}))
        (tmp_path / 'media' / 'notes.txt').write_text('not a blob')
        (tmp_path / 'media' / 'empty-folder').mkdir()
        before = tree_of(tmp_path)
        async with base.scratch_namespace('4096') as one, base.scratch_namespace('4096') as two:
            folders = {Path(one.directory), Path(two.directory)}  # type: ignore[attr-defined]
            assert len(folders) == 2, 'the same label twice is still two namespaces'
            for folder in folders:
                assert folder.parent == tmp_path / 'media'
                assert re.fullmatch(r'mediastash-tune-[0-9a-f]{8}-4096', folder.name)
            uris = await fill(one, 'one')
            assert not any([await two.exists(uri) for uri in uris])
            assert not any([await base.exists(uri) for uri in uris])
            assert [uri async for uri in base.iter_uris()] == [kept]  # a namespace's blobs are not the store's
        assert tree_of(tmp_path) == before
        assert not any(folder.exists() for folder in folders)


async def test_disk_labels_are_checked_before_anything_is_made(tmp_path: Path) -> None:
    async with DiskMediaStore(tmp_path / 'media') as base:
        before = tree_of(tmp_path)
        for label in ('', '../up', 'a/b', 'x' * 33, 4096, 'secret token'):
            with pytest.raises(InvalidArgumentError, match=r'^label must be 1-32 letters') as raised:
                async with base.scratch_namespace(label):  # type: ignore[arg-type]
                    pass
            assert str(label) not in str(raised.value) or label == ''
        assert tree_of(tmp_path) == before


async def test_sqlite_namespaces_drop_their_tables_and_touch_no_row(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    async with SqliteMediaStore(database=database) as base:
        kept = await base.put(b'user row')
        async with base.scratch_namespace('65536') as scratch:
            table = scratch.table  # type: ignore[attr-defined]
            assert re.fullmatch(r'mediastash_tune_[0-9a-f]{8}_65536', table)
            await fill(scratch, 'sqlite')
            with sqlite3.connect(database) as connection:
                assert connection.execute(f'SELECT count(*) FROM "{table}"').fetchone() == (3,)
        assert await base.get(kept) == b'user row'
    with sqlite3.connect(database) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables == ['media']
        assert connection.execute('SELECT count(*) FROM media').fetchone() == (1,)


async def test_a_sqlite_file_only_a_namespace_wrote_is_removed_with_its_side_files(tmp_path: Path) -> None:
    fresh = tmp_path / 'fresh.db'
    async with SqliteMediaStore(database=fresh) as base, base.scratch_namespace('1') as scratch:
        await fill(scratch, 'fresh')
        assert fresh.exists()
    assert tree_of(tmp_path) == {}


async def test_sqlite_namespaces_on_a_caller_connection_and_in_memory(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / 'theirs.db', check_same_thread=False, isolation_level=None)
    try:
        connection.execute('CREATE TABLE notes (x)')
        async with SqliteMediaStore(connection=connection) as base, base.scratch_namespace('2') as scratch:
            await fill(scratch, 'connection')
        names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert names == ['notes']
    finally:
        connection.close()
    async with SqliteMediaStore(database=':memory:') as base, base.scratch_namespace('3') as scratch:
        uris = await fill(scratch, 'memory')
        assert [await base.exists(uri) for uri in uris] == [False, False, False]


@pytest.fixture
def s3_bucket(moto_server: S3Endpoint) -> tuple[S3Endpoint, str]:
    import boto3

    client = boto3.client('s3', **moto_server.client_options())
    bucket = unique_bucket('scratch')
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key='keep/existing.txt', Body=b'user data')
    return moto_server, bucket


def s3_keys(endpoint: S3Endpoint, bucket: str) -> dict[str, str]:
    import boto3

    client = boto3.client('s3', **endpoint.client_options())
    return {item['Key']: item['ETag'] for item in client.list_objects_v2(Bucket=bucket).get('Contents', [])}


async def test_s3_namespaces_delete_every_key_they_wrote(s3_bucket: tuple[S3Endpoint, str]) -> None:
    from mediastash.stores.s3 import S3MediaStore

    endpoint, bucket = s3_bucket
    async with S3MediaStore(bucket=bucket, key_prefix='media/', **endpoint.client_options()) as base:
        kept = await base.put(b'user blob')
        before = s3_keys(endpoint, bucket)
        async with base.scratch_namespace('16384') as scratch:
            assert scratch.key_prefix.startswith('media/mediastash-tune-')  # type: ignore[attr-defined]
            await fill(scratch, 's3')
            written = set(s3_keys(endpoint, bucket)) - set(before)
            assert len(written) == 3 and all(key.startswith(scratch.key_prefix) for key in written)  # type: ignore[attr-defined]
        assert s3_keys(endpoint, bucket) == before
        assert await base.get(kept) == b'user blob'  # the store's client is still open: the namespace only borrowed it


async def test_mongo_namespaces_drop_their_collections(mongo_uri: str) -> None:
    from pymongo import AsyncMongoClient

    from mediastash.stores.mongo import MongoMediaStore
    from tests.mongo_support import unique_name

    database = unique_name('scratch')
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri)
    try:
        await client[database]['media'].insert_one({'_id': 'user-document'})
        async with MongoMediaStore(db_url=mongo_uri, database=database, chunk_size_bytes=16 << 10) as base:
            kept = await base.put(LARGE)
            before = sorted(await client[database].list_collection_names())
            async with base.scratch_namespace('1024') as scratch:
                assert scratch.collection.startswith('media_tune_')  # type: ignore[attr-defined]
                await fill(scratch, 'mongo')
                assert len(await client[database].list_collection_names()) == len(before) + 2
            assert sorted(await client[database].list_collection_names()) == before
            assert await base.get(kept) == LARGE
        assert await client[database]['media'].count_documents({'_id': 'user-document'}) == 1
    finally:
        await client.drop_database(database)
        await client.close()


async def test_a_store_without_the_capability_is_refused_naming_it() -> None:
    wrapper = WrapperMediaStore(MemoryMediaStore())
    assert not isinstance(wrapper, ScratchableMediaStore)
    with pytest.raises(NamespacesUnsupportedError, match=r'ScratchableMediaStore.*WrapperMediaStore has none'):
        StoreNamespaces(wrapper)
