"""``S3MediaStore.from_url``: ``s3://bucket[/prefix]?endpoint_url=...&region=...``; never credentials."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores._plan import StorePlan
from mediastash.stores._url import (
    boolean,
    integer,
    looks_secret,
    merged_options,
    number,
    query_parameters,
    shown,
    size,
    split_url,
    unknown_parameter,
    url_scheme,
)

if TYPE_CHECKING:
    from mediastash.stores.s3._store import S3MediaStore

__all__ = ['plan_s3']

T = TypeVar('T', bound='S3MediaStore')

_BUCKET = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*')
_AWS_CHAIN = (
    'the AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), '
    'AWS_PROFILE / the shared credentials file, or an instance role'
)
_TEXT = {'endpoint_url': 'endpoint_url', 'region': 'region_name', 'put_check': 'put_check'}
_INTEGERS = ('max_concurrency', 'max_attempts', 'read_attempts')
_SIZES = ('multipart_threshold', 'part_size')
_NUMBERS = ('known_ttl', 'retry_max_backoff')
_PARAMETERS = (*_TEXT, 'conditional_writes', *_SIZES, *_INTEGERS, *_NUMBERS)


def plan_s3(store: type[T], url: str, create: bool, overrides: dict[str, Any]) -> StorePlan[T]:
    """Check ``url``; buckets are never created, so ``create`` changes nothing and nothing is contacted."""
    scheme = url_scheme(url, store.__name__, ('s3',))
    parts = split_url(url, scheme, credentials_hint=f'they come from {_AWS_CHAIN}')
    bucket = parts.netloc
    if not bucket:
        raise InvalidStoreConfiguration('the s3:// URL names no bucket; use s3://<bucket>[/<key prefix>]')
    if ':' in bucket:
        raise InvalidStoreConfiguration(
            "the bucket part of the s3:// URL holds a ':' (not repeated here): a bucket takes no port and no "
            f'credentials; write s3://<bucket>[/<key prefix>], give a port in endpoint_url=, and credentials come '
            f'from {_AWS_CHAIN}'
        )
    if _BUCKET.fullmatch(bucket) is None:
        raise InvalidStoreConfiguration(
            'invalid S3 bucket name in the s3:// URL (not repeated here): use letters, digits, dots and hyphens'
        )
    prefix = unquote(parts.path[1:])
    if prefix and not prefix.endswith('/'):
        prefix += '/'
    arguments: dict[str, Any] = {'bucket': bucket}
    if prefix:
        arguments['key_prefix'] = prefix
    for name, value in query_parameters(parts.query, 's3://').items():
        if looks_secret(name):
            raise InvalidStoreConfiguration(
                f'S3 credentials are never taken from the URL (query parameter {shown(name)}); '
                f'they come from {_AWS_CHAIN}'
            )
        if name in _TEXT and not value:
            raise InvalidStoreConfiguration(f'URL parameter {name}= is empty')
        if name == 'endpoint_url':
            arguments['endpoint_url'] = _endpoint(value)
        elif name in _TEXT:
            arguments[_TEXT[name]] = value
        elif name == 'conditional_writes':
            arguments[name] = boolean(name, value)
        elif name in _SIZES:
            arguments[name] = size(name, value)
        elif name in _INTEGERS:
            arguments[name] = integer(name, value)
        elif name in _NUMBERS:
            arguments[name] = number(name, value)
        else:
            raise unknown_parameter(name, 's3://', _PARAMETERS)
    merged = merged_options(store, arguments, overrides)
    if 'client' in overrides:  # the caller's client knows where the bucket is
        for name in ('endpoint_url', 'region_name'):
            if name not in overrides:
                merged.pop(name, None)
    return StorePlan(lambda: store(**merged))


def _endpoint(value: str) -> str:
    """An ``http(s)://host[:port][/path]`` endpoint without credentials (the value is not quoted in errors)."""
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError:
        raise InvalidStoreConfiguration('URL parameter endpoint_url= is not a valid http(s) URL') from None
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise InvalidStoreConfiguration('URL parameter endpoint_url= must be an http:// or https:// URL with a host')
    if '@' in parts.netloc:
        raise InvalidStoreConfiguration(
            f'URL parameter endpoint_url= must not carry credentials (user:password@); they come from {_AWS_CHAIN}'
        )
    if parts.query or parts.fragment:
        raise InvalidStoreConfiguration('URL parameter endpoint_url= takes no query or fragment')
    return value
