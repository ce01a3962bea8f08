"""How ``S3MediaStore`` reads the SDK's errors: which ``StoreOperationError`` each becomes (see ``docs/s3.md``).

The store base does the mapping for every public method; this module only
classifies. A reason is an S3 error code or an exception class name, never the
SDK's message, which can quote the endpoint URL.
"""

from __future__ import annotations

import aiohttp
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as SdkConnectionError,
)

from mediastash.errors import StoreOperationError, StorePermissionError, StoreUnavailableError
from mediastash.stores.base import DriverError
from mediastash.stores.s3._multipart import error_code, error_status

__all__ = ['classify_sdk_error']

_DENIED_CODES = frozenset(
    {
        'AccessDenied',
        'AllAccessDisabled',
        'ExpiredToken',
        'InvalidAccessKeyId',
        'InvalidToken',
        'SignatureDoesNotMatch',
        'TokenRefreshRequired',
    }
)
_BUSY_CODES = frozenset({'SlowDown', 'ServiceUnavailable', 'RequestTimeout', 'Throttling', 'ThrottlingException'})
_BUSY_STATUSES = frozenset({429, 502, 503, 504})
_UNREACHABLE: tuple[type[BaseException], ...] = (
    SdkConnectionError,  # EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError, SSLError
    HTTPClientError,  # ConnectionClosedError, ReadTimeoutError, ResponseStreamingError
    IncompleteReadError,
    aiohttp.ClientError,  # a connection or body cut short below the SDK
)
_NO_CREDENTIALS: tuple[type[BaseException], ...] = (NoCredentialsError, PartialCredentialsError)
_SET_CREDENTIALS = (
    'no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment, '
    'or a profile (AWS_PROFILE) in the AWS config or credentials file'
)


def classify_sdk_error(exc: Exception) -> DriverError | None:
    """The ``DriverError`` for an error aiobotocore or aiohttp raised; ``None`` for anything else.

    A ``ClientError`` (the server answered) is a permission error for 401/403
    and the denial codes, unavailable for 429/502/503/504 and throttling codes,
    else a failed operation carrying the HTTP status. A connection that could
    not be made or was cut is unavailable; missing credentials are a permission
    error whose reason says where to set them; any other SDK error a failed
    operation.
    """
    if isinstance(exc, ClientError):
        code = error_code(exc) or 'ClientError'
        status = error_status(exc) or None
        kind: type[StoreOperationError] = StoreOperationError
        if status in (401, 403) or code in _DENIED_CODES:
            kind = StorePermissionError
        elif status in _BUSY_STATUSES or code in _BUSY_CODES:
            kind = StoreUnavailableError
        return DriverError(kind, code, status)
    if isinstance(exc, _UNREACHABLE):
        return DriverError(StoreUnavailableError, type(exc).__name__)
    if isinstance(exc, _NO_CREDENTIALS):
        return DriverError(StorePermissionError, f'{type(exc).__name__}: {_SET_CREDENTIALS}')
    if isinstance(exc, CredentialRetrievalError):  # a configured source (a process, SSO) failed to answer
        return DriverError(StorePermissionError, type(exc).__name__)
    if isinstance(exc, BotoCoreError):
        return DriverError(StoreOperationError, type(exc).__name__)
    return None
