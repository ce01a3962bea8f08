"""``S3MediaStore`` against moto in server mode: the conformance suite plus S3-specific behaviour.

Every request goes over HTTP to a real moto process on 127.0.0.1; the SDK is
never patched. The raw helpers reach the bucket through a separate client.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import pytest
from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings

import mediastash.stores.s3._store as s3_store_module
from mediastash import (
    IntegrityError,
    MediaContext,
    MediaNotFoundError,
    default_key_strategy,
    media_uri_for,
    sharded_key_strategy,
)
from mediastash.errors import InvalidStoreConfiguration, StoreClosedError, UnsafeKeyError
from mediastash.stores import DigestRange
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.stores.s3._touch import refresh_object
from mediastash.testing.store import MISSING_URI, StoreTests, blob, chunked
from mediastash.urls import PublicUrlResolver
from tests.namespace_interleaving import check_interleaving, operations
from tests.s3_servers import S3Endpoint, moto_server, unique_bucket
from tests.storage_snapshots import bucket_state

__all__ = ['moto_server']  # the session fixture, imported so pytest finds it here


RAW_SESSION = get_session()
RAW_CONFIG = Config(signature_version='s3v4', s3={'addressing_style': 'path'}, retries={'total_max_attempts': 1})
MiB = 1 << 20
SECRET = 'sEcReT-ACCESS-key-do-not-leak'
TOKEN = 'SESSION-token-do-not-leak'


def digest(uri: str) -> str:
    return uri.removeprefix('media+sha256://')


class RawBucket:
    """One bucket reached through the test's own client (the backend bypass)."""

    def __init__(self, endpoint: S3Endpoint, bucket: str) -> None:
        self.endpoint = endpoint
        self.bucket = bucket
        self._context: Any = None
        self.client: Any = None

    async def open(self) -> RawBucket:
        self._context = RAW_SESSION.create_client(
            's3',
            config=RAW_CONFIG,
            **self.endpoint.client_options(),
        )
        self.client = await self._context.__aenter__()
        return self

    async def close(self) -> None:
        if self._context is not None:
            await self._context.__aexit__(None, None, None)
            self._context = None

    async def create(self) -> None:
        await self.client.create_bucket(Bucket=self.bucket)

    async def read(self, key: str) -> bytes | None:
        try:
            response = await self.client.get_object(Bucket=self.bucket, Key=key)
        except self.client.exceptions.NoSuchKey:
            return None
        async with response['Body'] as body:
            return bytes(await body.read())

    async def write(self, key: str, data: bytes) -> None:
        await self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    async def delete(self, key: str) -> None:
        await self.client.delete_object(Bucket=self.bucket, Key=key)

    async def keys(self) -> list[str]:
        found: list[str] = []
        async for page in self.client.get_paginator('list_objects_v2').paginate(Bucket=self.bucket):
            found.extend(item['Key'] for item in page.get('Contents', []))
        return sorted(found)

    async def head(self, key: str) -> dict[str, Any]:
        return dict(await self.client.head_object(Bucket=self.bucket, Key=key))

    async def destroy(self) -> None:
        """Empty and remove the bucket (SeaweedFS gives every bucket its own volumes: a long run exhausts them)."""
        try:
            await self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            return  # the test removed it
        for upload in await self.uploads():
            await self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload['Key'], UploadId=upload['UploadId'])
        keys = await self.keys()
        for start in range(0, len(keys), 1000):
            objects = [{'Key': key} for key in keys[start : start + 1000]]
            await self.client.delete_objects(Bucket=self.bucket, Delete={'Objects': objects, 'Quiet': True})
        await self.client.delete_bucket(Bucket=self.bucket)

    async def uploads(self) -> list[dict[str, Any]]:
        response = await self.client.list_multipart_uploads(Bucket=self.bucket)
        return list(response.get('Uploads', []))


class S3Conformance(StoreTests):
    """The conformance suite on a fresh bucket per store; subclasses choose the endpoint and options."""

    has_namespaces: ClassVar[bool | None] = True

    store_options: ClassVar[dict[str, Any]] = {}
    written_at_resolution: ClassVar[float] = 1.0  # a HEAD's Last-Modified has whole seconds
    # raw_set_written_at stays unimplemented: LastModified cannot be set (see the tests with a short
    # TOUCH_AFTER_SECONDS below); the real-time garbage-collection tests of the suite still run.

    @pytest.fixture(autouse=True)
    def _endpoint(self, moto_server: S3Endpoint) -> None:
        self.endpoint = moto_server
        self.raw: dict[int, RawBucket] = {}

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> S3MediaStore:
        raw = await RawBucket(self.endpoint, unique_bucket()).open()
        await raw.create()
        store = S3MediaStore(
            bucket=raw.bucket, public_url=public_url, **self.endpoint.client_options(), **self.store_options
        )
        self.raw[id(store)] = raw
        return store

    async def reopen_store(self, store: Any) -> S3MediaStore:
        """A second store with its own client on the same bucket and prefix."""
        return S3MediaStore(bucket=store.bucket, **self.endpoint.client_options(), **self.store_options)

    async def close_store(self, store: Any) -> None:
        await store.aclose()
        raw = self.raw.pop(id(store), None)
        if raw is not None:
            try:
                await raw.destroy()
            finally:
                await raw.close()

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return await self.raw[id(store)].read(store.key_for(uri))

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        await self.raw[id(store)].write(store.key_for(uri), data)

    async def raw_storage_snapshot(self, store: Any) -> object | None:
        raw = self.raw[id(store)]
        return await bucket_state(raw.client, raw.bucket)

    async def raw_delete(self, store: Any, uri: str) -> None:
        await self.raw[id(store)].delete(store.key_for(uri))

    async def raw_count(self, store: Any) -> int | None:
        return len(await self.raw[id(store)].keys())


