"""``open_store(url)`` against real stores: every URL form, overrides, ``create=False`` and the refused URLs.

Disk and SQLite use temporary folders, S3 the session's moto server (credentials
from the AWS environment variables, as a user's would be), MongoDB the
project's test server. Errors must name the bad part and never a secret.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import quote

import pytest
from aiobotocore.session import get_session
from botocore.config import Config
from pymongo import AsyncMongoClient

import mediastash
from mediastash import (
    BaseMediaStore,
    DiskMediaStore,
    InvalidStoreConfiguration,
    MediaContext,
    MediaNotFoundError,
    MediaStashError,
    MemoryMediaStore,
    SqliteMediaStore,
    StoreNotFoundError,
    media_uri_for,
    open_store,
)
from mediastash.open_store import open_cached_store
from mediastash.stores.mongo import MongoMediaStore
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from tests.mongo_support import TEST_DATABASE, Document, mongo_uri, raw_client, unique_name
from tests.s3_servers import FaultProxy, S3Endpoint, fault_proxy, moto_server, unique_bucket
from tests.strict_warnings import every_warning_an_error

__all__ = ['fault_proxy', 'moto_server', 'mongo_uri']  # session fixtures, imported so pytest finds them here

DATA = b'open_store round trip \x00\xff' * 100
SECRET = 'wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY'
KEY_ID = 'AKIAIOSFODNN7EXAMPLE'
PASSWORD = 'pa55-w0rd-not-to-leak'


async def round_trip(store: BaseMediaStore, data: bytes = DATA) -> str:
    """Put and get through an ``async with`` block; returns the URI."""
    async with store:
        uri = await store.put(data, context=MediaContext(media_type='application/octet-stream'))
        assert uri == media_uri_for(data)
        assert await store.get(uri) == data
        assert await store.exists(uri)
    return uri


def blob_name(data: bytes = DATA) -> str:
    return f'{hashlib.sha256(data).hexdigest()}.bin'


def refused(url: Any, *, create: bool = True, **overrides: Any) -> str:
    """The message of the ``InvalidStoreConfiguration`` that opening ``url`` raises."""
    with pytest.raises(InvalidStoreConfiguration) as caught:
        open_store(url, create=create, **overrides)
    return str(caught.value)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home folder (``~``) and working directory."""
    home = tmp_path / 'home'
    home.mkdir()
    monkeypatch.setenv('HOME', str(home))
    work = tmp_path / 'work'
    work.mkdir()
    monkeypatch.chdir(work)
    return home


# -- memory ---------------------------------------------------------------------------


async def test_memory_url() -> None:
    store = open_store('memory://')
    assert type(store) is MemoryMediaStore
    await round_trip(store)


async def test_memory_url_takes_overrides() -> None:
    async def resolver(uri: str, context: Any) -> str:
        return f'https://cdn.example/{uri[-64:]}'

    async with open_store('memory://', public_url=resolver) as store:
        uri = await store.put(DATA)
        assert await store.public_url(uri) == f'https://cdn.example/{uri[-64:]}'


@pytest.mark.parametrize('url', ['memory://x', 'memory:///', 'memory://?a=1'])
def test_memory_url_takes_nothing_else(url: str) -> None:
    assert 'memory://' in refused(url)


# -- disk -----------------------------------------------------------------------------


async def test_plain_path(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / 'media'))
    assert type(store) is DiskMediaStore
    await round_trip(store)
    assert (tmp_path / 'media' / blob_name()).read_bytes() == DATA


async def test_path_object(tmp_path: Path) -> None:
    await round_trip(open_store(tmp_path / 'media'))
    assert (tmp_path / 'media' / blob_name()).is_file()


async def test_relative_path(home: Path) -> None:
    await round_trip(open_store('media'))
    assert (Path.cwd() / 'media' / blob_name()).is_file()


@pytest.mark.parametrize('form', ['~/media', 'file://~/media'])
async def test_home_folder_is_expanded(home: Path, form: str) -> None:
    await round_trip(open_store(form))
    assert (home / 'media' / blob_name()).is_file()
    assert not (Path.cwd() / '~').exists()


async def test_disk_store_expands_the_home_folder(home: Path) -> None:
    store = DiskMediaStore('~/media')
    assert store.directory == home / 'media'
    await round_trip(store)
    assert (home / 'media' / blob_name()).is_file()
    assert not (Path.cwd() / '~').exists()


@pytest.mark.parametrize('prefix', ['file://', 'file://localhost'])
async def test_file_url(tmp_path: Path, prefix: str) -> None:
    folder = tmp_path / 'with space'
    store = open_store(prefix + quote(str(folder)) + '?fsync=true')
    assert type(store) is DiskMediaStore
    await round_trip(store)
    assert (folder / blob_name()).read_bytes() == DATA


async def test_create_false_opens_an_existing_folder(tmp_path: Path) -> None:
    uri = await round_trip(DiskMediaStore(tmp_path / 'media'))
    async with open_store(str(tmp_path / 'media'), create=False) as store:
        assert await store.get(uri) == DATA


@pytest.mark.parametrize('form', ['plain', 'path', 'file'])
def test_create_false_refuses_a_missing_folder_and_creates_nothing(tmp_path: Path, form: str) -> None:
    missing = tmp_path / 'parent' / 'media'
    url: Any = {'plain': str(missing), 'path': missing, 'file': f'file://{missing}'}[form]
    with pytest.raises(StoreNotFoundError) as caught:
        open_store(url, create=False)
    assert str(missing) in str(caught.value)
    assert caught.value.name == str(missing)
    assert not isinstance(caught.value, FileNotFoundError)
    assert not (tmp_path / 'parent').exists()


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    file = tmp_path / 'file'
    file.write_bytes(b'x')
    assert str(file) in refused(str(file))
    assert str(file) in refused(str(file), create=False)


