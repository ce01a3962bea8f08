"""MongoDB store benchmark: mediastash's ``MongoMediaStore`` against pydantic-ai-harness's, same server, one run.

Run from the repository root with the project venv active::

    python benchmarks/mongo.py              # full run: 5 runs per case, chunk sizes 1 and 8 MiB
    python benchmarks/mongo.py --quick      # smoke run: 2 runs, 16 MiB per case, 64 MiB stream
    python benchmarks/mongo.py --chunk-mib 1 --no-stream --runs 7   # the gets issue 32 fixed, side by side

The server is ``$MEDIASTASH_MONGO_URI`` or a SecantusDB started (and stopped)
with ``scripts/mongo-server``. For each chunk size and blob size (1 MiB and
8 MiB blobs, 100 MiB in all) both stores put every blob into empty collections,
get every blob, put every blob again (already stored) and delete every blob
(the harness's store has no ``delete``: its manifest and chunks are deleted
with pymongo by ``_id`` and ``files_id``, its own index); a last case does the
same with 2,000 blobs of 1-4 KiB (``--small``). Runs alternate which store goes
first; the table shows medians, ranges and throughput ratios. Each run starts
from empty collections and fills them, so a get that scans the chunk collection
instead of using an index shows as a low ratio (issue 32: 8 MiB blobs in 1 MiB
chunks read at 0.22-0.40x of the harness).
Round trips are the commands pymongo's command monitoring sees, per blob.
The streaming case runs in a fresh subprocess and reports its peak RSS above
the baseline taken just before the stream (Linux ``VmHWM`` after ``clear_refs``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic_ai_harness.media import MongoMediaStore as HarnessMongoMediaStore
from pymongo import AsyncMongoClient, monitoring

from mediastash.stores.mongo import MongoMediaStore

MiB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent
SERVER_SCRIPT = ROOT / 'scripts' / 'mongo-server'
DATABASE = 'mediastash_bench'
OPS = ('put', 'get', 're-put', 'delete')
Document = dict[str, Any]


class CommandCounter(monitoring.CommandListener):
    """Counts the commands a client sends (one command is one round trip)."""

    def __init__(self) -> None:
        self.count = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.count += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@dataclass
class Contender:
    name: str
    make: Callable[[AsyncMongoClient[Document], str, int], Any]
    client: AsyncMongoClient[Document]
    counter: CommandCounter


@dataclass
class Result:
    seconds: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in OPS})
    round_trips: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in OPS})


def make_ours(client: AsyncMongoClient[Document], collection: str, chunk: int) -> MongoMediaStore:
    return MongoMediaStore(client=client, database=DATABASE, collection=collection, chunk_size_bytes=chunk)


def make_harness(client: AsyncMongoClient[Document], collection: str, chunk: int) -> Any:
    return HarnessMongoMediaStore(client=client, database=DATABASE, collection=collection, chunk_size_bytes=chunk)


async def delete_harness_blob(client: AsyncMongoClient[Document], collection: str, uri: str) -> bool:
    """The anchor for deletes: pydantic-ai-harness's store has no ``delete``, so its layout is deleted by hand,
    as a collector would: the manifest, then its chunks by ``files_id`` (the harness's own ``(files_id, n)`` index)."""
    digest = uri.rsplit('/', 1)[-1]
    database = client[DATABASE]
    if await database[collection].find_one_and_delete({'_id': digest}, projection={'_id': 1}) is None:
        return False
    await database[f'{collection}_chunks'].delete_many({'files_id': digest})
    return True


def blobs_of(size: int, total: int) -> list[bytes]:
    """Distinct random blobs of ``size`` bytes adding up to ``total`` (the last may be shorter)."""
    sizes = [size] * (total // size) + ([total % size] if total % size else [])
    return [os.urandom(n) for n in sizes]


async def timed(contender: Contender, action: Callable[[], Awaitable[None]]) -> tuple[float, int]:
    gc.collect()
    before = contender.counter.count
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start, contender.counter.count - before


async def one_run(contender: Contender, blobs: list[bytes], chunk: int, result: Result, run: int) -> None:
    collection = f'bench_{contender.name}_{run + 1}_{os.getpid()}'
    store = contender.make(contender.client, collection, chunk)
    uris: list[str] = []

    async def put_all() -> None:
        uris.clear()
        for data in blobs:
            uris.append(await store.put(data))

    async def get_all() -> None:
        for uri, data in zip(uris, blobs, strict=True):
            if len(await store.get(uri)) != len(data):
                raise AssertionError(f'{contender.name} returned the wrong blob for {uri}')

    async def delete_all() -> None:
        for uri in uris:
            if contender.name == 'ours':
                removed = await store.delete(uri)
            else:
                removed = await delete_harness_blob(contender.client, collection, uri)
            if not removed:
                raise AssertionError(f'{contender.name} did not delete {uri}')

    try:
        for op, action in (('put', put_all), ('get', get_all), ('re-put', put_all), ('delete', delete_all)):
            seconds, commands = await timed(contender, action)
            result.seconds[op].append(seconds)
            result.round_trips[op].append(commands / len(blobs))
    finally:
        database = contender.client[DATABASE]
        await database.drop_collection(collection)
        await database.drop_collection(f'{collection}_chunks')


def fmt_range(values: list[float], unit: Callable[[float], str]) -> str:
    """Median and range of per-run times, shown as throughput (the slowest run first)."""
    return f'{unit(statistics.median(values))} ({unit(max(values))}-{unit(min(values))})'


def throughput(total: int) -> Callable[[float], str]:
    return lambda seconds: f'{total / MiB / seconds:.0f} MiB/s'


def per_second(count: int) -> Callable[[float], str]:
    return lambda seconds: f'{count / seconds:.0f} blobs/s'


# -- streaming memory (own process) ---------------------------------------------------


def rss_kib(field_name: str) -> int:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith(field_name + ':'):
            return int(line.split()[1])
    raise RuntimeError(f'{field_name} not in /proc/self/status')


async def stream_case(uri: str, total: int, piece: int) -> dict[str, float]:
    """Stream ``total`` bytes in and out through our store; peak RSS above the baseline for each direction."""
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri)
    collection = f'bench_stream_{os.getpid()}'
    store = MongoMediaStore(client=client, database=DATABASE, collection=collection)
    await store.put(b'warm-up: connection pool, indexes' * 1000)
    seed = os.urandom(piece)

    async def source() -> AsyncIterator[bytes]:
        for n in range(total // piece):
            yield hashlib.sha256(n.to_bytes(8, 'big')).digest() + seed[32:]

    def reset_peak() -> int:
        gc.collect()
        Path('/proc/self/clear_refs').write_text('5')
        return rss_kib('VmRSS')

    try:
        baseline = reset_peak()
        start = time.perf_counter()
        stored = await store.put_stream(source())
        put_seconds = time.perf_counter() - start
        put_peak = rss_kib('VmHWM') - baseline
        baseline = reset_peak()
        start = time.perf_counter()
        hasher = hashlib.sha256()
        async for chunk in store.get_stream(stored, chunk_size=MiB):
            hasher.update(chunk)
        get_seconds = time.perf_counter() - start
        get_peak = rss_kib('VmHWM') - baseline
        if 'media+sha256://' + hasher.hexdigest() != stored:
            raise AssertionError('streamed bytes do not match')
    finally:
        await client[DATABASE].drop_collection(collection)
        await client[DATABASE].drop_collection(f'{collection}_chunks')
        await client.close()
    return {
        'put_seconds': put_seconds,
        'get_seconds': get_seconds,
        'put_peak_mib': put_peak / 1024,
        'get_peak_mib': get_peak / 1024,
    }


def run_stream_subprocess(uri: str, total: int) -> dict[str, float]:
    command = [sys.executable, __file__, '--stream-child', str(total)]
    done = subprocess.run(
        command, env={**os.environ, 'MEDIASTASH_MONGO_URI': uri}, capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# -- the server -------------------------------------------------------------------------


@contextmanager
def mongo_server(state_dir: Path) -> Iterator[str]:
    configured = os.environ.get('MEDIASTASH_MONGO_URI')
    if configured:
        yield configured
        return
    env = {**os.environ, 'MEDIASTASH_MONGO_STATE_DIR': str(state_dir)}
    started = subprocess.run([str(SERVER_SCRIPT), 'start'], env=env, capture_output=True, text=True, check=False)
    if started.returncode:
        raise SystemExit(f'could not start the benchmark server:\n{started.stderr}')
    try:
        yield started.stdout.strip().split('=', 1)[1]
    finally:
        subprocess.run([str(SERVER_SCRIPT), 'stop'], env=env, capture_output=True, check=False)


# -- main ------------------------------------------------------------------------------


async def bench(uri: str, args: argparse.Namespace) -> list[str]:
    total = args.total_mib * MiB
    contenders: list[Contender] = []
    for name, make in (('ours', make_ours), ('harness', make_harness)):
        counter = CommandCounter()
        contenders.append(Contender(name, make, AsyncMongoClient(uri, event_listeners=[counter]), counter))
    lines = [
        '| chunk | blobs | op | mediastash: median (min-max) | harness: median (min-max) '
        '| ours / harness throughput | round trips per blob: ours / harness |',
        '|---:|---|---|---:|---:|---:|---:|',
    ]
    info = await contenders[0].client.server_info()
    server = f'MongoDB wire version {info.get("version")}'
    if 'secantusVersion' in info:
        server = f'SecantusDB {info["secantusVersion"]} (reports MongoDB {info.get("version")})'
    lines.insert(0, f'- server: {server}\n')
    cases = [
        (chunk_mib, f'{len(blobs)} x {blob_mib} MiB', blobs, throughput(total))
        for chunk_mib in args.chunk_mib
        for blob_mib in (1, 8)
        for blobs in [blobs_of(blob_mib * MiB, total)]
    ]
    if args.small:  # many small blobs: one manifest (ours inline, the harness's plus one chunk) each
        small = [os.urandom(1024 + n % 3072) for n in range(args.small)]
        cases.append((args.chunk_mib[0], f'{len(small)} x 1-4 KiB', small, per_second(len(small))))
    try:
        for chunk_mib, label, blobs, unit in cases:
            results = {contender.name: Result() for contender in contenders}
            for contender in contenders:  # untimed warm-up: connections, first collections
                await one_run(contender, blobs[:2], chunk_mib * MiB, Result(), -1)
            for run in range(args.runs):
                order = contenders if run % 2 == 0 else contenders[::-1]
                for contender in order:
                    await one_run(contender, blobs, chunk_mib * MiB, results[contender.name], run)
                    if args.verbose:
                        print(chunk_mib, label, contender.name, results[contender.name], file=sys.stderr)
            ours, theirs = results['ours'], results['harness']
            for op in OPS:
                ratio = statistics.median(theirs.seconds[op]) / statistics.median(ours.seconds[op])
                our_trips, their_trips = (statistics.median(r.round_trips[op]) for r in (ours, theirs))
                trips = f'{our_trips:.2f} / {their_trips:.2f}'
                lines.append(
                    f'| {chunk_mib} MiB | {label} | {op} | {fmt_range(ours.seconds[op], unit)} '
                    f'| {fmt_range(theirs.seconds[op], unit)} | {ratio:.2f}x | {trips} |'
                )
    finally:
        for contender in contenders:
            await contender.client.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--quick', action='store_true', help='2 runs, 16 MiB per case, 64 MiB stream')
    parser.add_argument('--total-mib', type=int, default=100)
    parser.add_argument('--stream-mib', type=int, default=256)
    parser.add_argument('--chunk-mib', type=int, nargs='+', default=[1, 8], help='chunk sizes, both stores alike')
    parser.add_argument('--small', type=int, default=2000, help='how many 1-4 KiB blobs (0: skip that case)')
    parser.add_argument('--no-stream', action='store_true', help='skip the streaming memory case')
    parser.add_argument('--verbose', action='store_true')
    parser.add_argument('--stream-child', type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stream_child:
        print(json.dumps(asyncio.run(stream_case(os.environ['MEDIASTASH_MONGO_URI'], args.stream_child, MiB))))
        return
    if args.quick:
        args.runs, args.total_mib, args.stream_mib, args.small = 2, 16, 64, min(args.small, 200)
    with (
        tempfile.TemporaryDirectory(prefix='mediastash-bench-mongo-') as state_dir,
        mongo_server(Path(state_dir)) as uri,
    ):
        table = asyncio.run(bench(uri, args))
        streams = (
            []
            if args.no_stream
            else [run_stream_subprocess(uri, args.stream_mib * MiB) for _ in range(min(args.runs, 3))]
        )
    source = '$MEDIASTASH_MONGO_URI' if os.environ.get('MEDIASTASH_MONGO_URI') else 'started by scripts/mongo-server'
    print(f'- machine: {platform.platform()}, {os.cpu_count()} CPUs; Python {platform.python_version()}')
    print(f'- pymongo {metadata.version("pymongo")}, pydantic-ai-harness {metadata.version("pydantic-ai-harness")}')
    print(f'- {args.runs} alternating runs per case after one warm-up; sequential puts and gets, one blob at a time')
    print(table[0].rstrip('\n') + f', {source} on 127.0.0.1')
    print()
    print('\n'.join(table[1:]))
    if not streams:
        return
    print()
    limit = 64
    put_peak = statistics.median(s['put_peak_mib'] for s in streams)
    get_peak = statistics.median(s['get_peak_mib'] for s in streams)
    put_rate = args.stream_mib / statistics.median(s['put_seconds'] for s in streams)
    get_rate = args.stream_mib / statistics.median(s['get_seconds'] for s in streams)
    print(f'| streaming ({len(streams)} runs, median) | throughput | peak RSS above baseline | target | result |')
    print('|---|---:|---:|---:|:---:|')
    for name, rate, peak in (('put_stream', put_rate, put_peak), ('get_stream', get_rate, get_peak)):
        verdict = 'PASS' if max(s[f'{name[:3]}_peak_mib'] for s in streams) < limit else 'FAIL'
        print(f'| {name} {args.stream_mib} MiB | {rate:.0f} MiB/s | {peak:.1f} MiB | < {limit} MiB | {verdict} |')


if __name__ == '__main__':
    main()
