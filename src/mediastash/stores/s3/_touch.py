"""Refresh an object's ``LastModified`` without changing its bytes: copy it onto itself.

S3 has no "touch". A server-side copy of an object onto its own key with
``MetadataDirective='REPLACE'`` (S3 refuses a self-copy that changes nothing)
and the same metadata writes the same bytes as a new object, dated now. The
headers a HEAD reports (content type and disposition, user metadata, storage
class, KMS encryption) are sent again so the copy keeps them. ``CopyObject``
takes objects up to 5 GiB; larger ones are copied in parts (``UploadPartCopy``)
and the multipart upload is aborted if any part fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from mediastash.stores.s3._multipart import _abort_quietly, part_layout, run_parts

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ['COPY_OBJECT_LIMIT', 'refresh_object']

COPY_OBJECT_LIMIT: Final = 5 << 30
"""The largest object one ``CopyObject`` copies."""
_COPY_PART_SIZE: Final = 512 << 20
_KEPT_HEADERS: Final = (
    'ContentType',
    'ContentDisposition',
    'ContentEncoding',
    'ContentLanguage',
    'CacheControl',
    'WebsiteRedirectLocation',
    'StorageClass',
    'SSEKMSKeyId',
    'BucketKeyEnabled',
)


def copy_arguments(head: Mapping[str, Any]) -> dict[str, Any]:
    """What a self-copy must send again to keep what ``head`` reports about the object."""
    arguments: dict[str, Any] = {'Metadata': dict(head.get('Metadata') or {})}
    for name in _KEPT_HEADERS:
        value = head.get(name)
        if value is not None:
            arguments[name] = value
    if head.get('ServerSideEncryption') == 'aws:kms':  # SSE-S3 (AES256) is the bucket's default anyway
        arguments['ServerSideEncryption'] = 'aws:kms'
    else:
        arguments.pop('SSEKMSKeyId', None)
        arguments.pop('BucketKeyEnabled', None)
    return arguments


async def refresh_object(
    client: S3Client,
    *,
    bucket: str,
    key: str,
    head: Mapping[str, Any],
    concurrency: int,
    copy_limit: int = COPY_OBJECT_LIMIT,
    part_size: int = _COPY_PART_SIZE,
) -> None:
    """Copy ``key`` onto itself so its ``LastModified`` becomes now (``head`` is its current HEAD).

    Raises the SDK's ``ClientError`` (``NoSuchKey`` when the object is gone).
    """
    arguments = copy_arguments(head)
    source = {'Bucket': bucket, 'Key': key}
    size = int(head.get('ContentLength') or 0)
    if size <= copy_limit:
        await client.copy_object(
            Bucket=bucket,
            Key=key,
            CopySource=cast(Any, source),
            MetadataDirective='REPLACE',
            ChecksumAlgorithm='SHA256',
            **arguments,
        )
        return
    created = await client.create_multipart_upload(Bucket=bucket, Key=key, **arguments)
    upload_id = created['UploadId']
    try:
        gate = asyncio.Semaphore(concurrency)

        async def copy_part(number: int, offset: int, length: int) -> dict[str, Any]:
            async with gate:
                response = await client.upload_part_copy(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    CopySource=cast(Any, source),
                    CopySourceRange=f'bytes={offset}-{offset + length - 1}',
                )
            return {'PartNumber': number, 'ETag': response['CopyPartResult']['ETag']}

        parts = await run_parts(
            copy_part(number, offset, length)
            for number, (offset, length) in enumerate(part_layout(size, part_size), start=1)
        )
        await client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload=cast(Any, {'Parts': parts})
        )
    except BaseException:
        await _abort_quietly(client, bucket, key, upload_id)
        raise