@pytest.mark.parametrize(
    ('url', 'named'),
    [
        ('file://otherhost/media', 'names no host'),
        ('file://', 'no folder'),
        ('file:///tmp/x?fsync=maybe', 'fsync'),
        ('file:///tmp/x?fsink=true', "'fsink'"),
        ('file:///tmp/x?fsync=true&fsync=false', "'fsync' twice"),
        ('file://user:' + PASSWORD + '@localhost/tmp/x', 'credentials'),
        ('file:///tmp/x#frag', 'fragment'),
    ],
)
def test_bad_file_urls(url: str, named: str) -> None:
    message = refused(url)
    assert named in message
    assert PASSWORD not in message


def test_disk_override_wins_and_unknown_override_is_named(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / 'a'), directory=tmp_path / 'b')
    assert isinstance(store, DiskMediaStore)
    assert store.directory == tmp_path / 'b'
    assert "'table'" in refused(str(tmp_path / 'c'), table='media')
    assert not (tmp_path / 'c').exists()


# -- SQLite ---------------------------------------------------------------------------


def rows(database: Path, table: str = 'media') -> list[str]:
    with sqlite3.connect(database) as connection:
        return [row[0] for row in connection.execute(f'SELECT sha256 FROM "{table}"')]


async def test_sqlite_relative_path(home: Path) -> None:
    store = open_store('sqlite:///relative.db')
    assert type(store) is SqliteMediaStore
    await round_trip(store)
    assert rows(Path.cwd() / 'relative.db') == [hashlib.sha256(DATA).hexdigest()]


async def test_sqlite_absolute_path_table_and_new_parent_folder(tmp_path: Path) -> None:
    database = tmp_path / 'new folder' / 'media.db'
    await round_trip(open_store(f'sqlite:///{quote(str(database))}?table=blobs'))
    assert rows(database, 'blobs') == [hashlib.sha256(DATA).hexdigest()]


async def test_sqlite_home_folder(home: Path) -> None:
    await round_trip(open_store('sqlite:///~/media.db'))
    assert rows(home / 'media.db') == [hashlib.sha256(DATA).hexdigest()]


async def test_sqlite_memory() -> None:
    store = open_store('sqlite:///:memory:')
    assert isinstance(store, SqliteMediaStore) and store.database == ':memory:'
    await round_trip(store)