class TestS3Store(S3Conformance):
    """Defaults: HEAD before PUT, conditional writes."""


class TestS3StoreIfNoneMatch(S3Conformance):
    """Conditional PUT without a HEAD first, under a key prefix and the sharded key strategy."""

    store_options: ClassVar[dict[str, Any]] = {
        'put_check': 'if-none-match',
        'key_prefix': 'tenant-a/media/',
        'key_strategy': sharded_key_strategy,
    }

    async def test_listing_many(self, store: Any) -> None:
        pytest.skip('1500 blobs take seconds on moto; TestS3Store covers it and test_listing covers the prefix')


# -- S3-specific behaviour on moto -------------------------------------------------------


@pytest.fixture
async def raw(moto_server: S3Endpoint) -> AsyncIterator[RawBucket]:
    bucket = await RawBucket(moto_server, unique_bucket('own')).open()
    await bucket.create()
    yield bucket
    await bucket.close()


@pytest.fixture
async def make(moto_server: S3Endpoint, raw: RawBucket) -> AsyncIterator[Any]:
    stores: list[S3MediaStore] = []

    def factory(**options: Any) -> S3MediaStore:
        store = S3MediaStore(bucket=raw.bucket, **{**moto_server.client_options(), **options})
        stores.append(store)
        return store

    yield factory
    for store in stores:
        await store.aclose()


async def test_unusual_characters_in_key(make: Any, raw: RawBucket) -> None:
    store = make(key_strategy=lambda uri, context: 'a b/c@d(e)=f+g.bin', key_prefix='pre fix/')
    uri = await store.put(b'odd key', context=MediaContext(metadata={'x': 'y'}))
    assert await raw.keys() == ['pre fix/a b/c@d(e)=f+g.bin']
    assert await raw.read('pre fix/a b/c@d(e)=f+g.bin') == b'odd key'
    assert await store.get(uri) == b'odd key'
    assert dict(await store.get_metadata(uri)) == {'x': 'y'}
    url = await store.presigned_url(uri)
    assert '/pre%20fix/a%20b/c%40d%28e%29%3Df%2Bg.bin?' in url
    assert await store.delete(uri)
    assert await raw.keys() == []


@pytest.mark.parametrize(
    'key', ['', '/abs.bin', 'a//b.bin', 'a/../b.bin', './x.bin', 'new\nline.bin', 'x' * 1025, None]
)
async def test_unsafe_keys_are_refused(make: Any, raw: RawBucket, key: object) -> None:
    store = make(key_strategy=lambda uri, context: key)
    with pytest.raises(UnsafeKeyError):
        await store.put(b'payload')
    with pytest.raises(UnsafeKeyError):
        await store.get(media_uri_for(b'payload'))
    assert await raw.keys() == []


async def test_key_with_a_lone_surrogate_is_a_typed_error(make: Any, raw: RawBucket) -> None:
    """A key S3 cannot carry (not UTF-8) is refused naming the key, never a bare ``UnicodeEncodeError``."""
    store = make(key_strategy=lambda uri, context: f'bad\udc80/{uri[-64:]}.bin')
    uri = media_uri_for(b'payload')
    for call in (store.put(b'payload'), store.get(uri), store.exists(uri), store.presigned_url(uri)):
        with pytest.raises(UnsafeKeyError, match=re.escape(repr('bad\udc80/')[1:-1]) + '.*UTF-8') as caught:
            await call
        assert not isinstance(caught.value, UnicodeError)
    with pytest.raises(UnsafeKeyError, match='UTF-8'):
        store.key_for(uri)
    assert await raw.keys() == []


def test_key_prefix_with_a_lone_surrogate_is_refused_at_construction() -> None:
    with pytest.raises(InvalidStoreConfiguration, match='key_prefix must be encodable as UTF-8'):
        S3MediaStore(bucket='b', key_prefix='media\ud800/')


async def test_prefix_and_listing_ignore_foreign_objects(make: Any, raw: RawBucket) -> None:
    store = make(key_prefix='tenant/')
    uri = await store.put(b'mine')
    await raw.write('tenant/notes.txt', b'not a blob')
    await raw.write(f'elsewhere/{uri[-64:]}.bin', b'mine')
    await raw.write(f'tenant/{"f" * 64}.bin.tmp', b'not a blob')
    assert [u async for u in store.iter_uris()] == [uri]
    assert f'tenant/{uri[-64:]}.bin' in await raw.keys()


