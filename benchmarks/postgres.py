"""PostgreSQL store benchmark: mediastash's ``PostgresMediaStore`` against pydantic-ai-harness's, same server and pool.

Run from the repository root with the project venv active::

    python benchmarks/postgres.py                   # 7 interleaved runs, 256 MiB streams
    python benchmarks/postgres.py --quick           # 3 runs, 64 MiB streams
    python benchmarks/postgres.py --latency-ms 1    # through a proxy adding 1 ms each way

The server is ``$MEDIASTASH_POSTGRES_DSN`` or one started (and stopped) with
``scripts/postgres-server``. Each run, in alternating order, gives each store a
fresh table on one shared asyncpg pool and times: the first put of 120 blobs
of 256 KiB at concurrency 8 (ours hashes each blob for verification), a get of
each (ours verifies it), and a re-put of all 120 from a fresh store object on
the same table (ours sends no body for a stored blob). ``--latency-ms`` puts a
TCP proxy in front of the server that delays every byte by that much in each
direction, as a database on another host would: round trips then count (the
proxy runs in a child process, so its forwarding does not share the measured
event loop). The table shows medians,
ranges and the harness/ours time ratio (above 1: ours is faster). The stream
case runs each side in a fresh subprocess and reports peak RSS above the
baseline taken just before (Linux ``VmHWM`` after ``clear_refs``): ours streams
with ``put_stream``/``get_stream``; the harness has no streaming, so its
``put``/``get`` hold the whole blob.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from pydantic_ai_harness.media import PostgresMediaStore as HarnessPostgresMediaStore

from mediastash.stores.postgres import PostgresMediaStore

KiB = 1 << 10
MiB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent
SERVER_SCRIPT = ROOT / 'scripts' / 'postgres-server'
BLOBS = 120
BLOB_SIZE = 256 * KiB
CONCURRENCY = 8
OPS = ('put', 'get', 're-put')
SIDES = ('harness', 'ours')

STREAM_CHILD = """
import asyncio, hashlib, json, random, sys

def status(field):
    for line in open('/proc/self/status'):
        if line.startswith(field + ':'):
            return int(line.split()[1]) * 1024
    raise LookupError(field)

def reset_peak():
    with open('/proc/self/clear_refs', 'w') as file:
        file.write('5')

async def main(side, dsn, table, mib):
    import asyncpg
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    piece = random.Random(0).randbytes(1 << 20)
    if side == 'ours':
        from mediastash.stores.postgres import PostgresMediaStore
        store = PostgresMediaStore(pool, table=table)
    else:
        from pydantic_ai_harness.media import PostgresMediaStore
        store = PostgresMediaStore(pool, table=table)
    await store.put(b'warm up')
    base = status('VmRSS'); reset_peak()
    if side == 'ours':
        async def chunks():
            for index in range(mib):
                yield index.to_bytes(8, 'big') + piece[8:]
        uri = await store.put_stream(chunks())
    else:  # no streaming: the caller builds the whole blob, the store sends it as one value
        uri = await store.put(b''.join(index.to_bytes(8, 'big') + piece[8:] for index in range(mib)))
    put_peak = status('VmHWM') - base
    base = status('VmRSS'); reset_peak()
    size = 0
    if side == 'ours':
        async for chunk in store.get_stream(uri):
            size += len(chunk)
    else:
        size = len(await store.get(uri))
    get_peak = status('VmHWM') - base
    await pool.close()
    print(json.dumps({'put_peak': put_peak, 'get_peak': get_peak, 'size': size}))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


