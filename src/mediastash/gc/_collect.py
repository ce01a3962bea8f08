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
from typing import Any, Final, Literal, Protocol

from mediastash._checks import positive_int
from mediastash.errors import MediaStashError
from mediastash.gc._report import GcReport
from mediastash.gc._roots import Root, as_root
from mediastash.stores.protocols import exists_in

__all__ = ['DEFAULT_GRACE', 'GcPhase', 'GcProgress', 'StoreNotCollectable', 'collect_garbage']

DEFAULT_GRACE: Final = timedelta(hours=24)
"""Well above the default writer settings (600 s cache trust + 3600 s touch interval)."""

_PROGRESS_EVERY: Final = 256

GcPhase = Literal['mark', 'list', 'delete']
"""``mark``: root items read; ``list``: blobs listed; ``delete``: deletable blobs handled."""


class GcProgress(Protocol):
    """Called as work advances: the phase, how much of it is done, and its total when known."""

    def __call__(self, phase: GcPhase, done: int, total: int | None) -> None: ...


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
    blobs at a time. A root that cannot be read raises ``RootReadError``
    before anything is deleted; a store that cannot be collected raises
    ``StoreNotCollectable``.
    """
    if isinstance(roots, str | bytes | dict | set | frozenset | os.PathLike | Root):
        raise TypeError(f'roots must be an iterable of roots, got a single {type(roots).__name__}: wrap it in a list')
    positive_int('batch_size', batch_size)
    grace_seconds = _grace_seconds(grace)
    _check_store(media_store, dry_run=dry_run, include_unknown_age=include_unknown_age)
    root_list = [as_root(root) for root in roots]
    if not root_list:
        raise ValueError('no roots: every old blob would be deleted; pass roots=[frozenset()] if that is meant')
    report = _Tally(progress)

    mark_started = time.time()
    written_before = mark_started - grace_seconds
    referenced: set[str] = set()
    for root in root_list:
        async for found in root.reference_batches():
            referenced.update(found)
            report.tick('mark')
    report.done('mark')
    mark_seconds = time.time() - mark_started

    sweep_started = time.time()
    if not dry_run:
        await _sweep_leftovers(media_store)
    candidates: dict[str, int] = {}
    unknown_age: dict[str, int] = {}
    async for info in media_store.iter_blobs():
        report.scanned += 1
        report.scanned_bytes += info.size
        if info.uri in referenced:
            report.referenced += 1
        elif info.written_at is None:
            if include_unknown_age:
                unknown_age[info.uri] = info.size
            else:
                report.skipped_unknown_age += 1
        elif info.written_at >= written_before:
            report.skipped_young += 1
        else:
            candidates[info.uri] = info.size
        report.tick('list')
    report.done('list')

    deletable = len(candidates) + len(unknown_age)
    deleted: set[str] = set()
    if not dry_run:
        handled = 0
        for batch in _batches(list(candidates), batch_size):
            deleted.update(await media_store.delete_unless_touched(batch, written_before=written_before))
            handled += len(batch)
            report.show('delete', handled, deletable)
        for batch in _batches(list(unknown_age), batch_size):
            await media_store.delete_many(batch)
            still_there = await exists_in(media_store, batch)
            deleted.update(uri for uri in batch if uri not in still_there)
            handled += len(batch)
            report.show('delete', handled, deletable)
    sizes = candidates | unknown_age
    return GcReport(
        dry_run=dry_run,
        mark_started=mark_started,
        grace_seconds=grace_seconds,
        written_before=written_before,
        roots=len(root_list),
        root_items=report.counts['mark'],
        references=len(referenced),
        scanned=report.scanned,
        scanned_bytes=report.scanned_bytes,
        referenced=report.referenced,
        skipped_young=report.skipped_young,
        skipped_unknown_age=report.skipped_unknown_age,
        deletable=deletable,
        deletable_bytes=sum(sizes.values()),
        deleted=len(deleted),
        bytes_freed=sum(sizes.get(uri, 0) for uri in deleted),
        mark_seconds=mark_seconds,
        sweep_seconds=time.time() - sweep_started,
        deletable_uris=frozenset(sizes),
        deleted_uris=frozenset(deleted),
    )


class _Tally:
    """Counters of one run, and throttled progress calls."""

    def __init__(self, progress: GcProgress | None) -> None:
        self.progress = progress
        self.counts: dict[GcPhase, int] = {'mark': 0, 'list': 0, 'delete': 0}
        self.scanned = 0
        self.scanned_bytes = 0
        self.referenced = 0
        self.skipped_young = 0
        self.skipped_unknown_age = 0

    def tick(self, phase: GcPhase) -> None:
        count = self.counts[phase] = self.counts[phase] + 1
        if self.progress is not None and count % _PROGRESS_EVERY == 0:
            self.progress(phase, count, None)

    def done(self, phase: GcPhase) -> None:
        if self.progress is not None:
            self.progress(phase, self.counts[phase], self.counts[phase])

    def show(self, phase: GcPhase, done: int, total: int) -> None:
        self.counts[phase] = done
        if self.progress is not None:
            self.progress(phase, done, total)


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
    needed = ['iter_blobs', 'delete_unless_touched']
    if include_unknown_age and not dry_run:
        needed.append('delete_many')
    missing = [name for name in needed if not callable(getattr(store, name, None))]
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
    sweep = getattr(store, 'sweep_temp_files', None)
    if callable(sweep):
        await sweep()


def _batches(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