async def test_sqlite_create_false(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    missing = tmp_path / 'parent' / 'missing.db'
    with pytest.raises(StoreNotFoundError) as caught:
        open_store(f'sqlite:///{missing}', create=False)
    assert str(missing) in str(caught.value)
    assert not (tmp_path / 'parent').exists()
    uri = await round_trip(open_store(f'sqlite:///{database}'))
    async with open_store(f'sqlite:///{database}', create=False) as store:
        assert await store.get(uri) == DATA


async def test_sqlite_connection_override(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / 'mine.db', check_same_thread=False)
    try:
        await round_trip(open_store(f'sqlite:///{tmp_path / "ignored.db"}?table=t2', connection=connection))
        assert not (tmp_path / 'ignored.db').exists()
    finally:
        connection.close()
    assert rows(tmp_path / 'mine.db', 't2') == [hashlib.sha256(DATA).hexdigest()]


@pytest.mark.parametrize(
    ('url', 'named'),
    [
        ('sqlite://', 'no database file'),
        ('sqlite:///', 'no database file'),
        ('sqlite://host/media.db', 'no host'),
        ('sqlite:///media.db?table=1bad', 'table name'),
        ('sqlite:///media.db?table=a-b', 'table name'),
        ('sqlite:///media.db?tabel=media', "'tabel'"),
        ('sqlite:///media.db?table=a&table=b', "'table' twice"),
        ('sqlite:///media.db?password=' + PASSWORD, "'password'"),
        ('sqlite://user:' + PASSWORD + '@/media.db', 'credentials'),
    ],
)
def test_bad_sqlite_urls(home: Path, url: str, named: str) -> None:
    message = refused(url)
    assert named in message
    assert PASSWORD not in message
    assert os.listdir(Path.cwd()) == []


def test_sqlite_folder_is_not_a_database(tmp_path: Path) -> None:
    assert str(tmp_path) in refused(f'sqlite:///{tmp_path}')


# -- S3 (moto) ------------------------------------------------------------------------

RAW_CONFIG = Config(signature_version='s3v4', s3={'addressing_style': 'path'})


@pytest.fixture
def aws_environment(moto_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> S3Endpoint:
    """Credentials in the AWS environment variables, where a user would put them."""
    for name in ('AWS_PROFILE', 'AWS_DEFAULT_PROFILE', 'AWS_SESSION_TOKEN', 'AWS_ENDPOINT_URL'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('AWS_ACCESS_KEY_ID', moto_server.access_key_id)
    monkeypatch.setenv('AWS_SECRET_ACCESS_KEY', moto_server.secret_access_key)
    monkeypatch.setenv('AWS_DEFAULT_REGION', moto_server.region_name)
    return moto_server


@pytest.fixture
async def s3_client(moto_server: S3Endpoint) -> AsyncIterator[Any]:
    async with get_session().create_client('s3', config=RAW_CONFIG, **moto_server.client_options()) as client:
        yield client


@pytest.fixture
async def bucket(s3_client: Any) -> str:
    name = unique_bucket('open')
    await s3_client.create_bucket(Bucket=name)
    return name


async def object_keys(client: Any, bucket: str) -> list[str]:
    response = await client.list_objects_v2(Bucket=bucket)
    return sorted(item['Key'] for item in response.get('Contents', []))


def s3_url(endpoint: S3Endpoint, bucket: str, path: str = '', **parameters: str) -> str:
    query = '&'.join(f'{name}={quote(value, safe="")}' for name, value in parameters.items())
    return f's3://{bucket}{path}?endpoint_url={quote(endpoint.url, safe="")}' + (f'&{query}' if query else '')


@pytest.mark.parametrize(
    ('path', 'prefix'), [('', ''), ('/', ''), ('/agents/media', 'agents/media/'), ('/a/b/', 'a/b/')]
)
async def test_s3_url(aws_environment: S3Endpoint, s3_client: Any, bucket: str, path: str, prefix: str) -> None:
    store = open_store(s3_url(aws_environment, bucket, path, region='us-east-1'))
    assert isinstance(store, S3MediaStore)
    assert (store.bucket, store.key_prefix) == (bucket, prefix)
    await round_trip(store)
    assert await object_keys(s3_client, bucket) == [prefix + blob_name()]


async def test_s3_store_settings_from_the_url(aws_environment: S3Endpoint, s3_client: Any, bucket: str) -> None:
    url = s3_url(
        aws_environment,
        bucket,
        put_check='if-none-match',
        conditional_writes='false',
        known_ttl='30',
        max_concurrency='2',
        max_attempts='3',
        read_attempts='2',
        retry_max_backoff='0.5',
        multipart_threshold=str(5 << 20),
        part_size=str(5 << 20),
    )
    large = os.urandom((5 << 20) + 1)
    async with open_store(url, create=False) as store:
        uri = await store.put(large)  # multipart from 5 MiB
        assert await store.get(uri) == large
    response = await s3_client.head_object(Bucket=bucket, Key=blob_name(large))
    assert '-' in response['ETag']  # a multipart upload's ETag


async def test_s3_overrides(aws_environment: S3Endpoint, s3_client: Any, bucket: str) -> None:
    store = open_store(f's3://{bucket}/p', client=s3_client, public_url=PresignedUrls(expires_in=60))
    async with store:
        url = await store.public_url(media_uri_for(DATA))
    await round_trip(open_store(f's3://{bucket}/p', client=s3_client))
    assert url is not None and 'X-Amz-Signature=' in url and f'/{bucket}/p/' in url
    assert await object_keys(s3_client, bucket) == ['p/' + blob_name()]
    # A client given as an override replaces the URL's endpoint and region.
    await round_trip(open_store(s3_url(aws_environment, bucket, '/q', region='eu-west-3'), client=s3_client))
    assert "'bucket_name'" in refused(f's3://{bucket}', bucket_name='x')


async def test_unknown_bucket_is_named_on_every_call(aws_environment: S3Endpoint) -> None:
    missing = unique_bucket('missing')
    async with open_store(s3_url(aws_environment, missing)) as store:
        uri = media_uri_for(DATA)
        calls: dict[str, Any] = {
            'put': lambda: store.put(DATA),
            'put multipart': lambda: store.put(b'x' * (16 << 20)),
            'put_stream': lambda: store.put_stream(aiter_of([DATA])),
            'get': lambda: store.get(uri),
            'get_stream': lambda: collect(store.get_stream(uri)),
            'exists': lambda: store.exists(uri),
            'get_metadata': lambda: store.get_metadata(uri),
            'iter_uris': lambda: collect(store.iter_uris()),
            'delete': lambda: store.delete(uri),
            'delete_many': lambda: store.delete_many([uri]),
            'exists_many': lambda: store.exists_many([uri, media_uri_for(b'other')]),
        }
        for name, call in calls.items():
            with pytest.raises(StoreNotFoundError) as caught:
                await call()
            assert caught.value.name == missing, name
            assert f"S3 bucket '{missing}' does not exist" in str(caught.value), name
            assert not isinstance(caught.value, MediaNotFoundError), name
            assert aws_environment.secret_access_key not in str(caught.value)


async def aiter_of(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


async def test_a_miss_in_an_existing_bucket_asks_the_bucket_once(fault_proxy: FaultProxy, bucket: str) -> None:
    fault_proxy.reset()
    store = S3MediaStore(bucket=bucket, **fault_proxy.endpoint.client_options())
    async with store:
        assert not await store.exists(media_uri_for(b'a'))
        assert not await store.exists(media_uri_for(b'b'))
        with pytest.raises(MediaNotFoundError):
            await store.get_metadata(media_uri_for(b'c'))
        assert not await store.delete(media_uri_for(b'd'))
    bucket_heads = [seen for seen in fault_proxy.seen('HEAD') if seen.target.rstrip('/') == f'/{bucket}']
    assert len(bucket_heads) == 1
    fault_proxy.reset()
    async with S3MediaStore(bucket=bucket, **fault_proxy.endpoint.client_options()) as store:
        uri = await store.put(DATA)  # a put's HEAD miss asks nothing more: the PUT itself would say NoSuchBucket
        assert await store.exists(uri)
        assert not await store.exists(media_uri_for(b'e'))  # the bucket was seen: no question
    assert [seen for seen in fault_proxy.seen('HEAD') if seen.target.rstrip('/') == f'/{bucket}'] == []


@pytest.mark.parametrize(
    'url',
    [
        f's3://{KEY_ID}:{SECRET}@bucket',
        f's3://{KEY_ID}@bucket/prefix',
        f's3://bucket?aws_secret_access_key={SECRET}',
        f's3://bucket?aws_access_key_id={KEY_ID}',
        f's3://bucket?aws_session_token={SECRET}',
        f's3://bucket?secret={SECRET}',
        f's3://bucket?password={SECRET}',
        f's3://bucket?{KEY_ID}={SECRET}',
        f's3://bucket?{SECRET}',
        f's3://bucket?endpoint_url=http://{KEY_ID}:{SECRET}@127.0.0.1:9000',
        f's3://bucket?endpoint_url={quote(f"http://{KEY_ID}:{SECRET}@127.0.0.1:9000", safe="")}',
    ],
)
def test_s3_credentials_in_the_url_are_refused_without_echo(url: str) -> None:
    message = refused(url)
    assert SECRET not in message
    assert KEY_ID not in message


@pytest.mark.parametrize(
    ('url', 'named'),
    [
        ('s3://', 'no bucket'),
        ('s3:///prefix', 'no bucket'),
        ('s3://bucket:9000/p', 'no port'),
        ('s3://bucket?adressing=path', "'adressing'"),
        ('s3://bucket?region=', 'region='),
        ('s3://bucket?region=a&region=b', "'region' twice"),
        ('s3://bucket?endpoint_url=ftp://host', 'endpoint_url='),
        ('s3://bucket?endpoint_url=', 'endpoint_url='),
        ('s3://bucket?put_check=sometimes', 'put_check'),
        ('s3://bucket?known_ttl=soon', 'known_ttl'),
        ('s3://bucket?known_ttl=0', 'known_ttl'),
        ('s3://bucket?max_concurrency=0', 'max_concurrency'),
        ('s3://bucket?part_size=big', 'part_size'),
        ('s3://bucket?conditional_writes=maybe', 'conditional_writes'),
        ('s3://bucket/p#fragment', 'fragment'),
        ('s3://bucket//double', 'key_prefix'),
    ],
)
def test_bad_s3_urls(url: str, named: str) -> None:
    assert named in refused(url)


# -- MongoDB --------------------------------------------------------------------------


def mongo_url(base: str, database: str, query: str = '') -> str:
    """``base`` (the test server's URI) pointed at ``database``, its own options kept, ``query`` added."""
    scheme, _, rest = base.partition('://')
    hosts, _, tail = rest.partition('/')
    options = '&'.join(part for part in (tail.partition('?')[2], query) if part)
    return f'{scheme}://{hosts}/{database}' + (f'?{options}' if options else '')


@pytest.fixture
async def mongo(mongo_uri: str) -> AsyncIterator[AsyncMongoClient[Document]]:
    client = raw_client(mongo_uri)
    yield client
    await client.close()


@pytest.fixture
async def collection(mongo: AsyncMongoClient[Document]) -> AsyncIterator[str]:
    """A fresh collection name in the test database; both of its collections are dropped afterwards."""
    name = unique_name('open')
    yield name
    await mongo[TEST_DATABASE][name].drop()
    await mongo[TEST_DATABASE][f'{name}_chunks'].drop()


async def test_mongo_url(mongo_uri: str, mongo: AsyncMongoClient[Document], collection: str) -> None:
    url = mongo_url(mongo_uri, TEST_DATABASE, f'collection={collection}&chunk_size_bytes=1000&appName=open-store-test')
    with every_warning_an_error():  # the driver warns about options it does not know: ours must be gone
        store = open_store(url, create=False)
    assert isinstance(store, MongoMediaStore)
    assert (store.database, store.collection, store.chunk_size_bytes) == (TEST_DATABASE, collection, 1000)
    await round_trip(store)
    manifest = await mongo[TEST_DATABASE][collection].find_one({'_id': hashlib.sha256(DATA).hexdigest()})
    assert manifest is not None and manifest['size'] == len(DATA)


async def test_mongo_store_takes_the_database_from_its_url(
    mongo_uri: str, mongo: AsyncMongoClient[Document], collection: str
) -> None:
    store = MongoMediaStore(db_url=mongo_url(mongo_uri, TEST_DATABASE), collection=collection)
    assert store.database == TEST_DATABASE
    await round_trip(store)
    assert await mongo[TEST_DATABASE][collection].count_documents({}) == 1
    client = raw_client(mongo_url(mongo_uri, 'from_client_url'))
    try:
        assert MongoMediaStore(client=client).database == 'from_client_url'
    finally:
        await client.close()


def test_mongo_store_without_any_database_is_refused_without_the_password() -> None:
    with pytest.raises(InvalidStoreConfiguration) as caught:
        MongoMediaStore(db_url=f'mongodb://user:{PASSWORD}@127.0.0.1:1/?authSource=admin')
    assert PASSWORD not in str(caught.value)
    assert 'database' in str(caught.value)


async def test_mongo_overrides(mongo_uri: str, mongo: AsyncMongoClient[Document], collection: str) -> None:
    # client= replaces the URL's hosts (this one is unreachable); database and collection still come from the URL.
    store = open_store(f'mongodb://127.0.0.1:1/{TEST_DATABASE}?collection={collection}', client=mongo)
    await round_trip(store)
    assert await mongo[TEST_DATABASE][collection].count_documents({}) == 1
    # database= fills in for a URL without one; a keyword wins over the URL's collection.
    other = unique_name('open')
    await round_trip(open_store(mongo_url(mongo_uri, ''), database=TEST_DATABASE, collection=other))
    assert await mongo[TEST_DATABASE][other].count_documents({}) == 1
    await mongo[TEST_DATABASE][other].drop()
    assert "'table'" in refused(mongo_url(mongo_uri, TEST_DATABASE), table='x')


async def test_mongodb_srv_url_is_accepted_without_contacting_anything() -> None:
    store = open_store('mongodb+srv://user:pw@cluster0.example.invalid/agents?collection=blobs&retryWrites=true')
    assert isinstance(store, MongoMediaStore)
    assert (store.database, store.collection) == ('agents', 'blobs')
    await store.aclose()


@pytest.mark.parametrize(
    ('url', 'named'),
    [
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/', 'no database'),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1', 'no database'),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1?collection=x', "'/'"),
        (f'mongodb://user:{PASSWORD}@/db', 'no host'),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/db?colection=x', "'colection'"),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/db?connectTimeoutMS=soon', "'connectTimeoutMS'"),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/db?tls=maybe', "'tls'"),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/db?collection=1bad', 'collection name'),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/db?collection=a&collection=b', "'collection' twice"),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/db?chunk_size_bytes=big', 'chunk_size_bytes'),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/db?chunk_size_bytes=0', 'chunk_size_bytes'),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:1/a.b', 'database name'),
        (f'mongodb://user:{PASSWORD}@127.0.0.1:notaport/db', 'db_url'),
        (f'mongodb+srv://user:{PASSWORD}@cluster.example.invalid:27017/db', 'db_url'),
        (f'mongodb://127.0.0.1:1/db?tlsCertificateKeyFilePassword={PASSWORD}&tls=maybe', "'tls'"),
    ],
)
def test_bad_mongo_urls_never_show_the_password(url: str, named: str) -> None:
    message = refused(url)
    assert named in message
    assert PASSWORD not in message


