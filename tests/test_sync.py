"""``mediastash sync`` and ``mediastash diff`` run as a user runs them, between real stores."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mediastash import CachedMediaStore, DiskMediaStore, MediaContext, SqliteMediaStore
from mediastash._units import format_bytes
from mediastash.errors import EmptySourceError
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.mongo import MongoMediaStore
from mediastash.stores.protocols import BlobInfo
from mediastash.stores.s3 import S3MediaStore
from mediastash.sync import BATCH, compare_stores, diff_stores, list_blobs, sync_stores
from mediastash.testing.store import blob
from mediastash.uri import media_uri_for
from tests.mongo_support import TEST_DATABASE, mongo_uri, unique_name
from tests.s3_servers import S3Endpoint, moto_server, unique_bucket
from tests.terminal_support import stderr_on_a_terminal
from tests.test_cli_ops import mongo_store_url, s3_client_call, s3_env, s3_url

__all__ = ['mongo_uri', 'moto_server']

MiB = 1 << 20
SECRET = 'sync-SECRET-do-not-print'


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Run:
    full_env = {**os.environ, 'AWS_SECRET_ACCESS_KEY': SECRET, 'AWS_ACCESS_KEY_ID': 'sync-test', **(env or {})}
    done = subprocess.run(
        [sys.executable, '-m', 'mediastash', *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )
    assert 'Traceback' not in done.stderr, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return Run(done.returncode, done.stdout, done.stderr)


@dataclass
class Seeded:
    uris: dict[str, bytes] = field(default_factory=dict)
    media_types: dict[str, str | None] = field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)


async def seed(store: Any, count: int = 12) -> Seeded:
    seeded = Seeded()
    async with store:
        for number in range(count):
            data = blob(1000 + 37_000 * number, seed=number)
            media_type = 'image/png' if number % 2 else None
            metadata = {'n': str(number)} if number % 3 else {}
            uri = await store.put(data, context=MediaContext(media_type=media_type, metadata=metadata))
            seeded.uris[uri] = data
            seeded.media_types[uri] = media_type
            seeded.metadata[uri] = metadata
    return seeded


async def check_copied(store: Any, seeded: Seeded, *, media_types: bool = False) -> None:
    async with store:
        assert set((await list_blobs(store)).keys()) == set(seeded.uris)
        for uri, data in seeded.uris.items():
            assert await store.get(uri) == data
            assert dict(await store.get_metadata(uri)) == seeded.metadata[uri]
            if media_types:
                assert await store.media_type_of(uri) == seeded.media_types[uri]


def summary(result: Run) -> dict[str, Any]:
    assert result.code == 0, result.err
    return dict(result.json())


# -- between backends --------------------------------------------------------------------------


async def test_disk_to_s3(tmp_path: Path, moto_server: S3Endpoint) -> None:
    seeded = await seed(DiskMediaStore(tmp_path / 'src'))
    bucket = unique_bucket('sync')
    await s3_client_call(moto_server, 'create_bucket', Bucket=bucket)
    destination = s3_url(bucket, moto_server.url)
    env = s3_env(moto_server)

    before = run('diff', str(tmp_path / 'src'), destination, '--json', env=env)
    assert before.code == 1
    assert sorted(before.json()['only_in_source']) == sorted(seeded.uris)

    done = summary(run('sync', str(tmp_path / 'src'), destination, '--jobs', '3', '--verify', '--json', env=env))
    assert done['copied'] == len(seeded.uris) and done['verified'] == len(seeded.uris)
    assert done['copied_bytes'] == sum(len(data) for data in seeded.uris.values())
    assert done['failed'] == 0 and done['skipped'] == 0
    assert (
        done['destination'] == f"S3MediaStore(bucket='{bucket}', key_prefix='cli/', endpoint_url='{moto_server.url}')"
    )
    store = S3MediaStore(bucket=bucket, key_prefix='cli/', **moto_server.client_options())
    await check_copied(store, seeded)

    after = run('diff', str(tmp_path / 'src'), destination, env=env)
    assert after.code == 0 and after.out.strip() == ''
    again = summary(run('sync', str(tmp_path / 'src'), destination, '--json', env=env))
    assert (again['copied'], again['skipped']) == (0, len(seeded.uris))

    extra = await DiskMediaStore(tmp_path / 'src').put(b'added to the source later')
    listed = summary(run('sync', str(tmp_path / 'src'), destination, '--list-destination', '--json', env=env))
    assert (listed['copied'], listed['skipped']) == (1, len(seeded.uris))
    async with S3MediaStore(bucket=bucket, key_prefix='cli/', **moto_server.client_options()) as reopened:
        assert await reopened.get(extra) == b'added to the source later'


async def test_sqlite_to_mongo_keeps_media_types(tmp_path: Path, mongo_uri: str) -> None:
    database = tmp_path / 'src.db'
    seeded = await seed(SqliteMediaStore(database=str(database)))
    collection = unique_name('sync')
    destination = mongo_store_url(mongo_uri, TEST_DATABASE, collection)
    done = summary(run('sync', f'sqlite:///{database}', destination, '--verify', '--json'))
    assert done['copied'] == len(seeded.uris)
    store = MongoMediaStore(db_url=mongo_uri, database=TEST_DATABASE, collection=collection)
    await check_copied(store, seeded, media_types=True)
    assert run('diff', f'sqlite:///{database}', destination).code == 0


async def test_s3_to_disk(tmp_path: Path, moto_server: S3Endpoint) -> None:
    bucket = unique_bucket('sync')
    await s3_client_call(moto_server, 'create_bucket', Bucket=bucket)
    seeded = await seed(S3MediaStore(bucket=bucket, key_prefix='cli/', **moto_server.client_options()))
    env = s3_env(moto_server)
    done = summary(run('sync', s3_url(bucket, moto_server.url), str(tmp_path / 'dst'), '--json', env=env))
    assert done['copied'] == len(seeded.uris)
    await check_copied(DiskMediaStore(tmp_path / 'dst'), seeded)
    assert run('diff', s3_url(bucket, moto_server.url), str(tmp_path / 'dst'), env=env).code == 0


# -- into a cached store ---------------------------------------------------------------------------


async def test_sync_into_a_cached_store_repairs_the_backing_store(tmp_path: Path, moto_server: S3Endpoint) -> None:
    """A blob deleted from the remote behind the local cache's back is copied again: the remote is the truth."""
    seeded = await seed(DiskMediaStore(tmp_path / 'src'), count=5)
    bucket = unique_bucket('sync-cached')
    await s3_client_call(moto_server, 'create_bucket', Bucket=bucket)

    def remote() -> S3MediaStore:
        return S3MediaStore(bucket=bucket, key_prefix='cli/', **moto_server.client_options())

    def cached(**options: Any) -> CachedMediaStore:
        return CachedMediaStore(remote(), cache=DiskMediaStore(tmp_path / 'cache'), **options)

    clock = FakeClock()
    long_lived = cached(trust_seconds=60, clock=clock)
    async with DiskMediaStore(tmp_path / 'src') as source:
        first = await sync_stores(source, long_lived)
        assert first.copied == len(seeded.uris)
        for uri in seeded.uris:
            await long_lived.get(uri)  # a restore: every blob now has a local copy
        gone = sorted(seeded.uris)[:2]
        for uri in gone:
            await s3_client_call(moto_server, 'delete_object', Bucket=bucket, Key=f'cli/{digest_of(uri)}.bin')

        async with cached() as fresh:  # a new process, a CLI run
            assert all([await fresh.cache.exists(uri) for uri in gone]), 'the local copies are still there'
            repaired = await sync_stores(source, fresh)
        assert (repaired.copied, repaired.skipped, repaired.failed) == (2, 3, 0)
        async with remote() as check:
            for uri in gone:
                assert await check.get(uri) == seeded.uris[uri]

        await s3_client_call(moto_server, 'delete_object', Bucket=bucket, Key=f'cli/{digest_of(gone[0])}.bin')
        clock.now += 61  # the long-lived store's confirmations are older than its trust age
        again = await sync_stores(source, long_lived)
        assert (again.copied, again.skipped) == (1, 4)
        await long_lived.aclose()
    async with remote() as check:
        assert await check.get(gone[0]) == seeded.uris[gone[0]]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def digest_of(uri: str) -> str:
    return uri.removeprefix('media+sha256://')


