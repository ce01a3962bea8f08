"""``mediastash tune``: choose ``threshold_bytes`` on your own histories and store.

Replays each history as a step store saves it (a snapshot after every step)
at every threshold in a scratch namespace of the store (``store.namespace``,
erased after each threshold and at the end; ``mediastash.tuning`` holds the
clean-up rule), and prints what was measured, the recommended threshold and
the rule behind it. See ``docs/tuning.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mediastash.cli._args import parse_size
from mediastash.cli._ui import Ui, UserError
from mediastash.stores.registry import help_forms

__all__ = ['parse_limit', 'parse_margin', 'parse_read_cost', 'parse_thresholds', 'register']

DEFAULT_THRESHOLDS = '4KiB,16KiB,64KiB,256KiB,1MiB'


def parse_thresholds(text: str) -> list[int]:
    """``'4KiB,64KiB,1MiB'`` -> ascending, distinct byte counts (each at least 1)."""
    values: list[int] = []
    for index, piece in enumerate(text.split(','), start=1):
        if not piece.strip():
            raise argparse.ArgumentTypeError(
                f'expected sizes separated by commas such as 4KiB,64KiB,1MiB; size {index} is empty'
            )
        try:
            value = parse_size(piece)
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(f'size {index}: {error}') from None
        if value < 1:
            raise argparse.ArgumentTypeError(
                f'thresholds must be at least 1 byte (the plot axis is logarithmic); size {index} is 0'
            )
        values.append(value)
    return sorted(set(values))


def parse_margin(text: str) -> float:
    """``'10%'`` or ``'0.1'`` -> 0.1."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith('%') else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError('expected a margin such as 10% or 0.1') from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError('expected a non-negative margin (below 100) such as 10% or 0.1')
    return value


def parse_read_cost(text: str) -> int:
    """``'16KiB'`` -> 16384: what one blob read weighs, in bytes of persisted snapshot JSON (0: reads are free)."""
    try:
        return parse_size(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            'expected the bytes one store read weighs, such as 16KiB, 1MB or 0 (reads weigh nothing)'
        ) from None


def parse_limit(text: str) -> Any:
    """``mongodb``, ``dynamodb`` or a byte count -> a ``Limit``."""
    from mediastash.tuning import KNOWN_LIMITS, Limit

    known = KNOWN_LIMITS.get(text.strip().lower())
    if known is not None:
        return known
    try:
        size = parse_size(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            'expected mongodb, dynamodb or a byte count such as 400KiB (409,600 bytes) or 400KB (400,000 bytes)'
        ) from None
    return Limit(f'a limit of {size:,} bytes', size)


