"""The recommendation rule: which threshold to use, from measured rows, and the rule in words.

Among the thresholds whose largest snapshot fits the limit (all of them
without one), find the largest whose total persisted snapshot bytes are
within ``margin`` of the smallest total any threshold reached. A larger
threshold moves fewer, larger payloads: fewer blobs and store round trips
for nearly the same snapshot bytes.

Given the payload sizes, the thresholds that store exactly the same as that
one (no payload lies between them: they sit in one gap of the payload sizes)
are one choice, and the pick is the one nearest the middle of that gap on a
log scale, between the largest payload left inline (or the smallest of those
thresholds, when larger) and the smallest payload moved. The largest would
sit just under the smallest payload seen, so next week's slightly smaller
output would stay inline everywhere; the middle of the gap leaves room both
ways. Without sizes the largest is taken.

The other thresholds of the gap are named as equivalent. Times are reported
but do not decide: equivalent thresholds do the same store work, so their
measured times differ only by noise, and a rule that let noise decide would
name a different threshold on every run. ``advice`` adds the warnings.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mediastash._units import format_bytes, format_threshold
from mediastash.tuning._results import Limit, ThresholdRow

__all__ = [
    'CLUSTER_HEADROOM',
    'DEFAULT_MARGIN',
    'FEW_PAYLOADS',
    'FEW_STEPS',
    'Recommendation',
    'advice',
    'recommend',
    'rule_text',
    'size_histogram',
]

DEFAULT_MARGIN: Final = 0.10

FEW_PAYLOADS: Final = 20
"""Fewer payloads than this, and the recommendation says it rests on little."""
CLUSTER_HEADROOM: Final = 0.25
"""A threshold within this fraction below the smallest payload it moves is warned about."""
FEW_STEPS: Final = 3
"""A history with fewer snapshots (steps) than this is warned about."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The chosen threshold (``None`` when no threshold satisfies the rule), the rule, and why."""

    threshold_bytes: int | None
    rule: str
    reason: str
    equivalent_thresholds: tuple[int, ...] = field(default=())
    """Other thresholds that stored exactly the same as the chosen one."""

    def as_json(self) -> dict[str, Any]:
        return {
            'threshold_bytes': self.threshold_bytes,
            'rule': self.rule,
            'reason': self.reason,
            'equivalent_thresholds': list(self.equivalent_thresholds),
        }

    def line(self) -> str:
        """The one-line verdict printed under the table."""
        if self.threshold_bytes is None:
            return f'No recommendation: {self.reason}'
        return f'Recommended threshold: {format_threshold(self.threshold_bytes)} ({self.threshold_bytes:,} bytes)'


def rule_text(margin: float, limit: Limit | None, *, gaps: bool = False) -> str:
    """The rule, with its parameters, as printed and documented (``gaps``: the payload sizes were given)."""
    scope = 'all thresholds' if limit is None else f'the thresholds whose largest snapshot fits {limit.describe()}'
    text = (
        f'Among {scope}, take the largest whose total persisted snapshot bytes are within {margin:.0%} of the '
        'smallest total of any threshold'
    )
    if not gaps:
        return text + '.'
    return (
        text + '; then, of the thresholds in the same gap of the payload sizes (they store exactly the same), '
        'take the one nearest the middle of that gap on a log scale, between the largest payload left inline '
        '(or the smallest of those thresholds, when larger) and the smallest payload moved, so payloads a little '
        'smaller or larger than these are treated alike.'
    )


def recommend(
    rows: Sequence[ThresholdRow],
    *,
    margin: float = DEFAULT_MARGIN,
    limit: Limit | None = None,
    payload_sizes: Sequence[int] | None = None,
) -> Recommendation:
    """Apply the rule (see the module docstring) to the measured ``rows``; ``payload_sizes`` lets it use the gaps."""
    if not rows:
        raise ValueError('recommend() needs at least one measured threshold')
    if not margin >= 0:
        raise ValueError(f'margin must be a non-negative fraction, got {margin!r}')
    rule = rule_text(margin, limit, gaps=payload_sizes is not None)
    floor = min(row.persisted_bytes_total for row in rows)
    ceiling = floor * (1 + margin)
    fitting = [row for row in rows if row.fits(limit)]
    if not fitting:
        assert limit is not None
        smallest = min(row.persisted_bytes_max for row in rows)
        return Recommendation(
            None,
            rule,
            f'no threshold keeps the largest snapshot within {limit.describe()}; '
            f'the smallest largest snapshot measured is {smallest:,} bytes',
        )
    within = [row for row in fitting if row.persisted_bytes_total <= ceiling]
    if not within:
        return Recommendation(
            None,
            rule,
            f'no threshold that fits {limit.describe() if limit else "the limit"} stays within {margin:.0%} '
            f'of the smallest total persisted bytes ({format_bytes(floor)})',
        )
    top = max(within, key=lambda row: row.threshold_bytes)
    gap_note = ''
    if payload_sizes is None:
        chosen = top
        group = [
            row for row in rows if row.persisted_bytes_total == top.persisted_bytes_total and row.blobs == top.blobs
        ]
    else:
        sizes = sorted(payload_sizes)
        group = [row for row in fitting if _same_gap(sizes, row.threshold_bytes, top.threshold_bytes)]
        chosen, gap_note = _middle_of_gap(sizes, group)
    equivalent = tuple(row.threshold_bytes for row in group if row is not chosen)
    excess = chosen.persisted_bytes_total / floor - 1
    reason = (
        f'{format_threshold(chosen.threshold_bytes)} persists {format_bytes(chosen.persisted_bytes_total)} in all, '
        f'{excess:.1%} above the smallest total ({format_bytes(floor)}), with {chosen.blobs:,} blobs'
    )
    if limit is not None:
        reason += f'; its largest snapshot ({chosen.persisted_bytes_max:,} bytes) fits {limit.name}'
    reason += gap_note
    if equivalent:
        names = ', '.join(format_threshold(value) for value in equivalent)
        verb = 'stores' if len(equivalent) == 1 else 'store'
        reason += f'; {names} {verb} exactly the same on these histories (no payload lies between them)'
    return Recommendation(chosen.threshold_bytes, rule, reason, equivalent)


