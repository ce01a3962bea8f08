"""Cached stores and sync: restores from S3 with and without a local ``CachedMediaStore``, and ``mediastash sync``.

Run from the repository root with the project venv active::

    python benchmarks/cached.py                 # 50 steps, 40 MiB of images; sync of 10,000 blobs
    python benchmarks/cached.py --quick         # 10 steps, 8 MiB; sync of 1,000 blobs

Restores: a 50-step history is externalized into S3 (moto, directly and
behind the tests' latency proxy at ``--latency`` seconds per request); then
the run is continued three times, each a restore of the lean history in a
fresh store (as a new worker process would: no known-blob cache). The plain
``S3MediaStore`` is compared with a ``CachedMediaStore`` over it whose disk
cache starts empty. Bytes downloaded are counted by a wrapper around the S3
store. Sync: ``mediastash sync`` of N small blobs from a disk store to S3 at
``--jobs 8``, run as a user runs it (a subprocess), blobs per second.
See docs/benchmarks.md ("Cached stores and sync").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiobotocore.session import get_session
from benchmarks._servers import Server, latency_proxy, s3_server

from mediastash import CachedMediaStore, DiskMediaStore, MediaContextLike, restore_media
from mediastash.context import EMPTY_CONTEXT
from mediastash.stores.s3 import S3MediaStore
from mediastash.testing import CountingMediaStore, MiB, agent_history
from mediastash.testing.store import blob
from mediastash.walker import DEFAULT_THRESHOLD_BYTES, externalize_media


class Downloads(CountingMediaStore):
    """Counts the bytes ``get`` returns (what a restore downloads)."""

    bytes_got = 0

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        data = await super().get(uri, context=context)
        self.bytes_got += len(data)
        return data


@dataclass(frozen=True)
class Restore:
    setup: str
    network: str
    number: int
    seconds: float
    downloaded: int
    gets: int


@contextmanager
def endpoints(server: Server, latency: float) -> Iterator[list[tuple[str, str]]]:
    """(label, endpoint URL) pairs: the server itself and the latency proxy in front of it."""
    with latency_proxy(server, latency) as proxy:
        yield [('moto, local', server.url), (f'moto + {latency * 1000:.0f} ms/request', proxy.endpoint.url)]


def options(server: Server, url: str) -> dict[str, Any]:
    return {
        'endpoint_url': url,
        'region_name': 'us-east-1',
        'aws_access_key_id': server.access_key_id,
        'aws_secret_access_key': server.secret_access_key,
    }


async def create_bucket(server: Server) -> str:
    bucket = f'bench-{uuid.uuid4().hex[:12]}'
    async with get_session().create_client('s3', **options(server, server.url)) as client:
        await client.create_bucket(Bucket=bucket)
    return bucket


async def restores(server: Server, latency: float, steps: int, image_mib: int, repeats: int) -> list[Restore]:
    history = agent_history(steps=steps, image_bytes_total=image_mib * MiB)
    bucket = await create_bucket(server)
    async with S3MediaStore(bucket=bucket, **options(server, server.url)) as writer:
        lean = await externalize_media(history, media_store=writer, threshold_bytes=DEFAULT_THRESHOLD_BYTES)
    results: list[Restore] = []
    with endpoints(server, latency) as pairs:
        for network, url in pairs:
            for setup in ('S3MediaStore', 'CachedMediaStore over it'):
                with tempfile.TemporaryDirectory(prefix='bench-cache-') as cache_dir:
                    for number in range(1, repeats + 1):
                        s3 = Downloads(S3MediaStore(bucket=bucket, **options(server, url)))
                        store: Any = s3
                        if setup != 'S3MediaStore':
                            store = CachedMediaStore(s3, cache=DiskMediaStore(cache_dir))
                        async with store:
                            started = time.perf_counter()
                            back = await restore_media(lean, media_store=store, known_blobs=False)
                            seconds = time.perf_counter() - started
                        assert back == history
                        results.append(Restore(setup, network, number, seconds, s3.bytes_got, s3.calls['get']))
                        print(f'{network:24} {setup:26} restore {number}: {seconds * 1000:8.1f} ms', file=sys.stderr)
    return results


async def seed_blobs(folder: Path, count: int, size: int) -> None:
    async with DiskMediaStore(folder) as store:
        gate = asyncio.Semaphore(32)

        async def one(number: int) -> None:
            async with gate:
                await store.put(blob(size, seed=number))

        await asyncio.gather(*(one(number) for number in range(count)))


def sync_run(server: Server, url: str, source: Path, bucket: str, jobs: int, fast: bool = False) -> float:
    env = {
        **os.environ,
        'AWS_ACCESS_KEY_ID': server.access_key_id,
        'AWS_SECRET_ACCESS_KEY': server.secret_access_key,
        'AWS_DEFAULT_REGION': 'us-east-1',
    }
    destination = f's3://{bucket}?endpoint_url={url}' + ('&put_check=if-none-match' if fast else '')
    command = [sys.executable, '-m', 'mediastash', 'sync', str(source), destination, '--jobs', str(jobs), '-q']
    if fast:
        command.append('--list-destination')
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f'sync failed: {done.stderr}')
    return seconds


async def syncs(
    server: Server, latency: float, counts: tuple[int, int], size: int, jobs: int
) -> list[tuple[str, int, float]]:
    """Sync ``counts[0]`` blobs straight to moto and ``counts[1]`` through the latency proxy, each run twice."""
    rows: list[tuple[str, int, float]] = []
    with endpoints(server, latency) as pairs:
        for (network, url), count in zip(pairs, counts, strict=True):
            with tempfile.TemporaryDirectory(prefix='bench-sync-') as tmp:
                source = Path(tmp) / 'src'
                await seed_blobs(source, count, size)
                for fast in (False, True):
                    how = ' (--list-destination, put_check=if-none-match)' if fast else ''
                    bucket = await create_bucket(server)
                    seconds = await asyncio.to_thread(sync_run, server, url, source, bucket, jobs, fast)
                    rows.append((f'{network}{how}', count, seconds))
                    print(f'{network:24} sync of {count} blobs{how}: {seconds:.1f} s', file=sys.stderr)
                    again = await asyncio.to_thread(sync_run, server, url, source, bucket, jobs, fast)
                    rows.append((f'{network}{how}, rerun (nothing missing)', count, again))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--latency', type=float, default=0.02, help='seconds per request at the proxy')
    parser.add_argument('--blobs', type=int, default=None, help='blobs to sync (default 10,000; quick 1,000)')
    parser.add_argument('--latency-blobs', type=int, default=None, help='blobs to sync through the proxy (1,000)')
    parser.add_argument('--blob-bytes', type=int, default=4096)
    parser.add_argument('--jobs', type=int, default=8)
    parser.add_argument('--skip-sync', action='store_true')
    parser.add_argument('--skip-restores', action='store_true')
    args = parser.parse_args()
    steps, image_mib = (10, 8) if args.quick else (50, 40)
    count = args.blobs or (1000 if args.quick else 10_000)
    slow_count = args.latency_blobs or min(count, 1000)
    with s3_server('moto') as server:
        results = [] if args.skip_restores else asyncio.run(restores(server, args.latency, steps, image_mib, 3))
        sync_rows = (
            []
            if args.skip_sync
            else asyncio.run(syncs(server, args.latency, (count, slow_count), args.blob_bytes, args.jobs))
        )
    print(f'\nRestores of a {steps}-step run ({image_mib} MiB of images), continued three times:\n')
    print('| network | store | restore | time | downloaded | S3 GETs |')
    print('|---|---|---:|---:|---:|---:|')
    for row in results:
        print(
            f'| {row.network} | {row.setup} | {row.number} | {row.seconds * 1000:.0f} ms '
            f'| {row.downloaded / MiB:.1f} MiB | {row.gets} |'
        )
    plain = {(row.network, row.number): row.seconds for row in results if row.setup == 'S3MediaStore'}
    for row in results:
        if row.setup != 'S3MediaStore':
            ratio = plain[(row.network, row.number)] / row.seconds
            print(f'{row.network}: cached restore {row.number}: {ratio:.1f}x the speed of plain restore {row.number}')
    if sync_rows:
        print(
            f'\nmediastash sync, disk -> S3, {args.blob_bytes}-byte blobs, --jobs {args.jobs} (with process start):\n'
        )
        print('| network | blobs | time | blobs/s |')
        print('|---|---:|---:|---:|')
        for network, blobs, seconds in sync_rows:
            print(f'| {network} | {blobs:,} | {seconds:.1f} s | {blobs / seconds:,.0f} |')


if __name__ == '__main__':
    main()
