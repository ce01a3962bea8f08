"""Garbage-collection benchmark: mark and sweep times, and memory, on a disk store and on S3 (moto).

Run from the repository root with the project venv active::

    python benchmarks/gc.py              # 100,000 blobs on disk, 10,000 on moto, 3 runs each
    python benchmarks/gc.py --quick      # 10,000 on disk, 1,000 on moto, 1 run
    python benchmarks/gc.py --only disk --runs 5

Disk: a ``DiskMediaStore`` folder with ``--blobs`` 32-byte blobs, written
straight into the store's layout (``<hex>.bin``); half of them are referenced
from lean JSON snapshot files (50 markers each, so 1,000 files for 100,000
blobs), the other half are garbage. S3: ``--s3-blobs`` blobs put through
``S3MediaStore`` into a bucket on one moto server, half referenced the same way.
Every run collects with ``grace=0`` (every blob written before the mark is old
enough): a dry run, then a real run that deletes the garbage (recreated between
runs). Reported: mark time (reading the roots), sweep time (listing, judging,
and for real runs deleting), peak memory growth of the process during the
collection (resident set, from ``VmHWM`` after resetting it; and the Python
heap by ``tracemalloc`` in one extra run of each kind), and the number of
``get``/``get_stream`` calls (counted by ``CountingMediaStore``: no blob's
bytes are read).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import statistics
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from _servers import s3_server
from mediastash import DiskMediaStore, __version__
from mediastash.gc import GcReport, JsonFileRoot, collect_garbage
from mediastash.markers import MARKER_KEY, URI_KEY
from mediastash.testing import CountingMediaStore
from mediastash.uri import media_uri_for

MiB = 1 << 20
BLOB_BYTES = 32
PER_SNAPSHOT = 50
URIS_FILE = Path(tempfile.gettempdir()) / f'gcbench-uris-{os.getpid()}.txt'
"""Where each run writes the URIs it judged deletable (the report holds counts only)."""
S3_SETTLE = 2.0
"""Seconds to wait after writing S3 objects: their whole-second ``Last-Modified`` is read as up to 1 s later."""


def blob(index: int) -> bytes:
    return index.to_bytes(8, 'big') * (BLOB_BYTES // 8)


def lean_snapshot(uris: list[str]) -> list[dict[str, Any]]:
    """A lean history as the walker writes it: one request per image marker."""
    return [
        {
            'kind': 'request',
            'parts': [
                {
                    'part_kind': 'user-prompt',
                    'content': [
                        'look at this',
                        {
                            'kind': 'binary',
                            'media_type': 'image/png',
                            'identifier': uri[-6:],
                            MARKER_KEY: True,
                            URI_KEY: uri,
                            'uri': uri,
                        },
                    ],
                }
            ],
        }
        for uri in uris
    ]


def write_roots(folder: Path, uris: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for number, start in enumerate(range(0, len(uris), PER_SNAPSHOT)):
        text = json.dumps(lean_snapshot(uris[start : start + PER_SNAPSHOT]))
        (folder / f'snapshot-{number:05d}.json').write_text(text)


# -- memory ----------------------------------------------------------------------------------------


def _status(field_name: str) -> int:
    match = re.search(rf'{field_name}:\s+(\d+) kB', Path('/proc/self/status').read_text())
    return int(match.group(1)) * 1024 if match else 0


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux); False where that is not possible."""
    try:
        Path('/proc/self/clear_refs').write_text('5')
    except OSError:
        return False
    return True


@dataclass
class Run:
    report: GcReport
    wall: float
    rss_growth: int | None
    gets: int


@dataclass
class Series:
    dry: list[Run] = field(default_factory=list)
    real: list[Run] = field(default_factory=list)
    traced_dry: int = 0
    traced_real: int = 0


async def measured(store: Any, roots: list[Any], *, dry_run: bool) -> Run:
    counting = CountingMediaStore(store)
    resettable = reset_peak_rss()
    before = _status('VmRSS')
    started = time.perf_counter()
    report = await collect_garbage(counting, roots, grace=timedelta(0), dry_run=dry_run, uris_file=URIS_FILE)
    wall = time.perf_counter() - started
    growth = _status('VmHWM') - before if resettable else None
    return Run(report, wall, growth, counting.calls['get'] + counting.calls['get_stream'])


async def traced(store: Any, roots: list[Any], *, dry_run: bool) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    await collect_garbage(store, roots, grace=timedelta(0), dry_run=dry_run)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


async def series(
    store: Any, roots: list[Any], runs: int, recreate: Callable[[frozenset[str]], Awaitable[None]], expected: int
) -> Series:
    result = Series()
    for _ in range(runs):
        result.dry.append(await measured(store, roots, dry_run=True))
        run = await measured(store, roots, dry_run=False)
        assert run.report.deleted == expected, (run.report.deleted, expected)
        result.real.append(run)
        await recreate(frozenset(run.report.iter_uris('deleted')))
    result.traced_dry = await traced(store, roots, dry_run=True)
    result.traced_real = await traced(store, roots, dry_run=False)
    return result


# -- disk ------------------------------------------------------------------------------------------


