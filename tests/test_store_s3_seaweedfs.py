"""``S3MediaStore`` against SeaweedFS, a real S3-compatible server that checks what moto does not.

SeaweedFS verifies SigV4 signatures (so presigned URLs expire and cannot be
tampered with) and supplied checksums. It runs as ``weed mini`` on 127.0.0.1,
started once per session; a missing ``weed`` binary fails these tests.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import aiohttp
import pytest
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import ClientError

from mediastash import MediaContext, StorePermissionError, media_uri_for
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.testing.store import blob
from mediastash.urls import PublicUrlResolver
from tests.s3_servers import S3Endpoint, seaweedfs, unique_bucket
from tests.test_store_s3 import RawBucket, S3Conformance

__all__ = ['seaweedfs']  # the session fixture, imported so pytest finds it here

MiB = 1 << 20


class TestSeaweedfsStore(S3Conformance):
    """The whole conformance suite on SeaweedFS (signatures and checksums checked by the server)."""

    @pytest.fixture(autouse=True)
    def _endpoint(self, seaweedfs: S3Endpoint) -> None:  # type: ignore[override]
        self.endpoint = seaweedfs
        self.raw: dict[int, RawBucket] = {}


@pytest.fixture
async def raw(seaweedfs: S3Endpoint) -> AsyncIterator[RawBucket]:
    bucket = await RawBucket(seaweedfs, unique_bucket('weed')).open()
    await bucket.create()
    yield bucket
    await bucket.close()


@pytest.fixture
async def store(seaweedfs: S3Endpoint, raw: RawBucket) -> AsyncIterator[S3MediaStore]:
    async with S3MediaStore(bucket=raw.bucket, **seaweedfs.client_options()) as opened:
        yield opened


async def fetch(url: str) -> tuple[int, bytes, str | None]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.read(), response.headers.get('Content-Type')


def with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(changes)
    return urlunsplit(parts._replace(query=urlencode(query)))


# -- presigned URLs ---------------------------------------------------------------------


async def test_presigned_url_returns_exact_bytes_and_type(seaweedfs: S3Endpoint, raw: RawBucket) -> None:
    data = blob(300_000, seed=1)
    async with S3MediaStore(
        bucket=raw.bucket, public_url=PresignedUrls(expires_in=300), **seaweedfs.client_options()
    ) as store:
        uri = await store.put(data, context=MediaContext(media_type='image/png'))
        url = await store.public_url(uri, context=MediaContext(media_type='image/webp'))
    assert url is not None
    assert 'X-Amz-Algorithm=AWS4-HMAC-SHA256' in url
    assert 'X-Amz-Expires=300' in url
    assert seaweedfs.secret_access_key not in url
    status, body, content_type = await fetch(url)
    assert (status, body, content_type) == (200, data, 'image/webp')


async def test_presigned_url_keeps_stored_type_when_asked(store: S3MediaStore) -> None:
    uri = await store.put(b'%PDF-1.7 tiny', context=MediaContext(media_type='application/pdf'))
    url = await store.presigned_url(uri, response_content_type=False, response_content_disposition='inline')
    assert await fetch(url) == (200, b'%PDF-1.7 tiny', 'application/pdf')


async def test_expired_presigned_url_is_refused(store: S3MediaStore) -> None:
    uri = await store.put(b'short lived')
    url = await store.presigned_url(uri, expires_in=1)
    assert (await fetch(url))[0] == 200
    await asyncio.sleep(2.2)
    status, body, _ = await fetch(url)
    assert status == 403
    assert b'short lived' not in body


@pytest.mark.parametrize('tamper', ['signature', 'expiry', 'key', 'content-type'])
async def test_tampered_presigned_url_is_refused(store: S3MediaStore, tamper: str) -> None:
    uri = await store.put(b'signed bytes')
    other = await store.put(b'other bytes')
    url = await store.presigned_url(uri, expires_in=60)
    if tamper == 'signature':
        signature = dict(parse_qsl(urlsplit(url).query))['X-Amz-Signature']
        url = with_query(url, **{'X-Amz-Signature': ('0' if signature[0] != '0' else '1') + signature[1:]})
    elif tamper == 'expiry':
        url = with_query(url, **{'X-Amz-Expires': '604800'})
    elif tamper == 'key':
        url = url.replace(uri[-64:], other[-64:])
    else:
        url = with_query(url, **{'response-content-type': 'text/html'})
    status, body, _ = await fetch(url)
    assert status == 403
    assert b'bytes' not in body


# -- checksums --------------------------------------------------------------------------


async def test_uploads_carry_the_sha256_checksum(store: S3MediaStore, raw: RawBucket) -> None:
    data = blob(100_000, seed=2)
    uri = await store.put(data)
    head = await raw.client.head_object(Bucket=raw.bucket, Key=store.key_for(uri), ChecksumMode='ENABLED')
    assert head['ChecksumSHA256'] == base64.b64encode(hashlib.sha256(data).digest()).decode()


async def test_server_refuses_a_wrong_checksum(store: S3MediaStore, raw: RawBucket) -> None:
    data = blob(10_000, seed=3)
    wrong = base64.b64encode(hashlib.sha256(data + b'!').digest()).decode()
    with pytest.raises(ClientError) as caught:
        await raw.client.put_object(
            Bucket=raw.bucket, Key=store.key_for(media_uri_for(data)), Body=data, ChecksumSHA256=wrong
        )
    assert caught.value.response['ResponseMetadata']['HTTPStatusCode'] == 400
    assert await raw.keys() == []


async def test_head_check_repairs_an_object_with_another_checksum(store: S3MediaStore, raw: RawBucket) -> None:
    data = blob(10_000, seed=4)
    uri = media_uri_for(data)
    wrong = bytes(reversed(data))
    await raw.client.put_object(
        Bucket=raw.bucket,
        Key=store.key_for(uri),
        Body=wrong,
        ChecksumSHA256=base64.b64encode(hashlib.sha256(wrong).digest()).decode(),
    )
    assert await store.put(data) == uri
    assert await raw.read(store.key_for(uri)) == data


async def test_multipart_round_trip_with_part_checksums(seaweedfs: S3Endpoint, raw: RawBucket) -> None:
    data = blob(12 * MiB, seed=5)
    async with S3MediaStore(
        bucket=raw.bucket, multipart_threshold=5 * MiB, part_size=5 * MiB, **seaweedfs.client_options()
    ) as store:
        uri = await store.put(data, context=MediaContext(media_type='video/mp4', metadata={'take': 'Ünïcode 1'}))
        assert await store.get(uri) == data
        assert dict(await store.get_metadata(uri)) == {'take': 'Ünïcode 1'}
        head = await raw.client.head_object(Bucket=raw.bucket, Key=store.key_for(uri), ChecksumMode='ENABLED')
    assert head['ContentType'] == 'video/mp4'
    assert head.get('ChecksumSHA256', '').endswith('-3')
    assert await raw.uploads() == []


async def test_wrong_credentials_are_refused(seaweedfs: S3Endpoint, raw: RawBucket, tmp_path: Path) -> None:
    options: dict[str, Any] = {**seaweedfs.client_options(), 'aws_secret_access_key': 'not-the-secret'}
    async with S3MediaStore(bucket=raw.bucket, max_attempts=1, **options) as store:
        with pytest.raises(StorePermissionError) as caught:
            await store.put(b'refused')
    assert isinstance(caught.value.__cause__, ClientError)
    assert caught.value.status == 403
    assert 'not-the-secret' not in str(caught.value)
    assert await raw.keys() == []


async def test_public_url_resolver_still_works(seaweedfs: S3Endpoint, raw: RawBucket) -> None:
    def resolver(uri: str, context: Any) -> str:
        return f'https://cdn.example.com/{uri[-64:]}.bin'

    public_url: PublicUrlResolver = resolver
    async with S3MediaStore(bucket=raw.bucket, public_url=public_url, **seaweedfs.client_options()) as store:
        uri = await store.put(b'cdn')
        assert await store.public_url(uri) == f'https://cdn.example.com/{uri[-64:]}.bin'


async def test_unsigned_body_with_a_wrong_checksum_is_refused(seaweedfs: S3Endpoint, raw: RawBucket) -> None:
    """The store sends UNSIGNED-PAYLOAD over plain HTTP: the signed checksum header is what protects the body."""
    data = blob(10_000, seed=13)
    config = AioConfig(
        signature_version='s3v4',
        s3={'addressing_style': 'path', 'payload_signing_enabled': False},
        request_checksum_calculation='when_required',
    )
    async with get_session().create_client('s3', config=config, **seaweedfs.client_options()) as client:
        wrong = base64.b64encode(hashlib.sha256(data[:-1] + b'?').digest()).decode()
        with pytest.raises(ClientError) as caught:
            await client.put_object(Bucket=raw.bucket, Key='tampered.bin', Body=data, ChecksumSHA256=wrong)
    assert caught.value.response['ResponseMetadata']['HTTPStatusCode'] == 400
    assert await raw.keys() == []


# -- garbage collection: the touch is a self-copy ---------------------------------------


async def test_touch_keeps_type_metadata_and_checksum(store: S3MediaStore, raw: RawBucket) -> None:
    data = blob(50_000, seed=7)
    uri = await store.put(data, context=MediaContext(media_type='image/png', metadata={'caption': 'Çà', 'k': 'v'}))
    key = store.key_for(uri)
    before = await raw.client.head_object(Bucket=raw.bucket, Key=key, ChecksumMode='ENABLED')
    await asyncio.sleep(1.1)  # a HEAD's Last-Modified has whole seconds
    assert await store.touch_many([uri], touch_after=0) == {uri}
    after = await raw.client.head_object(Bucket=raw.bucket, Key=key, ChecksumMode='ENABLED')
    assert after['LastModified'] > before['LastModified']
    assert (after['ContentType'], after['Metadata']) == ('image/png', before['Metadata'])
    assert after['ChecksumSHA256'] == base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert dict(await store.get_metadata(uri)) == {'caption': 'Çà', 'k': 'v'}
    assert await store.get(uri) == data
    assert (
        await store.delete_unless_touched([uri], written_before=before['LastModified'].timestamp() + 1) == frozenset()
    )
    assert await store.exists(uri)
