"""S3 benchmark: mediastash's ``S3MediaStore`` against pydantic-ai-harness's, on one moto server.

Run from the repository root with the project venv active::

    python benchmarks/s3.py              # 3 runs: 200 x 1 MiB, 25 x 8 MiB, 1 x 64 MiB
    python benchmarks/s3.py --quick      # smoke run on fewer, smaller blobs

One ``moto_server`` process on 127.0.0.1 serves both stores; each run gives
each store a fresh bucket (emptied and removed afterwards so moto's memory stays
flat) and alternates which store goes first. Per workload it times the first
put of every blob, the second put of the same blobs (already stored) and the
get of every blob, all at concurrency 8 on one event loop, and reports the
median over runs. A second table compares our two put checks (HEAD first vs a
conditional PUT with ``If-None-Match: *``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import httpx
from aiobotocore.session import get_session
from botocore.config import Config
from pydantic_ai_harness.media import S3MediaStore as HarnessS3MediaStore

from mediastash.stores.s3 import S3MediaStore

MiB = 1 << 20
CONCURRENCY = 8
KEY, SECRET, REGION = 'bench-key', 'bench-secret', 'us-east-1'
TARGETS = {'put': 2.5, 'put again': 10.0, 'get': 3.0}


@dataclass(frozen=True)
class Workload:
    name: str
    count: int
    size: int

    def blobs(self) -> list[bytes]:
        """Distinct, incompressible blobs (sha256 in counter mode, seeded by the workload)."""
        out = []
        for index in range(self.count):
            seed = hashlib.sha256(f'{self.name}:{index}'.encode()).digest()
            block = b''.join(hashlib.sha256(seed + i.to_bytes(4, 'big')).digest() for i in range(2048))
            out.append((block * (self.size // len(block) + 1))[: self.size - 4] + index.to_bytes(4, 'big'))
        return out


FULL = [Workload('200 x 1 MiB', 200, MiB), Workload('25 x 8 MiB', 25, 8 * MiB), Workload('1 x 64 MiB', 1, 64 * MiB)]
QUICK = [Workload('40 x 1 MiB', 40, MiB), Workload('5 x 8 MiB', 5, 8 * MiB), Workload('1 x 32 MiB', 1, 32 * MiB)]


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, '-m', 'moto.server', '-H', '127.0.0.1', '-p', str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.5):
                return process, f'http://127.0.0.1:{port}'
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError('moto server did not start')


async def bounded(calls: Sequence[Callable[[], Awaitable[Any]]]) -> float:
    """Run ``calls`` at most ``CONCURRENCY`` at a time; seconds taken."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await call()

    started = time.perf_counter()
    await asyncio.gather(*(one(call) for call in calls))
    return time.perf_counter() - started


async def time_store(store: Any, blobs: list[bytes]) -> dict[str, float]:
    uris: list[str] = []

    async def put(data: bytes) -> None:
        uris.append(await store.put(data))

    times = {'put': await bounded([lambda d=d: put(d) for d in blobs])}
    times['put again'] = await bounded([lambda d=d: store.put(d) for d in blobs])
    expected = {hashlib.sha256(d).hexdigest(): d for d in blobs}
    results: list[bytes] = []

    async def get(uri: str) -> None:
        results.append(await store.get(uri))

    times['get'] = await bounded([lambda u=u: get(u) for u in uris])
    assert sorted(results) == sorted(expected.values()), 'a store returned wrong bytes'
    return times


async def empty_bucket(client: Any, bucket: str) -> None:
    async for page in client.get_paginator('list_objects_v2').paginate(Bucket=bucket):
        keys = [{'Key': item['Key']} for item in page.get('Contents', [])]
        if keys:
            await client.delete_objects(Bucket=bucket, Delete={'Objects': keys, 'Quiet': True})
    await client.delete_bucket(Bucket=bucket)