# -- anything else --------------------------------------------------------------------


@pytest.mark.parametrize(
    ('url', 'named'),
    [
        ('ftp://host/media', "'ftp'"),
        ('postgres://user:' + PASSWORD + '@host/db', 'must not carry a password'),  # a known scheme (issue 19)
        ('', 'empty'),
        ('   ', 'empty'),
        (42, 'int'),
        (b'/tmp/media', 'bytes'),
    ],
)
def test_unknown_and_unusable_urls(url: Any, named: str) -> None:
    message = refused(url)
    assert named in message
    assert PASSWORD not in message


def test_errors_are_exported() -> None:
    assert mediastash.StoreNotFoundError is StoreNotFoundError
    assert mediastash.open_store is open_store
    assert issubclass(StoreNotFoundError, mediastash.MediaStashError)


# -- a known scheme without its '//' (issue 17, item 4) -----------------------------------

SCHEME_TYPOS = [
    ('s3:/bucket/prefix', 's3://<bucket>'),
    ('s3:bucket', 's3://<bucket>'),
    ('S3:/bucket', 's3://<bucket>'),
    ('s3//bucket/prefix', 's3://<bucket>'),
    ('s3:\\\\bucket', 's3://<bucket>'),
    ('sqlite:/media.db', 'sqlite:///'),
    ('sqlite:media.db', 'sqlite:///'),
    ('mongodb:/127.0.0.1/db', 'mongodb://'),
    ('mongodb+srv:/cluster.example.invalid/db', 'mongodb+srv://'),
    ('memory:', 'memory://'),
    ('memory:/', 'memory://'),
    ('file:/srv/media', 'file:///'),
    (' s3://bucket', 's3://<bucket>'),
    ('\tmemory://', 'memory://'),
]


