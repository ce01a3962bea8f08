"""``collect_garbage``: mark what the roots reference, sweep what is old enough and unreferenced.

The safety rule (``docs/gc.md``): ``mark_started`` is taken before any root is
read; a blob can go only when no root references it and its known last-write
time is before ``mark_started - grace``; the deletion re-checks that age in the
store (``delete_unless_touched``), atomically where the backend can. Writers
refresh a blob's time whenever they confirm it, so with ``grace`` above their
cache trust age plus ``TOUCH_AFTER_SECONDS`` a blob a writer re-references
while the collector runs is never deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Final

from mediastash._checks import positive_int
from mediastash._digest_set import DigestSet
from mediastash.errors import InvalidArgumentError, MediaStashError
from mediastash.gc._report import GcReport
from mediastash.gc._roots import Root, as_root
from mediastash.gc._sweep import GcProgress, Sweeper, Tally, UriLog
from mediastash.stores._range import DigestRange, blobs_in_range
from mediastash.stores.capabilities import capabilities_of, sweep_temp_files
from mediastash.stores.protocols import BlobInfo
from mediastash.uri import MEDIA_URI_SCHEME

__all__ = ['DEFAULT_GRACE', 'StoreNotCollectable', 'collect_garbage']

DEFAULT_GRACE: Final = timedelta(hours=24)
"""Well above the default writer settings (600 s cache trust + 3600 s touch interval)."""

_JUDGE_BATCH: Final = 5000
"""Listed blobs looked up in the mark set at once."""


class StoreNotCollectable(MediaStashError, TypeError):
    """The store cannot list its blobs with their age, or cannot delete only blobs that are still old."""


async def collect_garbage(
    media_store: Any,
    roots: Iterable[object],
    *,
    grace: timedelta | float = DEFAULT_GRACE,
    dry_run: bool = True,
    include_unknown_age: bool = False,
    batch_size: int = 1000,
    progress: GcProgress | None = None,
    shard: tuple[int, int] | None = None,
    uris_file: str | os.PathLike[str] | None = None,
) -> GcReport:
    """Delete the blobs of ``media_store`` that no root references and nobody wrote or touched for ``grace``.

    ``roots``: an iterable of roots, each anything ``as_root`` accepts (a
    lean tree, a path, a set of URIs, a step store, an ``OffloadingKV``, a
    ``Root``). ``grace``: a ``timedelta`` or seconds; a shorter grace than
    the writers' ``KnownBlobCache.trust_seconds + TOUCH_AFTER_SECONDS`` is safe
    only when no other process writes to the store meanwhile (``docs/gc.md``).
    ``dry_run=True`` (the default) deletes nothing and reports what a real run
    would delete; a real run also sweeps the store's old crash leftovers
    (``sweep_temp_files``, where the store has it) before listing.
    ``include_unknown_age=True`` also deletes unreferenced blobs whose age
    the store does not know (rows pydantic-ai-harness wrote): they go through
    ``delete_many`` with no age check, so a writer re-referencing one during
    the collection is not protected. Deletions run ``batch_size``
    blobs at a time, while the listing goes on. A root that cannot be read
    raises ``RootReadError`` before anything is deleted; a store that cannot be
    collected raises ``StoreNotCollectable``.

    Memory does not grow with the store: the referenced digests are kept in
    a temporary SQLite file (``DigestSet``), the listing is judged a batch at a
    time, and the report holds counts. ``uris_file``: a path the run writes
    one line per blob it judged deletable to, ``deletable URI`` in a dry run,
    ``deleted URI`` or ``kept URI`` in a real one (read it with
    ``GcReport.iter_uris``). ``shard=(k, n)``: collect only shard ``k``
    (from 0) of ``n`` equal parts of the digest space (``DigestRange.shard``);
    ``n`` runs, one per shard, in any processes or machines, together do what
    one run does. A run killed part-way deleted only unreferenced old blobs;
    run it again to finish.
    """
    if isinstance(roots, str | bytes | dict | set | frozenset | os.PathLike | Root):
        raise TypeError(f'roots must be an iterable of roots, got a single {type(roots).__name__}: wrap it in a list')
    positive_int('batch_size', batch_size)
    grace_seconds = _grace_seconds(grace)
    digest_range = _shard_range(shard)
    _check_store(media_store, dry_run=dry_run, include_unknown_age=include_unknown_age)
    root_list = [as_root(root) for root in roots]
    if not root_list:
        raise ValueError('no roots: every old blob would be deleted; pass roots=[frozenset()] if that is meant')
    report = Tally(progress)
    with UriLog(uris_file) as log:  # opened first: a file that cannot be written stops the run before any read
        marks = DigestSet()
        try:
            mark_started = time.time()
            written_before = mark_started - grace_seconds
            await _mark(root_list, marks, digest_range, report)
            references = await marks.count()
            mark_seconds = time.time() - mark_started

            sweep_started = time.time()
            if not dry_run:
                await _sweep_leftovers(media_store)
            sweeper = Sweeper(media_store, report, log, dry_run=dry_run, batch_size=batch_size, before=written_before)
            listed: list[BlobInfo] = []
            async for info in blobs_in_range(media_store, digest_range):
                listed.append(info)
                if len(listed) >= _JUDGE_BATCH:
                    await sweeper.judge(listed, await marks.present(_digests(listed)), include_unknown_age)
                    listed = []
            await sweeper.judge(listed, await marks.present(_digests(listed)), include_unknown_age)
            report.done('list')
            await sweeper.finish()
            report.show('delete', sweeper.handled, report.deletable)
        finally:
            await marks.aclose()
    return GcReport(
        dry_run=dry_run,
        mark_started=mark_started,
        grace_seconds=grace_seconds,
        written_before=written_before,
        roots=len(root_list),
        root_items=report.counts['mark'],
        references=references,
        scanned=report.scanned,
        scanned_bytes=report.scanned_bytes,
        referenced=report.referenced,
        skipped_young=report.skipped_young,
        skipped_unknown_age=report.skipped_unknown_age,
        deletable=report.deletable,
        deletable_bytes=report.deletable_bytes,
        deleted=report.deleted,
        bytes_freed=report.bytes_freed,
        mark_seconds=mark_seconds,
        sweep_seconds=time.time() - sweep_started,
        shard=None if shard is None else (shard[0], shard[1]),
        uris_file=None if uris_file is None else os.fspath(uris_file),
    )


async def _mark(roots: list[Root], marks: DigestSet, digest_range: DigestRange, report: Tally) -> None:
    """Add every digest the roots reference (in the range) to ``marks``; a root that fails stops everything."""
    whole = digest_range.whole
    start = len(MEDIA_URI_SCHEME)
    for root in roots:
        async for found in root.reference_batches():
            digests = (uri[start:] for uri in found)
            await marks.add(digests if whole else (digest for digest in digests if digest in digest_range))
            report.tick('mark')
    await marks.flush()
    report.done('mark')


def _digests(infos: list[BlobInfo]) -> list[str]:
    start = len(MEDIA_URI_SCHEME)
    return [info.uri[start:] for info in infos]


def _shard_range(shard: object) -> DigestRange:
    if shard is None:
        return DigestRange()
    if not isinstance(shard, tuple) or len(shard) != 2:
        raise InvalidArgumentError('shard', 'None or a pair (k, n) of ints with 0 <= k < n', shard)
    return DigestRange.shard(shard[0], shard[1])


def _grace_seconds(grace: timedelta | float) -> float:
    if isinstance(grace, timedelta):
        seconds = grace.total_seconds()
    elif isinstance(grace, int | float) and not isinstance(grace, bool):
        seconds = float(grace)
    else:
        raise TypeError(f'grace must be a timedelta or a number of seconds, got {type(grace).__name__}')
    if not seconds >= 0:
        raise ValueError(f'grace must not be negative, got {seconds!r} seconds')
    return seconds


def _check_store(store: Any, *, dry_run: bool, include_unknown_age: bool) -> None:
    declared = capabilities_of(store)
    needed = {'iter_blobs': declared.blob_listing, 'delete_unless_touched': declared.guarded_deletes}
    if include_unknown_age and not dry_run:
        needed['delete_many'] = declared.deletes
    missing = [name for name, present in needed.items() if not present]
    if missing:
        raise StoreNotCollectable(
            f'{store!r} cannot be garbage-collected: it lacks {", ".join(missing)} '
            '(listing blobs with their age, and deleting only blobs still old)'
        )


async def _sweep_leftovers(store: Any) -> None:
    """Remove the store's old crash leftovers where it keeps any (a disk store's temporary files and tombstones).

    Every deleting run does it, whether or not a blob turns out deletable, so
    a store nobody writes to is still cleaned by its collections; a dry run
    never does. The store's own ``sweep_temp_files`` and its default age
    decide what is old enough (a live writer's file never is).
    """
    await sweep_temp_files(store)