# -- diff, failures, --delete --------------------------------------------------------------------


async def test_diff_lists_each_side(tmp_path: Path) -> None:
    left, right = DiskMediaStore(tmp_path / 'left'), DiskMediaStore(tmp_path / 'right')
    shared = await left.put(b'on both sides')
    await right.put(b'on both sides')
    only_left = await left.put(b'left only')
    only_right = await right.put(b'right only')
    result = run('diff', str(tmp_path / 'left'), str(tmp_path / 'right'))
    assert result.code == 1
    assert result.out.split('\n')[:2] == [f'< {only_left}', f'> {only_right}']
    assert shared not in result.out
    missing = run('diff', str(tmp_path / 'left'), str(tmp_path / 'nowhere'))
    assert missing.code == 1 and 'nowhere' in missing.err
    assert not (tmp_path / 'nowhere').exists()


async def test_a_corrupt_source_blob_fails_the_sync_and_the_rest_is_copied(tmp_path: Path) -> None:
    source = DiskMediaStore(tmp_path / 'src')
    seeded = await seed(source, count=6)
    bad = next(iter(seeded.uris))
    source.path_for(bad).write_bytes(b'not what the name promises')
    result = run('sync', str(tmp_path / 'src'), str(tmp_path / 'dst'), '--json')
    assert result.code == 1
    report = result.json()
    assert report['copied'] == 5 and report['failed'] == 1
    assert report['failures'][0]['uri'] == bad
    destination = DiskMediaStore(tmp_path / 'dst')
    assert not await destination.exists(bad), 'nothing of a blob that failed verification is kept'
    table = run('sync', str(tmp_path / 'src'), str(tmp_path / 'dst'))
    assert table.code == 1 and f'failed: {bad}' in table.out


