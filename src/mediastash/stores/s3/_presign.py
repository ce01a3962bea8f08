"""Presigned GET URLs for blobs in an S3 bucket (SigV4, so any model provider can fetch them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mediastash.context import MediaContextLike, context_media_type
from mediastash.errors import InvalidStoreConfiguration

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = ['MAX_EXPIRES_IN', 'MIN_EXPIRES_IN', 'PresignedUrls', 'check_expires_in', 'inline_disposition', 'presign_get']

MIN_EXPIRES_IN = 1
MAX_EXPIRES_IN = 7 * 24 * 3600
"""SigV4 presigned URLs live at most seven days."""


def check_expires_in(expires_in: object) -> int:
    """``expires_in`` as an int of seconds within S3's 1 s .. 7 days; ``InvalidStoreConfiguration`` otherwise."""
    if isinstance(expires_in, bool) or not isinstance(expires_in, int):
        raise InvalidStoreConfiguration(f'expires_in must be an int of seconds, got {expires_in!r}')
    if not MIN_EXPIRES_IN <= expires_in <= MAX_EXPIRES_IN:
        raise InvalidStoreConfiguration(
            f'expires_in must be between {MIN_EXPIRES_IN} and {MAX_EXPIRES_IN} seconds (7 days), got {expires_in}'
        )
    return expires_in


@dataclass(frozen=True, kw_only=True, slots=True)
class PresignedUrls:
    """Pass as ``S3MediaStore(public_url=PresignedUrls(...))`` to make ``public_url`` return presigned GET URLs.

    ``response_content_type``: ``True`` asks S3 to serve the blob with the
    call's ``context.media_type`` (when it has one), a string fixes the type,
    ``False`` leaves the stored ``Content-Type``. ``response_content_disposition``:
    ``True`` serves it ``inline`` with the call's ``context.filename`` (when it
    has one), a string is sent as given (for example ``'attachment; filename="a.pdf"'``),
    ``None`` leaves the stored value.
    """

    expires_in: int = 3600
    response_content_type: bool | str = True
    response_content_disposition: bool | str | None = None

    def __post_init__(self) -> None:
        check_expires_in(self.expires_in)
        if not isinstance(self.response_content_type, bool | str):
            raise InvalidStoreConfiguration(
                f'response_content_type must be a bool or str, got {self.response_content_type!r}'
            )
        if self.response_content_disposition is not None and not isinstance(
            self.response_content_disposition, bool | str
        ):
            raise InvalidStoreConfiguration(
                f'response_content_disposition must be a bool, str or None, got {self.response_content_disposition!r}'
            )


async def presign_get(
    client: S3Client, *, bucket: str, key: str, options: PresignedUrls, context: MediaContextLike
) -> str:
    """A SigV4 presigned URL for ``GET bucket/key`` with the response overrides ``options`` asks for."""
    params: dict[str, Any] = {'Bucket': bucket, 'Key': key}
    content_type = options.response_content_type
    if content_type is True:
        content_type = context_media_type(context) or False
    if content_type:
        params['ResponseContentType'] = content_type
    disposition = options.response_content_disposition
    if disposition is True:
        disposition = inline_disposition(context_filename(context))
    if isinstance(disposition, str):
        params['ResponseContentDisposition'] = disposition
    return await client.generate_presigned_url('get_object', Params=params, ExpiresIn=options.expires_in)


def context_filename(context: MediaContextLike) -> str | None:
    """The context's ``filename`` when it is a non-empty string."""
    name = getattr(context, 'filename', None)
    return name if isinstance(name, str) and name else None


def inline_disposition(filename: str | None) -> str:
    """``Content-Disposition: inline`` naming ``filename`` (RFC 6266; RFC 5987 encoding for non-ASCII names)."""
    if filename is None:
        return 'inline'
    safe = ''.join(ch if 0x20 <= ord(ch) < 0x7F and ch not in '"\\' else '_' for ch in filename)
    if safe == filename:
        return f'inline; filename="{filename}"'
    return f'inline; filename="{safe}"; filename*=UTF-8\'\'{quote(filename, safe="")}'
