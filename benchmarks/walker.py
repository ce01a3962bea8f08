"""Walker benchmark: mediastash against pydantic-ai-harness on the same trees, in one process.

Run from the repository root with the project venv active::

    python benchmarks/walker.py            # full run, 5 runs per case
    python benchmarks/walker.py --quick    # small smoke run

Both libraries use their own ``DiskMediaStore`` in their own temporary
directory. Runs alternate between the two (ours first on even runs, theirs
first on odd runs), each contender gets one untimed warm-up call, ``os.sync()``
and ``gc.collect()`` precede every timed call (outside the timing), and every
call runs on one shared event loop. Each case reports the median over
``--runs`` and the range.
See docs/benchmarks.md for results and what dominates each case.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from pydantic_ai_harness.media import DiskMediaStore as HarnessDiskMediaStore
from pydantic_ai_harness.media import externalize_media as harness_externalize
from pydantic_ai_harness.media import restore_media as harness_restore

from mediastash.known_blobs import KnownBlobCache
from mediastash.stores.disk import DiskMediaStore
from mediastash.stores.protocols import MediaStore
from mediastash.testing import MiB, agent_history, copy_tree, describe_history, json_size, small_parts_history
from mediastash.walker import DEFAULT_THRESHOLD_BYTES, externalize_media, restore_media

THRESHOLD = DEFAULT_THRESHOLD_BYTES
SMALL_REPEATS = 5
"""Case (b) takes milliseconds, so each of its runs times this many calls and reports the mean."""


def plain_copy(node: Any) -> Any:
    """The floor for a walk that finds nothing to move: a recursive copy of dicts and lists."""
    if isinstance(node, dict):
        return {key: plain_copy(value) for key, value in node.items()}
    if isinstance(node, list):
        return [plain_copy(value) for value in node]
    return node


@dataclass(frozen=True)
class Sample:
    """Median and range of one contender's runs."""

    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f'{fmt_time(self.median)} ({fmt_time(self.low)}-{fmt_time(self.high)})'


@dataclass
class Row:
    case: str
    ours: Sample
    reference: Sample | None
    reference_label: str
    ratio: float | None
    ratio_label: str
    target: str
    passed: bool | None


class Bench:
    """Holds the event loop and scratch directory shared by every measurement."""

    def __init__(self, runner: asyncio.Runner, scratch: Path, runs: int, verbose: bool, sync: bool) -> None:
        self.runner = runner
        self.sync = sync
        self.scratch = scratch
        self.runs = runs
        self.verbose = verbose
        self._dirs = 0

    def fresh_dir(self, label: str) -> Path:
        self._dirs += 1
        path = self.scratch / f'{label}-{self._dirs}'
        path.mkdir()
        return path

    def time_async(self, make: Callable[[], Awaitable[object]], repeats: int = 1) -> float:
        """Seconds per call of ``make()``, awaited ``repeats`` times on the shared loop."""

        async def timed() -> float:
            started = time.perf_counter()
            for _ in range(repeats):
                await make()
            return (time.perf_counter() - started) / repeats

        if self.sync and hasattr(os, 'sync'):
            os.sync()  # flush earlier runs' dirty pages now, not during this timing
        gc.collect()
        return self.runner.run(timed())

    def alternate(self, contenders: dict[str, Callable[[int], float]]) -> dict[str, Sample]:
        """Warm each contender up once, then run each ``runs`` times, rotating who goes first; return medians."""
        names = list(contenders)
        for name in names:
            contenders[name](-1)
        samples: dict[str, list[float]] = {name: [] for name in names}
        for run in range(self.runs):
            shift = run % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(contenders[name](run))
        if self.verbose:
            for name, values in samples.items():
                print(f'    {name:10} ' + ' '.join(fmt_time(value) for value in values), file=sys.stderr)
        return {name: Sample(statistics.median(values), min(values), max(values)) for name, values in samples.items()}


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f'{seconds * 1e6:.0f} µs'
    if seconds < 1:
        return f'{seconds * 1e3:.1f} ms'
    return f'{seconds:.2f} s'


def versions() -> str:
    names = ('mediastash', 'pydantic-ai-harness', 'pydantic-ai-slim', 'pybase64', 'xxhash')
    found = []
    for name in names:
        try:
            found.append(f'{name} {metadata.version(name)}')
        except metadata.PackageNotFoundError:
            found.append(f'{name} (not installed)')
    return ', '.join(found)