async def test_delete_removes_only_old_extra_blobs(tmp_path: Path) -> None:
    source = DiskMediaStore(tmp_path / 'src')
    kept = await source.put(b'in the source')
    destination = DiskMediaStore(tmp_path / 'dst')
    old_extra = await destination.put(b'old, not in the source')
    young_extra = await destination.put(b'young, not in the source')
    two_days_ago = time.time() - 2 * 86400
    os.utime(destination.path_for(old_extra), (two_days_ago, two_days_ago))
    done = summary(run('sync', str(tmp_path / 'src'), str(tmp_path / 'dst'), '--delete', '--json'))
    assert (done['copied'], done['deleted'], done['kept_young']) == (1, 1, 1)
    assert await destination.exists(kept)
    assert not await destination.exists(old_extra)
    assert await destination.exists(young_extra), 'written within the grace period: kept'
    assert (
        summary(run('sync', str(tmp_path / 'src'), str(tmp_path / 'dst'), '--delete', '--grace', '0', '--json'))[
            'deleted'
        ]
        == 1
    )
    assert run('diff', str(tmp_path / 'src'), str(tmp_path / 'dst')).code == 0


async def test_delete_with_an_empty_source_refuses_unless_allowed(tmp_path: Path) -> None:
    """An empty source is far more often a wrong path than an intent: --delete would empty the destination."""
    (tmp_path / 'empty').mkdir()
    destination = DiskMediaStore(tmp_path / 'dst')
    held = [await destination.put(blob(5000, seed=number)) for number in range(3)]
    two_days_ago = time.time() - 2 * 86400
    for uri in held:
        os.utime(destination.path_for(uri), (two_days_ago, two_days_ago))

    refused = run('sync', str(tmp_path / 'empty'), str(tmp_path / 'dst'), '--delete', '--json')
    assert refused.code == 1
    assert 'holds no blob' in refused.err and '--allow-empty-source' in refused.err
    assert refused.out == '', 'no summary: nothing was done'
    assert all([await destination.exists(uri) for uri in held]), 'nothing deleted'

    plain = summary(run('sync', str(tmp_path / 'empty'), str(tmp_path / 'dst'), '--json'))
    assert (plain['copied'], plain['deleted']) == (0, 0), 'without --delete an empty source is harmless'

    with pytest.raises(EmptySourceError, match='allow_empty_source'):
        async with DiskMediaStore(tmp_path / 'empty') as source:
            await sync_stores(source, destination, delete_written_before=time.time())
    assert all([await destination.exists(uri) for uri in held])

    allowed = summary(
        run('sync', str(tmp_path / 'empty'), str(tmp_path / 'dst'), '--delete', '--allow-empty-source', '--json')
    )
    assert allowed['deleted'] == len(held)
    assert not any([await destination.exists(uri) for uri in held])