def _readers_help() -> str:
    """The installed history readers by kind, the built-in one with what it reads (no reader is imported)."""
    from mediastash.tuning._readers import HARNESS_STEPS, available_history_readers

    return ', '.join(
        f'{kind} (pydantic-ai-harness FileStepStore folders, SqliteStepStore databases)'
        if kind == HARNESS_STEPS
        else kind
        for kind in available_history_readers()
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``tune``."""
    tune = commands.add_parser(
        'tune',
        parents=[common],
        help='measure several thresholds on your histories and store, and recommend one',
        description=(
            'Replay message histories as a step store saves them (a snapshot after every step) at each threshold, '
            'in a scratch namespace of the store (erased after each threshold), and report persisted snapshot '
            'bytes, blobs, store calls and save/restore times, with a recommended threshold and its rule.'
        ),
    )
    tune.add_argument(
        'histories',
        nargs='*',
        type=Path,
        metavar='HISTORY',
        help=f'pydantic-ai message-history JSON files, or inputs an installed history reader claims: {_readers_help()}',
    )
    tune.add_argument(
        '--store',
        required=True,
        metavar='URL',
        help=f'the store to measure on: memory://, {help_forms()}',
    )
    tune.add_argument(
        '--media',
        default=None,
        metavar='URL',
        help='the media store the histories were written with (read only, never created), e.g. the media_store= '
        'of an OffloadingStepStore; without it a step store is read with its own media store',
    )
    tune.add_argument(
        '--thresholds',
        type=parse_thresholds,
        default=parse_thresholds(DEFAULT_THRESHOLDS),
        metavar='SIZES',
        help=f'comma-separated thresholds to compare (default: {DEFAULT_THRESHOLDS})',
    )
    tune.add_argument('--synthetic', action='store_true', help='also replay the 50-step, 40 MiB synthetic history')
    tune.add_argument(
        '--limit',
        type=parse_limit,
        default=None,
        metavar='mongodb|dynamodb|BYTES',
        help='only recommend thresholds whose largest snapshot fits this cap (default: none)',
    )
    tune.add_argument(
        '--margin',
        type=parse_margin,
        default=None,
        metavar='FRACTION',
        help='how far above the smallest total persisted bytes the pick may be, e.g. 10%% or 0.1 (default: 10%%)',
    )
    tune.add_argument(
        '--read-cost',
        type=parse_read_cost,
        default=None,
        metavar='BYTES',
        help='what one blob read from the store weighs against persisted snapshot bytes, e.g. 256KiB for S3 '
        '(default: 16KiB; 0 weighs persisted bytes alone)',
    )
    tune.add_argument(
        '--plot', type=Path, default=None, metavar='FILE', help='draw the results into FILE (.png or .svg)'
    )
    tune.set_defaults(handler=run_tune)


async def run_tune(args: argparse.Namespace, ui: Ui) -> int:
    """Load the inputs, sweep the thresholds, print the table and recommendation, write JSON and the plot."""
    from mediastash.tuning import (
        DEFAULT_MARGIN,
        DEFAULT_READ_COST,
        UrlNamespaces,
        advice,
        check_plot_target,
        history_payload_sizes,
        plot_sweep,
        recommend,
        size_histogram,
        steps_by_history,
    )

    if not args.histories and not args.synthetic:
        raise UserError('nothing to replay: give history files or step stores, or --synthetic')
    if args.plot is not None:
        check_plot_target(args.plot)
    margin: float = DEFAULT_MARGIN if args.margin is None else args.margin
    read_cost: int = DEFAULT_READ_COST if args.read_cost is None else args.read_cost

    namespaces = UrlNamespaces(args.store)
    try:
        rows, histories, snapshots, seconds = await _sweep(args, ui, namespaces)
    finally:
        for leftover in [*namespaces.warnings, *namespaces.leftovers]:
            ui.err.print(f'mediastash: warning: {leftover}', markup=False, highlight=False)

    sizes = history_payload_sizes(histories)
    recommendation = recommend(rows, margin=margin, limit=args.limit, payload_sizes=sizes, read_cost=read_cost)
    warnings = advice(recommendation, sizes, steps_by_history(histories), thresholds=args.thresholds)
    _print_table(ui, rows, histories, snapshots, namespaces.description, seconds)
    _print_payloads(ui, sizes)
    ui.line(recommendation.line())
    if recommendation.threshold_bytes is not None:
        ui.line(f'Why: {recommendation.reason}.')
    ui.line(f'Rule: {recommendation.rule}')
    for warning in warnings:
        ui.line(f'Warning: {warning}')
    if args.plot is not None:
        title = _plot_title(histories, snapshots)
        plot_sweep(
            rows,
            recommendation,
            args.plot,
            limit=args.limit,
            margin=margin,
            title=title,
            payload_sizes=sizes,
            read_cost=read_cost,
        )
        ui.info(f'plot written to {args.plot}')
    ui.json(
        {
            'store': namespaces.description,
            'histories': [{'name': history.name, 'messages': len(history.messages)} for history in histories],
            'snapshots_per_threshold': snapshots,
            'sweep_seconds': seconds,
            'margin': margin,
            'read_cost_bytes': read_cost,
            'limit': None if args.limit is None else {'name': args.limit.name, 'bytes': args.limit.bytes},
            'rows': [row.as_json() for row in rows],
            'recommendation': recommendation.as_json(),
            'payload_sizes': sizes,
            'payload_size_histogram': [
                {'low_bytes': low, 'high_bytes': high, 'count': count} for low, high, count in size_histogram(sizes)
            ],
            'warnings': warnings,
        }
    )
    return 0


async def _sweep(args: argparse.Namespace, ui: Ui, namespaces: Any) -> tuple[list[Any], list[Any], int, float]:
    """Open the store (a bad URL or unreachable server fails here, before any work), load the inputs, sweep."""
    from mediastash.tuning import History, count_snapshots, load_inputs, sweep, synthetic_history

    async with namespaces, _media_store(args.media) as media:
        if namespaces.cleaned:
            ui.info(f'erased {len(namespaces.cleaned)} scratch namespace(s) left by interrupted tune runs')
        histories: list[History] = await load_inputs(list(args.histories), media_store=media)
        if args.synthetic:
            ui.info('building the synthetic history ...')
            histories.append(synthetic_history())
        snapshots = count_snapshots(histories)
        started = time.perf_counter()
        with ui.progress('replaying snapshots', total=len(args.thresholds) * snapshots) as step:
            rows = await sweep(histories, args.thresholds, namespaces, advance=step.advance)
        seconds = time.perf_counter() - started
    return rows, histories, snapshots, seconds


@contextlib.asynccontextmanager
async def _media_store(url: str | None) -> AsyncIterator[Any]:
    """The ``--media`` store, opened as the read-only commands open stores (``create=False``), or ``None``."""
    if url is None:
        yield None
        return
    from mediastash.cli._ops import _opened

    async with _opened(url, create=False) as store:
        yield store


def _print_table(ui: Ui, rows: list[Any], histories: list[Any], snapshots: int, store: str, seconds: float) -> None:
    from mediastash.tuning import format_bytes, format_seconds, format_threshold

    columns = [
        'threshold',
        'persisted',
        'p95',
        'largest',
        'blobs',
        'media',
        'puts',
        'gets',
        'save',
        'restore',
        'MongoDB',
        'DynamoDB',
    ]
    table = [
        [
            format_threshold(row.threshold_bytes),
            format_bytes(row.persisted_bytes_total),
            format_bytes(row.persisted_bytes_p95),
            format_bytes(row.persisted_bytes_max),
            row.blobs,
            format_bytes(row.media_bytes),
            row.puts,
            row.gets,
            format_seconds(row.externalize_seconds_median),
            format_seconds(row.restore_seconds_median),
            row.fits_mongodb,
            row.fits_dynamodb,
        ]
        for row in rows
    ]
    count = f'{len(histories)} histor{"y" if len(histories) == 1 else "ies"}'
    title = f'Threshold sweep: {count}, {snapshots} snapshots per threshold, {store}, {format_seconds(seconds)}'
    ui.table(title, columns, table)
    ui.line(
        'persisted: JSON of all snapshots; p95 / largest: one snapshot; blobs / media: stored in the store; '
        'puts / gets: store calls; save / restore: median per snapshot; MongoDB / DynamoDB: the largest snapshot '
        'fits 16 MiB / 400 KB.'
    )


def _print_payloads(ui: Ui, sizes: list[int]) -> None:
    """Where the payloads lie: count, smallest / median / largest, and exact counts per power-of-two bucket."""
    from mediastash.tuning import format_bytes, size_histogram

    if not sizes:
        ui.line('Payloads: none.')
        return
    middle = sizes[len(sizes) // 2]
    ui.line(
        f'Payloads: {len(sizes):,} (smallest {format_bytes(sizes[0])}, median {format_bytes(middle)}, '
        f'largest {format_bytes(sizes[-1])}); by size:'
    )
    for low, high, count in size_histogram(sizes):
        ui.line(f'  {format_bytes(low):>10} - {format_bytes(high):<10} {count:,}')


def _plot_title(histories: list[Any], snapshots: int) -> str:
    names = histories[0].name if len(histories) == 1 else f'{len(histories)} histories'
    return f'mediastash tune: {names}, {snapshots} snapshots per threshold'