async def run(workloads: list[Workload], runs: int, endpoint: str) -> None:
    session = get_session()
    config = Config(signature_version='s3v4', s3={'addressing_style': 'path'})
    samples: dict[tuple[str, str, str], list[float]] = {}
    async with (
        session.create_client(
            's3',
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            config=config,
        ) as admin,
        httpx.AsyncClient(limits=httpx.Limits(max_connections=32), timeout=120) as http,
    ):
        for workload in workloads:
            blobs = workload.blobs()
            for index in range(runs):
                contenders: list[tuple[str, Callable[[str], Any]]] = [
                    (
                        'harness',
                        lambda b: HarnessS3MediaStore(
                            bucket=b,
                            endpoint=endpoint,
                            region=REGION,
                            access_key_id=KEY,
                            secret_access_key=SECRET,
                            client=http,
                        ),
                    ),
                    (
                        'ours',
                        lambda b: S3MediaStore(
                            bucket=b,
                            endpoint_url=endpoint,
                            region_name=REGION,
                            aws_access_key_id=KEY,
                            aws_secret_access_key=SECRET,
                        ),
                    ),
                    (
                        'ours, If-None-Match',
                        lambda b: S3MediaStore(
                            bucket=b,
                            endpoint_url=endpoint,
                            region_name=REGION,
                            aws_access_key_id=KEY,
                            aws_secret_access_key=SECRET,
                            put_check='if-none-match',
                        ),
                    ),
                ]
                if index % 2:
                    contenders[:2] = contenders[1::-1]
                for name, make in contenders:
                    bucket = f'bench-{uuid.uuid4().hex[:16]}'
                    await admin.create_bucket(Bucket=bucket)
                    store = make(bucket)
                    if isinstance(store, S3MediaStore):
                        await store.exists('media+sha256://' + '0' * 64)  # open the client outside the timing
                    try:
                        for phase, seconds in (await time_store(store, blobs)).items():
                            samples.setdefault((workload.name, phase, name), []).append(seconds)
                    finally:
                        if isinstance(store, S3MediaStore):
                            await store.aclose()
                        await empty_bucket(admin, bucket)
                print(f'  {workload.name}: run {index + 1}/{runs} done', file=sys.stderr)
    report(workloads, samples, runs)


def report(workloads: list[Workload], samples: dict[tuple[str, str, str], list[float]], runs: int) -> None:
    med = {key: statistics.median(values) for key, values in samples.items()}
    print(f'\nS3 stores on one moto server, concurrency {CONCURRENCY}, median of {runs} runs (seconds)\n')
    print('| workload | phase | pydantic-ai-harness | mediastash | speed-up | target | result |')
    print('|---|---|---:|---:|---:|---:|---|')
    for workload in workloads:
        for phase, target in TARGETS.items():
            theirs, ours = med[(workload.name, phase, 'harness')], med[(workload.name, phase, 'ours')]
            ratio = theirs / ours
            verdict = 'PASS' if ratio >= target else 'MISS'
            print(f'| {workload.name} | {phase} | {theirs:.3f} | {ours:.3f} | {ratio:.1f}x | {target:g}x | {verdict} |')
    print('\nPut check: HEAD first (default) vs conditional PUT (`put_check="if-none-match"`), median seconds\n')
    print('| workload | phase | HEAD first | If-None-Match |')
    print('|---|---|---:|---:|')
    for workload in workloads:
        for phase in ('put', 'put again'):
            head, cond = med[(workload.name, phase, 'ours')], med[(workload.name, phase, 'ours, If-None-Match')]
            print(f'| {workload.name} | {phase} | {head:.3f} | {cond:.3f} |')
    versions = ', '.join(
        f'{name} {metadata.version(name)}' for name in ('aiobotocore', 'moto', 'pydantic-ai-harness', 'httpx')
    )
    print(f'\n{platform.python_implementation()} {platform.python_version()}, {platform.machine()}, {versions}')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--quick', action='store_true', help='fewer, smaller blobs (smoke run)')
    options = parser.parse_args()
    process, endpoint = start_moto()
    try:
        asyncio.run(run(QUICK if options.quick else FULL, 2 if options.quick else options.runs, endpoint))
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == '__main__':
    main()
