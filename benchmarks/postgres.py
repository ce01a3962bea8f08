"""PostgreSQL store benchmark: mediastash's ``PostgresMediaStore`` against pydantic-ai-harness's, same server and pool.

Run from the repository root with the project venv active::

    python benchmarks/postgres.py                        # loopback and 1 ms / 1000 Mbit/s, 7 runs each, streams
    python benchmarks/postgres.py --quick                # 3 runs, 64 MiB streams
    python benchmarks/postgres.py --network 0 --network 2/100 --no-stream

The server is ``$MEDIASTASH_POSTGRES_DSN`` or one started (and stopped) with
``scripts/postgres-server``. Each run, in alternating order, gives each store a
fresh table on one shared asyncpg pool and times: one small put that creates
the table (``new table``: ours makes three tables, the harness one), then from
a new store object on that table the first put of 120 blobs of 256 KiB at
concurrency 8 (ours hashes each blob for verification), a get of each (ours
verifies it), and a re-put of all 120 from another new store object (ours
sends no body for a stored blob). ``--network MS/MBIT``
(repeatable; ``0`` is loopback) puts a TCP proxy in front of the server that
delays every byte by ``MS`` in each direction and passes it over one link of
``MBIT`` Mbit/s per direction shared by all connections, as a database on
another host would: round trips and bytes sent then count (the proxy runs in a
child process, so its forwarding does not share the measured event loop). The
table shows medians, ranges, the harness/ours time ratio (above 1: ours is
faster) and the CPU per operation of this process and of the server backends
behind the pool (read from ``/proc``; ``?`` when the server is elsewhere): on a
machine where the client, the server and the proxy share two cores, CPU is
what loopback times measure. The stream case runs each side in a fresh
subprocess and reports peak RSS above the baseline taken just before (Linux
``VmHWM`` after ``clear_refs``): ours streams with
``put_stream``/``get_stream``; the harness has no streaming, so its
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
from dataclasses import dataclass
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
OPS = ('new table', 'put', 'get', 're-put')
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


class Link:
    """One direction of a network link shared by every connection through the proxy: ``bytes_per_second`` of
    bandwidth (``None``: unlimited) and ``delay`` seconds of propagation."""

    def __init__(self, delay: float, bytes_per_second: float | None) -> None:
        self.delay = delay
        self.bytes_per_second = bytes_per_second
        self.bytes = 0
        self._free_at = 0.0

    def due(self, size: int) -> float:
        """When ``size`` bytes handed over now arrive: after the bytes queued before them, then the delay."""
        now = time.monotonic()
        self.bytes += size
        if self.bytes_per_second is None:
            return now + self.delay
        self._free_at = max(now, self._free_at) + size / self.bytes_per_second
        return self._free_at + self.delay


class DelayProxy:
    """A TCP forwarder on 127.0.0.1 in front of the server: every byte crosses a ``Link`` in each direction."""

    def __init__(self, host: str, port: int, delay: float, bytes_per_second: float | None = None) -> None:
        self.upstream = (host, port)
        self.links = (Link(delay, bytes_per_second), Link(delay, bytes_per_second))  # to the server, back
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
        await asyncio.gather(
            self._pipe(reader, up_writer, self.links[0]),
            self._pipe(up_reader, writer, self.links[1]),
            return_exceptions=True,
        )
        writer.close()
        up_writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Link) -> None:
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
                await queue.put((link.due(len(data)), data))
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


class Meter:
    """CPU seconds spent by this process and by the server backends behind the pool (from ``/proc``; the server
    part is ``None`` when the backends are not readable, e.g. on another host), and the bytes the proxy forwarded
    (``None`` on loopback)."""

    def __init__(self, backends: list[int], proxy: subprocess.Popen[str] | None) -> None:
        self.backends = backends
        self.proxy = proxy
        self._tick = os.sysconf('SC_CLK_TCK')

    def bytes(self) -> tuple[int, int] | None:
        return None if self.proxy is None else traffic(self.proxy)

    def now(self) -> tuple[float, float | None]:
        server: float | None = 0.0
        for pid in self.backends:
            try:
                fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
            except OSError:
                server = None
                break
            assert server is not None
            server += (int(fields[11]) + int(fields[12])) / self._tick  # utime, stime
        return time.process_time(), server


Sample = dict[str, float | None]
"""``seconds``, ``client`` and ``server`` CPU seconds, ``sent`` and ``received`` bytes through the proxy of one step."""


async def one_side(side: str, pool: Any, data: list[bytes], cpu: Meter) -> dict[str, Sample]:
    """On a fresh table: one tiny put that creates it (``new table``), then from a new store object the first put
    of ``data``, the get and, from another new store object, the re-put; time and CPU of each."""
    table = f'bench_{side}_{uuid.uuid4().hex[:10]}'
    samples: dict[str, Sample] = {}

    async def timed(op: str, calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
        moved = cpu.bytes()
        client, server = cpu.now()
        started = time.perf_counter()
        results = await bounded(calls)
        seconds = time.perf_counter() - started
        client_after, server_after = cpu.now()
        moved_after = cpu.bytes()
        samples[op] = {
            'seconds': seconds,
            'client': client_after - client,
            'server': None if server is None or server_after is None else server_after - server,
            'sent': None if moved is None or moved_after is None else moved_after[0] - moved[0],
            'received': None if moved is None or moved_after is None else moved_after[1] - moved[1],
        }
        return results

    try:
        creator = make_store(side, pool, table)
        await timed('new table', [lambda: creator.put(b'the first blob of a new table')])
        store = make_store(side, pool, table)  # a store object of its own, on a table that exists
        uris = await timed('put', [lambda payload=payload: store.put(payload) for payload in data])
        got = await timed('get', [lambda uri=uri: store.get(uri) for uri in uris])
        assert got == data
        fresh = make_store(side, pool, table)
        await timed('re-put', [lambda payload=payload: fresh.put(payload) for payload in data])
    finally:
        async with pool.acquire() as connection:
            for suffix in ('', '_chunked', '_chunks'):
                await connection.execute(f'DROP TABLE IF EXISTS "{table}{suffix}"')
    return samples


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


@dataclass(frozen=True)
class Network:
    """Loopback (no proxy), or a proxy adding ``latency_ms`` each way over a shared link of ``mbit`` Mbit/s."""

    latency_ms: float
    mbit: float | None

    @classmethod
    def parse(cls, spec: str) -> Network:
        latency, _, mbit = spec.partition('/')
        return cls(float(latency), float(mbit) if mbit else None)

    @property
    def proxied(self) -> bool:
        return self.latency_ms > 0 or self.mbit is not None

    def __str__(self) -> str:
        if not self.proxied:
            return 'loopback'
        link = f', {self.mbit:g} Mbit/s shared link' if self.mbit is not None else ''
        return f'{self.latency_ms:g} ms each way{link}'

    @property
    def spec(self) -> str:
        return f'{self.latency_ms:g}/{self.mbit:g}' if self.mbit is not None else f'{self.latency_ms:g}'


async def serve_proxy(host: str, port: int, network: Network) -> None:
    """Run a ``DelayProxy`` until killed, printing its port (the ``--serve-proxy`` child)."""
    rate = None if network.mbit is None else network.mbit * 1e6 / 8
    proxy = DelayProxy(host, port, network.latency_ms / 1000, rate)
    await proxy.start()
    print(proxy.port, flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):  # a line asks for the bytes forwarded so far
        print(proxy.links[0].bytes, proxy.links[1].bytes, flush=True)


def traffic(proxy: subprocess.Popen[str]) -> tuple[int, int]:
    """Bytes the proxy child has forwarded to the server and back so far."""
    assert proxy.stdin is not None and proxy.stdout is not None
    proxy.stdin.write('\n')
    proxy.stdin.flush()
    sent, received = proxy.stdout.readline().split()
    return int(sent), int(received)


def start_proxy(dsn: str, network: Network) -> tuple[str, subprocess.Popen[str]]:
    """A ``DelayProxy`` in its own process (its forwarding must not share the measured event loop)."""
    parts = urlsplit(dsn)
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            '--serve-proxy',
            f'{parts.hostname or "127.0.0.1"}:{parts.port or 5432}:{network.spec}',
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    port = int(child.stdout.readline())
    user = parts.netloc.rpartition('@')[0]
    return urlunsplit(parts._replace(netloc=f'{user}@127.0.0.1:{port}')), child


Results = dict[str, dict[str, list[Sample]]]
"""side -> step -> one sample per run."""


async def measure(dsn: str, runs: int, network: Network) -> Results:
    proxy = None
    if network.proxied:
        dsn, proxy = start_proxy(dsn, network)
    pool = await asyncpg.create_pool(dsn, min_size=CONCURRENCY, max_size=CONCURRENCY)
    results: Results = {side: {op: [] for op in OPS} for side in SIDES}
    try:
        cpu = Meter(await _backends(pool), proxy)
        for run in range(runs):
            data = blobs(run)
            order = SIDES if run % 2 == 0 else SIDES[::-1]
            for side in order:
                for op, sample in (await one_side(side, pool, data, cpu)).items():
                    results[side][op].append(sample)
            print(f'{network}: run {run + 1}/{runs} done', file=sys.stderr)
    finally:
        await pool.close()
        if proxy is not None:
            proxy.kill()
            proxy.wait()
    return results


async def _backends(pool: Any) -> list[int]:
    """The server process ids behind every connection of the pool (all held at once, so all are counted)."""
    connections = [await pool.acquire() for _ in range(CONCURRENCY)]
    try:
        return [int(await connection.fetchval('SELECT pg_backend_pid()')) for connection in connections]
    finally:
        for connection in connections:
            await pool.release(connection)


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
    parser.add_argument(
        '--network',
        action='append',
        metavar='MS[/MBIT]',
        help='0 for loopback, or the delay a proxy adds each way with an optional shared bandwidth, e.g. 1/1000 '
        '(repeatable; default: 0 and 1/1000)',
    )
    parser.add_argument('--no-stream', action='store_true', help='skip the streaming case')
    parser.add_argument('--serve-proxy', metavar='HOST:PORT:NETWORK', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_proxy:
        host, port, spec = args.serve_proxy.rsplit(':', 2)
        asyncio.run(serve_proxy(host, int(port), Network.parse(spec)))
        return
    runs = args.runs or (3 if args.quick else 7)
    mib = args.stream_mib or (64 if args.quick else 256)
    networks = [Network.parse(spec) for spec in (args.network or ['0', '1/1000'])]
    dsn, stop = server_dsn()
    try:
        results = {network: asyncio.run(measure(dsn, runs, network)) for network in networks}
        peaks = {} if args.no_stream else {side: stream_peaks(side, dsn, mib) for side in SIDES}
        version = asyncio.run(_server_version(dsn))
    finally:
        stop()
    print(
        f'PostgreSQL {version}, asyncpg {metadata.version("asyncpg")}, '
        f'pydantic-ai-harness {metadata.version("pydantic-ai-harness")}, Python {platform.python_version()}, '
        f'{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {runs} interleaved runs per network, '
        f'{BLOBS} x {BLOB_SIZE // KiB} KiB at concurrency {CONCURRENCY}'
    )
    print()
    print(
        '| network | case | harness median (range) | ours median (range) | harness / ours '
        '| CPU ms per op, client + server: harness / ours | KiB per op to / from the server: harness / ours |'
    )
    print('|---|---|---|---|---|---|---|')
    for network, found in results.items():
        for op in OPS:
            theirs, ours = found['harness'][op], found['ours'][op]
            calls = 1 if op == 'new table' else BLOBS
            ratio = _median(theirs, 'seconds') / _median(ours, 'seconds')
            print(
                f'| {network} | {op} | {_ms(theirs)} | {_ms(ours)} | **{ratio:.2f}x** '
                f'| {_cpu(theirs, calls)} / {_cpu(ours, calls)} | {_kib(theirs, calls)} / {_kib(ours, calls)} |'
            )
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


def _median(samples: list[Sample], key: str) -> float:
    values = [sample[key] for sample in samples]
    return statistics.median(value for value in values if value is not None)


def _ms(samples: list[Sample]) -> str:
    values = [float(sample['seconds'] or 0.0) * 1000 for sample in samples]
    return f'{statistics.median(values):.0f} ms ({min(values):.0f}-{max(values):.0f})'


def _kib(samples: list[Sample], calls: int) -> str:
    """Median bytes per operation sent to the server and back through the proxy; ``-`` on loopback."""
    if any(sample['sent'] is None for sample in samples):
        return '-'
    return f'{_median(samples, "sent") / calls / KiB:.1f} + {_median(samples, "received") / calls / KiB:.1f}'


def _cpu(samples: list[Sample], calls: int) -> str:
    """Median CPU per operation over the runs: this process, and the server backends when readable."""
    client = _median(samples, 'client') * 1000 / calls
    if any(sample['server'] is None for sample in samples):
        return f'{client:.2f} + ?'
    return f'{client:.2f} + {_median(samples, "server") * 1000 / calls:.2f}'


async def _server_version(dsn: str) -> str:
    connection = await asyncpg.connect(dsn)
    try:
        return str(await connection.fetchval('SHOW server_version'))
    finally:
        await connection.close()


if __name__ == '__main__':
    main()
