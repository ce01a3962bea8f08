"""Tenant namespaces: the name rule, and the erase loop every store shares.

A namespace is a store view confined to one tenant's blobs (see
``BaseMediaStore.namespace``); ``docs/stores.md`` explains the model. This
module holds what does not depend on a backend: which names are accepted, and
how a namespace is emptied in bounded batches so that an interrupted erase can
simply be run again.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

from mediastash.errors import InvalidNamespaceError, StoreOperationError
from mediastash.stores.protocols import BlobInfo

__all__ = ['ERASE_BATCH', 'EraseReport', 'check_namespace_name', 'erase_all', 'namespace_segment']

_NAME: Final = re.compile(r'[A-Za-z0-9._-]{1,64}')

ERASE_BATCH: Final = 1000
"""How many blobs ``erase`` lists before it deletes them: its memory is bounded by this, not by the namespace."""


def check_namespace_name(value: object, *, parameter: str = 'namespace') -> str:
    """``value`` when it is a valid namespace name, else ``InvalidNamespaceError`` naming ``parameter``.

    Valid: 1 to 64 of ``A-Z a-z 0-9 . _ -``, and not made of dots only (``.``
    and ``..`` mean something to a path). The error never shows the value.
    """
    if not isinstance(value, str) or _NAME.fullmatch(value) is None or not value.strip('.'):
        raise InvalidNamespaceError(parameter, value)
    return value


_DEVICE_NAMES: Final = frozenset(
    ['con', 'prn', 'aux', 'nul', *(f'com{digit}' for digit in range(10)), *(f'lpt{digit}' for digit in range(10))]
)
"""File names Windows reserves for devices, whatever their extension."""


def namespace_segment(name: str) -> str:
    """``name`` as one folder or table name that no other namespace name maps to, on any file system.

    Case-insensitive file systems (macOS, Windows) and SQLite table names
    would fold ``Alice`` and ``alice`` together, so each capital letter
    becomes ``^`` and its small letter; a final ``.`` (which Windows drops)
    becomes ``^_``; a Windows device name (``con``, ``nul.x``) gets a leading
    ``~``. ``^`` and ``~`` never occur in a valid name, so the mapping is
    one-to-one and the result never holds two names that differ only in case.
    """
    segment = ''.join(f'^{char.lower()}' if 'A' <= char <= 'Z' else char for char in check_namespace_name(name))
    if segment.endswith('.'):
        segment = segment[:-1] + '^_'
    if segment.split('.', 1)[0] in _DEVICE_NAMES:
        segment = '~' + segment
    return segment


@dataclass(frozen=True, slots=True)
class EraseReport:
    """What ``erase()`` removed from a namespace: ``count`` blobs of ``bytes`` bytes in total.

    ``bytes`` sums the sizes the listing reported for the blobs that are gone
    after their deletion. A rerun after an interruption reports only what was
    left, and ``EraseReport(namespace, 0, 0)`` once the namespace is empty.
    """

    namespace: str
    count: int
    bytes: int


ListBatch = Callable[[], AsyncIterator[BlobInfo]]
DeleteBatch = Callable[[list[str]], Awaitable[Iterable[str]]]


async def erase_all(
    namespace: str,
    list_blobs: ListBatch,
    delete_batch: DeleteBatch,
    *,
    where: str,
    progress: Callable[[int, int], None] | None = None,
) -> EraseReport:
    """Delete everything ``list_blobs`` yields, ``ERASE_BATCH`` at a time, until a fresh listing is empty.

    ``delete_batch(uris)`` deletes the given URIs and returns those that were
    removed. Each pass starts a new listing (no listing is held open while its
    blobs are deleted, which some backends do not allow). A blob listed again
    after a deletion that did not remove it means the backend lists what it
    cannot delete: ``StoreOperationError`` instead of looping for ever.
    ``progress(count, bytes)`` is called after every batch.
    """
    count = 0
    size = 0
    unremoved: set[str] = set()
    while True:
        batch: dict[str, int] = {}
        listing = list_blobs()
        try:
            async for info in listing:
                batch[info.uri] = info.size
                if len(batch) >= ERASE_BATCH:
                    break
        finally:
            if isinstance(listing, AsyncGenerator):  # what every store's listing is: closed, not left to GC
                await listing.aclose()
        if not batch:
            return EraseReport(namespace, count, size)
        if unremoved & batch.keys():
            raise StoreOperationError('erase', where, 'listed blobs could not be deleted')
        removed = set(await delete_batch(list(batch)))
        unremoved = batch.keys() - removed
        count += len(removed)
        size += sum(batch[uri] for uri in removed if uri in batch)
        if progress is not None:
            progress(count, size)
