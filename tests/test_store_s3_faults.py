"""``S3MediaStore`` through a fault-injecting proxy in front of moto.

The proxy answers 503 SlowDown, resets connections, drops responses after moto
applied the request, and cuts GET bodies short on the requests a test picks.
Puts and gets must still succeed with exact bytes and nothing stored twice.
Retry backoff is capped near zero so these tests stay fast.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from botocore.exceptions import IncompleteReadError, ResponseStreamingError

from mediastash import MediaNotFoundError, StoreUnavailableError, media_uri_for
from mediastash.stores.s3 import AUTO_HEAD_FROM, S3MediaStore
from mediastash.testing.store import blob, chunked, collect
from tests.s3_servers import FaultProxy, S3Endpoint, fault_proxy, moto_server, unique_bucket
from tests.test_store_s3 import RawBucket

__all__ = ['fault_proxy', 'moto_server']  # session fixtures, imported so pytest finds them here

MiB = 1 << 20


@pytest.fixture
def proxy(fault_proxy: FaultProxy) -> FaultProxy:
    fault_proxy.reset()
    return fault_proxy


@pytest.fixture
async def raw(moto_server: S3Endpoint) -> AsyncIterator[RawBucket]:
    bucket = await RawBucket(moto_server, unique_bucket('faults')).open()
    await bucket.create()
    yield bucket
    await bucket.close()


@pytest.fixture
async def make(proxy: FaultProxy, raw: RawBucket) -> AsyncIterator[Any]:
    stores: list[S3MediaStore] = []

    def factory(**options: Any) -> S3MediaStore:
        settings: dict[str, Any] = {'max_attempts': 4, 'retry_max_backoff': 0.01, **options}
        store = S3MediaStore(bucket=raw.bucket, **proxy.endpoint.client_options(), **settings)
        stores.append(store)
        return store

    yield factory
    for store in stores:
        await store.aclose()


def requests(proxy: FaultProxy, method: str, contains: str = '') -> int:
    return sum(1 for seen in proxy.seen(method) if contains in seen.target)


# -- uploads ----------------------------------------------------------------------------


async def test_second_put_sends_no_upload(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(put_check='head')
    data = blob(300_000)
    uri = await store.put(data)
    assert requests(proxy, 'PUT') == 1
    assert await store.put(data) == uri
    assert requests(proxy, 'PUT') == 1
    assert requests(proxy, 'HEAD') == 2
    assert await raw.keys() == [f'{uri[-64:]}.bin']


def uploaded(proxy: FaultProxy) -> int:
    return sum(seen.body_size for seen in proxy.seen('PUT'))


async def test_default_put_costs_one_request_per_new_small_blob_at_latency(
    make: Any, proxy: FaultProxy, raw: RawBucket
) -> None:
    """At 20 ms per request a new blob below ``AUTO_HEAD_FROM`` is one conditional PUT (no HEAD first)."""
    proxy.delay = 0.02
    store = make()
    blobs = [blob(256 << 10, seed=seed) for seed in range(8)]
    uris = await asyncio.gather(*map(store.put, blobs))
    assert len(proxy.seen()) == 8
    assert [seen.headers.get('if-none-match') for seen in proxy.seen('PUT')] == ['*'] * 8
    proxy.forget_seen()
    assert await asyncio.gather(*map(store.put, blobs)) == uris  # stored: a 412, then a HEAD that checks the copy
    assert (requests(proxy, 'PUT'), requests(proxy, 'HEAD'), requests(proxy, 'GET')) == (8, 8, 0)
    assert len(await raw.keys()) == 8


async def test_default_put_never_reuploads_a_stored_large_blob(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    """From ``AUTO_HEAD_FROM`` bytes up a HEAD comes first: a re-put of a stored blob uploads no byte."""
    proxy.delay = 0.02
    store = make()
    data = blob(AUTO_HEAD_FROM + 1, seed=3)
    uri = await store.put(data)
    assert (requests(proxy, 'HEAD'), requests(proxy, 'PUT'), uploaded(proxy)) == (1, 1, len(data))
    proxy.forget_seen()
    other = make()  # another instance: no known-blob shortcut
    assert await other.put(data) == uri
    assert (requests(proxy, 'HEAD'), requests(proxy, 'PUT'), uploaded(proxy)) == (1, 0, 0)


@pytest.mark.parametrize(
    ('size', 'route'),
    [
        (MiB - 1, 'conditional'),
        (MiB, 'conditional'),
        (MiB + 1, 'head'),
        (AUTO_HEAD_FROM - 1, 'conditional'),
        (AUTO_HEAD_FROM, 'head'),
    ],
)
async def test_default_put_check_splits_above_one_mib(make: Any, proxy: FaultProxy, size: int, route: str) -> None:
    """A new blob of exactly 1 MiB is one conditional PUT (small, as for ``VERIFY_ON_PUT_BYTES``); from
    ``AUTO_HEAD_FROM`` (1 MiB + 1 byte) a HEAD comes first. Requests counted at the proxy."""
    data = blob(size, seed=size % 97)
    await make().put(data)
    puts = proxy.seen('PUT')
    assert [seen.body_size for seen in puts] == [size]
    assert puts[0].headers.get('if-none-match') == '*'
    assert requests(proxy, 'HEAD') == (1 if route == 'head' else 0)


async def test_default_reput_of_a_stored_one_mib_blob_is_checked_without_a_download(
    make: Any, proxy: FaultProxy, raw: RawBucket
) -> None:
    """The price of the conditional route at exactly 1 MiB: a re-put through another instance sends the body
    (412), then one HEAD whose ETag (our MD5) confirms the copy: no GET, no second object."""
    data = blob(MiB, seed=41)
    uri = await make().put(data)
    proxy.forget_seen()
    assert await make().put(data) == uri
    assert (requests(proxy, 'PUT'), requests(proxy, 'HEAD'), requests(proxy, 'GET'), uploaded(proxy)) == (
        1,
        1,
        0,
        MiB,
    )
    assert await raw.keys() == [f'{uri[-64:]}.bin']


@pytest.mark.parametrize('put_check', ['auto', 'head', 'if-none-match'])
async def test_a_wrong_stored_copy_is_replaced_by_an_unconditional_put(
    make: Any, proxy: FaultProxy, raw: RawBucket, put_check: str
) -> None:
    """Healing on S3: a fresh instance finds the same-size copy wrong (ETag is not our MD5, the GET hashes wrong)
    and sends one PUT without ``If-None-Match``, carrying our SHA-256; a sound copy is left alone."""
    data = blob(200_000, seed=30)
    uri = await make(put_check=put_check).put(data)
    key = make().key_for(uri)
    await raw.write(key, blob(len(data), seed=31))
    proxy.forget_seen()
    assert await make(put_check=put_check).put(data) == uri
    rewrite = [seen for seen in proxy.seen('PUT') if 'if-none-match' not in seen.headers]
    assert len(rewrite) == 1
    assert rewrite[0].headers['x-amz-checksum-sha256'] == base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert await raw.read(key) == data
    proxy.forget_seen()
    assert await make(put_check=put_check).put(data) == uri  # sound now: no unconditional PUT, no GET
    assert all('if-none-match' in seen.headers for seen in proxy.seen('PUT'))
    assert requests(proxy, 'GET') == 0


@pytest.mark.parametrize('kind', ['slowdown', 'reset', 'lost_response'])
@pytest.mark.parametrize('put_check', ['head', 'if-none-match'])
async def test_put_survives_fault(make: Any, proxy: FaultProxy, raw: RawBucket, kind: Any, put_check: str) -> None:
    store = make(put_check=put_check)
    data = blob(200_000, seed=1)
    proxy.inject(kind, 'PUT', times=2)
    uri = await store.put(data)
    assert not proxy.pending()
    assert requests(proxy, 'PUT') == 3
    assert await raw.keys() == [store.key_for(uri)]
    assert await raw.read(store.key_for(uri)) == data
    assert await store.get(uri) == data


async def test_lost_response_without_conditional_writes(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(conditional_writes=False)
    data = blob(50_000, seed=2)
    proxy.inject('lost_response', 'PUT')
    uri = await store.put(data)
    assert requests(proxy, 'PUT') == 2
    assert await raw.keys() == [store.key_for(uri)]
    assert await store.get(uri) == data


async def test_retries_do_not_wait_long(make: Any, proxy: FaultProxy) -> None:
    store = make()
    await store.exists(media_uri_for(b'warm up the client'))
    proxy.inject('slowdown', 'PUT', times=3)
    started = time.monotonic()
    await store.put(b'slow down thrice')
    assert time.monotonic() - started < 1.5  # the SDK's own backoff would average 3.5 s here
    assert requests(proxy, 'PUT') == 4


async def test_put_gives_up_after_max_attempts(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(max_attempts=2)
    proxy.inject('slowdown', 'PUT', times=5)
    with pytest.raises(StoreUnavailableError, match='SlowDown'):
        await store.put(b'never stored')
    assert requests(proxy, 'PUT') == 2
    assert await raw.keys() == []


async def test_head_fault_is_retried(make: Any, proxy: FaultProxy) -> None:
    store = make()
    uri = await store.put(b'present')
    proxy.forget_seen()
    proxy.inject('reset', 'HEAD')
    proxy.inject('slowdown', 'HEAD')
    assert await store.exists(uri)
    assert requests(proxy, 'HEAD') == 3


async def test_missing_blob_through_proxy(make: Any) -> None:
    with pytest.raises(MediaNotFoundError):
        await make().get(media_uri_for(b'absent'))


# -- multipart --------------------------------------------------------------------------


async def test_multipart_survives_faults_on_every_step(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(multipart_threshold=5 * MiB, part_size=5 * MiB, max_concurrency=3)
    data = blob(13 * MiB, seed=3)
    proxy.inject('slowdown', 'POST', contains='?uploads')
    proxy.inject('lost_response', 'PUT', contains='partNumber=2')
    proxy.inject('reset', 'PUT', contains='partNumber=3')
    proxy.inject('lost_response', 'POST', contains='uploadId=')
    uri = await store.put(data)
    assert not proxy.pending()
    assert requests(proxy, 'PUT', 'partNumber=') == 5
    key = store.key_for(uri)
    assert await raw.keys() == [key]
    assert (await raw.head(key))['ETag'].endswith('-3"')
    assert await raw.uploads() == []
    assert await store.get(uri) == data


async def test_failed_multipart_upload_is_aborted(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(multipart_threshold=5 * MiB, part_size=5 * MiB, max_attempts=2)
    data = blob(11 * MiB, seed=4)
    proxy.inject('slowdown', 'PUT', contains='partNumber=2', times=10)
    with pytest.raises(StoreUnavailableError, match='SlowDown'):
        await store.put(data)
    assert requests(proxy, 'DELETE', 'uploadId=') == 1
    assert await raw.uploads() == []
    assert await raw.keys() == []


async def test_failed_streamed_multipart_is_aborted(
    make: Any, proxy: FaultProxy, raw: RawBucket, tmp_path: Any
) -> None:
    store = make(multipart_threshold=5 * MiB, part_size=5 * MiB, max_attempts=1, spool_directory=tmp_path)
    proxy.inject('reset', 'POST', contains='uploadId=')
    with pytest.raises(StoreUnavailableError, match=r'(?i)connection|closed|disconnect'):
        await store.put_stream(chunked(blob(6 * MiB, seed=5), MiB))
    assert await raw.uploads() == []
    assert await raw.keys() == []
    assert list(tmp_path.iterdir()) == []


# -- reads ------------------------------------------------------------------------------


async def test_truncated_get_resumes_with_range(make: Any, proxy: FaultProxy) -> None:
    store = make()
    data = blob(3 * MiB, seed=6)
    uri = await store.put(data)
    proxy.inject('truncate', 'GET', times=2)
    assert await store.get(uri) == data
    gets = proxy.seen('GET')
    assert [seen.fault for seen in gets] == ['truncate', 'truncate', None]
    assert gets[0].range is None
    assert gets[1].range is not None and gets[1].range.startswith('bytes=')
    assert int(gets[2].range.removeprefix('bytes=').rstrip('-')) > int(gets[1].range.removeprefix('bytes=').rstrip('-'))


async def test_truncated_stream_resumes(make: Any, proxy: FaultProxy) -> None:
    store = make()
    data = blob(2 * MiB, seed=7)
    uri = await store.put(data)
    proxy.inject('truncate', 'GET')
    chunks = await collect(store.get_stream(uri, chunk_size=64 * 1024))
    assert b''.join(chunks) == data
    assert all(len(chunk) <= 64 * 1024 for chunk in chunks)


async def test_get_fails_after_read_attempts(make: Any, proxy: FaultProxy) -> None:
    store = make(read_attempts=2)
    uri = await store.put(blob(MiB, seed=8))
    proxy.inject('truncate', 'GET', times=2)
    with pytest.raises(StoreUnavailableError) as caught:
        await store.get(uri)
    assert isinstance(caught.value.__cause__, (ResponseStreamingError, IncompleteReadError, aiohttp.ClientPayloadError))
    assert requests(proxy, 'GET') == 2


async def test_get_request_fault_is_retried(make: Any, proxy: FaultProxy) -> None:
    store = make()
    data = blob(100_000, seed=9)
    uri = await store.put(data)
    proxy.inject('slowdown', 'GET')
    proxy.inject('reset', 'GET')
    assert await store.get(uri) == data


async def test_truncated_large_get_resumes_and_is_verified(make: Any, proxy: FaultProxy) -> None:
    store = make()
    data = blob(11 * MiB, seed=10)  # hashed while it arrives, in blocks (see stores/s3/_hashing.py)
    uri = await store.put(data)
    proxy.inject('truncate', 'GET', times=2)
    assert await store.get(uri) == data
    assert [seen.fault for seen in proxy.seen('GET')] == ['truncate', 'truncate', None]


# -- what goes on the wire --------------------------------------------------------------


async def test_uploads_carry_our_checksum_and_no_second_body_hash(make: Any, proxy: FaultProxy) -> None:
    store = make(multipart_threshold=5 * MiB, part_size=5 * MiB)
    small, large = blob(200_000, seed=11), blob(11 * MiB, seed=12)
    uris = [await store.put(small), await store.put(large)]
    uploads = proxy.seen('PUT')
    assert len(uploads) == 4  # one PUT, then three parts
    for seen in uploads:
        # the body's integrity rests on the signed x-amz-checksum-sha256 header, which the server checks
        assert seen.headers['x-amz-content-sha256'] == 'UNSIGNED-PAYLOAD'
        assert seen.headers['x-amz-checksum-sha256']
    assert uploads[0].headers['x-amz-checksum-sha256'] == base64.b64encode(hashlib.sha256(small).digest()).decode()
    assert uploads[0].headers['if-none-match'] == '*'
    assert [await store.get(uri) for uri in uris] == [small, large]
    assert all('x-amz-checksum-mode' not in seen.headers for seen in proxy.seen('GET'))


# -- known_ttl (opt-in) -----------------------------------------------------------------


async def test_known_ttl_skips_the_head_of_a_repeated_put(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(known_ttl=60, put_check='head')
    data = blob(100_000, seed=13)
    uri = await store.put(data)
    for _ in range(3):
        assert await store.put(data) == uri
    assert (requests(proxy, 'HEAD'), requests(proxy, 'PUT')) == (1, 1)
    assert await store.delete(uri)  # a deletion through the store forgets the key at once
    assert await store.put(data) == uri
    assert requests(proxy, 'PUT') == 2
    assert await raw.read(store.key_for(uri)) == data


async def test_known_ttl_trusts_a_key_until_it_expires(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(known_ttl=0.3)
    data = blob(50_000, seed=14)
    uri = await store.put(data)
    await raw.delete(store.key_for(uri))  # behind the store's back: the documented trade-off
    assert await store.put(data) == uri
    assert requests(proxy, 'PUT') == 1
    assert await store.exists(uri) is False
    await asyncio.sleep(0.35)
    assert await store.put(data) == uri
    assert requests(proxy, 'PUT') == 2
    assert await raw.read(store.key_for(uri)) == data


async def test_known_ttl_remembers_a_blob_found_stored(make: Any, proxy: FaultProxy) -> None:
    data = blob(70_000, seed=15)
    uri = await make().put(data)
    store = make(known_ttl=60, put_check='if-none-match')
    assert await store.put(data) == uri  # 412: already stored
    assert await store.put(data) == uri
    assert requests(proxy, 'PUT') == 2