async def test_metadata_and_content_type_on_the_wire(make: Any, raw: RawBucket) -> None:
    store = make()
    metadata = {'tenant': 'acme', 'caption': 'Çà — 猫', 'empty': '', 'padded': ' x ', 'word': '=?UTF-8?B?eA==?='}
    uri = await store.put(b'meta', context=MediaContext(media_type='image/png', metadata=metadata))
    head = await raw.head(store.key_for(uri))
    assert head['ContentType'] == 'image/png'
    assert head['Metadata']['tenant'] == 'acme'
    assert head['Metadata']['caption'].startswith('=?UTF-8?B?')
    assert head['Metadata']['word'] != '=?UTF-8?B?eA==?='
    assert dict(await store.get_metadata(uri)) == metadata


async def test_mixed_case_metadata_keys_are_accepted_and_come_back_lowercased(make: Any, raw: RawBucket) -> None:
    """They used to be refused with ``ValueError``, where the harness's S3 store and every other store accept
    them. S3 keeps user-metadata names lowercased, so that is what ``get_metadata`` returns."""
    store = make()
    uri = await store.put(b'tagged', context=MediaContext(metadata={'Tenant': 'acme', 'Run-ID': 'R1', 'x': 'y'}))
    assert dict(await store.get_metadata(uri)) == {'tenant': 'acme', 'run-id': 'R1', 'x': 'y'}
    assert (await raw.head(store.key_for(uri)))['Metadata'] == {'tenant': 'acme', 'run-id': 'R1', 'x': 'y'}
    streamed = await store.put_stream(chunked(b'streamed', 3), context=MediaContext(metadata={'Origin': 'Pipeline'}))
    assert dict(await store.get_metadata(streamed)) == {'origin': 'Pipeline'}


async def test_first_put_metadata_wins(make: Any) -> None:
    store = make()
    uri = await store.put(b'blob', context=MediaContext(metadata={'v': '1'}))
    await store.put(b'blob', context=MediaContext(metadata={'v': '2'}))
    assert dict(await store.get_metadata(uri)) == {'v': '1'}


@pytest.mark.parametrize(
    ('metadata', 'message'),
    [
        ({'Tenant': 'x', 'tenant': 'y'}, "'Tenant' and 'tenant' differ only in case"),
        ({'bad key': 'x'}, "'bad key'"),
        ({'-lead': 'x'}, "'-lead'"),
        ({'ok': 'line\nbreak'}, "'ok'"),
        ({'tab': 'a\tb'}, "'tab'"),
        ({'big': 'x' * 2100}, 'allows 2048'),
    ],
)
async def test_bad_metadata_is_refused_before_sending(make: Any, raw: RawBucket, metadata: Any, message: str) -> None:
    store = make()
    with pytest.raises(ValueError, match=re.escape(message)):
        await store.put(b'x', context=MediaContext(metadata=metadata))
    with pytest.raises(ValueError, match=re.escape(message)):
        await store.put_stream(chunked(b'x', 1), context=MediaContext(metadata=metadata))
    assert await raw.keys() == []


async def test_64_mib_multipart_round_trip(make: Any, raw: RawBucket) -> None:
    store = make()
    data = os.urandom(64 * MiB)
    uri = await store.put(data, context=MediaContext(media_type='video/mp4'))
    assert uri == media_uri_for(data)
    assert await store.get(uri) == data
    head = await raw.head(store.key_for(uri))
    assert head['ETag'].endswith('-8"')
    assert head['ContentType'] == 'video/mp4'
    assert await raw.uploads() == []


async def test_streamed_put_spools_to_a_temp_file_and_cleans_up(make: Any, raw: RawBucket, tmp_path: Path) -> None:
    store = make(multipart_threshold=5 * MiB, part_size=5 * MiB, spool_directory=tmp_path)
    data = blob(11 * MiB, seed=3)
    uri = await store.put_stream(chunked(data, MiB), context=MediaContext(metadata={'via': 'stream'}))
    assert uri == media_uri_for(data)
    assert os.listdir(tmp_path) == []
    assert (await raw.head(store.key_for(uri)))['ETag'].endswith('-3"')
    assert await store.get(uri) == data
    assert dict(await store.get_metadata(uri)) == {'via': 'stream'}


async def test_repairs_an_object_of_the_wrong_size(make: Any, raw: RawBucket) -> None:
    store = make()
    data = blob(5000, seed=4)
    uri = media_uri_for(data)
    await raw.write(store.key_for(uri), data[:10])
    assert await store.put(data) == uri
    assert await raw.read(store.key_for(uri)) == data


async def test_secrets_stay_out_of_repr_errors_and_logs(
    moto_server: S3Endpoint, raw: RawBucket, caplog: pytest.LogCaptureFixture
) -> None:
    options = {**moto_server.client_options(), 'aws_secret_access_key': SECRET, 'aws_session_token': TOKEN}
    endpoint = moto_server.url.replace('http://', f'http://user:{SECRET}@')
    caplog.set_level(logging.DEBUG)
    store = S3MediaStore(bucket=raw.bucket, **options)
    texts = [repr(store), str(store)]
    try:
        uri = await store.put(blob(1000), context=MediaContext(metadata={'k': 'v'}))
        await store.get(uri)
        url = await store.presigned_url(uri)
        assert SECRET not in url  # SigV4 presigning puts the session token itself in the URL, by design
        for call in (store.get(media_uri_for(b'missing')), store.get_metadata(media_uri_for(b'missing'))):
            with pytest.raises(MediaNotFoundError) as caught:
                await call
            texts.append(str(caught.value))
    finally:
        await store.aclose()
    with pytest.raises(StoreClosedError) as closed:
        await store.exists(uri)
    texts.append(str(closed.value))
    texts.append(repr(store.storage_key))
    with pytest.warns(UserWarning, match='user-info'):
        with_userinfo = S3MediaStore(bucket='b', endpoint_url=endpoint, aws_secret_access_key=SECRET)
    texts.extend([repr(with_userinfo), repr(with_userinfo.storage_key)])
    texts.extend(record.getMessage() for record in caplog.records)
    assert len(caplog.records) > 10  # botocore really logged the requests at DEBUG
    for text in texts:
        assert SECRET not in text
        assert TOKEN not in text
    assert texts[0] == f'S3MediaStore(bucket={raw.bucket!r}, endpoint_url={moto_server.url!r})'


