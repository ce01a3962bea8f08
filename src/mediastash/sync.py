"""Copy or compare the blobs of two stores (the library behind ``mediastash sync`` and ``mediastash diff``).

Blobs are content-addressed, so a copy is correct exactly when the
destination returns the source's URI for it, and resuming is a matter of
asking the destination what it already holds (``exists_many``). Blobs are
streamed (``get_stream`` into ``put_stream``) when both stores can, so a blob
larger than memory copies in constant memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from mediastash._checks import positive_int
from mediastash._describe import describe_error
from mediastash._digest_set import DigestSet
from mediastash.context import MediaContext
from mediastash.errors import EmptySourceError, InvalidArgumentError, MediaStashError
from mediastash.stores._range import DigestRange, blobs_in_range
from mediastash.stores.capabilities import media_type_of as recorded_media_type
from mediastash.stores.protocols import (
    CollectableMediaStore,
    ListableMediaStore,
    MediaStore,
    StatableMediaStore,
    StreamingMediaStore,
    exists_in,
)
from mediastash.uri import MEDIA_URI_SCHEME

__all__ = [
    'StoreComparison',
    'StoreDiff',
    'SyncFailure',
    'SyncReport',
    'compare_stores',
    'diff_stores',
    'list_blobs',
    'sync_stores',
]

BATCH: Final = 1000
"""URIs per existence check on the destination (and per deletion batch)."""
CHUNK: Final = 1 << 20

_Item = TypeVar('_Item')


@dataclass(frozen=True)
class SyncFailure:
    """One blob that could not be copied (or verified, or deleted), and why (one line, no secret)."""

    uri: str
    error: str


@dataclass
class SyncReport:
    """What a sync did: counts and bytes (bytes of blobs whose size the source lists; else counted as copied).

    ``source`` and ``destination`` name the stores by their ``repr``, which
    every mediastash store keeps free of credentials. ``seconds``: wall time
    of the copy and delete phases (the source's listing excluded when the
    caller passed it in).
    """

    source: str = ''
    destination: str = ''
    seconds: float = 0.0
    copied: int = 0
    copied_bytes: int = 0
    skipped: int = 0
    skipped_bytes: int = 0
    verified: int = 0
    deleted: int = 0
    kept_young: int = 0
    failures: list[SyncFailure] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def bytes_per_second(self) -> float:
        """Throughput of the copy: ``copied_bytes`` over ``seconds`` (0 when nothing was copied)."""
        return self.copied_bytes / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class StoreDiff:
    """URIs held by one store only (sorted)."""

    only_in_source: list[str]
    only_in_destination: list[str]

    @property
    def equal(self) -> bool:
        return not self.only_in_source and not self.only_in_destination


def _listable(store: MediaStore, role: str) -> None:
    if not isinstance(store, ListableMediaStore | CollectableMediaStore):
        raise MediaStashError(f'the {role} store ({type(store).__name__}) cannot list its blobs')


async def list_blobs(store: MediaStore, *, on_progress: Callable[[int], None] | None = None) -> dict[str, int | None]:
    """Every URI the store holds, with its size where the store lists sizes (``iter_blobs``), in one dict.

    The dict grows with the store: for a store of millions of blobs, stream
    the listing (``iter_blobs`` / ``iter_uris``) or compare with
    ``compare_stores``, as ``sync_stores`` and ``diff_stores`` do.
    ``on_progress(n)``: ``n`` more blobs listed (a listing of millions of S3 objects takes minutes).
    """
    _listable(store, 'given')
    found: dict[str, int | None] = {}
    async for uri, size in _sized(store, DigestRange()):
        found[uri] = size
        if on_progress is not None:
            on_progress(1)
    return found


class StoreComparison:
    """Two stores' listings as digest sets in temporary SQLite files (``DigestSet``); the URIs one side holds
    and the other lacks are read from them in URI order, a page at a time. Made by ``compare_stores``."""

    def __init__(self, source: DigestSet, destination: DigestSet) -> None:
        self._source = source
        self._destination = destination

    def only_in_source(self) -> AsyncIterator[str]:
        """The URIs the source holds and the destination lacks, sorted (each call walks them afresh)."""
        return _missing(self._source, self._destination)

    def only_in_destination(self) -> AsyncIterator[str]:
        """The URIs the destination holds and the source lacks, sorted (each call walks them afresh)."""
        return _missing(self._destination, self._source)


@asynccontextmanager
async def compare_stores(source: MediaStore, destination: MediaStore) -> AsyncIterator[StoreComparison]:
    """List both stores (at once; no blob is read) into temporary digest sets and compare them.

    Memory does not grow with the stores: each listing is streamed into a
    ``DigestSet`` ``BATCH`` URIs at a time, and the differences are read back
    a page at a time, so a caller that writes them out as they come (``mediastash
    diff``) compares stores of any size. The sets' files go when the block ends.
    """
    _listable(source, 'source')
    _listable(destination, 'destination')
    left, right = DigestSet(), DigestSet()
    try:
        await asyncio.gather(_fill(left, source), _fill(right, destination))
        yield StoreComparison(left, right)
    finally:
        await left.aclose()
        await right.aclose()


async def _fill(digests: DigestSet, store: MediaStore) -> None:
    async for batch in _batches(_sized(store, DigestRange())):
        await digests.add(_digest(uri) for uri, _ in batch)
    await digests.flush()


async def _missing(present: DigestSet, absent: DigestSet) -> AsyncIterator[str]:
    """The URIs of ``present``'s digests that ``absent`` lacks, in digest (so URI) order."""
    page: list[str] = []
    async for digest in present.sorted():
        page.append(digest)
        if len(page) >= BATCH:
            for uri in await _lacking(page, absent):
                yield uri
            page = []
    for uri in await _lacking(page, absent):
        yield uri


