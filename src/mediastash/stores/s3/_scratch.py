"""Scratch namespaces of an S3 store: the key prefix ``<key_prefix>mediastash-tune-<id>-<label>/`` of its bucket.

The namespace store shares the store's client (same endpoint, credentials and
retries) and copies its upload and read settings, so what is measured in it
is what the store itself would do. Emptied, the prefix is gone: S3 has no folders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mediastash.stores._scratch import ScratchSpace, scratch_name

if TYPE_CHECKING:  # the store module imports this one when asked for a namespace
    from mediastash.stores.s3._store import S3MediaStore

__all__ = ['open_scratch']


async def open_scratch(store: S3MediaStore, label: str, cls: type[S3MediaStore]) -> ScratchSpace[S3MediaStore]:
    """A store on a new key prefix under ``store``'s, on ``store``'s client (which stays ``store``'s to close)."""
    name = scratch_name(label)
    prefix = f'{store.key_prefix}{name}/'
    scratch = cls(
        bucket=store.bucket,
        client=await store._s3(),
        key_prefix=prefix,
        key_strategy=store._key_strategy,
        put_check=store._put_check,
        conditional_writes=store._conditional_writes,
        multipart_threshold=store._multipart_threshold,
        part_size=store._part_size,
        max_concurrency=store._max_concurrency,
        max_attempts=store._max_attempts,
        read_attempts=store._read_attempts,
        spool_directory=store._spool_directory,
        known_ttl=None if store._known is None else store._known._ttl,
    )
    where = f'key prefix {prefix} of bucket {store.bucket}'
    return ScratchSpace(scratch, name, where)