class _Everything(logging.Handler):
    """Keeps every record that reaches the root logger, formatted as a handler would see it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.texts.append(f'{record.name} {record.getMessage()} {record.args!r} {record.__dict__!r}')


async def test_password_in_endpoint_url_reaches_no_logger(moto_server: S3Endpoint, raw: RawBucket) -> None:
    """User-info in ``endpoint_url`` is stripped before the SDK sees it: no record of any library carries it."""
    password = 'PassWord-in-the-URL-do-not-leak'
    endpoint = moto_server.url.replace('http://', f'http://someone:{password}@')
    handler = _Everything()
    root = logging.getLogger()
    names = ('', 'botocore', 'aiobotocore', 'urllib3', 'aiohttp', 'mediastash')
    levels = {name: logging.getLogger(name).level for name in names}
    root.addHandler(handler)
    for name in names:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        with pytest.warns(UserWarning, match='user-info') as warned:
            store = S3MediaStore(
                bucket=raw.bucket,
                endpoint_url=endpoint,
                region_name=moto_server.region_name,
                aws_access_key_id=moto_server.access_key_id,
                aws_secret_access_key=moto_server.secret_access_key,
            )
        async with store:
            small, large = blob(1000, seed=21), blob(3 * MiB, seed=22)
            uris = [await store.put(data, context=MediaContext(metadata={'k': 'v'})) for data in (small, large)]
            assert [await store.get(uri) for uri in uris] == [small, large]
            assert await store.exists(uris[0])
            assert dict(await store.get_metadata(uris[0])) == {'k': 'v'}
            url = await store.presigned_url(uris[0])
            async with aiohttp.ClientSession() as http, http.get(url) as response:
                assert response.status == 200
                assert await response.read() == small
            with pytest.raises(MediaNotFoundError) as missing:
                await store.get(media_uri_for(b'missing'))
            assert await store.delete(uris[1])
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    assert any(record.name.startswith('botocore') for record in handler.records)  # the SDK really logged
    assert any(moto_server.url.removeprefix('http://') in text for text in handler.texts)  # and named the host
    texts = [*handler.texts, url, str(missing.value), repr(store), *(str(w.message) for w in warned)]
    for text in texts:
        assert password not in text
        assert 'someone:' not in text


async def test_caller_owned_client_stays_open(moto_server: S3Endpoint, raw: RawBucket) -> None:
    async with RAW_SESSION.create_client(
        's3', config=Config(signature_version='s3v4'), **moto_server.client_options()
    ) as client:
        async with S3MediaStore(bucket=raw.bucket, client=client) as store:
            uri = await store.put(b'caller client')
            assert 'X-Amz-Signature=' in await store.presigned_url(uri)
        with pytest.raises(StoreClosedError):
            await store.get(uri)
        assert await raw.read(store.key_for(uri)) == b'caller client'
        assert (await client.head_object(Bucket=raw.bucket, Key=store.key_for(uri)))['ContentLength'] == 13


async def test_caller_client_that_would_presign_with_sigv2_is_refused(moto_server: S3Endpoint, raw: RawBucket) -> None:
    async with RAW_SESSION.create_client('s3', **moto_server.client_options()) as client:
        store = S3MediaStore(bucket=raw.bucket, client=client)
        uri = await store.put(b'v2')
        with pytest.raises(InvalidStoreConfiguration, match='SigV4'):
            await store.presigned_url(uri)


async def test_presigned_url_options(make: Any) -> None:
    store = make(public_url=PresignedUrls(expires_in=120, response_content_disposition='attachment'))
    uri = await store.put(b'download me', context=MediaContext(media_type='text/plain'))
    url = await store.public_url(uri, context=MediaContext(media_type='text/csv'))
    assert 'X-Amz-Algorithm=AWS4-HMAC-SHA256' in url
    assert 'X-Amz-Expires=120' in url
    assert 'response-content-type=text%2Fcsv' in url
    assert 'response-content-disposition=attachment' in url
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert await response.read() == b'download me'


@pytest.mark.parametrize('expires_in', [0, -5, 604801, 1.5, True, '60'])
async def test_presign_expiry_bounds(make: Any, expires_in: Any) -> None:
    with pytest.raises(InvalidStoreConfiguration, match='expires_in'):
        PresignedUrls(expires_in=expires_in)
    store = make()
    with pytest.raises(ValueError, match='expires_in'):
        await store.presigned_url(media_uri_for(b'x'), expires_in=expires_in)


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({'bucket': ''}, 'bucket'),
        ({'client': object(), 'endpoint_url': 'http://x'}, 'either client='),
        ({'part_size': 1 << 20}, 'part_size'),
        ({'multipart_threshold': 1000}, 'multipart_threshold'),
        ({'max_concurrency': 0}, 'max_concurrency'),
        ({'put_check': 'guess'}, 'put_check'),
        ({'retry_max_backoff': -1}, 'retry_max_backoff'),
        ({'client': object(), 'retry_max_backoff': 0.1}, 'retry_max_backoff'),
        ({'key_prefix': '/root/'}, 'key_prefix'),
        ({'known_ttl': 0}, 'known_ttl'),
        ({'known_ttl': -1.0}, 'known_ttl'),
        ({'known_ttl': True}, 'known_ttl'),
        ({'known_ttl': '60'}, 'known_ttl'),
    ],
)
def test_invalid_configuration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidStoreConfiguration, match=message):
        S3MediaStore(**{'bucket': 'b', **options})


async def test_sigv2_config_is_refused(make: Any) -> None:
    store = make(config=Config(signature_version='s3'))
    with pytest.raises(InvalidStoreConfiguration, match='SigV4'):
        await store.put(b'x')


async def test_delete_many_in_batches(make: Any, raw: RawBucket) -> None:
    store = make()
    uris = await asyncio.gather(*(store.put(f'gc {i}'.encode()) for i in range(30)))
    assert await store.delete_many([*uris[:20], media_uri_for(b'never'), uris[0]]) == 20
    assert sorted(await raw.keys()) == sorted(store.key_for(uri) for uri in uris[20:])


async def test_under_pydantic_ai_harness_file_step_store(make: Any, raw: RawBucket, tmp_path: Path) -> None:
    steps = pytest.importorskip('pydantic_ai_harness.step_persistence')
    messages = pytest.importorskip('pydantic_ai.messages')
    store = make()
    image = blob(200_000, seed=9)
    history = [
        messages.ModelRequest(
            parts=[
                messages.UserPromptPart(
                    content=['What is this?', messages.BinaryContent(data=image, media_type='image/png')]
                )
            ]
        ),
        messages.ModelResponse(parts=[messages.TextPart(content='A cat.')]),
    ]
    step_store = steps.FileStepStore(tmp_path / 'runs', media_store=store)
    await step_store.register_run(steps.RunRecord(run_id='r1', agent_name='s3'))
    await step_store.save_snapshot(
        steps.ContinuableSnapshot(run_id='r1', step_index=1, messages=history, agent_name='s3')
    )
    restored = await step_store.latest_snapshot(run_id='r1')
    assert restored is not None
    adapter = messages.ModelMessagesTypeAdapter
    assert adapter.dump_python(restored.messages, mode='json') == adapter.dump_python(history, mode='json')
    assert await raw.keys() == [f'{hashlib.sha256(image).hexdigest()}.bin']
    assert await raw.read(store.key_for(media_uri_for(image))) == image


@pytest.mark.parametrize('tamper', ['flipped', 'truncated'])
async def test_large_blob_hashed_while_it_arrives_is_still_verified(make: Any, raw: RawBucket, tamper: str) -> None:
    store = make()
    data = blob(9 * MiB, seed=12)
    uri = await store.put(data)
    stored = data[: 5 * MiB] + bytes([data[5 * MiB] ^ 1]) + data[5 * MiB + 1 :] if tamper == 'flipped' else data[:-1]
    await raw.write(store.key_for(uri), stored)
    with pytest.raises(IntegrityError) as caught:
        await store.get(uri)
    assert uri in str(caught.value)


# -- storage identity (the known-blob caches' key) --------------------------------------


def test_storage_identity_without_a_client() -> None:
    assert S3MediaStore(bucket='b', region_name='eu-west-1').storage_key == ('s3', 'eu-west-1', 'b', '')
    with pytest.warns(UserWarning, match='user-info'):
        custom = S3MediaStore(bucket='b', key_prefix='p/', endpoint_url=f'HTTP://user:{SECRET}@Minio.Example:9000/')
    assert custom.storage_key == ('s3', 'http://minio.example:9000', 'b', 'p/')
    plain = S3MediaStore(bucket='b', endpoint_url='http://minio.example:9000')
    assert plain.storage_key == ('s3', 'http://minio.example:9000', 'b', '')
    assert SECRET not in repr(custom.storage_key)


async def test_instances_on_one_bucket_and_prefix_share_their_storage_key(
    moto_server: S3Endpoint, raw: RawBucket
) -> None:
    options = moto_server.client_options()
    async with RAW_SESSION.create_client('s3', config=RAW_CONFIG, **options) as client:
        first = S3MediaStore(bucket=raw.bucket, key_prefix='t/', **options)
        second = S3MediaStore(bucket=raw.bucket, key_prefix='t/', client=client)  # a caller's client, same endpoint
        other_prefix = S3MediaStore(bucket=raw.bucket, key_prefix='u/', **options)
        other_bucket = S3MediaStore(bucket=unique_bucket('other'), key_prefix='t/', **options)
        try:
            assert first.storage_key == second.storage_key
            assert hash(first.storage_key) == hash(second.storage_key)
            assert other_prefix.storage_key != first.storage_key
            assert other_bucket.storage_key != first.storage_key
            uri = await first.put(b'shared')
            before = (second.deletion_generation, other_prefix.deletion_generation)
            assert await second.delete(uri)
            assert second.deletion_generation > before[0]
            assert first.deletion_generation == second.deletion_generation
            assert other_prefix.deletion_generation == before[1]
            generation = second.deletion_generation
            assert await first.delete_many([uri]) == 0  # already gone, yet still noted for every instance
            assert second.deletion_generation > generation
        finally:
            for store in (first, second, other_prefix, other_bucket):
                await store.aclose()


async def test_known_ttl_sees_a_deletion_through_another_instance(make: Any, raw: RawBucket) -> None:
    remembering = make(known_ttl=60)
    collector = make()
    data = blob(20_000, seed=21)
    uri = await remembering.put(data)
    assert await collector.delete(uri)
    assert await raw.keys() == []
    assert await remembering.put(data) == uri  # the deletion was noted for the same storage: HEAD, then upload
    assert await raw.read(remembering.key_for(uri)) == data


def test_importing_mediastash_does_not_import_the_sdk() -> None:
    code = (
        'import sys, mediastash, mediastash.stores\n'
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'aiobotocore', 'botocore', 'aiohttp'})\n"
        'assert not loaded, loaded\n'
        'from mediastash.stores import S3MediaStore, PresignedUrls\n'
        'import mediastash.stores.s3 as package\n'
        'assert S3MediaStore is package.S3MediaStore and PresignedUrls is package.PresignedUrls\n'
        "assert 'aiobotocore' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ('filename', 'disposition'),
    [
        (None, 'inline'),
        ('cat.png', 'inline; filename="cat.png"'),
        ('chat "log".txt', 'inline; filename="chat _log_.txt"; filename*=UTF-8\'\'chat%20%22log%22.txt'),
        ('café.png', 'inline; filename="caf_.png"; filename*=UTF-8\'\'caf%C3%A9.png'),
    ],
)
async def test_presigned_disposition_from_the_context_filename(
    make: Any, filename: str | None, disposition: str
) -> None:
    store = make(public_url=PresignedUrls(expires_in=300, response_content_disposition=True))
    assert store.public_url_lifetime == 300
    uri = await store.put(b'inline me', context=MediaContext(media_type='image/png'))
    url = await store.public_url(uri, context=MediaContext(media_type='image/png', filename=filename))
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert await response.read() == b'inline me'
        assert response.headers.get('Content-Disposition') == disposition


async def test_public_url_lifetime_is_none_without_presigning(make: Any) -> None:
    assert make().public_url_lifetime is None
    with pytest.raises(InvalidStoreConfiguration, match='response_content_disposition'):
        PresignedUrls(response_content_disposition=3)  # type: ignore[arg-type]


# -- garbage collection -----------------------------------------------------------------


async def modified(raw: RawBucket, key: str) -> float:
    return float((await raw.head(key))['LastModified'].timestamp())


async def wait_past_the_second(since: float) -> None:
    """Sleep until a HEAD's whole-second ``Last-Modified`` must differ from one taken at ``since``."""
    await asyncio.sleep(max(0.0, since + 1.05 - time.time()))


