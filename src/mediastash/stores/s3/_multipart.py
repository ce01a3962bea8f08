"""Multipart upload of one blob: parts sent concurrently, each with its SHA-256, aborted on any failure.

An upload that fails or is cancelled is aborted, so no incomplete upload is
left in the bucket to be billed. A ``CompleteMultipartUpload`` whose response
was lost and that the SDK resent may come back as "no such upload" or
"precondition failed"; the object is then checked with a HEAD instead of
reporting a failure.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from botocore.exceptions import ClientError

from mediastash.stores._blob import OFFLOAD_BYTES

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ['MAX_PARTS', 'MIN_PART_SIZE', 'part_layout', 'run_parts', 'upload_multipart']

_PartT = TypeVar('_PartT')

MIN_PART_SIZE = 5 << 20
"""S3's smallest part (all but the last)."""
MAX_PARTS = 10_000

ReadRange = Callable[[int, int], Awaitable[bytes]]
"""``(offset, length) -> bytes`` of the blob being uploaded."""

_log = logging.getLogger(__name__)


def part_layout(size: int, part_size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of each part; the part size grows when ``size`` would need over 10,000 parts."""
    part_size = max(part_size, MIN_PART_SIZE, -(-size // MAX_PARTS))
    return [(offset, min(part_size, size - offset)) for offset in range(0, size, part_size)] or [(0, 0)]


def checksum_b64(data: bytes) -> str:
    """Base64 SHA-256, the form of S3's ``x-amz-checksum-sha256``."""
    return base64.b64encode(hashlib.sha256(data).digest()).decode('ascii')


def error_code(exc: ClientError) -> str:
    return str(exc.response.get('Error', {}).get('Code', ''))


def error_status(exc: ClientError) -> int:
    return int(exc.response.get('ResponseMetadata', {}).get('HTTPStatusCode', 0))


async def upload_multipart(
    client: S3Client,
    *,
    bucket: str,
    key: str,
    size: int,
    read_range: ReadRange,
    part_size: int,
    concurrency: int,
    extra: dict[str, Any],
    if_none_match: bool,
) -> None:
    """Upload ``size`` bytes read through ``read_range`` to ``bucket/key`` as one multipart object.

    ``extra`` holds ``ContentType`` / ``Metadata``. With ``if_none_match`` the
    completion is conditional, and a 412 means another writer stored the blob
    first (the upload is then aborted, which is the correct outcome).
    """
    created = await client.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm='SHA256', **extra)
    upload_id = created['UploadId']
    try:
        parts = await _send_parts(client, bucket, key, upload_id, size, read_range, part_size, concurrency)
        conditional: dict[str, Any] = {'IfNoneMatch': '*'} if if_none_match else {}
        try:
            await client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload=cast(Any, {'Parts': parts}), **conditional
            )
        except ClientError as exc:
            if error_code(exc) not in ('NoSuchUpload', 'PreconditionFailed') and error_status(exc) != 412:
                raise
            if not await _object_has_size(client, bucket, key, size):
                raise
            await _abort_quietly(client, bucket, key, upload_id)
    except BaseException:
        await _abort_quietly(client, bucket, key, upload_id)
        raise


async def _send_parts(
    client: S3Client,
    bucket: str,
    key: str,
    upload_id: str,
    size: int,
    read_range: ReadRange,
    part_size: int,
    concurrency: int,
) -> list[dict[str, Any]]:
    """Send every part, at most ``concurrency`` at a time (bounding memory); the first failure cancels the rest."""
    gate = asyncio.Semaphore(concurrency)

    async def send(number: int, offset: int, length: int) -> dict[str, Any]:
        async with gate:
            data = await read_range(offset, length)
            digest = await asyncio.to_thread(checksum_b64, data) if length >= OFFLOAD_BYTES else checksum_b64(data)
            response = await client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data, ChecksumSHA256=digest
            )
            return {'PartNumber': number, 'ETag': response['ETag'], 'ChecksumSHA256': digest}

    return await run_parts(
        send(number, offset, length) for number, (offset, length) in enumerate(part_layout(size, part_size), start=1)
    )


async def run_parts(parts: Iterable[Coroutine[Any, Any, _PartT]]) -> list[_PartT]:
    """Run the part coroutines concurrently; on the first failure cancel the rest and raise that failure.

    Results come back in the order given (the order of the part numbers).
    """
    tasks = [asyncio.ensure_future(part) for part in parts]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error
    return [task.result() for task in tasks]


async def _object_has_size(client: S3Client, bucket: str, key: str, size: int) -> bool:
    try:
        head = await client.head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return head.get('ContentLength') == size


async def _abort_quietly(client: S3Client, bucket: str, key: str, upload_id: str) -> None:
    """Abort the upload; a failure to abort is logged (without secrets), never raised over the real error."""
    try:
        await asyncio.shield(client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id))
    except ClientError as exc:
        if error_code(exc) != 'NoSuchUpload':
            _log.warning('could not abort multipart upload of %r in bucket %r: %s', key, bucket, error_code(exc))
    except Exception as exc:
        _log.warning('could not abort multipart upload of %r in bucket %r: %s', key, bucket, type(exc).__name__)