async def _lacking(digests: list[str], absent: DigestSet) -> list[str]:
    found = await absent.present(digests)
    return [MEDIA_URI_SCHEME + digest for digest in digests if digest not in found]


async def diff_stores(source: MediaStore, destination: MediaStore) -> StoreDiff:
    """The URIs present on one side only (both stores listed; no bytes read).

    The listings are compared on disk (``compare_stores``); only the
    differences are held in memory, in the two lists returned.
    """
    async with compare_stores(source, destination) as comparison:
        return StoreDiff(
            [uri async for uri in comparison.only_in_source()],
            [uri async for uri in comparison.only_in_destination()],
        )


async def media_type_of(store: MediaStore, uri: str) -> str | None:
    """The media type the store recorded for the blob: its ``stat`` answer (no bytes read), else its
    ``media_type_of`` (sync or async) for a store without ``stat``; ``None`` when neither is there."""
    if isinstance(store, StatableMediaStore):
        return (await store.stat(uri)).media_type
    return await recorded_media_type(store, uri)


async def _copy_one(source: MediaStore, destination: MediaStore, uri: str, verify: bool) -> int:
    """Copy one blob (streaming where both stores can); the bytes copied. Raises on any failure."""
    metadata: Mapping[str, str] = await source.get_metadata(uri)
    context = MediaContext(media_type=await media_type_of(source, uri), metadata=dict(metadata))
    size = 0
    if isinstance(source, StreamingMediaStore) and isinstance(destination, StreamingMediaStore):

        async def counted() -> AsyncIterator[bytes]:
            nonlocal size
            stream = source.get_stream(uri, chunk_size=CHUNK)
            try:
                async for chunk in stream:
                    size += len(chunk)
                    yield chunk
            finally:
                await stream.aclose()  # type: ignore[attr-defined]

        written = await destination.put_stream(counted(), context=context)
    else:
        data = await source.get(uri)
        size = len(data)
        written = await destination.put(data, context=context)
    if written != uri:
        raise MediaStashError(f'the destination stored {uri} as {written}')
    if verify:
        await verify_blob(destination, uri)
    return size


async def verify_blob(store: MediaStore, uri: str) -> None:
    """Read the blob to its end through the store, which checks it against its digest (``IntegrityError``)."""
    if isinstance(store, StreamingMediaStore):
        stream = store.get_stream(uri, chunk_size=CHUNK)
        try:
            async for _ in stream:
                pass
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
    else:
        await store.get(uri)


def _describe(error: BaseException) -> str:
    return describe_error(error) or f'{type(error).__name__}: {error}'


