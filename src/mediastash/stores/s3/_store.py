"""``S3MediaStore``: blobs in an S3 (or S3-compatible) bucket through aiobotocore.

The real SDK brings SigV4 signing, the standard retry mode and presigning.
On top of it the store skips uploads of blobs already in the bucket, sends a
SHA-256 checksum so the server rejects corrupted uploads, uploads large blobs
in concurrent parts, resumes a GET whose body was cut short with a ranged GET,
and (like every mediastash store) verifies what it reads against the URI.

For garbage collection a blob's last-write time is its ``LastModified``: a
``put`` of stored bytes (or ``touch_many``) refreshes it by copying the object
onto itself once it is older than ``TOUCH_AFTER_SECONDS``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import re
import tempfile
import threading
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Iterable, Iterator, Mapping
from contextlib import aclosing
from datetime import datetime
from enum import Enum
from typing import IO, TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlsplit, urlunsplit

from mediastash.context import EMPTY_CONTEXT, MediaContextLike, context_media_type, context_metadata
from mediastash.errors import (
    IntegrityError,
    InvalidStoreConfiguration,
    MediaNotFoundError,
    StoreNotFoundError,
    StoreOperationError,
    UnsafeKeyError,
)
from mediastash.keys import KeyStrategy, default_key_strategy, sharded_key_strategy
from mediastash.stores._range import DigestRange
from mediastash.stores.base import (
    TOUCH_AFTER_SECONDS,
    VERIFY_ON_PUT_BYTES,
    BaseMediaStore,
    DriverError,
    Ingest,
)
from mediastash.stores.protocols import BlobInfo, BlobStat
from mediastash.stores.s3._errors import classify_sdk_error
from mediastash.stores.s3._hashing import PipelinedSha256
from mediastash.stores.s3._known import KnownKeys
from mediastash.stores.s3._metadata import decode_metadata, encode_metadata
from mediastash.stores.s3._multipart import ReadRange, error_code, error_status, upload_multipart
from mediastash.stores.s3._options import PutCheck, S3Options, public_endpoint
from mediastash.stores.s3._presign import PresignedUrls, presign_get
from mediastash.stores.s3._redact import redact_in_sdk_logs
from mediastash.stores.s3._touch import refresh_object
from mediastash.uri import EMBEDDED_DIGEST_PATTERN, is_digest, media_uri, parse_media_uri
from mediastash.urls import PublicUrlResolver

try:
    import aiohttp
    from aiobotocore.config import AioConfig
    from aiobotocore.session import AioSession, get_session
    from botocore.config import Config
    from botocore.exceptions import ClientError, IncompleteReadError, ReadTimeoutError, ResponseStreamingError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('S3MediaStore needs aiobotocore: pip install "mediastash[s3]"') from exc

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ['AUTO_HEAD_FROM', 'S3MediaStore']

AUTO_HEAD_FROM = (1 << 20) + 1
"""With ``put_check='auto'``, blobs of this many bytes or more (above 1 MiB) are HEADed before upload; blobs of
at most 1 MiB, the size ``VERIFY_ON_PUT_BYTES`` also calls small, are sent as one conditional PUT (measured at
20 ms per request and on loopback: see ``docs/s3.md``)."""

_MAX_KEY_BYTES = 1024
NAMESPACE_AREA: Final = '.mediastash-namespaces/'
"""Under a store's ``key_prefix``, the keys of its namespaces: ``.mediastash-namespaces/<name>/`` each (the disk
store's folder name; see ``docs/s3.md``)."""
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_DEFAULT_SUFFIX = '.bin'
_DELETE_BATCH = 1000
_SWEEP_BATCH = 100
"""Keys HEADed and then deleted together by ``delete_unless_touched`` (small: the HEAD-to-delete window)."""
_HEAD_CONCURRENCY = 16
_HEAD_RESOLUTION = 1.0
"""A HEAD's ``Last-Modified`` is an HTTP date: whole seconds, rounded down."""
_AWS_HOSTS = ('.amazonaws.com', '.amazonaws.com.cn')
_READ_CHUNK = 1 << 20
_DEFAULT_CONTENT_TYPES = frozenset({'', 'binary/octet-stream', 'application/octet-stream'})
"""What S3 services report for an object uploaded without a Content-Type (AWS and moto: ``binary/octet-stream``;
SeaweedFS and others: ``application/octet-stream``): read as no media type recorded, since a HEAD cannot tell them
from a put that gave one, and they say nothing about the bytes."""
_STREAM_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientPayloadError,
    aiohttp.ClientConnectionError,
    ResponseStreamingError,
    IncompleteReadError,
    ReadTimeoutError,
    asyncio.TimeoutError,
)
"""A GET body cut short: resumed with a ranged GET."""


class _Stored(Enum):
    ABSENT = 'absent'
    SAME = 'same'
    DIFFERENT = 'different'


class _Credentials:
    """Connection secrets, kept out of ``repr`` and error messages."""

    __slots__ = ('access_key_id', 'secret_access_key', 'session_token')

    def __init__(self, access_key_id: str | None, secret_access_key: str | None, session_token: str | None) -> None:
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        self.session_token = session_token

    def __repr__(self) -> str:
        return '<credentials hidden>'


