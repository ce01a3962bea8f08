"""``GcReport``: what one garbage collection saw, judged and deleted (counts; the URIs go to a file when asked)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

__all__ = ['GcReport', 'GcUriOutcome']

GcUriOutcome = Literal['deletable', 'deleted', 'kept']
"""A line of a ``uris_file``: ``deletable`` (a dry run), ``deleted`` or ``kept`` (a real run; kept: a writer
touched the blob, or it vanished, between the listing and the delete)."""

_OUTCOMES: Final = ('deletable', 'deleted', 'kept')


@dataclass(frozen=True, slots=True)
class GcReport:
    """The outcome of ``collect_garbage``: counts only, so it is small whatever the store's size.

    Counts are of blobs the store listed (``scanned``; with ``shard`` set, the
    shard's blobs), except ``references`` (distinct URIs the roots named, stored
    or not, in the shard). A blob the store listed is exactly one of:
    ``referenced``, ``skipped_young`` (written or touched after
    ``written_before``), ``skipped_unknown_age`` (no last-write time, kept unless
    ``include_unknown_age``) or ``deletable``. In a real run ``deleted`` can be
    below ``deletable``: a writer touched the blob (or it vanished) between the
    listing and the delete. ``uris_file``: where the run wrote the URIs it
    judged (``collect_garbage(uris_file=...)``), read back with ``iter_uris``.
    """

    dry_run: bool
    mark_started: float
    """Unix time taken before any root was read."""
    grace_seconds: float
    written_before: float
    """``mark_started - grace_seconds``: only blobs last written before this can go."""
    roots: int
    root_items: int
    """Snapshots, files and records the roots yielded."""
    references: int
    scanned: int
    scanned_bytes: int
    referenced: int
    skipped_young: int
    skipped_unknown_age: int
    deletable: int
    deletable_bytes: int
    deleted: int
    bytes_freed: int
    mark_seconds: float
    sweep_seconds: float
    shard: tuple[int, int] | None = None
    """``(k, n)``: the run collected shard ``k`` of ``n`` (its part of the digest space); ``None``: all of it."""
    uris_file: str | None = None

    def iter_uris(self, outcome: GcUriOutcome = 'deleted') -> Iterator[str]:
        """The URIs of ``uris_file`` with that outcome, read one line at a time (``deletable``: every URI the
        run judged deletable, deleted or kept)."""
        if outcome not in _OUTCOMES:
            raise ValueError(f'outcome must be one of {", ".join(_OUTCOMES)}')
        if self.uris_file is None:
            raise AttributeError(
                'this GcReport kept no URIs: pass uris_file= to collect_garbage (mediastash gc --uris-file) to have '
                'the URIs written to a file'
            )
        with Path(self.uris_file).open(encoding='utf-8') as lines:
            for line in lines:
                found, _, uri = line.rstrip('\n').partition(' ')
                if found == outcome or (outcome == 'deletable' and found in _OUTCOMES):
                    yield uri

    @property
    def deletable_uris(self) -> frozenset[str]:
        """Deprecated: the URIs judged deletable, read from ``uris_file`` (use ``iter_uris('deletable')``)."""
        return self._deprecated_uris('deletable')

    @property
    def deleted_uris(self) -> frozenset[str]:
        """Deprecated: the URIs deleted, read from ``uris_file`` (use ``iter_uris('deleted')``)."""
        return self._deprecated_uris('deleted')

    def _deprecated_uris(self, outcome: GcUriOutcome) -> frozenset[str]:
        """``iter_uris(outcome)`` as a set, for the deprecated ``<outcome>_uris`` properties (warns, naming the caller's
        line)."""
        warnings.warn(
            f'GcReport.{outcome}_uris is deprecated: pass uris_file= and read report.iter_uris({outcome!r})',
            DeprecationWarning,
            stacklevel=3,
        )
        return frozenset(self.iter_uris(outcome))

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the counts (and ``shard``, ``uris_file``)."""
        result: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if self.shard is not None:
            result['shard'] = list(self.shard)
        return result
