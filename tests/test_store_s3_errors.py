"""``S3MediaStore``'s SDK errors reach callers as ``StoreOperationError`` subclasses (issue 17, items 11 and 15).

They used to surface as raw ``botocore`` ``ClientError`` (or connection errors):
neither a ``MediaStashError`` nor the ``RuntimeError`` pydantic-ai-harness's S3
store raised. The fault proxy in front of moto answers 500 InternalError, 403
AccessDenied or 503 SlowDown on the requests a test picks; an endpoint nobody
listens on is unreachable. The SDK is never patched.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from mediastash import (
    MediaNotFoundError,
    MediaStashError,
    StoreNotFoundError,
    StoreOperationError,
    StorePermissionError,
    StoreUnavailableError,
    media_uri_for,
)
from mediastash.stores.s3 import S3MediaStore
from tests.s3_servers import HOST, FaultProxy, S3Endpoint, fault_proxy, free_port, moto_server
from tests.test_store_s3 import RawBucket
from tests.test_store_s3_faults import make, proxy, raw, requests

__all__ = ['fault_proxy', 'make', 'moto_server', 'proxy', 'raw']  # fixtures, imported so pytest finds them here


def assert_store_error(
    error: BaseException, kind: type[StoreOperationError], operation: str, reason: str, status: int | None
) -> None:
    """One mapped error: its class, the call, the S3 code and status, the SDK's error as cause, no secret."""
    assert type(error) is kind
    assert isinstance(error, RuntimeError)
    assert isinstance(error, MediaStashError)
    assert (error.operation, error.reason, error.status) == (operation, reason, status)
    assert isinstance(error.__cause__, ClientError)
    text = str(error)
    assert f' {operation} ' in text
    assert reason in text
    assert 'S3MediaStore(bucket=' in text
    assert f'status {status}' in text


async def test_a_server_error_on_put_is_a_store_operation_error(
    make: Any, proxy: FaultProxy, raw: RawBucket, moto_server: S3Endpoint
) -> None:
    store = make(max_attempts=2)
    proxy.inject('internal', 'PUT', times=5)
    with pytest.raises(StoreOperationError) as caught:
        await store.put(b'never stored')
    assert_store_error(caught.value, StoreOperationError, 'put', 'InternalError', 500)
    assert moto_server.secret_access_key not in str(caught.value)
    assert requests(proxy, 'PUT') == 2  # the SDK retried a 500 before giving up
    assert await raw.keys() == []


@pytest.mark.parametrize(
    ('operation', 'method', 'reason'),
    [('get', 'GET', 'InternalError'), ('exists', 'HEAD', '500'), ('get_metadata', 'HEAD', '500')],
)
async def test_a_server_error_on_a_read_names_the_call(
    make: Any, proxy: FaultProxy, operation: str, method: str, reason: str
) -> None:
    """A HEAD answer has no body, so its code is the status itself."""
    store = make(max_attempts=1)
    uri = await store.put(b'stored')
    proxy.inject('internal', method)
    with pytest.raises(StoreOperationError) as caught:
        await getattr(store, operation)(uri)
    assert_store_error(caught.value, StoreOperationError, operation, reason, 500)


async def test_a_refusal_is_a_permission_error(make: Any, proxy: FaultProxy, raw: RawBucket) -> None:
    store = make(max_attempts=3)
    proxy.inject('denied', 'PUT', times=3)
    with pytest.raises(StorePermissionError) as caught:
        await store.put(b'refused')
    assert_store_error(caught.value, StorePermissionError, 'put', 'AccessDenied', 403)
    assert requests(proxy, 'PUT') == 1  # a 403 is not retried
    assert await raw.keys() == []


async def test_throttling_that_outlasts_the_retries_is_unavailable(make: Any, proxy: FaultProxy) -> None:
    store = make(max_attempts=2)
    uri = await store.put(b'stored')
    proxy.inject('slowdown', 'GET', times=5)
    with pytest.raises(StoreUnavailableError) as caught:
        await store.get(uri)
    assert_store_error(caught.value, StoreUnavailableError, 'get', 'SlowDown', 503)


async def test_an_unreachable_endpoint_is_unavailable(moto_server: S3Endpoint) -> None:
    options = {**moto_server.client_options(), 'endpoint_url': f'http://{HOST}:{free_port()}'}
    async with S3MediaStore(bucket='nobody-listens', max_attempts=1, **options) as store:
        with pytest.raises(StoreUnavailableError) as caught:
            await store.exists(media_uri_for(b'anything'))
    error = caught.value
    assert isinstance(error.__cause__, EndpointConnectionError)
    assert (error.operation, error.reason, error.status) == ('exists', 'EndpointConnectionError', None)
    assert isinstance(error, RuntimeError)
    assert moto_server.secret_access_key not in str(error)


async def test_a_missing_blob_and_a_missing_bucket_keep_their_errors(make: Any, moto_server: S3Endpoint) -> None:
    with pytest.raises(MediaNotFoundError):
        await make().get(media_uri_for(b'absent'))
    async with S3MediaStore(bucket='no-such-bucket-here', **moto_server.client_options()) as store:
        with pytest.raises(StoreNotFoundError):
            await store.put(b'nowhere to go')
