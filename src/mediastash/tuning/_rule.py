"""The recommendation rule: which threshold to use, from measured rows, and the rule in words.

Each threshold is weighed as its total persisted snapshot bytes plus
``read_cost`` bytes for every blob read from the store while restoring the
snapshots (``DEFAULT_READ_COST`` unless told otherwise; 0 weighs bytes
alone). Among the thresholds whose largest snapshot fits the limit (all of
them without one), find the largest whose weight is within ``margin`` of the
smallest weight any threshold reached. A larger threshold moves fewer, larger
payloads: fewer blobs and store round trips for nearly the same snapshot
bytes, and the read cost makes a threshold that saves a few bytes with many
more round trips weigh what those trips cost.

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
from mediastash.errors import InvalidArgumentError
from mediastash.tuning._results import Limit, ThresholdRow

__all__ = [
    'CLUSTER_HEADROOM',
    'DEFAULT_MARGIN',
    'DEFAULT_READ_COST',
    'FEW_PAYLOADS',
    'FEW_STEPS',
    'Recommendation',
    'advice',
    'recommend',
    'rule_text',
    'size_histogram',
]

DEFAULT_MARGIN: Final = 0.10

DEFAULT_READ_COST: Final = 16 << 10
"""What one blob read from the store weighs, in bytes of persisted snapshot JSON: 16 KiB (see docs/tuning.md)."""

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


def rule_text(margin: float, limit: Limit | None, *, gaps: bool = False, read_cost: int = DEFAULT_READ_COST) -> str:
    """The rule, with its parameters, as printed and documented (``gaps``: the payload sizes were given)."""
    scope = 'all thresholds' if limit is None else f'the thresholds whose largest snapshot fits {limit.describe()}'
    if read_cost:
        text = (
            f'Weigh each threshold as its total persisted snapshot bytes plus {_cost(read_cost)} for every blob '
            f'read from the store (the read cost); among {scope}, take the largest whose weight is within '
            f'{margin:.0%} of the smallest weight of any threshold'
        )
    else:
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
    read_cost: int = DEFAULT_READ_COST,
) -> Recommendation:
    """Apply the rule (see the module docstring) to the measured ``rows``; ``payload_sizes`` lets it use the gaps.

    ``read_cost``: what one blob read weighs, in bytes (a non-negative int; 0 weighs persisted bytes alone).
    """
    if not rows:
        raise ValueError('recommend() needs at least one measured threshold')
    if not margin >= 0:
        raise ValueError(f'margin must be a non-negative fraction, got {margin!r}')
    if isinstance(read_cost, bool) or not isinstance(read_cost, int) or read_cost < 0:
        raise InvalidArgumentError('read_cost', 'a non-negative int (bytes per blob read)', read_cost)
    rule = rule_text(margin, limit, gaps=payload_sizes is not None, read_cost=read_cost)

    def weight(row: ThresholdRow) -> int:
        return row.persisted_bytes_total + read_cost * row.gets

    floor = min(weight(row) for row in rows)
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
    within = [row for row in fitting if weight(row) <= ceiling]
    what = 'weight' if read_cost else 'total persisted bytes'
    if not within:
        return Recommendation(
            None,
            rule,
            f'no threshold that fits {limit.describe() if limit else "the limit"} stays within {margin:.0%} '
            f'of the smallest {what} ({format_bytes(floor)})',
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
    excess = weight(chosen) / floor - 1 if floor else 0.0
    reason = f'{format_threshold(chosen.threshold_bytes)} persists {format_bytes(chosen.persisted_bytes_total)} in all'
    if read_cost:
        reason += (
            f' and reads {_blobs(chosen.gets)}, weighing {format_bytes(weight(chosen))} at {_cost(read_cost)} '
            f'per read, {excess:.1%} above the smallest weight ({format_bytes(floor)})'
        )
    else:
        reason += f', {excess:.1%} above the smallest total ({format_bytes(floor)})'
    reason += f', with {_blobs(chosen.blobs)}'
    if limit is not None:
        reason += f'; its largest snapshot ({chosen.persisted_bytes_max:,} bytes) fits {limit.name}'
    reason += gap_note
    if equivalent:
        names = ', '.join(format_threshold(value) for value in equivalent)
        verb = 'stores' if len(equivalent) == 1 else 'store'
        reason += f'; {names} {verb} exactly the same on these histories (no payload lies between them)'
    return Recommendation(chosen.threshold_bytes, rule, reason, equivalent)


def _blobs(count: int) -> str:
    return f'{count:,} blob' + ('' if count == 1 else 's')


def _cost(read_cost: int) -> str:
    """A read cost in words: ``'16 KiB (16,384 bytes)'``."""
    shown = format_threshold(read_cost)
    return f'{read_cost:,} bytes' if shown.endswith(' B') else f'{shown} ({read_cost:,} bytes)'


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
    recommendation: Recommendation,
    payload_sizes: Sequence[int],
    steps_by_history: Sequence[tuple[str, int]],
    *,
    thresholds: Sequence[int] = (),
) -> list[str]:
    """Warnings about what the recommendation rests on, as sentences (empty when there is nothing to say).

    Few payloads (fewer than ``FEW_PAYLOADS``); a pick that is the smallest or
    the largest of the ``thresholds`` swept (the best may lie beyond them:
    sweep further); a threshold within
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
    if chosen is not None and len(set(thresholds)) == 1:
        warnings.append('Only one threshold was swept, so the pick was compared with nothing: sweep several.')
    elif chosen is not None and thresholds:
        edge = 'smallest' if chosen == min(thresholds) else 'largest' if chosen == max(thresholds) else None
        if edge is not None:
            beyond = 'smaller' if edge == 'smallest' else 'larger'
            warnings.append(
                f'The pick {format_threshold(chosen)} is the {edge} threshold swept, so the rule could not compare '
                f'it with a {beyond} one: sweep {beyond} thresholds too (--thresholds) before relying on it.'
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