@pytest.fixture
def short_touch_after(monkeypatch: pytest.MonkeyPatch) -> float:
    """Stores made after this treat a blob as old after 1 s instead of an hour."""
    monkeypatch.setattr(s3_store_module, 'TOUCH_AFTER_SECONDS', 1.0)
    return 1.0


@pytest.mark.parametrize('put_check', ['head', 'if-none-match'])
async def test_put_of_an_old_blob_copies_it_onto_itself(
    make: Any, raw: RawBucket, short_touch_after: float, put_check: str
) -> None:
    store = make(put_check=put_check)
    data = blob(3000, seed=50)
    context = MediaContext(media_type='image/png', metadata={'caption': 'Çà', 'k': 'v'})
    uri = await store.put(data, context=context)
    key = store.key_for(uri)
    before = await raw.head(key)
    first = before['LastModified'].timestamp()
    await wait_past_the_second(time.time() + short_touch_after)
    assert await store.put(data) == uri
    after = await raw.head(key)
    assert after['LastModified'].timestamp() > first
    assert after['ContentType'] == 'image/png'
    assert after['Metadata'] == before['Metadata']
    assert dict(await store.get_metadata(uri)) == {'caption': 'Çà', 'k': 'v'}
    assert await store.get(uri) == data
    assert [info.written_at async for info in store.iter_blobs()] == [pytest.approx(after['LastModified'].timestamp())]


