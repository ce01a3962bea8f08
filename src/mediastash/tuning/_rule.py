"""The recommendation rule: which threshold to use, from measured rows, and the rule in words.

Among the thresholds whose largest snapshot fits the limit (all of them
without one), take the largest whose total persisted snapshot bytes are
within ``margin`` of the smallest total any threshold reached. A larger
threshold moves fewer, larger payloads: fewer blobs and store round trips
for nearly the same snapshot bytes.

Thresholds that stored exactly the same as the pick (equal persisted bytes
and blob count: no payload of these histories lies between them) are named
as equivalent. Times are reported but do not decide: equivalent thresholds
do the same store work, so their measured times differ only by noise, and a
rule that let noise decide would name a different threshold on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mediastash._units import format_bytes, format_threshold
from mediastash.tuning._results import Limit, ThresholdRow

__all__ = ['DEFAULT_MARGIN', 'Recommendation', 'recommend', 'rule_text']

DEFAULT_MARGIN: Final = 0.10


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


def rule_text(margin: float, limit: Limit | None) -> str:
    """The rule, with its parameters, as printed and documented."""
    scope = 'all thresholds' if limit is None else f'the thresholds whose largest snapshot fits {limit.describe()}'
    return (
        f'Among {scope}, take the largest whose total persisted snapshot bytes are within {margin:.0%} of the '
        'smallest total of any threshold.'
    )


def recommend(
    rows: Sequence[ThresholdRow], *, margin: float = DEFAULT_MARGIN, limit: Limit | None = None
) -> Recommendation:
    """Apply the rule (see the module docstring) to the measured ``rows``."""
    if not rows:
        raise ValueError('recommend() needs at least one measured threshold')
    if not margin >= 0:
        raise ValueError(f'margin must be a non-negative fraction, got {margin!r}')
    rule = rule_text(margin, limit)
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
    chosen = max(within, key=lambda row: row.threshold_bytes)
    equivalent = tuple(
        row.threshold_bytes
        for row in rows
        if row is not chosen and row.persisted_bytes_total == chosen.persisted_bytes_total and row.blobs == chosen.blobs
    )
    excess = chosen.persisted_bytes_total / floor - 1
    reason = (
        f'{format_threshold(chosen.threshold_bytes)} persists {format_bytes(chosen.persisted_bytes_total)} in all, '
        f'{excess:.1%} above the smallest total ({format_bytes(floor)}), with {chosen.blobs:,} blobs'
    )
    if limit is not None:
        reason += f'; its largest snapshot ({chosen.persisted_bytes_max:,} bytes) fits {limit.name}'
    if equivalent:
        names = ', '.join(format_threshold(value) for value in equivalent)
        verb = 'stores' if len(equivalent) == 1 else 'store'
        reason += f'; {names} {verb} exactly the same on these histories (no payload lies between them)'
    return Recommendation(chosen.threshold_bytes, rule, reason, equivalent)
