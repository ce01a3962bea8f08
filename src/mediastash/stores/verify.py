"""Re-hash stored blobs and, on request, remove the corrupt ones (``BaseMediaStore.verify``, ``mediastash verify``).

Repair can only remove: a corrupt blob is deleted so that the next ``put`` of
the right bytes stores them fresh. No store can invent the original bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from mediastash._checks import positive_int
from mediastash._tasks import raise_first
from mediastash.errors import IntegrityError, InvalidArgumentError, MediaNotFoundError
from mediastash.stores._range import DigestRange, blobs_in_range
from mediastash.stores.protocols import (
    BlobCheck,
    CheckableMediaStore,
    CollectableMediaStore,
    DeletableMediaStore,
    ListableMediaStore,
    MediaStore,
    StreamingMediaStore,
)
from mediastash.uri import MEDIA_URI_SCHEME, parse_media_uri

__all__ = ['VERIFY_CHUNK_BYTES', 'VerifyReport', 'verify_store']

VERIFY_CHUNK_BYTES = 1 << 20
"""Piece size when a blob is streamed for verification."""
_QUEUED_PER_WORKER: Final = 4
"""Listed URIs waiting per worker: the listing runs only a little ahead of the checks."""


@dataclass
class VerifyReport:
    """What a verification found: blobs checked, intact, corrupt, missing and repaired (deleted), and intact bytes.

    ``damaged_copies``: blobs that read sound (counted in ``ok``) while another
    stored copy of them does not hash to the URI (a store that keeps two
    copies, such as PostgreSQL's inline row beside a chunked copy); ``healed``:
    those whose damaged copy the repair removed, the sound copy kept.
    """

    checked: int = 0
    ok: int = 0
    bytes: int = 0
    corrupt: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    damaged_copies: list[str] = field(default_factory=list)
    healed: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True when nothing was corrupt or missing and no stored copy was damaged."""
        return not self.corrupt and not self.missing and not self.damaged_copies

    def as_json(self) -> dict[str, Any]:
        """A JSON document of the report (URIs sorted)."""
        return {
            'checked': self.checked,
            'ok': self.ok,
            'corrupt': sorted(self.corrupt),
            'missing': sorted(self.missing),
            'repaired': sorted(self.repaired),
            'damaged_copies': sorted(self.damaged_copies),
            'healed': sorted(self.healed),
            'bytes': self.bytes,
        }


async def verify_store(
    store: MediaStore,
    uris: Iterable[str] | None = None,
    *,
    repair: bool = False,
    max_concurrency: int = 4,
    on_checked: Callable[[str], None] | None = None,
    shard: tuple[int, int] | None = None,
) -> VerifyReport:
    """Read every blob of ``uris`` (default: every blob the store lists) and check its sha256.

    Blobs are streamed when the store can, ``max_concurrency`` at a time.
    The store's listing is consumed as the checks go (a short queue between
    them), so memory does not grow with the number of blobs; only the corrupt
    and missing URIs are kept. With ``repair=True`` each corrupt blob is
    deleted (the store must support ``delete``); missing blobs cannot be
    repaired. A blob that reads sound while another stored copy of it is
    damaged is listed in ``damaged_copies``; a repair removes that copy
    (``healed``) and keeps the sound one. Without ``repair`` nothing is
    written. ``on_checked(uri)`` is called after each blob (progress bars).
    ``shard=(k, n)``: only the blobs of shard ``k`` of ``n`` equal parts of
    the digest space (``DigestRange.shard``), so ``n`` workers verify a store
    together.
    """
    positive_int('max_concurrency', max_concurrency)
    digest_range = None if shard is None else _shard_range(shard)
    if repair and not isinstance(store, DeletableMediaStore):
        raise TypeError(f'{store!r} cannot delete blobs, so verify cannot repair it')
    if uris is None:
        if not isinstance(store, ListableMediaStore | CollectableMediaStore):
            raise TypeError(f'{store!r} cannot list its blobs; pass the URIs to verify')
        todo: AsyncIterator[str] = _listed(store, digest_range)
    else:
        given = list(dict.fromkeys(uris))
        for uri in given:
            parse_media_uri(uri)
        todo = _given(given, digest_range)
    report = VerifyReport()
    queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=_QUEUED_PER_WORKER * max_concurrency)

    async def feed() -> None:  # a listing that fails cancels the workers through the task group
        async for uri in todo:
            await queue.put(uri)
        for _ in range(max_concurrency):
            await queue.put(None)

    async def worker() -> None:
        while (uri := await queue.get()) is not None:
            try:
                checked = await _check(store, uri, repair)
            except IntegrityError:
                report.corrupt.append(uri)
                if repair and isinstance(store, DeletableMediaStore) and await store.delete(uri):
                    report.repaired.append(uri)
            except MediaNotFoundError:
                report.missing.append(uri)
            else:
                report.ok += 1
                report.bytes += checked.size
                if checked.damaged_copies:
                    report.damaged_copies.append(uri)
                if checked.removed_copies:
                    report.healed.append(uri)
            report.checked += 1
            if on_checked is not None:
                on_checked(uri)

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(feed())
            for _ in range(max_concurrency):
                group.create_task(worker())
    except BaseExceptionGroup as error:  # a store error (not a corrupt or missing blob) is raised as it is
        raise_first(error)
    return report


async def _listed(store: Any, digest_range: DigestRange | None) -> AsyncIterator[str]:
    """The store's URIs (a shard's only when a range is given), from its ranged listing where it has one: that
    listing remembers nothing per blob (a disk or S3 store with a custom layout remembers each digest it saw)."""
    if isinstance(store, CollectableMediaStore):
        async for info in blobs_in_range(store, digest_range or DigestRange()):
            yield info.uri
        return
    async for uri in store.iter_uris():
        if digest_range is None or uri[len(MEDIA_URI_SCHEME) :] in digest_range:
            yield uri


async def _given(uris: list[str], digest_range: DigestRange | None) -> AsyncIterator[str]:
    for uri in uris:
        if digest_range is None or uri[len(MEDIA_URI_SCHEME) :] in digest_range:
            yield uri


def _shard_range(shard: object) -> DigestRange:
    if not isinstance(shard, tuple) or len(shard) != 2:
        raise InvalidArgumentError('shard', 'None or a pair (k, n) of ints with 0 <= k < n', shard)
    return DigestRange.shard(shard[0], shard[1])


async def _check(store: MediaStore, uri: str, repair: bool) -> BlobCheck:
    """A mediastash store's ``check_blob`` (which also checks the further copies it keeps of the blob), else the
    whole blob read (verified by the store)."""
    if isinstance(store, CheckableMediaStore):
        return await store.check_blob(uri, repair=repair)
    if isinstance(store, StreamingMediaStore):
        size = 0
        async for chunk in store.get_stream(uri, chunk_size=VERIFY_CHUNK_BYTES):
            size += len(chunk)
        return BlobCheck(size)
    return BlobCheck(len(await store.get(uri)))