async def test_the_summary_names_both_stores_and_reports_bytes_and_throughput(tmp_path: Path) -> None:
    seeded = await seed(DiskMediaStore(tmp_path / 'src'), count=6)
    total = sum(len(data) for data in seeded.uris.values())
    database = tmp_path / 'dst.db'
    text = run('sync', str(tmp_path / 'src'), f'sqlite:///{database}')
    assert text.code == 0, text.err
    line = next(line for line in text.out.splitlines() if line.startswith('synced '))
    assert f"DiskMediaStore('{tmp_path / 'src'}')" in line and str(database) in line
    assert line.index('DiskMediaStore') < line.index('SqliteMediaStore'), 'source first, then destination'
    assert f'6 copied ({format_bytes(total)})' in line
    assert re.search(r'[0-9.]+ (B|KiB|MiB|GiB)/s', line), line

    again = summary(run('sync', str(tmp_path / 'src'), f'sqlite:///{database}', '--json'))
    assert again['source'] == f"DiskMediaStore('{tmp_path / 'src'}')"
    assert 'SqliteMediaStore(' in again['destination'] and str(database) in again['destination']
    assert (again['copied'], again['copied_bytes'], again['skipped_bytes']) == (0, 0, total)
    assert again['seconds'] > 0 and again['bytes_per_second'] == 0

    (tmp_path / 'more').mkdir()
    fresh = summary(run('sync', str(tmp_path / 'src'), str(tmp_path / 'more'), '--json'))
    assert fresh['copied_bytes'] == total
    assert fresh['bytes_per_second'] == pytest.approx(total / fresh['seconds'], rel=1e-6)


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='pseudo-terminals as on Linux')
async def test_progress_of_the_copy_on_a_terminal(tmp_path: Path) -> None:
    """The source is listed as the copy goes (memory does not grow with it), so the bar counts without a total."""
    await seed(DiskMediaStore(tmp_path / 'src'), count=7)
    shown = stderr_on_a_terminal('sync', str(tmp_path / 'src'), str(tmp_path / 'dst'))
    assert 'syncing' in shown and '7/?' in shown, 'the bar counts blobs as they are handled'
    quiet = stderr_on_a_terminal('sync', str(tmp_path / 'src'), str(tmp_path / 'dst2'), '-q')
    assert 'syncing' not in quiet


# -- interrupted and large --------------------------------------------------------------------------


@pytest.fixture
async def many(tmp_path: Path) -> dict[str, bytes]:
    source = DiskMediaStore(tmp_path / 'src')
    blobs = {}
    for number in range(1500):
        data = blob(20_000, seed=10_000 + number)
        blobs[await source.put(data)] = data
    return blobs


async def test_interrupted_sync_resumes_without_duplicates(tmp_path: Path, many: dict[str, bytes]) -> None:
    destination = tmp_path / 'dst.db'
    _kill_midway(['sync', str(tmp_path / 'src'), f'sqlite:///{destination}', '--jobs', '1', '-q'], destination)
    copied_before = _rows(destination, recover=True)
    assert 0 < copied_before < len(many), 'the kill landed midway'

    rerun = summary(run('sync', str(tmp_path / 'src'), f'sqlite:///{destination}', '--verify', '--json'))
    assert rerun['skipped'] == copied_before
    assert rerun['copied'] == len(many) - copied_before, 'only what was missing is copied again'
    assert rerun['verified'] == rerun['copied']
    assert run('diff', str(tmp_path / 'src'), f'sqlite:///{destination}').code == 0
    verified = run('verify', f'sqlite:///{destination}', '--json')
    assert verified.code == 0, verified.out
    async with SqliteMediaStore(database=str(destination)) as copied:
        for uri, data in many.items():
            assert await copied.get(uri) == data