def _same_gap(sizes: Sequence[int], a: int, b: int) -> bool:
    """Whether no payload size lies in ``[min(a, b), max(a, b))``: the two thresholds move the same payloads."""
    low, high = min(a, b), max(a, b)
    return not any(low <= size < high for size in sizes)


def _middle_of_gap(sizes: Sequence[int], group: Sequence[ThresholdRow]) -> tuple[ThresholdRow, str]:
    """The row of ``group`` nearest the log middle of its gap, and the gap's bounds in words (for the reason)."""
    thresholds = [row.threshold_bytes for row in group]
    smallest, largest = min(thresholds), max(thresholds)
    inline = max((size for size in sizes if size < smallest), default=0)
    moved = min((size for size in sizes if size >= largest), default=None)
    # The gap as far as the measured thresholds reach: from the largest payload left inline or the
    # smallest threshold of the group, whichever is larger, to the smallest payload moved.
    if inline > smallest:
        lower = f'{format_bytes(inline)} (the largest payload left inline)'
    else:
        lower = f'{format_threshold(smallest)} (its smallest threshold)'
    if moved is None:
        upper, top = f'{format_threshold(largest)} (its largest threshold)', largest
    else:
        upper, top = f'{format_bytes(moved)} (the smallest payload moved)', moved
    middle = (math.log(max(inline, smallest)) + math.log(top)) / 2
    chosen = min(group, key=lambda row: (abs(math.log(row.threshold_bytes) - middle), -row.threshold_bytes))
    return chosen, f'; it is the threshold nearest the middle of its gap in the payload sizes, {lower} to {upper}'


def size_histogram(sizes: Sequence[int]) -> list[tuple[int, int, int]]:
    """Exact counts of payload sizes by power-of-two bucket: ``(low, high, count)`` for ``low <= size < high``."""
    counts: dict[int, int] = {}
    for size in sizes:
        low = 1 << (max(size, 1).bit_length() - 1)
        counts[low] = counts.get(low, 0) + 1
    return [(low, low * 2, counts[low]) for low in sorted(counts)]


def advice(
    recommendation: Recommendation, payload_sizes: Sequence[int], steps_by_history: Sequence[tuple[str, int]]
) -> list[str]:
    """Warnings about what the recommendation rests on, as sentences (empty when there is nothing to say).

    Few payloads (fewer than ``FEW_PAYLOADS``); a threshold within
    ``CLUSTER_HEADROOM`` below the smallest payload it moves while no payload
    lies within that fraction below the threshold (it sits at the top of a gap,
    so a slightly smaller payload than the cluster's would stay inline); histories of fewer than ``FEW_STEPS``
    snapshots (``steps_by_history``: name and snapshot count of each).
    """
    warnings: list[str] = []
    count = len(payload_sizes)
    if count == 0:
        warnings.append('The histories hold no payload: every threshold stores the same, so the pick says nothing.')
    elif count < FEW_PAYLOADS:
        median = format_bytes(int(statistics.median(payload_sizes)))
        warnings.append(
            f'The recommendation rests on {count} payload{"" if count == 1 else "s"} (fewer than {FEW_PAYLOADS}, '
            f'median {median}): replay more histories before relying on it.'
        )
    chosen = recommendation.threshold_bytes
    if chosen is not None:
        moved = min((size for size in payload_sizes if size >= chosen), default=None)
        inline = max((size for size in payload_sizes if size < chosen), default=0)
        # Right under a cluster with a gap below it (not inside a continuum of sizes, where some
        # payload always sits just below any threshold): the pick hugs the top of the gap.
        if moved is not None and chosen >= (1 - CLUSTER_HEADROOM) * moved > inline:
            warnings.append(
                f'The threshold {format_threshold(chosen)} is within {CLUSTER_HEADROOM:.0%} below the smallest '
                f'payload it moves ({format_bytes(moved)}), and no payload lies just below it: a payload '
                'slightly smaller than those would stay inline in every snapshot.'
            )
    short = [name for name, steps in steps_by_history if steps < FEW_STEPS]
    if short:
        listed = ', '.join(short[:3]) + (f' and {len(short) - 3} more' if len(short) > 3 else '')
        warnings.append(
            f'{len(short)} histor{"y has" if len(short) == 1 else "ies have"} fewer than {FEW_STEPS} steps '
            f'({listed}): a run saves a snapshot per step, so longer runs repeat each payload more often than '
            'measured here.'
        )
    return warnings
