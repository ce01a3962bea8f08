"""The sweep of a collection: judging listed blobs against the mark set, deleting as it goes, counting."""

from __future__ import annotations

import os
from typing import IO, Any, Literal, Protocol

from mediastash.stores.protocols import BlobInfo, exists_in
from mediastash.uri import MEDIA_URI_SCHEME

__all__ = ['GcPhase', 'GcProgress', 'Sweeper', 'Tally', 'UriLog']

GcPhase = Literal['mark', 'list', 'delete']
"""``mark``: root items read; ``list``: blobs listed; ``delete``: deletable blobs handled."""


class GcProgress(Protocol):
    """Called as work advances: the phase, how much of it is done, and its total when known."""

    def __call__(self, phase: GcPhase, done: int, total: int | None) -> None: ...


PROGRESS_EVERY = 256
"""Progress calls come once per this many items of a phase."""


class Tally:
    """Counters of one run, and throttled progress calls."""

    def __init__(self, progress: GcProgress | None) -> None:
        self.progress = progress
        self.counts: dict[GcPhase, int] = {'mark': 0, 'list': 0, 'delete': 0}
        self.scanned = 0
        self.scanned_bytes = 0
        self.referenced = 0
        self.skipped_young = 0
        self.skipped_unknown_age = 0
        self.deletable = 0
        self.deletable_bytes = 0
        self.deleted = 0
        self.bytes_freed = 0

    def tick(self, phase: GcPhase) -> None:
        count = self.counts[phase] = self.counts[phase] + 1
        if self.progress is not None and count % PROGRESS_EVERY == 0:
            self.progress(phase, count, None)

    def done(self, phase: GcPhase) -> None:
        if self.progress is not None:
            self.progress(phase, self.counts[phase], self.counts[phase])

    def show(self, phase: GcPhase, done: int, total: int | None) -> None:
        self.counts[phase] = done
        if self.progress is not None:
            self.progress(phase, done, total)


class Sweeper:
    """Judges listed blobs and deletes the deletable ones ``batch_size`` at a time as they are found."""

    def __init__(
        self, store: Any, report: Tally, log: UriLog, *, dry_run: bool, batch_size: int, before: float
    ) -> None:
        self.store = store
        self.report = report
        self.log = log
        self.dry_run = dry_run
        self.batch_size = batch_size
        self.before = before
        self.old: dict[str, int] = {}
        self.unknown_age: dict[str, int] = {}
        self.handled = 0

    async def judge(self, infos: list[BlobInfo], referenced: set[str], include_unknown_age: bool) -> None:
        report = self.report
        start = len(MEDIA_URI_SCHEME)
        for info in infos:
            report.scanned += 1
            report.scanned_bytes += info.size
            if info.uri[start:] in referenced:
                report.referenced += 1
            elif info.written_at is None:
                if include_unknown_age:
                    await self._doomed(self.unknown_age, info)
                else:
                    report.skipped_unknown_age += 1
            elif info.written_at >= self.before:
                report.skipped_young += 1
            else:
                await self._doomed(self.old, info)
            report.tick('list')

    async def _doomed(self, batch: dict[str, int], info: BlobInfo) -> None:
        self.report.deletable += 1
        self.report.deletable_bytes += info.size
        batch[info.uri] = info.size
        if len(batch) >= self.batch_size:
            await self._flush(batch)

    async def finish(self) -> None:
        await self._flush(self.old)
        await self._flush(self.unknown_age)

    async def _flush(self, batch: dict[str, int]) -> None:
        if not batch:
            return
        uris = list(batch)
        if self.dry_run:
            self.log.write('deletable', uris)
        else:
            if batch is self.old:
                deleted = await self.store.delete_unless_touched(uris, written_before=self.before)
            else:
                await self.store.delete_many(uris)
                still_there = await exists_in(self.store, uris)
                deleted = frozenset(uri for uri in uris if uri not in still_there)
            self.report.deleted += len(deleted)
            self.report.bytes_freed += sum(batch[uri] for uri in deleted if uri in batch)
            self.log.write('deleted', [uri for uri in uris if uri in deleted])
            self.log.write('kept', [uri for uri in uris if uri not in deleted])
        self.handled += len(uris)
        batch.clear()


class UriLog:
    """The ``uris_file`` being written (nothing when none was asked for); flushed after every batch."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = path
        self.file: IO[str] | None = None

    def __enter__(self) -> UriLog:
        if self.path is not None:
            self.file = open(self.path, 'w', encoding='utf-8')
        return self

    def write(self, outcome: str, uris: list[str]) -> None:
        if self.file is not None and uris:
            self.file.writelines(f'{outcome} {uri}\n' for uri in uris)
            self.file.flush()

    def __exit__(self, *_: object) -> None:
        if self.file is not None:
            self.file.close()
