"""Garbage-collection benchmark: mark and sweep times, and memory, on a disk store and on S3 (moto).

Run from the repository root with the project venv active::

    python benchmarks/gc.py              # 100,000 blobs on disk, 10,000 on moto, 3 runs each
    python benchmarks/gc.py --quick      # 10,000 on disk, 1,000 on moto, 1 run
    python benchmarks/gc.py --only disk --runs 5
    python benchmarks/gc.py --scale --runs 3                       # SQLite, 250k and 1M blobs
    python benchmarks/gc.py --scale --runs 1 --sizes 4000000       # 4M blobs (long)
    python benchmarks/gc.py --scale --sizes 0 --s3-blobs 20000     # only the S3 shards on moto

``--scale``: a SQLite store filled straight through SQL with 32-byte blobs,
half of them referenced from lean JSON files of 500 markers; every collection
runs in a fresh process (peak RSS is that process's ``VmHWM``): a dry run and a
real run in one process, then ``--shards`` processes at once, one per shard,
each a real run (the store is restored from a copy before each run). Then, on
moto with ``--s3-blobs`` blobs, dry runs over the whole bucket and over each
shard, whose listing starts at the shard's first key (``--only disk`` skips it).

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
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
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
from mediastash import DiskMediaStore, SqliteMediaStore, __version__
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


# -- at scale (--scale): SQLite with 250k to 4M blobs, each run in a fresh process ------------------------


def fill_scale_store(database: Path, snapshots: Path, count: int) -> None:
    """``count`` 32-byte blobs written straight into a SqliteMediaStore table, two hours old; the first half
    referenced from lean JSON files of 500 markers each."""
    written_at = time.time() - 7200
    with sqlite3.connect(database) as connection:
        connection.execute(
            'CREATE TABLE media (sha256 TEXT PRIMARY KEY, media_type TEXT, bytes BLOB NOT NULL, '
            'size_bytes INTEGER NOT NULL, metadata TEXT, created_at REAL)'
        )
        for start in range(0, count, 100_000):
            rows = []
            for index in range(start, min(start + 100_000, count)):
                data = blob(index)
                rows.append((hashlib.sha256(data).hexdigest(), None, data, len(data), None, written_at))
            connection.executemany('INSERT INTO media VALUES (?, ?, ?, ?, ?, ?)', rows)
    snapshots.mkdir()
    referenced = count // 2
    for number, start in enumerate(range(0, referenced, 500)):
        markers = [
            {MARKER_KEY: True, URI_KEY: media_uri_for(blob(index)), 'kind': 'binary'}
            for index in range(start, min(start + 500, referenced))
        ]
        (snapshots / f'snapshot-{number:05d}.json').write_text(json.dumps({'parts': markers}))


async def scale_child(database: str, snapshots: str, shard: tuple[int, int] | None, real: bool) -> None:
    """One collection in this (fresh) process; prints its report, wall time and peak RSS as JSON."""
    store = SqliteMediaStore(database=database)
    baseline = _status('VmRSS')
    started = time.perf_counter()
    try:
        report = await collect_garbage(
            store, [JsonFileRoot(snapshots)], grace=timedelta(hours=1), dry_run=not real, shard=shard
        )
    finally:
        await store.aclose()
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    print(
        json.dumps(
            {'wall': wall, 'cpu': cpu, 'peak_rss': _status('VmHWM'), 'baseline_rss': baseline, **report.as_dict()}
        )
    )


def run_scale_child(database: Path, snapshots: Path, shard: str | None, real: bool) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, '--scale-child', str(database), str(snapshots)]
    command += ['--shard', shard] if shard else []
    command += ['--real'] if real else []
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def finished(job: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = job.communicate()
    if job.returncode != 0:
        raise SystemExit(f'a collection process failed with exit code {job.returncode}')
    result: dict[str, Any] = json.loads(out)
    return result


def scale_case(count: int, runs: int, shards: int) -> list[str]:
    """Table rows for one store size: dry and real runs, one process, then ``shards`` processes at once."""
    work = Path(tempfile.mkdtemp(prefix='gcscale-'))
    try:
        pristine, snapshots = work / 'pristine.db', work / 'snapshots'
        started = time.perf_counter()
        fill_scale_store(pristine, snapshots, count)
        print(f'  {count:,} blobs written in {time.perf_counter() - started:.0f} s', file=sys.stderr)
        database = work / 'media.db'
        rows = []
        for kind in ('dry', 'real', f'{shards} shards, real'):
            results: list[list[dict[str, Any]]] = []
            for _ in range(runs):
                shutil.copyfile(pristine, database)
                if kind == 'dry':
                    jobs = [run_scale_child(database, snapshots, None, False)]
                elif kind == 'real':
                    jobs = [run_scale_child(database, snapshots, None, True)]
                else:
                    jobs = [run_scale_child(database, snapshots, f'{k}/{shards}', True) for k in range(shards)]
                started = time.perf_counter()
                results.append([finished(job) for job in jobs])
                elapsed = time.perf_counter() - started
                for result in results[-1]:
                    result['elapsed'] = elapsed
            deleted = sum(result['deleted'] for result in results[0])
            deletable = sum(result['deletable'] for result in results[0])
            assert deletable == count - count // 2, (deletable, count)
            wall = [run[0]['elapsed'] for run in results]
            cpu = [sum(result['cpu'] for result in run) for run in results]
            calls = [max(result['wall'] for result in run) for run in results]
            peaks = [max(result['peak_rss'] for result in run) for run in results]
            growth = [max(result['peak_rss'] - result['baseline_rss'] for result in run) for run in results]
            rows.append(
                f'| {count:,} | {kind} | {seconds(wall)} | {seconds(calls)} | {median(calls) / count * 1e6:.1f} µs '
                f'| {median(cpu) / count * 1e6:.1f} µs | {mib(median(peaks))} | {mib(median(growth))} '
                f'| {deleted:,} of {deletable:,} |'
            )
            print(rows[-1], file=sys.stderr)
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def s3_shards_case(blobs: int, runs: int, shards: int) -> list[str]:
    """Dry runs on moto: one over the whole bucket, then each of ``shards`` shards (the listing starts at the
    shard's first key), in this process; table rows."""
    from aiobotocore.session import get_session

    from mediastash.stores.s3 import S3MediaStore

    with s3_server('moto') as server:
        options = {
            'endpoint_url': server.url,
            'region_name': 'us-east-1',
            'aws_access_key_id': server.access_key_id,
            'aws_secret_access_key': server.secret_access_key,
        }
        bucket = f'gcscale-{uuid.uuid4().hex[:12]}'
        async with get_session().create_client('s3', **options) as client:
            await client.create_bucket(Bucket=bucket)
        work = Path(tempfile.mkdtemp(prefix='gcscale-s3-'))
        store = S3MediaStore(bucket=bucket, **options)
        try:
            gate = asyncio.Semaphore(32)

            async def put(index: int) -> str:
                async with gate:
                    return await store.put(blob(index))

            uris = list(await asyncio.gather(*(put(index) for index in range(blobs))))
            write_roots(work / 'snapshots', uris[: blobs // 2])
            await asyncio.sleep(S3_SETTLE)
            roots = [JsonFileRoot(work / 'snapshots')]
            rows = []
            for label, shard_list in (
                ('whole bucket', [None]),
                (f'{shards} shards, one after another', list(range(shards))),
            ):
                walls: list[float] = []
                listed: list[int] = []
                for _ in range(runs):
                    started = time.perf_counter()
                    reports = [
                        await collect_garbage(
                            store, roots, grace=timedelta(0), shard=None if k is None else (k, shards)
                        )
                        for k in shard_list
                    ]
                    walls.append(time.perf_counter() - started)
                    listed = [report.scanned for report in reports]
                rows.append(
                    f'| S3 (moto), {blobs:,} blobs | {label}, dry | {seconds(walls)} '
                    f'| {", ".join(f"{count:,}" for count in listed)} |'
                )
                print(rows[-1], file=sys.stderr)
            return rows
        finally:
            await store.aclose()
            shutil.rmtree(work, ignore_errors=True)


def scale_main(sizes: list[int], runs: int, shards: int, s3_blobs: int = 0) -> None:
    print(f'- machine: {platform.platform()}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}')
    print(f'- Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; mediastash {__version__}')
    print(f'  {runs} run(s) per row, each collection in a fresh process')
    lines = [
        '| blobs | run | processes (wall) | collect_garbage call | call per blob | CPU per blob | peak RSS '
        '| RSS growth during the call | deleted |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for count in sizes:
        lines += scale_case(count, runs, shards)
    print()
    print('\n'.join(lines))
    if s3_blobs:
        rows = asyncio.run(s3_shards_case(s3_blobs, runs, shards))
        print()
        print(
            '\n'.join(['| case | run | wall (median, min-max) | blobs each listing read |', '|---|---|---|---|', *rows])
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--blobs', type=int, default=100_000, help='blobs in the disk store (default 100,000)')
    parser.add_argument('--s3-blobs', type=int, default=10_000, help='blobs in the S3 bucket (default 10,000)')
    parser.add_argument('--runs', type=int, default=3, help='dry and real runs per case (default 3)')
    parser.add_argument('--only', choices=('disk', 's3'), default=None)
    parser.add_argument('--quick', action='store_true', help='10,000 disk blobs, 1,000 on S3, 1 run')
    parser.add_argument('--scale', action='store_true', help='SQLite at 250k and 1M blobs (see --sizes)')
    parser.add_argument('--sizes', default='250000,1000000', help='with --scale: store sizes (default 250000,1000000)')
    parser.add_argument('--shards', type=int, default=4, help='with --scale: shards run at once (default 4)')
    parser.add_argument('--scale-child', nargs=2, metavar=('DB', 'SNAPSHOTS'), help=argparse.SUPPRESS)
    parser.add_argument('--shard', default=None, help=argparse.SUPPRESS)
    parser.add_argument('--real', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scale_child:
        shard = tuple(int(part) for part in args.shard.split('/')) if args.shard else None
        asyncio.run(scale_child(*args.scale_child, shard, args.real))  # type: ignore[arg-type]
        return
    if args.scale:
        sizes = [int(size) for size in args.sizes.split(',') if int(size)]
        scale_main(sizes, args.runs, args.shards, args.s3_blobs if args.only != 'disk' else 0)
        return
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