async def disk_case(blobs: int, runs: int) -> tuple[str, Series, float]:
    work = Path(tempfile.mkdtemp(prefix='gcbench-'))
    try:
        folder = work / 'media'
        folder.mkdir()
        started = time.perf_counter()
        uris = write_disk_blobs(folder, range(blobs))
        setup = time.perf_counter() - started
        write_roots(work / 'snapshots', uris[: blobs // 2])
        store = DiskMediaStore(folder)
        by_uri = {uri: index for index, uri in enumerate(uris)}

        async def recreate(deleted: frozenset[str]) -> None:
            await asyncio.to_thread(write_disk_blobs, folder, [by_uri[uri] for uri in deleted])

        roots = [JsonFileRoot(work / 'snapshots')]
        result = await series(store, roots, runs, recreate, blobs - blobs // 2)
        return f'disk, {blobs:,} blobs, {len(list((work / "snapshots").iterdir())):,} snapshot files', result, setup
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_disk_blobs(folder: Path, indexes: Any) -> list[str]:
    """Write blobs straight into DiskMediaStore's default layout (``<hex>.bin``)."""
    uris = []
    for index in indexes:
        data = blob(index)
        uri = media_uri_for(data)
        (folder / f'{uri[-64:]}.bin').write_bytes(data)
        uris.append(uri)
    return uris


# -- S3 on moto ------------------------------------------------------------------------------------


async def s3_case(blobs: int, runs: int) -> tuple[str, Series, float]:
    from aiobotocore.session import get_session

    from mediastash.stores.s3 import S3MediaStore

    with s3_server('moto') as server:
        options = {
            'endpoint_url': server.url,
            'region_name': 'us-east-1',
            'aws_access_key_id': server.access_key_id,
            'aws_secret_access_key': server.secret_access_key,
        }
        bucket = f'gcbench-{uuid.uuid4().hex[:12]}'
        async with get_session().create_client('s3', **options) as client:
            await client.create_bucket(Bucket=bucket)
        work = Path(tempfile.mkdtemp(prefix='gcbench-s3-'))
        store = S3MediaStore(bucket=bucket, **options)
        try:
            gate = asyncio.Semaphore(32)

            async def put(index: int) -> str:
                async with gate:
                    return await store.put(blob(index))

            started = time.perf_counter()
            uris = list(await asyncio.gather(*(put(index) for index in range(blobs))))
            setup = time.perf_counter() - started
            write_roots(work / 'snapshots', uris[: blobs // 2])
            by_uri = {uri: index for index, uri in enumerate(uris)}

            async def recreate(deleted: frozenset[str]) -> None:
                await asyncio.gather(*(put(by_uri[uri]) for uri in deleted))
                await asyncio.sleep(S3_SETTLE)

            await asyncio.sleep(S3_SETTLE)

            roots = [JsonFileRoot(work / 'snapshots')]
            result = await series(store, roots, runs, recreate, blobs - blobs // 2)
            return f'S3 (moto), {blobs:,} blobs', result, setup
        finally:
            await store.aclose()
            shutil.rmtree(work, ignore_errors=True)


# -- report ----------------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def seconds(values: list[float]) -> str:
    return f'{median(values):.2f} s ({min(values):.2f}-{max(values):.2f})'


def mib(value: float | None) -> str:
    return 'n/a' if value is None else f'{value / MiB:.1f} MiB'


def table(cases: list[tuple[str, Series, float]]) -> str:
    lines = [
        '| case | run | mark | sweep | whole call | deleted | peak RSS growth | peak heap (tracemalloc) | gets |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for name, result, _setup in cases:
        for kind, runs, traced_peak in (
            ('dry', result.dry, result.traced_dry),
            ('real', result.real, result.traced_real),
        ):
            growth = [run.rss_growth for run in runs if run.rss_growth is not None]
            lines.append(
                f'| {name} | {kind} | {seconds([r.report.mark_seconds for r in runs])} '
                f'| {seconds([r.report.sweep_seconds for r in runs])} | {seconds([r.wall for r in runs])} '
                f'| {runs[0].report.deleted:,} of {runs[0].report.deletable:,} deletable '
                f'| {mib(max(growth) if growth else None)} | {mib(traced_peak)} | {sum(r.gets for r in runs)} |'
            )
    return '\n'.join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--blobs', type=int, default=100_000, help='blobs in the disk store (default 100,000)')
    parser.add_argument('--s3-blobs', type=int, default=10_000, help='blobs in the S3 bucket (default 10,000)')
    parser.add_argument('--runs', type=int, default=3, help='dry and real runs per case (default 3)')
    parser.add_argument('--only', choices=('disk', 's3'), default=None)
    parser.add_argument('--quick', action='store_true', help='10,000 disk blobs, 1,000 on S3, 1 run')
    args = parser.parse_args()
    if args.quick:
        args.blobs, args.s3_blobs, args.runs = 10_000, 1_000, 1

    async def run_all() -> list[tuple[str, Series, float]]:
        cases = []
        if args.only in (None, 'disk'):
            cases.append(await disk_case(args.blobs, args.runs))
        if args.only in (None, 's3'):
            cases.append(await s3_case(args.s3_blobs, args.runs))
        return cases

    cases = asyncio.run(run_all())
    print(f'- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}')
    print(f'- Python {platform.python_version()}; mediastash {__version__}; {args.runs} run(s) per case')
    for name, result, setup in cases:
        first = result.dry[0].report
        print(
            f'- {name}: {first.scanned:,} listed, {first.referenced:,} referenced by {first.root_items:,} root '
            f'files, {first.deletable:,} deletable; setup (writing the blobs) {setup:.1f} s'
        )
    print()
    print(table(cases))


if __name__ == '__main__':
    main()