def run_cases(bench: Bench, history: list[dict[str, Any]], small: list[dict[str, Any]]) -> list[Row]:
    rows: list[Row] = []
    steps = sum(1 for message in history if message['kind'] == 'response')
    parts = sum(len(message['parts']) for message in small)
    run = bench.runner.run

    # (a) cold externalize into an empty store.
    def ours_cold(_: int) -> float:
        store = DiskMediaStore(bench.fresh_dir('ours-a'))
        seconds = bench.time_async(
            lambda: externalize_media(
                history, media_store=store, threshold_bytes=THRESHOLD, known_blobs=KnownBlobCache()
            )
        )
        shutil.rmtree(store.directory)
        return seconds

    def harness_cold(_: int) -> float:
        directory = bench.fresh_dir('harness-a')
        store = HarnessDiskMediaStore(directory)
        seconds = bench.time_async(lambda: harness_externalize(history, media_store=store, threshold_bytes=THRESHOLD))
        shutil.rmtree(directory)
        return seconds

    print('(a) cold externalize ...', file=sys.stderr, flush=True)
    a = bench.alternate({'ours': ours_cold, 'harness': harness_cold})
    rows.append(row(f'(a) externalize {steps}-step history, empty store', a['ours'], a['harness'], 3.0))

    # (b) many small parts, nothing to move.
    small_store = DiskMediaStore(bench.fresh_dir('ours-b'))
    harness_small_store = HarnessDiskMediaStore(bench.fresh_dir('harness-b'))
    print('(b) small parts ...', file=sys.stderr, flush=True)
    b = bench.alternate(
        {
            'ours': lambda _: bench.time_async(
                lambda: externalize_media(small, media_store=small_store, threshold_bytes=THRESHOLD), SMALL_REPEATS
            ),
            'harness': lambda _: bench.time_async(
                lambda: harness_externalize(small, media_store=harness_small_store, threshold_bytes=THRESHOLD),
                SMALL_REPEATS,
            ),
            'copy': lambda _: bench.time_async(lambda: _sync(plain_copy, small), SMALL_REPEATS),
        }
    )
    rows.append(row(f'(b) externalize {parts:,} small parts', b['ours'], b['harness'], None))
    rows.append(
        Row(
            '(b) same, against a plain recursive copy',
            b['ours'],
            b['copy'],
            'plain copy',
            b['ours'].median / b['copy'].median,
            'ours / copy',
            '≤ 1.3x',
            b['ours'].median / b['copy'].median <= 1.3,
        )
    )

    # Warm stores for (c) and (d): each library has already saved the history once.
    ours_store = DiskMediaStore(bench.fresh_dir('ours-cd'))
    cache = KnownBlobCache()
    ours_lean = run(externalize_media(history, media_store=ours_store, threshold_bytes=THRESHOLD, known_blobs=cache))
    harness_store = HarnessDiskMediaStore(bench.fresh_dir('harness-cd'))
    harness_lean = run(harness_externalize(history, media_store=harness_store, threshold_bytes=THRESHOLD))
    resaved = copy_tree(history)  # equal but not identical strings, as a fresh dump_python gives

    # (c) the same history saved again (the next step snapshot repeats it).
    print('(c) re-externalize into a warm store ...', file=sys.stderr, flush=True)
    c = bench.alternate(
        {
            'ours': lambda _: bench.time_async(
                lambda: externalize_media(resaved, media_store=ours_store, threshold_bytes=THRESHOLD, known_blobs=cache)
            ),
            'harness': lambda _: bench.time_async(
                lambda: harness_externalize(resaved, media_store=harness_store, threshold_bytes=THRESHOLD)
            ),
        }
    )
    rows.append(row('(c) externalize again, blobs already stored', c['ours'], c['harness'], 10.0))

    # (d) restore the lean tree.
    print('(d) restore ...', file=sys.stderr, flush=True)
    d = bench.alternate(
        {
            'ours': lambda _: bench.time_async(
                lambda: restore_media(ours_lean, media_store=ours_store, known_blobs=False)
            ),
            'harness': lambda _: bench.time_async(lambda: harness_restore(harness_lean, media_store=harness_store)),
            'ours-warm': lambda _: bench.time_async(
                lambda: restore_media(ours_lean, media_store=ours_store, known_blobs=cache)
            ),
        }
    )
    rows.append(row('(d) restore, cold (read + sha256 verify)', d['ours'], d['harness'], 1.3))
    rows.append(row('(d) restore, warm known-blob cache', d['ours-warm'], d['harness'], None))

    check_results(bench, history, ours_lean, harness_lean, ours_store, harness_store, cache, resaved)
    return rows


async def _sync(func: Callable[[Any], Any], arg: Any) -> Any:
    return func(arg)


def row(case: str, ours: Sample, reference: Sample, target: float | None) -> Row:
    ratio = reference.median / ours.median
    return Row(
        case,
        ours,
        reference,
        'harness',
        ratio,
        'harness / ours',
        f'≥ {target:g}x' if target is not None else '(info)',
        None if target is None else ratio >= target,
    )


