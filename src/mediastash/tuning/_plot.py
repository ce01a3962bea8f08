"""The sweep's plot: persisted bytes and save/restore time against the threshold, the pick marked.

matplotlib is an optional extra (``pip install 'mediastash[plot]'``), imported
only here and only when a plot is asked for. The figure is drawn without
pyplot (no global state, no display), as PNG or SVG by the file extension.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from mediastash._units import format_threshold
from mediastash.errors import MediaStashError
from mediastash.tuning._results import KNOWN_LIMITS, Limit, ThresholdRow
from mediastash.tuning._rule import DEFAULT_READ_COST, Recommendation

__all__ = ['PLOT_FORMATS', 'PlotError', 'check_plot_target', 'plot_sweep']

PLOT_FORMATS: Final = {'.png': 'png', '.svg': 'svg'}
_MIB = float(1 << 20)


class PlotError(MediaStashError):
    """The plot cannot be drawn: matplotlib is missing or the file type is not PNG or SVG."""


def check_plot_target(path: Path) -> str:
    """The format for ``path`` (``'png'`` or ``'svg'``), after checking that matplotlib can be imported."""
    kind = PLOT_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise PlotError(f'the plot file must end in .png or .svg, got {path.name!r}')
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotError('plotting needs matplotlib: pip install "mediastash[plot]"') from None
    return kind


def plot_sweep(
    rows: Sequence[ThresholdRow],
    recommendation: Recommendation,
    path: Path,
    *,
    limit: Limit | None = None,
    margin: float | None = None,
    title: str = 'mediastash tune',
    payload_sizes: Sequence[int] | None = None,
    read_cost: int = DEFAULT_READ_COST,
) -> None:
    """Draw the sweep into ``path`` (PNG or SVG), four panels on one log threshold axis.

    Total persisted bytes of all snapshots, with the weight the rule compares
    (those bytes plus ``read_cost`` per blob read, when not 0) and the margin
    line over the smallest weight; the
    largest and p95 single snapshot, the only panel the per-document caps
    are drawn against (a cap applies to one snapshot, never to the total);
    where the payloads lie (a mark per payload, when ``payload_sizes`` is
    given); median save and restore times.
    """
    kind = check_plot_target(path)
    from matplotlib.figure import Figure

    thresholds = [row.threshold_bytes for row in rows]
    figure = Figure(figsize=(8.0, 9.5), layout='constrained')
    totals, single, marks, times = figure.subplots(4, 1, sharex=True, height_ratios=(3, 3, 1, 2))

    totals.plot(thresholds, [row.persisted_bytes_total / _MIB for row in rows], 'o-', label='all snapshots (total)')
    weights = [(row.persisted_bytes_total + read_cost * row.gets) / _MIB for row in rows]
    if read_cost:
        label = f'weight: total + {format_threshold(read_cost)} per blob read'
        totals.plot(thresholds, weights, 'd:', color='tab:olive', label=label)
    if margin is not None:
        smallest = 'smallest weight' if read_cost else 'smallest total'
        ceiling = min(weights) * (1 + margin)
        totals.axhline(ceiling, color='0.55', linewidth=0.8, linestyle='--', label=f'{smallest} + {margin:.0%}')
    totals.set_yscale('log')
    totals.set_ylabel('all snapshots (MiB)')
    totals.set_title(title)

    single.plot(thresholds, [row.persisted_bytes_max / _MIB for row in rows], '^-', label='largest snapshot')
    single.plot(thresholds, [row.persisted_bytes_p95 / _MIB for row in rows], 's--', label='p95 snapshot')
    for cap in [limit] if limit is not None else list(KNOWN_LIMITS.values()):
        single.axhline(cap.bytes / _MIB, color='tab:red', linewidth=0.8, linestyle='-.', alpha=0.7)
        single.annotate(
            cap.name, (0.01, cap.bytes / _MIB), xycoords=('axes fraction', 'data'), fontsize=7, color='tab:red',
            va='bottom',
        )  # fmt: skip
    single.set_yscale('log')
    single.set_ylabel('one snapshot (MiB)')

    sizes = sorted(payload_sizes or ())
    if sizes:
        marks.eventplot(sizes, lineoffsets=0.5, linelengths=0.8, linewidths=0.8, colors='tab:purple', alpha=0.6)
    marks.set_ylim(0, 1)
    marks.set_yticks([])
    marks.set_ylabel(f'payloads\n({len(sizes):,})', fontsize=8)

    times.plot(thresholds, [row.externalize_seconds_median * 1000 for row in rows], 'o-', label='save (externalize)')
    times.plot(thresholds, [row.restore_seconds_median * 1000 for row in rows], 's-', label='restore (store reads)')
    times.set_ylabel('median per snapshot (ms)')
    times.set_ylim(bottom=0)
    times.set_xlabel('threshold_bytes (payload size on the payloads panel)')

    chosen = recommendation.threshold_bytes
    for axes in (totals, single, marks, times):
        if chosen is not None:
            axes.axvline(chosen, color='tab:green', linewidth=2, alpha=0.6)
        axes.grid(True, which='major', alpha=0.3)
        if axes is not marks:
            axes.legend(fontsize=8, loc='best')
    if chosen is not None:
        totals.annotate(
            f'recommended: {format_threshold(chosen)}', (chosen, 0.97), xycoords=('data', 'axes fraction'),
            color='tab:green', ha='center', va='top', fontsize=9, fontweight='bold',
            bbox={'boxstyle': 'round', 'facecolor': 'white', 'edgecolor': 'tab:green'},
        )  # fmt: skip
    _threshold_axis(times, thresholds, sizes)
    figure.savefig(path, format=kind, dpi=110)


def _threshold_axis(axes: Any, thresholds: Sequence[int], sizes: Sequence[int] = ()) -> None:
    """Log-2 x axis ticked and labelled at the measured thresholds, wide enough for every payload mark."""
    from matplotlib.ticker import NullLocator

    axes.set_xscale('log', base=2)
    low = min(min(thresholds), *sizes[:1])
    high = max(max(thresholds), *sizes[-1:])
    axes.set_xlim(max(low, 1) / 1.5, high * 1.5)
    axes.set_xticks(list(thresholds), [format_threshold(value) for value in thresholds])
    axes.xaxis.set_minor_locator(NullLocator())