class DelayProxy:
    """A TCP forwarder on 127.0.0.1 that delivers everything ``delay`` seconds late, in each direction."""

    def __init__(self, host: str, port: int, delay: float) -> None:
        self.upstream = (host, port)
        self.delay = delay
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, '127.0.0.1', 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)
        writer.close()
        up_writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    writer.close()
                    return
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(1 << 16)
                await queue.put((time.monotonic() + self.delay, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()


def blobs(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(BLOB_SIZE) for _ in range(BLOBS)]


async def bounded(calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await call()

    return await asyncio.gather(*(one(call) for call in calls))


def make_store(side: str, pool: Any, table: str) -> Any:
    if side == 'ours':
        return PostgresMediaStore(pool, table=table)
    return HarnessPostgresMediaStore(pool, table=table)


async def one_side(side: str, pool: Any, data: list[bytes]) -> dict[str, float]:
    """Seconds for the first put, the get and the re-put of ``data`` on a fresh table."""
    table = f'bench_{side}_{uuid.uuid4().hex[:10]}'
    store = make_store(side, pool, table)
    timings: dict[str, float] = {}
    try:
        started = time.perf_counter()
        uris = await bounded([lambda payload=payload: store.put(payload) for payload in data])
        timings['put'] = time.perf_counter() - started
        started = time.perf_counter()
        got = await bounded([lambda uri=uri: store.get(uri) for uri in uris])
        timings['get'] = time.perf_counter() - started
        assert got == data
        fresh = make_store(side, pool, table)
        started = time.perf_counter()
        await bounded([lambda payload=payload: fresh.put(payload) for payload in data])
        timings['re-put'] = time.perf_counter() - started
    finally:
        async with pool.acquire() as connection:
            for suffix in ('', '_chunked', '_chunks'):
                await connection.execute(f'DROP TABLE IF EXISTS "{table}{suffix}"')
    return timings


def stream_peaks(side: str, dsn: str, mib: int) -> dict[str, int]:
    table = f'bench_stream_{side}_{uuid.uuid4().hex[:10]}'
    try:
        done = subprocess.run(
            [sys.executable, '-c', STREAM_CHILD, side, dsn, table, str(mib)],
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        )
        result: dict[str, int] = json.loads(done.stdout)
        assert result['size'] == mib * MiB
        return result
    finally:
        asyncio.run(_drop(dsn, table))


async def _drop(dsn: str, table: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        for suffix in ('', '_chunked', '_chunks'):
            await connection.execute(f'DROP TABLE IF EXISTS "{table}{suffix}"')
    finally:
        await connection.close()


async def serve_proxy(host: str, port: int, delay: float) -> None:
    """Run a ``DelayProxy`` until killed, printing its port (the ``--serve-proxy`` child)."""
    proxy = DelayProxy(host, port, delay)
    await proxy.start()
    print(proxy.port, flush=True)
    await asyncio.Event().wait()


def start_proxy(dsn: str, latency: float) -> tuple[str, subprocess.Popen[str]]:
    """A ``DelayProxy`` in its own process (its forwarding must not share the measured event loop)."""
    parts = urlsplit(dsn)
    child = subprocess.Popen(
        [sys.executable, __file__, '--serve-proxy', f'{parts.hostname or "127.0.0.1"}:{parts.port or 5432}:{latency}'],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    port = int(child.stdout.readline())
    user = parts.netloc.rpartition('@')[0]
    return urlunsplit(parts._replace(netloc=f'{user}@127.0.0.1:{port}')), child


async def measure(dsn: str, runs: int, latency: float) -> dict[str, dict[str, list[float]]]:
    proxy = None
    if latency > 0:
        dsn, proxy = start_proxy(dsn, latency)
    pool = await asyncpg.create_pool(dsn, min_size=CONCURRENCY, max_size=CONCURRENCY)
    results: dict[str, dict[str, list[float]]] = {side: {op: [] for op in OPS} for side in SIDES}
    try:
        for run in range(runs):
            data = blobs(run)
            order = SIDES if run % 2 == 0 else SIDES[::-1]
            for side in order:
                for op, seconds in (await one_side(side, pool, data)).items():
                    results[side][op].append(seconds)
            print(f'run {run + 1}/{runs} done', file=sys.stderr)
    finally:
        await pool.close()
        if proxy is not None:
            proxy.kill()
            proxy.wait()
    return results


def server_dsn() -> tuple[str, Callable[[], None]]:
    dsn = os.environ.get('MEDIASTASH_POSTGRES_DSN')
    if dsn:
        return dsn, lambda: None
    env = {**os.environ, 'MEDIASTASH_POSTGRES_STATE_DIR': str(Path(os.environ.get('TMPDIR', '/tmp')) / 'ms-pg-bench')}
    started = subprocess.run([str(SERVER_SCRIPT), 'start'], env=env, capture_output=True, text=True, check=True)
    dsn = started.stdout.strip().removeprefix('export MEDIASTASH_POSTGRES_DSN=')
    return dsn, lambda: subprocess.run([str(SERVER_SCRIPT), 'stop'], env=env, capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='3 runs and 64 MiB streams')
    parser.add_argument('--runs', type=int, default=None)
    parser.add_argument('--stream-mib', type=int, default=None)
    parser.add_argument('--latency-ms', type=float, default=0.0, help='one-way delay a proxy adds (default 0)')
    parser.add_argument('--no-stream', action='store_true', help='skip the streaming case')
    parser.add_argument('--serve-proxy', metavar='HOST:PORT:DELAY', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_proxy:
        host, port, delay = args.serve_proxy.rsplit(':', 2)
        asyncio.run(serve_proxy(host, int(port), float(delay)))
        return
    runs = args.runs or (3 if args.quick else 7)
    mib = args.stream_mib or (64 if args.quick else 256)
    dsn, stop = server_dsn()
    try:
        results = asyncio.run(measure(dsn, runs, args.latency_ms / 1000))
        peaks = {} if args.no_stream else {side: stream_peaks(side, dsn, mib) for side in SIDES}
        version = asyncio.run(_server_version(dsn))
    finally:
        stop()
    print(
        f'PostgreSQL {version}, asyncpg {metadata.version("asyncpg")}, '
        f'pydantic-ai-harness {metadata.version("pydantic-ai-harness")}, Python {platform.python_version()}, '
        f'{os.cpu_count()} CPUs; {runs} interleaved runs, {BLOBS} x {BLOB_SIZE // KiB} KiB '
        f'at concurrency {CONCURRENCY}, {args.latency_ms:g} ms added each way'
    )
    print()
    print('| case | harness median (range) | ours median (range) | harness / ours |')
    print('|---|---|---|---|')
    for op in OPS:
        theirs, ours = results['harness'][op], results['ours'][op]
        ratio = statistics.median(theirs) / statistics.median(ours)
        print(f'| {op} | {_ms(theirs)} | {_ms(ours)} | {ratio:.2f}x |')
    if not peaks:
        return
    print()
    print(f'| {mib} MiB blob, peak RSS over baseline | harness put / get (whole blob) | ours put_stream / get_stream |')
    print('|---|---|---|')
    h, o = peaks['harness'], peaks['ours']
    print(
        f'| MiB | {h["put_peak"] / MiB:.0f} / {h["get_peak"] / MiB:.0f} | '
        f'{o["put_peak"] / MiB:.0f} / {o["get_peak"] / MiB:.0f} |'
    )


def _ms(values: list[float]) -> str:
    return f'{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})'


async def _server_version(dsn: str) -> str:
    connection = await asyncpg.connect(dsn)
    try:
        return str(await connection.fetchval('SHOW server_version'))
    finally:
        await connection.close()


if __name__ == '__main__':
    main()
