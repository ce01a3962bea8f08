"""``S3Options``: an ``S3MediaStore``'s settings, and its URL form.

``from_url`` takes ``s3://bucket[/prefix]?endpoint_url=...&region=...`` and the
other parameters of ``_QUERY``; never credentials (they come from the AWS
environment, a profile or an instance role).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self
from urllib.parse import unquote, urlsplit, urlunsplit

from mediastash.errors import InvalidStoreConfiguration
from mediastash.keys import KeyStrategy, default_key_strategy
from mediastash.stores._options import Converter, StoreOptions, check_callable, check_path, query_options
from mediastash.stores._url import (
    boolean,
    check_unicode,
    duration,
    integer,
    looks_secret,
    query_parameters,
    shown,
    size,
    split_url,
    text,
    url_scheme,
)
from mediastash.stores.s3._multipart import MIN_PART_SIZE
from mediastash.stores.s3._presign import PresignedUrls
from mediastash.urls import PublicUrlResolver

if TYPE_CHECKING:
    from botocore.config import Config
    from types_aiobotocore_s3 import S3Client

__all__ = ['MAX_KNOWN_TTL', 'MAX_PART_SIZE', 'PutCheck', 'S3Options', 'public_endpoint']

PutCheck = Literal['auto', 'head', 'if-none-match']
"""How ``put`` learns that a blob is already stored (see ``S3MediaStore``)."""

MAX_KNOWN_TTL = 86_400
"""The longest ``known_ttl`` (seconds)."""
MAX_PART_SIZE = 5 << 30
"""S3's largest part, and its largest single-request upload (5 GiB)."""

_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_BUCKET = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,254}')
_REGION = re.compile(r'[A-Za-z0-9._-]{1,64}')
_AWS_CHAIN = (
    'the AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), '
    'AWS_PROFILE / the shared credentials file, or an instance role'
)


def _endpoint(name: str, value: str) -> str:
    """An ``http(s)://host[:port][/path]`` endpoint without credentials (the value is not quoted in errors)."""
    _check_endpoint(f'URL parameter {name}=', text(name, value), user_info=False)
    return value


def _check_endpoint(what: str, value: object, *, user_info: bool) -> None:
    """Refuse an endpoint that is not an ``http(s)://host[:port][/path]`` str; ``user_info`` allows ``user:pass@``."""
    if not isinstance(value, str) or not value or _CONTROL.search(value):
        raise InvalidStoreConfiguration(f'{what} must be an http:// or https:// URL without control characters')
    check_unicode(what, value)
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError:  # refused below, outside the handler: the ValueError can quote part of the URL
        parts = None
    if parts is None:
        raise InvalidStoreConfiguration(f'{what} is not a valid http(s) URL (not repeated here)')
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise InvalidStoreConfiguration(f'{what} must be an http:// or https:// URL with a host')
    if not user_info and '@' in parts.netloc:
        raise InvalidStoreConfiguration(
            f'{what} must not carry credentials (user:password@); they come from {_AWS_CHAIN}'
        )
    if parts.query or parts.fragment:
        raise InvalidStoreConfiguration(f'{what} takes no query or fragment')