async def sync_stores(
    source: MediaStore,
    destination: MediaStore,
    *,
    jobs: int = 4,
    verify: bool = False,
    delete_written_before: float | None = None,
    allow_empty_source: bool = False,
    listed: Mapping[str, int | None] | None = None,
    list_destination: bool = False,
    on_progress: Callable[[int], None] | None = None,
    shard: tuple[int, int] | None = None,
) -> SyncReport:
    """Copy every blob of ``source`` that ``destination`` lacks, ``jobs`` at a time.

    A rerun copies only what is still missing. ``verify``: read each copied
    blob back from ``destination`` to its end (the store checks the digest).
    ``delete_written_before`` (Unix time): also delete from ``destination``
    the blobs ``source`` lacks, through ``delete_unless_touched`` so a blob
    written or touched after that time is kept (see ``docs/cli.md``). A
    source that holds no blob at all then raises ``EmptySourceError`` before
    anything is deleted, unless ``allow_empty_source`` (an empty source is far
    more often a wrong path than a wish to empty the destination).
    ``listed``: the source's listing when the caller already has it.
    ``list_destination``: learn what ``destination`` holds by listing it once
    instead of asking per blob (``exists_many``): far fewer requests on S3
    (one per 1000 blobs instead of a HEAD each) when the destination does not
    hold many more blobs than the source.
    ``on_progress(n)``: ``n`` more source blobs handled.
    ``shard=(k, n)``: only the blobs of shard ``k`` of ``n`` equal parts of
    the digest space, on both sides (``DigestRange.shard``), so ``n`` jobs
    sync a store together.

    Memory does not grow with the stores: the source is listed, checked and
    copied ``BATCH`` blobs at a time, and the digest sets the destination's
    listing and the deletion need live in temporary SQLite files
    (``DigestSet``, as in garbage collection).
    """
    positive_int('jobs', jobs)
    _listable(source, 'source')
    if delete_written_before is not None and not isinstance(destination, CollectableMediaStore):
        raise MediaStashError(
            f'--delete needs a destination that dates its blobs ({type(destination).__name__} cannot)'
        )
    if list_destination:
        _listable(destination, 'destination')
    digest_range = DigestRange() if shard is None else _shard_range(shard)
    started = time.perf_counter()
    report = SyncReport(source=repr(source), destination=repr(destination))
    held: DigestSet | None = None
    wanted = DigestSet() if delete_written_before is not None else None
    try:
        if list_destination:
            held = DigestSet()
            async for batch in _batches(_sized(destination, digest_range)):
                await held.add(_digest(uri) for uri, _ in batch)
            await held.flush()
        source_blobs = _from_mapping(listed, digest_range) if listed is not None else _sized(source, digest_range)
        listed_count = 0
        async for batch in _batches(source_blobs):
            listed_count += len(batch)
            if wanted is not None:
                await wanted.add(_digest(uri) for uri, _ in batch)
            await _copy_batch(source, destination, dict(batch), held, jobs, verify, report, on_progress)
        if delete_written_before is not None and wanted is not None:
            if not listed_count and not allow_empty_source:
                raise EmptySourceError(
                    f'the source store {source!r} holds no blob at all, so deleting what it lacks would empty the '
                    'destination; check the source, or pass allow_empty_source=True to delete anyway'
                )
            await wanted.flush()
            await _delete_extra(destination, wanted, delete_written_before, report, digest_range)
    finally:
        for digests in (held, wanted):
            if digests is not None:
                await digests.aclose()
    report.seconds = time.perf_counter() - started
    return report


async def _copy_batch(
    source: MediaStore,
    destination: MediaStore,
    blobs: dict[str, int | None],
    held: DigestSet | None,
    jobs: int,
    verify: bool,
    report: SyncReport,
    on_progress: Callable[[int], None] | None,
) -> None:
    """Copy the blobs of one batch of the source's listing that the destination lacks, ``jobs`` at a time."""
    gate = asyncio.Semaphore(jobs)

    async def one(uri: str) -> None:
        async with gate:
            try:
                size = await _copy_one(source, destination, uri, verify)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                report.failures.append(SyncFailure(uri, _describe(error)))
            else:
                report.copied += 1
                report.copied_bytes += size
                report.verified += 1 if verify else 0
        if on_progress is not None:
            on_progress(1)

    uris = list(blobs)
    if held is not None:
        found = await held.present([_digest(uri) for uri in uris])
        present = frozenset(uri for uri in uris if _digest(uri) in found)
    else:
        present = await exists_in(destination, uris, max_concurrency=max(jobs, 16))
    report.skipped += len(present)
    report.skipped_bytes += sum(blobs[uri] or 0 for uri in present)
    if on_progress is not None and present:
        on_progress(len(present))
    await asyncio.gather(*(one(uri) for uri in uris if uri not in present))


async def _delete_extra(
    destination: Any, wanted: DigestSet, before: float, report: SyncReport, digest_range: DigestRange
) -> None:
    """Delete from ``destination`` what the source lacks, unless written or touched since ``before``."""
    async for batch in _batches(_sized(destination, digest_range)):
        uris = [uri for uri, _ in batch]
        found = await wanted.present([_digest(uri) for uri in uris])
        extra = [uri for uri in uris if _digest(uri) not in found]
        if not extra:
            continue
        try:
            deleted = await destination.delete_unless_touched(extra, written_before=before)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            report.failures.extend(SyncFailure(uri, _describe(error)) for uri in extra)
            continue
        report.deleted += len(deleted)
        report.kept_young += len(extra) - len(deleted)


async def _sized(store: Any, digest_range: DigestRange) -> AsyncIterator[tuple[str, int | None]]:
    """``(uri, size)`` of every blob of the range (size ``None`` when the store lists no sizes)."""
    if isinstance(store, CollectableMediaStore):
        async for info in blobs_in_range(store, digest_range):
            yield info.uri, info.size
        return
    async for uri in store.iter_uris():
        if digest_range.whole or _digest(uri) in digest_range:
            yield uri, None


async def _from_mapping(
    listed: Mapping[str, int | None], digest_range: DigestRange
) -> AsyncIterator[tuple[str, int | None]]:
    for uri, size in listed.items():
        if digest_range.whole or _digest(uri) in digest_range:
            yield uri, size


async def _batches(items: AsyncIterator[_Item], size: int = BATCH) -> AsyncIterator[list[_Item]]:
    batch: list[_Item] = []
    async for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _digest(uri: str) -> str:
    return uri[len(MEDIA_URI_SCHEME) :]


def _shard_range(shard: object) -> DigestRange:
    if not isinstance(shard, tuple) or len(shard) != 2:
        raise InvalidArgumentError('shard', 'None or a pair (k, n) of ints with 0 <= k < n', shard)
    return DigestRange.shard(shard[0], shard[1])