async def test_put_of_a_young_blob_does_not_copy_it(make: Any, raw: RawBucket) -> None:
    store = make()
    uri = await store.put(b'young')
    first = await modified(raw, store.key_for(uri))
    await wait_past_the_second(time.time())
    await store.put(b'young')
    await store.put_stream(chunked(b'young', 2))
    assert await modified(raw, store.key_for(uri)) == first


async def test_known_ttl_makes_a_put_touch_earlier(make: Any, raw: RawBucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key remembered for ``known_ttl`` skips its HEAD (and touch), so the put touches ``known_ttl`` earlier."""
    monkeypatch.setattr(s3_store_module, 'TOUCH_AFTER_SECONDS', 3.0)
    store = make(known_ttl=1.5)
    uri = await store.put(b'remembered')
    first = await modified(raw, store.key_for(uri))
    await asyncio.sleep(1.6)  # past known_ttl, short of TOUCH_AFTER_SECONDS
    await store.put(b'remembered')
    assert await modified(raw, store.key_for(uri)) > first


async def test_touch_many_copies_old_blobs_and_keeps_their_headers(make: Any, raw: RawBucket) -> None:
    store = make()
    old = await store.put(b'old', context=MediaContext(media_type='text/plain', metadata={'k': 'v'}))
    await wait_past_the_second(time.time())
    young = await store.put(b'young')
    young_modified = await modified(raw, store.key_for(young))
    old_modified = await modified(raw, store.key_for(old))
    await raw.client.put_object_tagging(
        Bucket=raw.bucket, Key=store.key_for(old), Tagging={'TagSet': [{'Key': 'team', 'Value': 'a'}]}
    )
    # Touch what was modified before the young blob's second (the old one only).
    touch_after = time.time() - young_modified + 0.5
    assert await store.touch_many([old, young, MISSING_URI], touch_after=touch_after) == {old, young}
    head = await raw.head(store.key_for(old))
    assert head['LastModified'].timestamp() > old_modified
    assert (head['ContentType'], head['Metadata']) == ('text/plain', {'k': 'v'})
    tags = await raw.client.get_object_tagging(Bucket=raw.bucket, Key=store.key_for(old))
    assert tags['TagSet'] == [{'Key': 'team', 'Value': 'a'}]
    assert await modified(raw, store.key_for(young)) == young_modified


async def test_blob_deleted_before_its_touch_is_reported_gone(make: Any, raw: RawBucket) -> None:
    store = make()
    uri = await store.put(b'collected meanwhile')
    key = store.key_for(uri)
    head = await raw.head(key)
    await raw.delete(key)
    assert await store._refresh(await store._s3(), key, head) is False
    assert await raw.keys() == [], 'a failed copy leaves nothing behind'
    long_ago = {**head, 'LastModified': datetime(2000, 1, 1, tzinfo=UTC)}
    assert await store._keep_fresh(await store._s3(), key, long_ago) is False


async def test_objects_over_the_copy_limit_are_copied_in_parts(raw: RawBucket) -> None:
    data = os.urandom(12 * MiB)
    await raw.client.put_object(
        Bucket=raw.bucket, Key='big.bin', Body=data, ContentType='video/mp4', Metadata={'k': 'v'}
    )
    head = await raw.head('big.bin')
    await wait_past_the_second(time.time())
    await refresh_object(
        raw.client, bucket=raw.bucket, key='big.bin', head=head, concurrency=2, copy_limit=8 * MiB, part_size=5 * MiB
    )
    after = await raw.head('big.bin')
    assert after['LastModified'] > head['LastModified']
    assert (after['ContentType'], after['Metadata'], after['ContentLength']) == ('video/mp4', {'k': 'v'}, 12 * MiB)
    assert after['ETag'].endswith('-3"'), 'three parts of 5, 5 and 2 MiB'
    assert await raw.read('big.bin') == data
    assert await raw.uploads() == []


async def test_failed_part_copy_aborts_the_upload(raw: RawBucket) -> None:
    await raw.client.put_object(Bucket=raw.bucket, Key='big.bin', Body=os.urandom(11 * MiB))
    head = await raw.head('big.bin')
    await raw.delete('big.bin')
    with pytest.raises(ClientError):
        await refresh_object(
            raw.client, bucket=raw.bucket, key='big.bin', head=head, concurrency=2, copy_limit=MiB, part_size=5 * MiB
        )
    assert await raw.uploads() == []
    assert await raw.keys() == []


async def test_delete_unless_touched_heads_each_blob_before_deleting(make: Any, raw: RawBucket) -> None:
    store = make()
    uris = [await store.put(f'blob {i}'.encode()) for i in range(250)]
    await wait_past_the_second(time.time())
    cutoff = time.time()
    kept = uris[::50]
    await asyncio.sleep(0.05)
    assert await store.touch_many(kept, touch_after=0) == set(kept)
    deleted = await store.delete_unless_touched([*uris, MISSING_URI], written_before=cutoff)
    assert deleted == set(uris) - set(kept)
    assert sorted(await raw.keys()) == sorted(store.key_for(uri) for uri in kept)


async def test_delete_unless_touched_keeps_a_blob_modified_within_the_cutoff_second(make: Any) -> None:
    """A HEAD says whole seconds: a blob modified in the cutoff's second may be younger, so it stays."""
    store = make()
    uri = await store.put(b'same second')
    assert await store.delete_unless_touched([uri], written_before=time.time()) == frozenset()
    assert await store.exists(uri)


# -- tenant namespaces ------------------------------------------------------------------------


def _either_side(uri: str, context: Any) -> str:
    """A key strategy whose keys sort before (``-/``) and after (``z/``) the namespaces' ``.mediastash-namespaces/``."""
    digest = uri[-64:]
    return f'{"-" if digest[0] < "8" else "z"}/{digest}.bin'


async def test_namespaces_are_key_prefixes_the_store_never_lists(make: Any, raw: RawBucket) -> None:
    """A namespace is ``<key_prefix>.mediastash-namespaces/<name>/``: the store's listing (here with keys sorting on
    both sides of it) skips it whole, views see only their own keys, presigned URLs name only the view's keys."""
    store = make(key_prefix='media/', key_strategy=_either_side, public_url=PresignedUrls(expires_in=300))
    acme, other = store.namespace('acme'), store.namespace('other')
    tenant = [await acme.put(blob(100, seed=seed)) for seed in range(8)]
    own = [await store.put(blob(200, seed=seed)) for seed in range(8)]
    sides = {store.key_for(uri)[len('media/')] for uri in own}
    assert sides == {'-', 'z'}, 'the store must have keys on both sides of .mediastash-namespaces/'
    keys = await raw.keys()
    assert sorted(key for key in keys if key.startswith('media/.mediastash-namespaces/acme/')) == sorted(
        f'media/.mediastash-namespaces/acme/{_either_side(uri, None)}' for uri in tenant
    )
    assert len(keys) == 16

    listings: list[dict[str, Any]] = []
    client = await store._s3()
    record = lambda params, **_: listings.append(dict(params))  # noqa: E731 - the SDK's public event hook
    client.meta.events.register('before-parameter-build.s3.ListObjectsV2', record)
    try:
        assert sorted([uri async for uri in store.iter_uris()]) == sorted(own)
    finally:
        client.meta.events.unregister('before-parameter-build.s3.ListObjectsV2', record)
    assert [listing.get('StartAfter') for listing in listings] == [None, 'media/.mediastash-namespaces/~']
    plain = make(key_prefix='plain/')  # the default strategy lists no digest twice: a restart from the top would
    await plain.namespace('t').put(b'in a namespace of plain/')
    plain_uri = await plain.put(b'in plain/ itself')
    assert [uri async for uri in plain.iter_uris()] == [plain_uri]
    assert [info.uri async for info in plain.iter_blobs_in_range(DigestRange())] == [plain_uri]
    sharded = make(key_prefix='sharded/', key_strategy=sharded_key_strategy)
    await sharded.namespace('t').put(b'in a namespace of sharded/')
    sharded_uri = await sharded.put(b'in sharded/ itself')
    assert [info.uri async for info in sharded.iter_blobs_in_range(DigestRange())] == [sharded_uri]
    assert [uri async for uri in sharded.iter_uris()] == [sharded_uri]
    assert sorted([info.uri async for info in store.iter_blobs()]) == sorted(own)
    assert sorted([uri async for uri in acme.iter_uris()]) == sorted(tenant)
    assert [uri async for uri in other.iter_uris()] == []
    for view in (other, store):
        assert await view.exists_many(tenant) == frozenset()
        with pytest.raises(MediaNotFoundError):
            await view.get(tenant[0])
        assert await view.delete_many(tenant) == 0

    url = await acme.public_url(tenant[0])
    assert url is not None and f'/media/.mediastash-namespaces/acme/{_either_side(tenant[0], None)}?' in url
    assert (
        acme.s3_uri(tenant[0]) == f's3://{raw.bucket}/media/.mediastash-namespaces/acme/{_either_side(tenant[0], None)}'
    )
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            assert await response.read() == blob(100, seed=0)
        for elsewhere in (await other.public_url(tenant[0]), await store.public_url(tenant[0])):
            assert elsewhere is not None
            async with session.get(elsewhere) as response:
                assert response.status == 404, "another namespace's URL must not serve the tenant's blob"

    report = await acme.erase()
    assert (report.count, report.bytes) == (8, 800)
    assert (await acme.erase()).count == 0
    left = [key for key in await raw.keys() if key.startswith('media/')]
    assert left == sorted(store.key_for(uri) for uri in own)


async def test_a_store_cannot_write_into_its_namespaces_keys(make: Any, raw: RawBucket) -> None:
    """A key strategy of the store (say one built from a caller's filename) that lands in the namespaces' keys is
    refused: no caller of the store reaches a tenant's keys. A view's keys are under its own prefix whatever the
    strategy returns."""
    sneaky = make(key_strategy=lambda uri, context: f'.mediastash-namespaces/acme/{uri[-64:]}.bin')
    tenant = sneaky.namespace('acme')
    uri = await tenant.put(b'the tenant blob')
    with pytest.raises(UnsafeKeyError, match=r'\.mediastash-namespaces/'):
        await sneaky.get(uri)
    with pytest.raises(UnsafeKeyError, match=r'\.mediastash-namespaces/'):
        await sneaky.put(b'the tenant blob')
    assert await raw.keys() == [f'.mediastash-namespaces/acme/.mediastash-namespaces/acme/{uri[-64:]}.bin']


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
@pytest.mark.parametrize('strategy', [default_key_strategy, sharded_key_strategy], ids=['flat', 'sharded'])
def test_random_interleavings_leave_each_namespace_exactly_its_blobs(
    moto_server: S3Endpoint, strategy: Any, steps: list[tuple[str, int, int]]
) -> None:
    async def run() -> None:
        raw = await RawBucket(moto_server, unique_bucket('mix')).open()
        await raw.create()
        store = S3MediaStore(bucket=raw.bucket, key_strategy=strategy, **moto_server.client_options())
        try:
            await check_interleaving(store, steps)
        finally:
            await store.aclose()
            await raw.destroy()
            await raw.close()

    asyncio.run(run())