@pytest.mark.parametrize(('url', 'form'), SCHEME_TYPOS)
@pytest.mark.parametrize('create', [True, False])
def test_a_known_scheme_without_its_slashes_is_refused_and_creates_nothing(
    home: Path, url: str, form: str, create: bool
) -> None:
    message = refused(url, create=create)
    assert form in message
    assert 'Nothing was created' in message
    assert os.listdir(Path.cwd()) == []
    assert os.listdir(home) == []


async def test_a_folder_named_like_a_scheme_is_still_reachable_as_a_path(home: Path) -> None:
    await round_trip(open_store('./s3:/bucket'))
    assert (Path.cwd() / 's3:' / 'bucket' / blob_name()).is_file()
    await round_trip(open_store(Path('memory:')))  # a Path object is always a path
    assert (Path.cwd() / 'memory:' / blob_name()).is_file()
    await round_trip(open_store('s3media/x'))  # a name that only starts like a scheme
    assert (Path.cwd() / 's3media' / 'x' / blob_name()).is_file()


# -- no value is ever echoed (issue 17, item 5) --------------------------------------------

PASTED = 'Pasted-Secret-9f8e7d6c5b4a'
"""A recognizable secret, pasted where a value goes; it must never appear in what the user sees."""
DIGITS = '918273645546372819'
"""A secret made of digits only (a PIN, an account number): it parses as an integer."""

