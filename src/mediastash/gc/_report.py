"""``GcReport``: what one garbage collection saw, judged and deleted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ['GcReport']


@dataclass(frozen=True, slots=True)
class GcReport:
    """The outcome of ``collect_garbage``.

    Counts are of blobs the store listed (``scanned``), except ``references``
    (distinct URIs the roots named, stored or not). A blob the store listed is
    exactly one of: ``referenced``, ``skipped_young`` (written or touched after
    ``written_before``), ``skipped_unknown_age`` (no last-write time, kept unless
    ``include_unknown_age``) or ``deletable``. In a real run ``deleted`` can be
    below ``deletable``: a writer touched the blob (or it vanished) between the
    listing and the delete. ``deletable_uris`` lists what the run judged
    deletable (what a dry run reports), ``deleted_uris`` what it removed.
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
    deletable_uris: frozenset[str] = field(default_factory=frozenset, repr=False)
    deleted_uris: frozenset[str] = field(default_factory=frozenset, repr=False)

    def as_dict(self, *, include_uris: bool = True) -> dict[str, Any]:
        """A JSON-ready dict (URI lists sorted)."""
        result: dict[str, Any] = {name: getattr(self, name) for name in _SCALARS}
        if include_uris:
            result['deletable_uris'] = sorted(self.deletable_uris)
            result['deleted_uris'] = sorted(self.deleted_uris)
        return result


_SCALARS = tuple(name for name in GcReport.__dataclass_fields__ if name not in {'deletable_uris', 'deleted_uris'})