class S3MediaStore(BaseMediaStore):
    """Content-addressed blobs as objects ``<key_prefix><key_strategy(uri)>`` in one bucket.

    Pass ``client=`` (an aiobotocore S3 client you own and close) or connection
    settings; a client the store creates is opened on first use and closed by
    ``aclose`` / ``async with``. SigV4 is always used, and the SDK's standard
    retry mode with ``max_attempts`` (``retry_max_backoff`` caps its wait).

    ``put`` does not rewrite a sound stored blob. With ``put_check='auto'`` (the
    default, chosen by measuring at 20 ms per request, see ``docs/s3.md``) a
    blob of at most 1 MiB (below ``AUTO_HEAD_FROM``) is sent as a conditional PUT
    (one request for a new blob; a 412 answer means "already stored"), and a
    larger one is HEADed first, so a stored large body is never uploaded
    again. ``'head'`` always HEADs first; ``'if-none-match'`` always sends the
    conditional PUT (blobs of ``multipart_threshold`` bytes or more always
    HEAD first). Either way the upload itself is conditional
    (``If-None-Match: *``), so a resent request whose first response was lost
    cannot fail or write twice; ``conditional_writes=False`` drops the header
    for servers that reject it (``'auto'`` then HEADs first at every size).
    A stored copy of another size or SHA-256 (or, up to ``VERIFY_ON_PUT_BYTES``,
    one that hashes wrong), or one that failed verification in this store, is
    replaced by an unconditional PUT of the right bytes (healing).
    User-info in ``endpoint_url`` is stripped (with a warning) before the SDK
    sees it: requests are signed with the access keys.
    Uploads carry ``Content-Type`` and ``x-amz-checksum-sha256``. Metadata is
    that of the first ``put`` (later puts do not change it). ``known_ttl``
    (seconds, off by default) lets a ``put`` of a key this store uploaded or
    saw stored within that time send nothing; a blob deleted by another
    process is then only re-uploaded once the time is up (deletions through
    any store of this process on the same bucket and prefix are seen at once).

    Capabilities: listing, deleting (batched), streaming, garbage collection
    (a blob's age is its ``LastModified``). ``put_stream`` spools to memory up
    to ``multipart_threshold`` and to a temporary file beyond, so the key (the
    digest) is known before anything is uploaded.

    A ``put`` that finds its blob stored with a ``LastModified`` older than
    ``TOUCH_AFTER_SECONDS`` (less ``known_ttl`` when that is set) copies the
    object onto itself, which dates it now: garbage collection then sees it
    as in use. ``delete_unless_touched`` HEADs each blob right before deleting
    it; S3 has no conditional delete on general purpose buckets that could
    close the remaining window (see ``docs/s3.md``).

    The store never creates its bucket: a call that finds it missing raises
    ``StoreNotFoundError`` naming it (``exists``, ``get_metadata`` and
    ``delete`` ask the bucket once per store when a HEAD answers 404, since a
    HEAD cannot say which of bucket and key is missing).
    """

    options_class = S3Options

    def __init__(
        self,
        *,
        bucket: str | None = None,
        client: S3Client | None = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        config: Config | None = None,
        key_prefix: str = '',
        key_strategy: KeyStrategy = default_key_strategy,
        public_url: PublicUrlResolver | PresignedUrls | None = None,
        put_check: PutCheck = 'auto',
        conditional_writes: bool = True,
        multipart_threshold: int = 16 << 20,
        part_size: int = 8 << 20,
        max_concurrency: int = 8,
        max_attempts: int = 5,
        retry_max_backoff: float | None = None,
        read_attempts: int = 5,
        spool_directory: str | os.PathLike[str] | None = None,
        known_ttl: float | None = None,
        options: S3Options | None = None,
    ) -> None:
        self._options = options = S3Options.settled(options, locals())  # the keywords above, by name
        public_url = options.public_url
        resolver: PublicUrlResolver | None
        if isinstance(public_url, PresignedUrls):
            presigned, resolver = public_url, self._presigned_public_url
        else:
            presigned, resolver = None, public_url
        super().__init__(public_url=resolver)
        self._bucket = options.bucket
        self._key_prefix = options.key_prefix
        self._key_strategy = options.key_strategy
        self._presigned = presigned
        self._put_check = options.put_check
        self._head_from = AUTO_HEAD_FROM
        self._conditional_writes = options.conditional_writes
        self._multipart_threshold = options.multipart_threshold
        self._part_size = options.part_size
        self._max_concurrency = options.max_concurrency
        self._max_attempts = options.max_attempts
        self._retry_max_backoff = options.retry_max_backoff
        self._read_attempts = options.read_attempts
        self._spool_directory = options.spool_directory
        self._known = KnownKeys(options.known_ttl) if options.known_ttl is not None else None
        # A key remembered for known_ttl skips its HEAD and so its touch: touch that much earlier, so a
        # skipped put never relies on a blob older than TOUCH_AFTER_SECONDS.
        self._put_touch_after = max(0.0, TOUCH_AFTER_SECONDS - (options.known_ttl or 0.0))
        self._endpoint_url = _without_user_info(options.endpoint_url)
        self._region_name = options.region_name
        self._credentials = _Credentials(
            options.aws_access_key_id, options.aws_secret_access_key, options.aws_session_token
        )
        self._user_config = options.config
        self._client: S3Client | None = options.client
        self._client_context: Any = None
        self._owns_client = options.client is None
        self._opening = asyncio.Lock()
        self._identity: Hashable | None = None
        self._bucket_seen = False
        self._bucket_checking = asyncio.Lock()
        self._client_owner: S3MediaStore | None = None  # on a namespace view: the store whose client it uses
        self._namespace_area: str | None = options.key_prefix + NAMESPACE_AREA  # None on a view: no nesting

    def _open_namespace(self, name: str) -> S3MediaStore:
        """A store on the key prefix ``<key_prefix>.mediastash-namespaces/<name>/`` of the same bucket, on this
        store's client (created by and closed with this store), with the same settings. ``PresignedUrls`` are bound
        to the view, so they name its own keys; another resolver names the store's layout and the base drops it."""
        key_prefix = f'{self._key_prefix}{NAMESPACE_AREA}{name}/'
        # No client of its own: it uses this store's (``_client_owner``), whoever made it.
        view = type(self)(
            options=self._options.replace(client=None, endpoint_url=self._endpoint_url, key_prefix=key_prefix)
        )
        view._head_from = self._head_from
        view._owns_client = False
        view._client_owner = self
        view._namespace_area = None
        view._bucket_seen = self._bucket_seen
        return view

    # -- description -------------------------------------------------------------------

    @property
    def bucket(self) -> str:
        """The bucket holding the blobs."""
        return self._bucket

    @property
    def key_prefix(self) -> str:
        """The start of every key this store reads or writes (``''`` for none; a namespace view's ends ``<name>/``)."""
        return self._key_prefix

    def _describe(self) -> str:
        where = f', endpoint_url={public_endpoint(self._endpoint_url)!r}' if self._endpoint_url else ''
        prefix = f', key_prefix={self._key_prefix!r}' if self._key_prefix else ''
        return f'S3MediaStore(bucket={self._bucket!r}{prefix}{where})'

    def _classify_error(self, exc: Exception) -> DriverError | None:
        """The SDK's errors by status and code (``_errors``): a 403 is a permission error, a 503 or a lost
        connection unavailable, any other server answer a failed operation naming its status."""
        return classify_sdk_error(exc) or super()._classify_error(exc)

    def _storage_identity(self) -> Hashable:
        """``('s3', endpoint or region, bucket, key_prefix)``; the endpoint without credentials."""
        if self._identity is None:
            self._identity = ('s3', self._location(), self._bucket, self._key_prefix)
        return self._identity

    def _location(self) -> str:
        """Where the bucket lives: a custom endpoint (normalized, no ``user:password@``), else the AWS region."""
        if self._endpoint_url:
            return _endpoint_identity(self._endpoint_url)
        if not self._owns_client and self._client is not None:
            meta = self._client.meta
            host = (urlsplit(meta.endpoint_url).hostname or '').lower()
            if not host.endswith(_AWS_HOSTS):
                return _endpoint_identity(meta.endpoint_url)
            return meta.region_name or ''
        return self._region_name or cast(str | None, _session().get_config_variable('region')) or ''

    # -- client lifecycle --------------------------------------------------------------

    async def _s3(self) -> S3Client:
        """The client, created on first use when the store owns it; ``StoreClosedError`` after ``aclose``."""
        self._check_open()
        if self._client_owner is not None:
            return await self._client_owner._s3()
        if self._client is not None:
            return self._client
        async with self._opening:
            self._check_open()
            if self._client is None:
                redact_in_sdk_logs(self._credentials.secret_access_key, self._credentials.session_token)
                context = _session().create_client(
                    's3',
                    endpoint_url=self._endpoint_url,
                    region_name=self._region_name,
                    aws_access_key_id=self._credentials.access_key_id,
                    aws_secret_access_key=self._credentials.secret_access_key,
                    aws_session_token=self._credentials.session_token,
                    config=self._client_config(),
                )
                client = await context.__aenter__()
                if self._retry_max_backoff is not None:
                    from mediastash.stores.s3._retries import cap_retry_backoff

                    cap_retry_backoff(client, max_attempts=self._max_attempts, max_backoff=self._retry_max_backoff)
                self._client_context = context
                self._client = client
        return self._client

    def _client_config(self) -> AioConfig:
        s3_options: dict[str, Any] = {'payload_signing_enabled': False}
        if self._endpoint_url:
            s3_options['addressing_style'] = 'path'
        base = AioConfig(
            signature_version='s3v4',
            retries={'mode': 'standard', 'total_max_attempts': self._max_attempts},
            max_pool_connections=max(10, 4 * self._max_concurrency),
            # Every upload carries our own x-amz-checksum-sha256 (a signed header the server checks the
            # body against) and every read is checked against the URI's sha256, so the SDK's own body
            # hash for the signature, its default CRC32 and its response checksum check would each hash
            # every byte once more for nothing (see docs/s3.md, "What the SDK is asked not to do").
            s3=s3_options,
            request_checksum_calculation='when_required',
            response_checksum_validation='when_required',
        )
        merged = base if self._user_config is None else base.merge(cast(AioConfig, self._user_config))
        version = getattr(merged, 'signature_version', None)
        if version not in ('s3v4', None):
            raise InvalidStoreConfiguration(
                f'S3MediaStore signs with SigV4 only; config asks for signature_version={version!r}'
            )
        return merged

    async def _aclose(self) -> None:
        """Close the client the store created (a caller's client stays open)."""
        if self._known is not None:
            self._known.clear()
        async with self._opening:
            context, self._client_context = self._client_context, None
            if self._owns_client:
                self._client = None
        if context is not None:
            await context.__aexit__(None, None, None)

    # -- keys --------------------------------------------------------------------------

    def _key_for(self, digest: str, context: MediaContextLike) -> str:
        """``key_prefix + key_strategy(uri, context)``, refused with ``UnsafeKeyError`` when S3 would mangle it."""
        name: object = self._key_strategy(media_uri(digest), context)
        if not isinstance(name, str):
            raise UnsafeKeyError(name, f'a key strategy must return str, got {type(name).__name__}')
        key = self._key_prefix + name
        if not name:
            raise UnsafeKeyError(name, 'the key is empty')
        if _CONTROL.search(key):
            raise UnsafeKeyError(key, 'the key contains a control character')
        if key.startswith('/'):
            raise UnsafeKeyError(key, "the key starts with '/'")
        if any(part in ('', '.', '..') for part in key.split('/')):
            raise UnsafeKeyError(key, "the key has an empty, '.' or '..' segment")
        if self._namespace_area is not None and key.startswith(self._namespace_area):
            raise UnsafeKeyError(key, f"the key is under '{NAMESPACE_AREA}', where the namespaces' blobs live")
        try:
            encoded = key.encode('utf-8')
        except UnicodeEncodeError as exc:
            raise UnsafeKeyError(
                key, f'the key cannot be encoded as UTF-8 ({exc.object[exc.start : exc.end]!r} at index {exc.start})'
            ) from None
        if len(encoded) > _MAX_KEY_BYTES:
            raise UnsafeKeyError(key, f'the key is longer than {_MAX_KEY_BYTES} bytes')
        return key

    def key_for(self, uri: str, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        """The object key that holds (or would hold) ``uri``."""
        return self._key_for(parse_media_uri(uri), context)

    def s3_uri(self, uri: str, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        """``s3://<bucket>/<key>`` of the object that holds (or would hold) ``uri`` (``S3AddressableMediaStore``)."""
        return f's3://{self._bucket}/{self.key_for(uri, context)}'

    # -- primitives --------------------------------------------------------------------

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        key = self._key_for(digest, context)
        extra = _put_arguments(context)
        with self._bucket_errors():
            await self._store(key, digest, len(data), _bytes_reader(data), extra)

    async def _rewrite(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Heal: an unconditional PUT (or multipart upload) of the right bytes with their SHA-256 checksum."""
        key = self._key_for(digest, context)
        extra = _put_arguments(context)
        if self._known is not None:
            self._known.forget([key])
        with self._bucket_errors():
            await self._store(key, digest, len(data), _bytes_reader(data), extra, replace=True)

    async def _store(
        self,
        key: str,
        digest: str,
        size: int,
        read_range: ReadRange,
        extra: dict[str, Any],
        *,
        replace: bool = False,
    ) -> None:
        """Upload unless already stored: one PUT, or a multipart upload from ``multipart_threshold`` bytes.

        ``replace`` (or a digest this store saw fail verification) uploads unconditionally. A stored copy
        found by the HEAD or after a 412 is replaced when ``_stored`` finds it wrong.
        """
        generation = self.deletion_generation
        overwrite = replace or not self._trusts_stored(digest)
        if not overwrite and self._known is not None and self._known.trusted(key, generation):
            return
        client = await self._s3()
        multipart = size >= self._multipart_threshold
        if not overwrite and self._head_first(size):
            stored, head = await self._stored(client, key, size, digest, read_range)
            if stored is _Stored.SAME and await self._keep_fresh(client, key, head):
                self._remember(key, generation)
                return
            overwrite = stored is _Stored.DIFFERENT
        conditional = self._conditional_writes and not overwrite
        if multipart:
            await upload_multipart(
                client,
                bucket=self._bucket,
                key=key,
                size=size,
                read_range=read_range,
                part_size=self._part_size,
                concurrency=self._max_concurrency,
                extra=extra,
                if_none_match=conditional,
            )
            self._remember(key, generation)
            return
        arguments: dict[str, Any] = {
            'Bucket': self._bucket,
            'Key': key,
            'Body': await read_range(0, size),
            'ChecksumSHA256': base64.b64encode(bytes.fromhex(digest)).decode('ascii'),
            **extra,
        }
        if conditional:
            arguments['IfNoneMatch'] = '*'
        try:
            await client.put_object(**arguments)
        except ClientError as exc:
            if not (conditional and _is_precondition_failed(exc)):
                raise
            # Already stored: check the copy (a HEAD; a GET for a small one without our checksum), then mark it
            # in use (a copy when it is old), or replace it when it is wrong.
            stored, found = await self._stored(client, key, size, digest, read_range)
            if stored is _Stored.DIFFERENT:
                del arguments['IfNoneMatch']
                await client.put_object(**arguments)
            elif stored is _Stored.ABSENT or not await self._keep_fresh(client, key, found):
                try:  # deleted in between: store it after all
                    await client.put_object(**arguments)
                except ClientError as again:
                    if not _is_precondition_failed(again):
                        raise
        self._remember(key, generation)

    def _head_first(self, size: int) -> bool:
        """Whether a put of ``size`` bytes asks with a HEAD before uploading (else a conditional PUT asks)."""
        if size >= self._multipart_threshold or self._put_check == 'head':
            return True
        if self._put_check == 'if-none-match':
            return False
        return size >= self._head_from or not self._conditional_writes

    async def _keep_fresh(self, client: S3Client, key: str, head: Mapping[str, Any]) -> bool:
        """Copy a stored object onto itself when its ``LastModified`` is too old for a put to rely on;
        ``False`` when it turns out to be gone."""
        modified = _last_modified(head)
        if modified is not None and modified >= time.time() - self._put_touch_after:
            return True
        return await self._refresh(client, key, head)

    async def _refresh(self, client: S3Client, key: str, head: Mapping[str, Any]) -> bool:
        """Date the object now (a self-copy); ``False`` when it was deleted since ``head``."""
        try:
            await refresh_object(client, bucket=self._bucket, key=key, head=head, concurrency=self._max_concurrency)
        except ClientError as exc:
            if _is_not_found(exc):
                return False
            raise
        return True

    def _remember(self, key: str, generation: int) -> None:
        if self._known is not None:
            self._known.add(key, generation)

    async def _stored(
        self, client: S3Client, key: str, size: int, digest: str, read_range: ReadRange
    ) -> tuple[_Stored, Mapping[str, Any]]:
        """Whether ``key`` holds this blob, with the HEAD that told.

        Another size is ``DIFFERENT``; so is another whole-object SHA-256 when the
        server reports one (AWS does; no download). A copy without one, of at
        most ``VERIFY_ON_PUT_BYTES``, is ``SAME`` when its ETag is the MD5 of our
        bytes (a single-part upload without KMS: moto, SeaweedFS, MinIO), else
        read and hashed (one GET); a larger one is trusted (a failed ``get``
        through this store makes the next put replace it).
        """
        try:
            head: Mapping[str, Any] = await client.head_object(Bucket=self._bucket, Key=key, ChecksumMode='ENABLED')
        except ClientError as exc:
            if _is_not_found(exc):
                return _Stored.ABSENT, {}
            raise
        if head.get('ContentLength') != size:
            return _Stored.DIFFERENT, head
        checksum = head.get('ChecksumSHA256')
        whole = head.get('ChecksumType') == 'FULL_OBJECT' or '-' not in (head.get('ETag') or '') + (checksum or '')
        if checksum and whole:
            same = checksum == base64.b64encode(bytes.fromhex(digest)).decode('ascii')
            return (_Stored.SAME if same else _Stored.DIFFERENT), head
        if size > VERIFY_ON_PUT_BYTES or await _etag_is_md5_of(head, read_range, size):
            return _Stored.SAME, head
        return (_Stored.SAME if await self._hashes_to(key, digest) else _Stored.DIFFERENT), head

    async def _hashes_to(self, key: str, digest: str) -> bool:
        """Whether the object at ``key`` (a small one: read whole) hashes to ``digest``; absent counts as no."""
        hasher = hashlib.sha256()
        try:
            async with aclosing(self._object_chunks(digest, key, _READ_CHUNK)) as chunks:
                async for chunk in chunks:
                    hasher.update(chunk)
        except MediaNotFoundError:
            return False
        return hasher.hexdigest() == digest

    async def _read_verified(self, digest: str, context: MediaContextLike) -> bytes:
        """The blob's bytes, verified against ``digest`` (``IntegrityError`` on mismatch).

        Large bodies are hashed while they arrive (in a worker thread, one block
        behind the reader), so the check ends almost when the download does.
        """
        key = self._key_for(digest, context)
        hasher = PipelinedSha256()
        pieces: list[bytes] = []
        try:
            async with aclosing(self._object_chunks(digest, key, _READ_CHUNK)) as chunks:
                async for chunk in chunks:
                    pieces.append(chunk)
                    await hasher.feed(chunk)
            actual = await hasher.hexdigest()
        finally:
            await hasher.aclose()
        if actual != digest:
            raise IntegrityError(media_uri(digest), actual_digest=actual, where=self._describe())
        return b''.join(pieces)

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return await self._head(self._key_for(digest, context)) is not None

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        head = await self._head(self._key_for(digest, context))
        if head is None:
            raise self._not_found(digest)
        return decode_metadata(head.get('Metadata', {}))

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        """One HEAD: ``ContentLength``, ``ContentType`` (a service's default for an upload without one reads
        as not recorded: ``_DEFAULT_CONTENT_TYPES``) and ``LastModified``; no GET."""
        head = await self._head(self._key_for(digest, context))
        if head is None:
            raise self._not_found(digest)
        content_type = head.get('ContentType')
        recorded = isinstance(content_type, str) and content_type not in _DEFAULT_CONTENT_TYPES
        return BlobStat(int(head.get('ContentLength') or 0), content_type if recorded else None, _last_modified(head))

    @property
    def unknown_media_type_reason(self) -> str:
        """Why a blob here may have no recorded media type (``mediastash stats`` and ``ls -l`` print it)."""
        return 'they were uploaded without a Content-Type'

    async def _head(self, key: str) -> Mapping[str, Any] | None:
        """The object's HEAD, or ``None`` when it is absent (``StoreNotFoundError`` when the bucket is)."""
        client = await self._s3()
        try:
            with self._bucket_errors():
                head = await client.head_object(Bucket=self._bucket, Key=key)
        except ClientError as exc:
            if _is_not_found(exc):
                await self._check_bucket(client)
                return None
            raise
        self._bucket_seen = True
        return head

    async def _check_bucket(self, client: S3Client) -> None:
        """Ask once per store whether the bucket exists, after a HEAD answered 404.

        ``StoreNotFoundError`` when it does not. Any other answer (403 without
        ``s3:ListBucket`` permission, say) cannot tell and is not asked again.
        """
        if self._bucket_seen:
            return
        async with self._bucket_checking:  # many concurrent misses ask once
            if self._bucket_seen:
                return
            try:
                await client.head_bucket(Bucket=self._bucket)
            except ClientError as exc:
                if error_status(exc) == 404 or _is_no_such_bucket(exc):
                    raise self._missing_bucket() from exc
                if error_status(exc) >= 500:
                    return  # ask again next time
            self._bucket_seen = True

    @contextlib.contextmanager
    def _bucket_errors(self) -> Iterator[None]:
        """Turn S3's ``NoSuchBucket`` into ``StoreNotFoundError`` naming the bucket."""
        try:
            yield
        except ClientError as exc:
            if _is_no_such_bucket(exc):
                raise self._missing_bucket() from exc
            raise

    def _missing_bucket(self) -> StoreNotFoundError:
        where = f' at {public_endpoint(self._endpoint_url)}' if self._endpoint_url else ''
        return StoreNotFoundError(
            'S3 bucket', self._bucket, hint=f'create it first{where} (mediastash never creates buckets)'
        )

    async def _object_chunks(self, digest: str, key: str, chunk_size: int) -> AsyncGenerator[bytes, None]:
        """The object's bytes in pieces of at most ``chunk_size``; a body cut short resumes with a ranged GET."""
        client = await self._s3()
        received = 0
        failures = 0
        while True:
            arguments: dict[str, Any] = {'Bucket': self._bucket, 'Key': key}
            if received:
                arguments['Range'] = f'bytes={received}-'
            try:
                with self._bucket_errors():
                    response = await client.get_object(**arguments)
            except ClientError as exc:
                if _is_not_found(exc):
                    raise self._not_found(digest) from None
                raise
            body = response['Body']
            try:
                while chunk := await body.read(chunk_size):
                    received += len(chunk)
                    yield chunk
                return
            except _STREAM_ERRORS:
                failures += 1
                if failures >= self._read_attempts:
                    raise
            finally:
                body.close()

    # -- public URLs -------------------------------------------------------------------

    @property
    def public_url_lifetime(self) -> float | None:
        """``expires_in`` of ``PresignedUrls``; ``None`` for another resolver without an ``expires_in``."""
        if self._presigned is not None:
            return float(self._presigned.expires_in)
        return super().public_url_lifetime

    async def _presigned_public_url(self, uri: str, context: MediaContextLike) -> str:
        """The resolver behind ``public_url`` when built with ``public_url=PresignedUrls(...)``."""
        assert self._presigned is not None
        return await self._presign(parse_media_uri(uri), context, self._presigned)

    async def presigned_url(
        self,
        uri: str,
        *,
        context: MediaContextLike = EMPTY_CONTEXT,
        expires_in: int = 3600,
        response_content_type: bool | str = True,
        response_content_disposition: bool | str | None = None,
    ) -> str:
        """A SigV4 presigned GET URL for ``uri`` (no request is sent; the blob is not checked to exist)."""
        options = PresignedUrls(
            expires_in=expires_in,
            response_content_type=response_content_type,
            response_content_disposition=response_content_disposition,
        )
        return await self._presign(parse_media_uri(uri), context, options)

    async def _presign(self, digest: str, context: MediaContextLike, options: PresignedUrls) -> str:
        client = await self._s3()
        url = await presign_get(
            client, bucket=self._bucket, key=self._key_for(digest, context), options=options, context=context
        )
        if 'X-Amz-Signature=' not in url:
            raise InvalidStoreConfiguration(
                "the S3 client presigns without SigV4; create it with botocore.config.Config(signature_version='s3v4')"
            )
        return url

    # -- optional capabilities ---------------------------------------------------------

    async def _list_digests(self) -> AsyncIterator[str]:
        """Digests of the objects under ``key_prefix`` (paginated). Keys must carry the digest in their name."""
        async for digest, _item in self._list_objects():
            yield digest

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        """Every blob with the ``Size`` and ``LastModified`` the listing reports (no HEAD, no GET)."""
        async for digest, item in self._list_objects():
            modified = item.get('LastModified')
            written_at = modified.timestamp() if isinstance(modified, datetime) else None
            yield BlobInfo(media_uri(digest), int(item.get('Size') or 0), written_at)

    async def _list_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        """The blobs of one digest range. The default and sharded key strategies name keys in digest order,
        so the listing starts at the range's first key (``StartAfter``) and stops at its end; a custom
        strategy lists everything and filters."""
        sharded = self._key_strategy is sharded_key_strategy
        if not sharded and self._key_strategy is not default_key_strategy:
            async for info in super()._list_blobs_in_range(digest_range):
                yield info
            return
        start = digest_range.start.ljust(64, '0')
        first = f'{start[:2]}/{start[2:4]}/{start}' if sharded else start  # the first key, less its suffix
        client = await self._s3()
        paginator = client.get_paginator('list_objects_v2')
        pages = aiter(
            paginator.paginate(Bucket=self._bucket, Prefix=self._key_prefix, StartAfter=self._key_prefix + first)
        )
        while (items := await self._next_page(pages)) is not None:
            for item in items:
                name = item['Key'][len(self._key_prefix) :]
                if name[:1] > 'f':
                    return  # past every key named by a digest (the namespaces' keys sort before the first one)
                stem = name.removesuffix(_DEFAULT_SUFFIX)
                digest = stem[6:] if sharded else stem
                if (
                    stem == name
                    or not is_digest(digest)
                    or (sharded and stem != f'{digest[:2]}/{digest[2:4]}/{digest}')
                ):
                    continue
                if digest_range.end is not None and digest >= digest_range.end:
                    return
                if digest >= start:
                    modified = item.get('LastModified')
                    written_at = modified.timestamp() if isinstance(modified, datetime) else None
                    yield BlobInfo(media_uri(digest), int(item.get('Size') or 0), written_at)

    async def _next_page(self, pages: AsyncIterator[Any]) -> list[Any] | None:
        """The listing entries of the next page of ``pages`` (its bucket errors mapped); ``None`` after the last."""
        with self._bucket_errors():
            try:
                page = await anext(pages)
            except StopAsyncIteration:
                return None
        return list(page.get('Contents', []))

    async def _list_objects(self) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
        """``(digest, listing entry)`` of each blob object under ``key_prefix``, each digest once.

        A store (not a view) never lists the keys under ``<key_prefix>.mediastash-namespaces/``: the first it meets
        restarts the listing after them all (``StartAfter``; a namespace name sorts before ``~``), so a store
        with large namespaces pays one request for them, not a page per thousand of their keys."""
        client = await self._s3()
        default = self._key_strategy is default_key_strategy
        seen: set[str] = set()
        area = self._namespace_area
        skipped = False
        paginator = client.get_paginator('list_objects_v2')
        pages = aiter(paginator.paginate(Bucket=self._bucket, Prefix=self._key_prefix))
        while (items := await self._next_page(pages)) is not None:
            for item in items:
                if area is not None and item['Key'].startswith(area):
                    if not skipped:
                        skipped = True
                        after = f'{area}~'
                        with contextlib.suppress(AttributeError):
                            await pages.aclose()  # type: ignore[attr-defined]
                        pages = aiter(
                            paginator.paginate(Bucket=self._bucket, Prefix=self._key_prefix, StartAfter=after)
                        )
                        break
                    continue
                name = item['Key'][len(self._key_prefix) :]
                if default:
                    stem = name.removesuffix(_DEFAULT_SUFFIX)
                    digest = stem if stem != name and is_digest(stem) else None
                else:
                    found = EMBEDDED_DIGEST_PATTERN.search(name.rsplit('/', 1)[-1])
                    digest = found.group() if found else None
                if digest is not None and digest not in seen:
                    if not default:
                        seen.add(digest)
                    yield digest, cast(Mapping[str, Any], item)

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        """A HEAD per blob (``max_concurrency`` at a time); one last modified before ``touch_before`` is
        copied onto itself. Blobs deleted before their copy are reported absent."""
        client = await self._s3()
        gate = asyncio.Semaphore(max_concurrency)

        async def one(digest: str) -> str | None:
            key = self._key_for(digest, EMPTY_CONTEXT)
            async with gate:
                head = await self._head(key)
                if head is None:
                    return None
                modified = _last_modified(head)
                if modified is not None and modified >= touch_before:
                    return digest
                with self._bucket_errors():
                    return digest if await self._refresh(client, key, head) else None

        found = await asyncio.gather(*map(one, digests))
        return {digest for digest in found if digest is not None}

    async def _client_to_delete(self, keys: Iterable[str]) -> S3Client:
        """The client, once the known-key cache has forgotten ``keys`` (they are about to be deleted)."""
        client = await self._s3()
        if self._known is not None:
            self._known.forget(keys)
        return client

    async def _heads(self, keys: list[str]) -> list[Mapping[str, Any] | None]:
        """HEAD every key, ``_HEAD_CONCURRENCY`` at a time (``None`` for a missing one), in ``keys``' order."""
        gate = asyncio.Semaphore(_HEAD_CONCURRENCY)

        async def head(key: str) -> Mapping[str, Any] | None:
            async with gate:
                return await self._head(key)

        return await asyncio.gather(*map(head, keys))

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        """Per batch of 100 keys: HEAD each, then one ``DeleteObjects`` of those still last modified before
        ``written_before``. Not atomic: a touch landing between a key's HEAD and the delete is lost."""
        keys = {self._key_for(digest, EMPTY_CONTEXT): digest for digest in digests}
        client = await self._client_to_delete(keys)
        deleted: list[str] = []
        failures: list[tuple[int, Mapping[str, Any]]] = []
        ordered = list(keys)
        for start in range(0, len(ordered), _SWEEP_BATCH):
            batch = ordered[start : start + _SWEEP_BATCH]
            heads = await self._heads(batch)
            doomed = [key for key, head in zip(batch, heads, strict=True) if _modified_before(head, written_before)]
            if not doomed:
                continue
            with self._bucket_errors():
                response = await client.delete_objects(
                    Bucket=self._bucket, Delete={'Objects': [{'Key': key} for key in doomed], 'Quiet': True}
                )
            errors = response.get('Errors', [])
            failed = {error.get('Key') for error in errors}
            deleted.extend(keys[key] for key in doomed if key not in failed)
            if errors:
                failures.append((len(doomed), errors[0]))
        if failures:
            count, first = failures[0]
            raise StoreOperationError(
                'delete_unless_touched',
                self._describe(),
                f'{len(failures)} DeleteObjects batches failed, first {first.get("Key")!r} of a batch of {count}: '
                f'{first.get("Code")}',
            )
        return deleted

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        key = self._key_for(digest, context)
        if self._known is not None:
            self._known.forget([key])
        if await self._head(key) is None:
            return False
        client = await self._s3()
        with self._bucket_errors():
            await client.delete_object(Bucket=self._bucket, Key=key)
        return True

    async def _delete_many(self, digests: list[str]) -> int:
        """Delete in batches of 1000 keys; returns how many were stored (found by HEAD) and removed."""
        keys = list(dict.fromkeys(self._key_for(digest, EMPTY_CONTEXT) for digest in digests))
        client = await self._client_to_delete(keys)
        found = [key for key, head in zip(keys, await self._heads(keys), strict=True) if head is not None]
        for start in range(0, len(found), _DELETE_BATCH):
            batch = found[start : start + _DELETE_BATCH]
            with self._bucket_errors():
                response = await client.delete_objects(
                    Bucket=self._bucket, Delete={'Objects': [{'Key': key} for key in batch], 'Quiet': True}
                )
            errors = response.get('Errors', [])
            if errors:
                first = errors[0]
                raise StoreOperationError(
                    'delete_many',
                    self._describe(),
                    f'{len(errors)} of {len(batch)} objects not deleted, '
                    f'first {first.get("Key")!r}: {first.get("Code")}',
                )
        return len(found)

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        """Spool the pieces (memory, then a temp file) while the base hashes them, then upload under the digest."""
        extra = _put_arguments(context)
        await self._s3()
        spool = _Spool(self._multipart_threshold, self._spool_directory)
        try:
            async for piece in ingest:
                await spool.write(piece)
            digest = ingest.digest
            key = self._key_for(digest, context)
            with self._bucket_errors():
                await self._store(key, digest, spool.size, spool.read_range, extra)
        finally:
            await spool.close()

    def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        return self._object_chunks(digest, self._key_for(digest, context), chunk_size)


class _Spool:
    """Bytes of a streamed blob: in memory up to ``limit``, then in an anonymous temporary file."""

    def __init__(self, limit: int, directory: str | os.PathLike[str] | None) -> None:
        self._limit = limit
        self._directory = directory
        self._memory = bytearray()
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self.size = 0

    async def write(self, piece: bytes) -> None:
        self.size += len(piece)
        if self._file is None and self.size < self._limit:
            self._memory += piece
            return
        if self._file is None:
            self._file = await asyncio.to_thread(self._open_file)
        await asyncio.to_thread(self._file.write, piece)

    def _open_file(self) -> IO[bytes]:
        """A temporary file holding what was buffered so far (runs in a worker thread)."""
        file = tempfile.TemporaryFile(dir=self._directory)  # noqa: SIM115 - closed by close()
        file.write(self._memory)
        self._memory = bytearray()
        return file

    async def read_range(self, offset: int, length: int) -> bytes:
        if self._file is None:
            return bytes(self._memory[offset : offset + length])
        return await asyncio.to_thread(self._read_at, self._file, offset, length)

    def _read_at(self, file: IO[bytes], offset: int, length: int) -> bytes:
        with self._lock:
            file.flush()
            file.seek(offset)
            return file.read(length)

    async def close(self) -> None:
        if self._file is not None:
            await asyncio.to_thread(self._file.close)
        self._memory = bytearray()


# -- helpers ------------------------------------------------------------------------------

_sessions = threading.local()


def _session() -> AioSession:
    """One aiobotocore session per thread: clients share its parsed service models (a new one costs ~0.3 s)."""
    session: AioSession | None = getattr(_sessions, 'session', None)
    if session is None:
        session = _sessions.session = get_session()
    return session


async def _etag_is_md5_of(head: Mapping[str, Any], read_range: ReadRange, size: int) -> bool:
    """Whether a HEAD's ETag is the MD5 of the ``size`` bytes ``read_range`` gives (a small blob, hashed off the loop).

    True only for a single-part object stored without KMS, where S3's ETag is the body's MD5; any other ETag
    (multipart ``-N``, KMS, a server's own scheme) is just not a match.
    """
    etag = str(head.get('ETag') or '').strip('"').lower()
    if len(etag) != 32:
        return False
    body = await read_range(0, size)
    return await asyncio.to_thread(lambda: hashlib.md5(body, usedforsecurity=False).hexdigest()) == etag


def _bytes_reader(data: bytes) -> ReadRange:
    """``read_range`` over bytes in memory (the whole blob without a copy)."""

    async def read_range(offset: int, length: int) -> bytes:
        return data if offset == 0 and length == len(data) else data[offset : offset + length]

    return read_range


def _put_arguments(context: MediaContextLike) -> dict[str, Any]:
    """``ContentType`` and encoded ``Metadata`` for an upload; raises before anything is sent."""
    extra: dict[str, Any] = {}
    metadata = encode_metadata(context_metadata(context))
    if metadata:
        extra['Metadata'] = metadata
    media_type = context_media_type(context)
    if media_type:
        if _CONTROL.search(media_type) or not media_type.isascii():
            raise ValueError(f'media_type {media_type!r} cannot be sent as an S3 Content-Type')
        extra['ContentType'] = media_type
    return extra


def _modified_before(head: Mapping[str, Any] | None, cutoff: float) -> bool:
    """Whether a HEAD answer's ``LastModified`` is before ``cutoff``; never for a missing key or no date.

    Whole seconds, rounded down: old only when even the end of that second is before the cutoff.
    """
    modified = None if head is None else _last_modified(head)
    return modified is not None and modified + _HEAD_RESOLUTION <= cutoff


def _last_modified(head: Mapping[str, Any]) -> float | None:
    """``LastModified`` of a HEAD as Unix time (``None`` when the server sent none)."""
    modified = head.get('LastModified')
    return modified.timestamp() if isinstance(modified, datetime) else None


def _is_not_found(exc: ClientError) -> bool:
    """A missing key (a missing bucket is not: see ``_is_no_such_bucket``)."""
    if _is_no_such_bucket(exc):
        return False
    return error_status(exc) == 404 or error_code(exc) in ('NoSuchKey', 'NotFound', '404')


def _is_no_such_bucket(exc: ClientError) -> bool:
    return error_code(exc) == 'NoSuchBucket'


def _is_precondition_failed(exc: ClientError) -> bool:
    return error_status(exc) == 412 or error_code(exc) == 'PreconditionFailed'


def _endpoint_identity(url: str) -> str:
    """``scheme://host[:port][/path]`` lowercased where case does not matter, without credentials or a final ``/``."""
    parts = urlsplit(url)
    host = (parts.hostname or '').lower()
    if ':' in host:
        host = f'[{host}]'
    netloc = f'{host}:{parts.port}' if parts.port else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip('/'), '', ''))


def _without_user_info(url: str | None) -> str | None:
    """``url`` without ``user:password@``, with a warning when there was one.

    S3 requests are signed with the access keys, so user-info in the endpoint
    is never used (aiohttp even refuses it next to SigV4's ``Authorization``);
    stripping it here means the SDK, and so its DEBUG logs, never see it.
    """
    public = public_endpoint(url)
    if public != url:
        warnings.warn(
            f'S3MediaStore ignores the user-info in endpoint_url (requests are signed with the access keys); '
            f'using {public!r}',
            UserWarning,
            stacklevel=4,
        )
    return public