SECRET_URLS = [
    f's3://b?max_attempts={PASTED}',
    f's3://b?max_attempts=-{DIGITS}',
    f's3://b?read_attempts=-{DIGITS}',
    f's3://b?max_concurrency=-{DIGITS}',
    f's3://b?part_size={DIGITS[:6]}',
    f's3://b?multipart_threshold={DIGITS[:6]}',
    f's3://b?put_check={PASTED}',
    f's3://b?known_ttl={PASTED}',
    f's3://b?known_ttl={DIGITS}',
    f's3://b?retry_max_backoff={DIGITS}',
    f's3://b?conditional_writes={PASTED}',
    f's3://{KEY_ID}:{PASTED}/prefix',
    f's3://{KEY_ID}:{DIGITS}/prefix',
    f's3://{PASTED}!/prefix',
    f's3://b/%01{PASTED}',
    f's3://b//{PASTED}',
    f's3://b?{PASTED}=1',
    f's3://b?endpoint_url={PASTED}',
    f's3:{PASTED}',
    f's3:/{KEY_ID}:{PASTED}/prefix',
    f'{PASTED}://bucket',
    f'mongodb://127.0.0.1:1/db?chunk_size_bytes={PASTED}',
    f'mongodb://127.0.0.1:1/db?chunk_size_bytes={DIGITS}',
    f'mongodb://127.0.0.1:1/db?chunk_size_bytes=-{DIGITS}',
    f'mongodb://127.0.0.1:1/db?collection={PASTED}',
    f'mongodb://127.0.0.1:1/{PASTED}.db',
    f'mongodb://127.0.0.1:1/db?tls={PASTED}',
    f'mongodb://127.0.0.1:1/db?{PASTED}=1',
    f'mongodb://{KEY_ID}:{PASTED}/db',
    f'mongodb://user:{PASTED}@127.0.0.1:1/',
    f'mongodb:/{KEY_ID}:{PASTED}/db',
    f'sqlite:///media.db?table={PASTED}',
    f'sqlite:///media.db?table=sqlite_{PASTED}',
    f'sqlite:///media.db?{PASTED}=1',
    f'sqlite://{KEY_ID}:{PASTED}/media.db',
    f'file://{KEY_ID}:{PASTED}/srv/media',
    f'file:///srv/media?fsync={PASTED}',
    f'memory://{PASTED}',
]


def shown_to_the_user(error: BaseException) -> str:
    """Everything an error shows: str, repr and args of it and of every exception a traceback would print with it."""
    shown: list[str] = []
    current: BaseException | None = error
    while current is not None:
        shown += [str(current), repr(current), *map(repr, current.args), *getattr(current, '__notes__', [])]
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return '\n'.join(shown)


def assert_nothing_secret(text: str) -> None:
    for secret in (PASTED, DIGITS, DIGITS[:6], KEY_ID):
        assert secret not in text


@pytest.mark.parametrize('url', SECRET_URLS)
def test_a_pasted_secret_never_appears_in_the_error(home: Path, url: str) -> None:
    for create in (True, False):  # with create=False a missing file may be what is reported first
        with pytest.raises(InvalidStoreConfiguration if create else MediaStashError) as caught:
            open_store(url, create=create)
        assert_nothing_secret(shown_to_the_user(caught.value))
    assert os.listdir(Path.cwd()) == []


@pytest.mark.parametrize(
    ('url', 'named', 'accepts'),
    [
        (f's3://b?max_attempts={PASTED}', 'max_attempts', 'integer'),
        (f's3://b?max_attempts=-{DIGITS}', 'max_attempts', 'an int from 1 to 100'),
        (f's3://b?put_check={PASTED}', 'put_check', "'if-none-match'"),
        (f'mongodb://127.0.0.1:1/db?chunk_size_bytes={PASTED}', 'chunk_size_bytes', 'integer'),
        (f'mongodb://127.0.0.1:1/db?chunk_size_bytes={DIGITS}', 'chunk_size_bytes', 'from 1 to'),
        (f's3://{KEY_ID}:{PASTED}/prefix', 'bucket', 'AWS_ACCESS_KEY_ID'),
        (f's3://b?conditional_writes={PASTED}', 'conditional_writes', 'true or false'),
        (f'sqlite:///media.db?table={PASTED}', 'table', 'letters, digits or underscores'),
        (f'mongodb://127.0.0.1:1/db?collection={PASTED}', 'collection', 'letters, digits or underscores'),
    ],
)
def test_errors_name_the_parameter_and_what_it_accepts(url: str, named: str, accepts: str) -> None:
    message = refused(url)
    assert named in message
    assert accepts in message


def test_bad_constructor_options_through_open_store_are_not_echoed(tmp_path: Path) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ('s3://b', {'put_check': PASTED}),
        ('s3://b', {'key_prefix': f'/{PASTED}'}),
        ('s3://b', {'key_prefix': f'{PASTED}\ud800'}),
        ('s3://b', {'known_ttl': int(DIGITS)}),
        ('s3://b', {'max_attempts': -int(DIGITS)}),
        ('s3://b', {'bucket': 0}),
        ('mongodb://127.0.0.1:1/db', {'collection': PASTED}),
        ('mongodb://127.0.0.1:1/db', {'database': f'{PASTED}.x'}),
        ('mongodb://127.0.0.1:1/db', {'chunk_size_bytes': -int(DIGITS)}),
        (f'sqlite:///{tmp_path}/m.db', {'table': PASTED}),
        (f'sqlite:///{tmp_path}/m.db', {'table': f'sqlite_{PASTED}'}),
    ]
    for url, overrides in cases:
        with pytest.raises(InvalidStoreConfiguration) as caught:
            open_store(url, **overrides)
        assert_nothing_secret(shown_to_the_user(caught.value))
    with pytest.raises(InvalidStoreConfiguration) as caught:
        SqliteMediaStore(database=f'{tmp_path}/{PASTED}.db', connection=sqlite3.connect(':memory:'))
    assert_nothing_secret(shown_to_the_user(caught.value))
    for options in ({'cache_write': PASTED}, {'cache_max_bytes': -int(DIGITS)}):
        with pytest.raises(InvalidStoreConfiguration) as caught:
            open_cached_store(tmp_path / 'remote', cache=tmp_path / 'cache', **options)
        assert_nothing_secret(shown_to_the_user(caught.value))
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize('command', ['ls', 'stats'])
@pytest.mark.parametrize('url', SECRET_URLS[::3])
def test_the_cli_never_prints_a_pasted_secret(
    home: Path, capsys: pytest.CaptureFixture[str], url: str, command: str
) -> None:
    from mediastash.cli import main

    assert main([command, url]) == 1
    out, err = capsys.readouterr()
    assert_nothing_secret(out + err)
    assert 'Traceback' not in err
    assert os.listdir(Path.cwd()) == []