def public_endpoint(url: str | None) -> str | None:
    """``url`` without any ``user:password@`` part (what a ``repr`` shows and what the SDK is given)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ''
    netloc = f'{host}:{parts.port}' if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _check_bucket(bucket: object) -> None:
    if not isinstance(bucket, str) or _BUCKET.fullmatch(bucket) is None:
        raise InvalidStoreConfiguration(
            'bucket must be a str of 1-255 letters, digits, dots, underscores and hyphens, starting with a letter '
            'or digit (the value given is not shown)'
        )


def _check_credential(name: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or _CONTROL.search(value) or not value.isascii():
        raise InvalidStoreConfiguration(
            f'{name} must be None or a non-empty str of printable ASCII (the value given is not shown)'
        )


_QUERY: dict[str, tuple[str, Converter]] = {
    'endpoint_url': ('endpoint_url', _endpoint),
    'region': ('region_name', text),
    'put_check': ('put_check', text),
    'conditional_writes': ('conditional_writes', boolean),
    'multipart_threshold': ('multipart_threshold', size),
    'part_size': ('part_size', size),
    'max_concurrency': ('max_concurrency', integer),
    'max_attempts': ('max_attempts', integer),
    'read_attempts': ('read_attempts', integer),
    'known_ttl': ('known_ttl', duration),
    'retry_max_backoff': ('retry_max_backoff', duration),
}
"""The query parameters of an ``s3://`` URL: the field each sets and how its text is read."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class S3Options(StoreOptions):
    """The bucket, connection and behaviour of an ``S3MediaStore`` (see the store for each setting).

    Credentials are never shown in its ``repr``. Pass either ``client`` or
    connection settings (``endpoint_url``, ``region_name``, credentials,
    ``config``), not both.
    """

    store_name: ClassVar[str] = 'S3MediaStore'

    bucket: str
    """The bucket (never created by the store)."""
    client: S3Client | None = dataclasses.field(default=None, compare=False)
    """An aiobotocore S3 client you own and close; else the store makes one from the connection settings."""
    endpoint_url: str | None = None
    """An S3-compatible service's ``http(s)://host[:port][/path]`` (URL: ``endpoint_url=``); a ``user:password@``
    in it is never shown and never sent (the store drops it with a warning)."""
    region_name: str | None = None
    """The AWS region: 1-64 letters, digits, ``.``, ``_`` or ``-`` (URL: ``region=``)."""
    aws_access_key_id: str | None = dataclasses.field(default=None, repr=False)
    aws_secret_access_key: str | None = dataclasses.field(default=None, repr=False)
    aws_session_token: str | None = dataclasses.field(default=None, repr=False)
    config: Config | None = None
    """A botocore ``Config`` merged under the store's retry and signing settings."""
    key_prefix: str = ''
    """Prepended to every key (the URL's path)."""
    key_strategy: KeyStrategy = default_key_strategy
    """Maps a URI to a key under ``key_prefix``."""
    public_url: PublicUrlResolver | PresignedUrls | None = None
    """``PresignedUrls(...)`` or a resolver of public URLs."""
    put_check: PutCheck = 'auto'
    """``'auto'``, ``'head'`` or ``'if-none-match'`` (URL: ``put_check=``)."""
    conditional_writes: bool = True
    """Send ``If-None-Match: *`` on uploads (URL: ``conditional_writes=``)."""
    multipart_threshold: int = 16 << 20
    """Blobs of this many bytes or more are uploaded in parts, 5 MiB-5 GiB (URL: ``multipart_threshold=16MiB``)."""
    part_size: int = 8 << 20
    """Bytes per part, 5 MiB-5 GiB (URL: ``part_size=8MiB``)."""
    max_concurrency: int = 8
    """Parts and batch requests in flight at once, 1-1024 (URL: ``max_concurrency=``)."""
    max_attempts: int = 5
    """The SDK's attempts per request, 1-100 (URL: ``max_attempts=``)."""
    retry_max_backoff: float | None = None
    """Most seconds the SDK waits between attempts, 0-60 (URL: ``retry_max_backoff=20s``)."""
    read_attempts: int = 5
    """Ranged GETs that resume a body cut short, 1-100 (URL: ``read_attempts=``)."""
    spool_directory: str | os.PathLike[str] | None = None
    """Where ``put_stream`` spools a large stream (the system's temporary folder by default)."""
    known_ttl: float | None = None
    """Seconds a key this store saw stored is trusted without a request (URL: ``known_ttl=10m``)."""

    def __post_init__(self) -> None:
        """Refuse contradictory or out-of-range settings (``InvalidStoreConfiguration`` naming the setting)."""
        _check_bucket(self.bucket)
        connection = (
            self.endpoint_url,
            self.region_name,
            self.aws_access_key_id,
            self.aws_secret_access_key,
            self.aws_session_token,
        )
        if self.client is not None and (any(value is not None for value in connection) or self.config is not None):
            raise InvalidStoreConfiguration(
                'pass either client= or connection settings (endpoint_url, region_name, credentials, config), not both'
            )
        if self.client is not None and self.retry_max_backoff is not None:
            raise InvalidStoreConfiguration('retry_max_backoff applies to a client the store creates, not to client=')
        if self.endpoint_url is not None:
            _check_endpoint('endpoint_url', self.endpoint_url, user_info=True)
        if self.config is not None:
            from botocore.config import Config

            if not isinstance(self.config, Config):
                raise InvalidStoreConfiguration(f'config must be a botocore Config, got {type(self.config).__name__}')
        if self.region_name is not None and (
            not isinstance(self.region_name, str) or _REGION.fullmatch(self.region_name) is None
        ):
            raise InvalidStoreConfiguration(
                'region_name must be None or 1-64 letters, digits, dots, underscores or hyphens such as us-east-1 '
                '(the value given is not shown)'
            )
        for name in ('aws_access_key_id', 'aws_secret_access_key', 'aws_session_token'):
            _check_credential(name, getattr(self, name))
        _check_key_prefix(self.key_prefix)
        check_callable('key_strategy', self.key_strategy, 'a key strategy: a callable (uri, context) -> key')
        if self.public_url is not None and not isinstance(self.public_url, PresignedUrls):
            check_callable('public_url', self.public_url, 'None, PresignedUrls(...) or a callable (uri, context)')
        if self.put_check not in ('auto', 'head', 'if-none-match'):
            raise InvalidStoreConfiguration("put_check must be 'auto', 'head' or 'if-none-match'")
        if not isinstance(self.conditional_writes, bool):
            raise InvalidStoreConfiguration('conditional_writes must be True or False')
        for name in ('part_size', 'multipart_threshold'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not MIN_PART_SIZE <= value <= MAX_PART_SIZE:
                raise InvalidStoreConfiguration(
                    f'{name} must be an int of bytes from {MIN_PART_SIZE} to {MAX_PART_SIZE} '
                    '(S3 minimum part size and maximum part or single upload size)'
                )
        for name, most in (('max_concurrency', 1024), ('max_attempts', 100), ('read_attempts', 100)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise InvalidStoreConfiguration(f'{name} must be an int from 1 to {most}')
        known_ttl = self.known_ttl
        if known_ttl is not None and (
            isinstance(known_ttl, bool) or not isinstance(known_ttl, int | float) or not 0 < known_ttl <= MAX_KNOWN_TTL
        ):
            raise InvalidStoreConfiguration(
                f'known_ttl must be None or a number of seconds above 0 and at most {MAX_KNOWN_TTL}'
            )
        backoff = self.retry_max_backoff
        if backoff is not None and (
            isinstance(backoff, bool) or not isinstance(backoff, int | float) or not 0 <= backoff <= 60
        ):
            raise InvalidStoreConfiguration('retry_max_backoff must be None or a number of seconds from 0 to 60')
        if self.spool_directory is not None:
            check_path('spool_directory', self.spool_directory)

    def __repr__(self) -> str:
        """The fields shown in a ``repr``, with ``endpoint_url`` stripped of any ``user:password@``."""
        shown: list[str] = []
        for field in dataclasses.fields(self):
            if field.repr:
                value = getattr(self, field.name)
                if field.name == 'endpoint_url':
                    value = public_endpoint(value)
                shown.append(f'{field.name}={value!r}')
        return f'{type(self).__name__}({", ".join(shown)})'

    @classmethod
    def from_store_url(cls, url: str, *, create: bool, overrides: dict[str, Any], owner: str) -> Self:
        """Check ``url``; buckets are never created, so ``create`` changes nothing and nothing is contacted."""
        scheme = url_scheme(url, owner, ('s3',))
        parts = split_url(url, scheme, credentials_hint=f'they come from {_AWS_CHAIN}')
        bucket = parts.netloc
        if not bucket:
            raise InvalidStoreConfiguration('the s3:// URL names no bucket; use s3://<bucket>[/<key prefix>]')
        if ':' in bucket:
            raise InvalidStoreConfiguration(
                "the bucket part of the s3:// URL holds a ':' (not repeated here): a bucket takes no port and no "
                f'credentials; write s3://<bucket>[/<key prefix>], give a port in endpoint_url=, and credentials '
                f'come from {_AWS_CHAIN}'
            )
        if _BUCKET.fullmatch(bucket) is None:
            raise InvalidStoreConfiguration(
                'invalid S3 bucket name in the s3:// URL (not repeated here): use letters, digits, dots and hyphens'
            )
        prefix = unquote(parts.path[1:])
        if prefix and not prefix.endswith('/'):
            prefix += '/'
        settings: dict[str, Any] = {'bucket': bucket}
        if prefix:
            settings['key_prefix'] = prefix
        parameters = query_parameters(parts.query, 's3://')
        for name in parameters:
            if looks_secret(name):
                raise InvalidStoreConfiguration(
                    f'S3 credentials are never taken from the URL (query parameter {shown(name)}); '
                    f'they come from {_AWS_CHAIN}'
                )
        settings.update(query_options(parameters, 's3://', _QUERY))
        if 'client' in overrides:  # the caller's client knows where the bucket is
            for name in ('endpoint_url', 'region_name'):
                settings.pop(name, None)
        return cls.made({**settings, **overrides}, owner)


def _check_key_prefix(key_prefix: object) -> None:
    if not isinstance(key_prefix, str) or _CONTROL.search(key_prefix) or key_prefix.startswith('/'):
        raise InvalidStoreConfiguration(
            'key_prefix must be a str without control characters or a leading / (the value given is not shown)'
        )
    check_unicode('key_prefix', key_prefix)