def _kill_midway(args: list[str], destination: Path) -> None:
    """Start the CLI and SIGKILL it once 100 blobs have arrived."""
    process = subprocess.Popen([sys.executable, '-m', 'mediastash', *args], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if destination.exists() and _rows(destination) >= 100:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, 'the sync finished before it could be interrupted'


def _rows(database: Path, *, recover: bool = False) -> int:
    """Rows in the store's table. ``recover``: open read-write, so SQLite first replays the WAL a killed
    writer left (a read-only connection cannot rebuild its index and may miss the last commits)."""
    import sqlite3

    location = f'file:{database}' if recover else f'file:{database}?mode=ro'
    try:
        with sqlite3.connect(location, uri=True, timeout=5) as connection:
            return int(connection.execute('SELECT count(*) FROM media').fetchone()[0])
    except sqlite3.OperationalError:
        return 0


async def test_a_256_mib_blob_syncs_in_bounded_memory(tmp_path: Path) -> None:
    size = 256 * MiB
    piece = blob(MiB, seed=256)

    async def chunks() -> AsyncIterator[bytes]:
        for number in range(size // MiB):
            yield number.to_bytes(8, 'big') + piece[8:]

    async with DiskMediaStore(tmp_path / 'src') as source:
        uri = await source.put_stream(chunks())
    peak = _peak_rss(['sync', str(tmp_path / 'src'), str(tmp_path / 'dst'), '--verify', '-q'])
    assert peak < 128 * MiB, f'peak RSS {peak / MiB:.0f} MiB for a {size // MiB} MiB blob'
    copied = DiskMediaStore(tmp_path / 'dst')
    assert copied.path_for(uri).stat().st_size == size


def _peak_rss(args: list[str]) -> int:
    """Run the CLI in a fresh parent process; the child's peak resident set size in bytes (Linux: KiB * 1024)."""
    measure = textwrap.dedent(
        """
        import resource, subprocess, sys
        done = subprocess.run([sys.executable, '-m', 'mediastash', *sys.argv[1:]], capture_output=True, text=True)
        print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        sys.stderr.write(done.stderr)
        """
    )
    done = subprocess.run([sys.executable, '-c', measure, *args], capture_output=True, text=True, timeout=600)
    code, peak_kib = (int(value) for value in done.stdout.split())
    assert code == 0, done.stderr
    print(f'peak RSS of the sync: {peak_kib / 1024:.0f} MiB')
    return peak_kib * 1024


# -- diff at any size: the listings are compared on disk, the differences streamed ---------------------


class _ListedUri(str):
    """A URI string the listing below hands out, counted while alive (so a test sees what a caller keeps)."""

    alive = 0
    peak = 0

    def __new__(cls, value: str) -> _ListedUri:
        made = super().__new__(cls, value)
        cls.alive += 1
        cls.peak = max(cls.peak, cls.alive)
        return made

    def __del__(self) -> None:
        type(self).alive -= 1


class _CountedListing(MemoryMediaStore):
    """A memory store whose listing hands out counted URI strings."""

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        async for info in super()._list_blobs():
            yield BlobInfo(_ListedUri(info.uri), info.size, info.written_at)


async def test_diff_keeps_no_listing_in_memory() -> None:
    """Regression: ``diff_stores`` held both listings in dicts (every listed URI alive at once); now at most a
    batch or two of each listing (the one being added, the next being gathered) is alive while the listings go
    into on-disk digest sets, whatever the stores' size."""
    listed = 5 * BATCH
    source, destination = _CountedListing(), _CountedListing()
    for index in range(listed):
        await source.put(blob(index))
        await destination.put(blob(index + 3))
    _ListedUri.alive = _ListedUri.peak = 0
    found = await diff_stores(source, destination)
    assert found.only_in_source == sorted(media_uri_for(blob(index)) for index in range(3))
    assert found.only_in_destination == sorted(media_uri_for(blob(listed + index)) for index in range(3))
    assert _ListedUri.peak <= 4 * BATCH + 2, f'{_ListedUri.peak} listed URIs alive at once (of {2 * listed})'
    assert _ListedUri.alive == 0


async def test_compare_stores_streams_the_differences_in_order_across_pages() -> None:
    """More differences than one page of a digest set's walk: every one comes once, in URI order."""
    source, destination = MemoryMediaStore(), MemoryMediaStore()
    count = 6 * 1000 + 500  # past the first 5,000-digest page of each walk
    for index in range(count):
        await (source if index % 7 else destination).put(blob(index))
    await source.put(blob(count))
    await destination.put(blob(count))
    async with compare_stores(source, destination) as comparison:
        only_source = [uri async for uri in comparison.only_in_source()]
        only_destination = [uri async for uri in comparison.only_in_destination()]
        assert [uri async for uri in comparison.only_in_source()] == only_source, 'a second walk gives the same'
    assert only_source == sorted(media_uri_for(blob(index)) for index in range(count) if index % 7)
    assert only_destination == sorted(media_uri_for(blob(index)) for index in range(0, count, 7))


async def test_diff_json_is_the_same_document_on_stdout_and_in_the_file(tmp_path: Path) -> None:
    left, right = SqliteMediaStore(database=tmp_path / 'left.db'), SqliteMediaStore(database=tmp_path / 'right.db')
    only_left = sorted([await left.put(blob(index)) for index in range(3)])
    await left.put(b'shared')
    await right.put(b'shared')
    await left.aclose()
    await right.aclose()
    urls = [f'sqlite:///{tmp_path / "left.db"}', f'sqlite:///{tmp_path / "right.db"}']
    result = run('diff', *urls, '--json', '--json-file', str(tmp_path / 'diff.json'))
    assert result.code == 1
    expected = {'only_in_source': only_left, 'only_in_destination': []}
    assert result.out == json.dumps(expected, indent=2) + '\n'
    assert (tmp_path / 'diff.json').read_text() == result.out
    same = run('diff', urls[1], urls[1], '--json')
    assert same.code == 0 and same.json() == {'only_in_source': [], 'only_in_destination': []}