# -- create=False creates nothing, and a failed open leaves nothing behind (item 6) --------


def test_open_cached_store_with_a_missing_store_creates_no_cache(home: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        open_cached_store('missing-dir', cache='cache-dir', create=False)
    with pytest.raises(StoreNotFoundError):
        open_cached_store('sqlite:///missing/m.db', cache='sqlite:///cache/c.db', create=False)
    with pytest.raises(StoreNotFoundError):
        open_cached_store(Path('missing-dir'), cache=Path('cache-dir') / 'deeper', create=False)
    assert os.listdir(Path.cwd()) == []


def test_a_failed_open_cached_store_leaves_no_folder_behind(home: Path) -> None:
    with pytest.raises(InvalidStoreConfiguration, match='same storage'):
        open_cached_store('new/media', cache='new/media')
    with pytest.raises(InvalidStoreConfiguration):
        open_cached_store('remote', cache='s3://b?known_ttl=0')
    with pytest.raises(InvalidStoreConfiguration):
        open_cached_store('remote/a', cache='sqlite:///cache/c.db?table=1bad')
    with pytest.raises(InvalidStoreConfiguration, match='write'):
        open_cached_store('remote', cache='cache', cache_write='back')  # type: ignore[arg-type]
    assert os.listdir(Path.cwd()) == []


async def test_open_cached_store_creates_the_cache_once_the_store_was_found(home: Path) -> None:
    os.mkdir('remote')
    async with open_cached_store('remote', cache='cache/deep', create=False) as store:
        await store.put(DATA)
    assert (Path('cache') / 'deep' / blob_name()).is_file()
    assert (Path('remote') / blob_name()).is_file()
    os.mkdir('kept')
    with pytest.raises(InvalidStoreConfiguration, match='same storage'):
        open_cached_store('kept', cache='kept')
    assert (Path.cwd() / 'kept').is_dir()  # a folder that was there before is never removed


def test_a_refused_sqlite_url_makes_no_parent_folder(home: Path) -> None:
    assert 'table' in refused('sqlite:///new/media.db?table=1bad')
    assert os.listdir(Path.cwd()) == []


# -- the registry and each backend's from_url (issue 18) ------------------------------------


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``mediastash.stores.registry`` with registrations undone after the test."""
    from mediastash.stores import registry

    monkeypatch.setattr(registry, '_registered', dict(registry._registered))
    return registry


class FolderMemoryStore(MemoryMediaStore):
    """A store with only ``from_url`` (no ``plan_from_url``), as a minimal plug-in writes it."""

    opened: ClassVar[list[str]] = []

    @classmethod
    def from_url(cls, url: str, *, create: bool = True, **overrides: Any) -> Self:
        cls.opened.append(url)
        return cls(**overrides)


LIST_SCHEMES = """
import sys
from mediastash.stores import available_schemes
print(available_schemes())
print(sorted(name for name in sys.modules if name.split('.')[0] in ('aiobotocore', 'botocore', 'pymongo')))
"""


def test_built_in_schemes_are_listed_without_importing_the_extras() -> None:
    result = subprocess.run([sys.executable, '-c', LIST_SCHEMES], capture_output=True, text=True, check=True)
    schemes, heavy = result.stdout.splitlines()
    assert {'memory', 'file', 'sqlite', 's3', 'mongodb', 'mongodb+srv'} <= set(eval(schemes))
    assert heavy == '[]'


def test_store_class_of_each_built_in_scheme() -> None:
    from mediastash.stores import store_class

    expected = {
        'memory': MemoryMediaStore,
        'file': DiskMediaStore,
        'sqlite': SqliteMediaStore,
        's3': S3MediaStore,
        'mongodb': MongoMediaStore,
        'mongodb+srv': MongoMediaStore,
        'S3': S3MediaStore,
    }
    for scheme, cls in expected.items():
        assert store_class(scheme) is cls
    with pytest.raises(InvalidStoreConfiguration, match="unknown store URL scheme 'ftp'"):
        store_class('ftp')


def test_an_unknown_scheme_names_the_extras_to_install() -> None:
    message = refused('ftp://host/x')
    assert 's3://<bucket>[/<key prefix>] (needs pip install "mediastash[s3]")' in message
    assert 'mongodb://host[:port]/<database> (needs pip install "mediastash[mongo]")' in message
    assert 'memory://' in message and 'sqlite:///' in message


async def test_register_store_with_a_class_and_with_a_lazy_target(registry: Any, tmp_path: Path) -> None:
    registry.register_store('folder-mem', FolderMemoryStore)
    FolderMemoryStore.opened.clear()
    store = open_store('folder-mem://anything', public_url=None)
    assert type(store) is FolderMemoryStore
    assert FolderMemoryStore.opened == ['folder-mem://anything']
    await round_trip(store)
    registry.register_store('lazy', 'tests.test_open_store:FolderMemoryStore')
    assert registry.store_class('lazy') is FolderMemoryStore
    assert 'lazy' in registry.available_schemes()
    registry.register_store('gone', 'tests.no_such_module:Store')
    message = refused('gone://x')
    assert "'tests.no_such_module:Store'" in message and 'cannot be imported' in message


def test_register_store_refuses_bad_arguments_without_echo(registry: Any) -> None:
    from mediastash.errors import InvalidArgumentError

    for scheme in ('x', 'Bad', f'{PASTED}', 'a b', ''):
        with pytest.raises(InvalidArgumentError) as caught:
            registry.register_store(scheme, FolderMemoryStore)
        assert_nothing_secret(shown_to_the_user(caught.value))
    for target in (object, 'no-colon', 42):
        with pytest.raises(InvalidArgumentError, match='target'):
            registry.register_store('okay', target)


def test_a_registered_store_without_plan_from_url_is_built_only_after_every_check(registry: Any, home: Path) -> None:
    registry.register_store('folder-mem', FolderMemoryStore)
    FolderMemoryStore.opened.clear()
    with pytest.raises(StoreNotFoundError):
        open_cached_store('missing', cache='folder-mem://c', create=False)
    with pytest.raises(InvalidStoreConfiguration):
        open_cached_store('folder-mem://b', cache='sqlite:///cache/c.db?tabel=media')
    assert FolderMemoryStore.opened == []
    assert os.listdir(Path.cwd()) == []


@pytest.mark.parametrize(
    ('cls', 'url'),
    [
        (DiskMediaStore, 's3://bucket'),
        (SqliteMediaStore, 'file:///tmp/x'),
        (S3MediaStore, 'sqlite:///x.db'),
        (MongoMediaStore, 's3://bucket'),
        (MemoryMediaStore, 'mongodb://host/db'),
        (S3MediaStore, f'{PASTED}://bucket'),
    ],
)
def test_from_url_refuses_another_backends_url_without_echo(home: Path, cls: Any, url: str) -> None:
    with pytest.raises(InvalidStoreConfiguration) as caught:
        cls.from_url(url)
    assert f'{cls.__name__}.from_url takes' in str(caught.value)
    assert_nothing_secret(shown_to_the_user(caught.value))
    assert os.listdir(Path.cwd()) == []


async def test_from_url_of_each_backend(home: Path, aws_environment: S3Endpoint, bucket: str) -> None:
    disk = DiskMediaStore.from_url('file://~/media?fsync=true')
    assert type(disk) is DiskMediaStore and disk.directory == home / 'media'
    await round_trip(disk)
    assert type(DiskMediaStore.from_url(Path('plain'))) is DiskMediaStore
    with pytest.raises(StoreNotFoundError):
        DiskMediaStore.from_url('file:///nowhere/at/all', create=False)
    sqlite = SqliteMediaStore.from_url('sqlite:///m.db?table=blobs')
    assert (sqlite.database, sqlite.table) == ('m.db', 'blobs')
    await round_trip(sqlite)
    s3 = S3MediaStore.from_url(s3_url(aws_environment, bucket, '/p'))
    assert (s3.bucket, s3.key_prefix) == (bucket, 'p/')
    await round_trip(s3)
    mongo = MongoMediaStore.from_url('mongodb+srv://cluster0.example.invalid/agents?collection=blobs')
    assert (mongo.database, mongo.collection) == ('agents', 'blobs')
    await mongo.aclose()
    assert type(MemoryMediaStore.from_url('memory://')) is MemoryMediaStore


async def test_from_url_builds_the_subclass_it_is_called_on(tmp_path: Path) -> None:
    class MyDisk(DiskMediaStore):
        pass

    store = MyDisk.from_url(f'file://{tmp_path}/m')
    assert type(store) is MyDisk
    await round_trip(store)


def test_plan_from_url_creates_nothing_until_opened(tmp_path: Path) -> None:
    plan = DiskMediaStore.plan_from_url(str(tmp_path / 'a' / 'b'))
    sqlite_plan = SqliteMediaStore.plan_from_url(f'sqlite:///{tmp_path}/c/d.db')
    assert os.listdir(tmp_path) == []
    assert plan.folders == (str(tmp_path / 'a' / 'b'),)
    store = plan.open()
    assert isinstance(store, DiskMediaStore) and (tmp_path / 'a' / 'b').is_dir()
    sqlite_plan.open()
    assert (tmp_path / 'c').is_dir()


def test_a_failed_build_removes_only_the_empty_folders_it_made(tmp_path: Path) -> None:
    from mediastash.stores import StorePlan

    (tmp_path / 'kept').mkdir()

    def build() -> None:
        (tmp_path / 'kept' / 'new' / 'deeper').mkdir(parents=True)
        raise RuntimeError('the build failed')

    with pytest.raises(RuntimeError):
        StorePlan(build, (str(tmp_path / 'kept' / 'new' / 'deeper'),)).open()
    assert os.listdir(tmp_path) == ['kept']
    assert os.listdir(tmp_path / 'kept') == []