def check_results(
    bench: Bench,
    history: list[dict[str, Any]],
    ours_lean: Any,
    harness_lean: Any,
    ours_store: DiskMediaStore,
    harness_store: HarnessDiskMediaStore,
    cache: KnownBlobCache,
    resaved: list[dict[str, Any]],
) -> None:
    """Outside the timings: both libraries round-trip and agree, so the race was between equals."""
    run = bench.runner.run
    assert run(restore_media(ours_lean, media_store=ours_store, known_blobs=False)) == history
    assert run(harness_restore(harness_lean, media_store=harness_store)) == history
    # Theirs read by us. (cast: their stores type `context` as their own MediaContext, narrower than ours.)
    assert run(restore_media(harness_lean, media_store=cast(MediaStore, harness_store))) == history
    again = run(externalize_media(resaved, media_store=ours_store, threshold_bytes=THRESHOLD, known_blobs=cache))
    assert again == ours_lean


def render(rows: list[Row], info: list[str], command: str) -> str:
    lines = [
        '| case | mediastash: median (min-max) | reference: median (min-max) | ratio of medians | target | result |',
        '|---|---:|---:|---:|---:|:---:|',
    ]
    for r in rows:
        reference = f'{r.reference_label}: {r.reference}' if r.reference is not None else ''
        ratio = f'{r.ratio:.2f}x {r.ratio_label}' if r.ratio is not None else ''
        result = '' if r.passed is None else ('PASS' if r.passed else 'MISS')
        lines.append(f'| {r.case} | {r.ours} | {reference} | {ratio} | {r.target} | {result} |')
    return '\n'.join([*info, '', *lines, '', f'Rerun: `{command}`'])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--runs', type=int, default=5, help='runs per case; the median is reported (default 5)')
    parser.add_argument('--quick', action='store_true', help='small trees and 2 runs: a smoke test, not a result')
    parser.add_argument('--verbose', action='store_true', help='print every sample to stderr')
    parser.add_argument(
        '--no-sync', action='store_true', help='skip os.sync() between runs (disk writeback then lands in timings)'
    )
    parser.add_argument('--steps', type=int, default=50, help='steps of the history for (a), (c), (d)')
    parser.add_argument('--image-mib', type=float, default=40.0, help='MiB of distinct images in that history')
    parser.add_argument('--small-parts', type=int, default=5000, help='parts of the history for (b)')
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.steps, args.image_mib, args.small_parts = 2, 8, 4.0, 500
    if args.runs < 1:
        parser.error('--runs must be at least 1')

    print('building histories ...', file=sys.stderr, flush=True)
    history = agent_history(steps=args.steps, image_bytes_total=int(args.image_mib * MiB), seed=0)
    small = small_parts_history(args.small_parts, seed=0)
    stats = describe_history(history, threshold=THRESHOLD)
    small_stats = describe_history(small, threshold=THRESHOLD)
    info = [
        f'- machine: {platform.platform()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}',
        f'- Python {platform.python_version()} ({platform.python_implementation()}); {versions()}',
        f'- history for (a), (c), (d): {args.steps} steps, {stats.messages} messages, {stats.parts} parts, '
        f'{json_size(history) / MiB:.1f} MiB of JSON; {stats.large_binary_parts} image parts '
        f'({stats.distinct_large_binaries} distinct, {stats.large_binary_bytes / MiB:.1f} MiB), '
        f'{stats.large_texts} tool outputs over the threshold ({stats.large_text_bytes / MiB:.2f} MiB)',
        f'- history for (b): {small_stats.parts:,} parts in {small_stats.messages} messages, '
        f'{small_stats.json_bytes / MiB:.1f} MiB of JSON, largest payload {small_stats.largest_small_payload:,} bytes',
        f'- threshold {THRESHOLD:,} bytes; one warm-up call each, then {args.runs} alternating runs; '
        f'{"gc.collect()" if args.no_sync else "os.sync() and gc.collect()"} before each timed call',
        f'- (b) times the mean of {SMALL_REPEATS} calls per run; stores are DiskMediaStore in a temporary '
        'directory (page cache warm for reads)',
    ]
    command = 'python benchmarks/walker.py' + (' --quick' if args.quick else f' --runs {args.runs}')
    command += ' --no-sync' if args.no_sync else ''
    with tempfile.TemporaryDirectory(prefix='mediastash-bench-') as scratch, asyncio.Runner() as runner:
        rows = run_cases(Bench(runner, Path(scratch), args.runs, args.verbose, not args.no_sync), history, small)
    print(render(rows, info, command))
    return 0


if __name__ == '__main__':
    sys.exit(main())
