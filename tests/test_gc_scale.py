"""Garbage collection, verify and sync at any size: memory flat in the number of blobs, shards, URI files, runs
killed part-way."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mediastash import DiskMediaStore, MemoryMediaStore, SqliteMediaStore
from mediastash._digest_set import DigestSet
from mediastash.errors import InvalidArgumentError
from mediastash.gc import UriFileRoot, UriRoot, collect_garbage
from mediastash.keys import sharded_key_strategy
from mediastash.markers import MARKER_KEY, URI_KEY
from mediastash.stores import DigestRange
from mediastash.stores.protocols import BlobInfo
from mediastash.stores.verify import verify_store
from mediastash.sync import BATCH, sync_stores
from mediastash.uri import media_uri
from tests.memory_support import overwrite_blob, set_written_at

REPO = Path(__file__).resolve().parents[1]
HOUR = 3600.0
SHARDS = 4


def digest(index: int) -> str:
    return hashlib.sha256(blob(index)).hexdigest()


def blob(index: int) -> bytes:
    return index.to_bytes(8, 'big')


async def make_store(kind: str, folder: Path) -> Any:
    if kind == 'memory':
        return MemoryMediaStore()
    if kind == 'sqlite':
        return SqliteMediaStore(database=folder / 'media.db')
    if kind == 'disk-sharded':
        return DiskMediaStore(folder / 'media', key_strategy=sharded_key_strategy)
    return DiskMediaStore(folder / 'media')


async def backdate(store: Any, uris: list[str], when: float) -> None:
    """Make blobs old behind the store's back."""
    if isinstance(store, MemoryMediaStore):
        for uri in uris:
            set_written_at(store, uri, when)
    elif isinstance(store, DiskMediaStore):
        for uri in uris:
            os.utime(store.path_for(uri), (when, when))
    else:
        with sqlite3.connect(store.database) as connection:
            connection.execute('UPDATE media SET created_at = ?', (when,))


def fill_sqlite(database: Path, count: int, written_at: float) -> list[str]:
    """``count`` small blobs written straight into a SqliteMediaStore table (much faster than ``put``)."""
    rows = [(digest(index), None, blob(index), 8, None, written_at) for index in range(count)]
    with sqlite3.connect(database) as connection:
        connection.execute(
            'CREATE TABLE IF NOT EXISTS media (sha256 TEXT PRIMARY KEY, media_type TEXT, bytes BLOB NOT NULL, '
            'size_bytes INTEGER NOT NULL, metadata TEXT, created_at REAL)'
        )
        connection.executemany('INSERT INTO media VALUES (?, ?, ?, ?, ?, ?)', rows)
    return [media_uri(row[0]) for row in rows]


def write_snapshots(folder: Path, uris: list[str], per_file: int = 500) -> Path:
    """Lean JSON files referencing ``uris``, ``per_file`` markers each."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, start in enumerate(range(0, len(uris), per_file)):
        markers = [{MARKER_KEY: True, URI_KEY: uri, 'kind': 'binary'} for uri in uris[start : start + per_file]]
        (folder / f'snapshot-{number:05d}.json').write_text(json.dumps({'parts': markers}))
    return folder


def stored_digests(database: Path) -> set[str]:
    with sqlite3.connect(database) as connection:
        return {row[0] for row in connection.execute('SELECT sha256 FROM media')}


# -- digest ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize('count', [1, 2, 3, 7, 16, 1000])
def test_shards_cover_the_digest_space_exactly_once(count: int) -> None:
    shards = [DigestRange.shard(index, count) for index in range(count)]
    rng = random.Random(count)
    probes = [rng.randbytes(32).hex() for _ in range(2000)]
    probes += ['0' * 64, 'f' * 64] + [shard.start.ljust(64, '0') for shard in shards]
    for probe in probes:
        assert sum(probe in shard for shard in shards) == 1, probe
    for before, after in itertools.pairwise(shards):
        assert before.end == after.start  # contiguous, in order
    assert shards[0].start == '' and shards[-1].end is None


def test_a_range_names_the_prefixes_its_digests_can_start_with() -> None:
    assert list(DigestRange().prefixes(2)) == list(range(256))
    assert list(DigestRange('4', '8').prefixes(1)) == [4, 5, 6, 7]
    assert list(DigestRange('4', '81').prefixes(1)) == [4, 5, 6, 7, 8]
    quarter = DigestRange.shard(1, 4)
    assert list(quarter.prefixes(2)) == list(range(0x40, 0x80))
    assert not DigestRange('80', '80').prefixes(2)


@pytest.mark.parametrize(
    ('call', 'name'),
    [
        (lambda: DigestRange.shard(4, 4), 'shard index'),
        (lambda: DigestRange.shard(-1, 4), 'shard index'),
        (lambda: DigestRange.shard(0, 0), 'shard count'),
        (lambda: DigestRange.shard(True, 2), 'shard index'),
        (lambda: DigestRange('XYZ-secret'), 'start'),
        (lambda: DigestRange('', 'g' * 65), 'end'),
    ],
)
def test_bad_ranges_are_refused_without_their_value(call: Any, name: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        call()
    assert caught.value.name == name and 'secret' not in str(caught.value) and 'ggg' not in str(caught.value)


async def test_a_bad_shard_is_refused_before_anything_is_read() -> None:
    store = MemoryMediaStore()
    for shard in [(4, 4), (0, 0), (1,), 'secret/4', [0, 4]]:
        with pytest.raises(InvalidArgumentError) as caught:
            await collect_garbage(store, [set()], shard=shard)  # type: ignore[arg-type]
        assert 'shard' in str(caught.value) and 'secret' not in str(caught.value)


# -- the mark set ------------------------------------------------------------------------------------


async def test_the_mark_set_holds_each_digest_once_and_answers_lookups() -> None:
    marks = DigestSet(cache_bytes=64 * 1024)  # a small cache: most pages live in the temporary file
    try:
        for start in range(0, 60_000, 7_000):
            await marks.add(digest(index) for index in range(start, min(start + 7_000, 60_000)))
        await marks.add(digest(index) for index in range(0, 1_000))  # again: no duplicates
        assert await marks.count() == 60_000
        asked = [digest(index) for index in range(59_500, 60_500)]
        assert await marks.present(asked) == {digest(index) for index in range(59_500, 60_000)}
        assert await marks.present([]) == set()
    finally:
        await marks.aclose()


# -- shards ------------------------------------------------------------------------------------------


@pytest.mark.parametrize('kind', ['memory', 'sqlite', 'disk', 'disk-sharded'])
async def test_shards_together_delete_exactly_the_unreferenced_blobs(kind: str, tmp_path: Path) -> None:
    store = await make_store(kind, tmp_path)
    try:
        uris = [await store.put(blob(index)) for index in range(96)]
        await backdate(store, uris, time.time() - 2 * HOUR)
        young = await store.put(b'written just now')
        referenced, unreferenced = set(uris[::2]), set(uris[1::2])
        roots = [frozenset(referenced)]

        dry = await asyncio.gather(
            *(
                collect_garbage(store, roots, grace=HOUR, shard=(k, SHARDS), uris_file=tmp_path / f'dry-{k}')
                for k in range(SHARDS)
            )
        )
        assert sum(report.deletable for report in dry) == len(unreferenced)
        assert sum(report.references for report in dry) == len(referenced)  # each shard marks only its part
        assert sum(report.scanned for report in dry) == len(uris) + 1

        reports = await asyncio.gather(
            *(
                collect_garbage(
                    store, roots, grace=HOUR, dry_run=False, shard=(k, SHARDS), uris_file=tmp_path / f'real-{k}'
                )
                for k in range(SHARDS)
            )
        )
        deleted: list[str] = []
        for k, report in enumerate(reports):
            mine = list(report.iter_uris('deleted'))
            assert all(uri[-64:] in DigestRange.shard(k, SHARDS) for uri in mine)
            assert report.shard == (k, SHARDS) and report.deleted == len(mine)
            deleted.extend(mine)
        assert sorted(deleted) == sorted(unreferenced)
        assert {uri async for uri in store.iter_uris()} == referenced | {young}
    finally:
        await store.aclose()


async def test_a_shard_stops_before_deleting_when_a_root_cannot_be_read(tmp_path: Path) -> None:
    store = MemoryMediaStore()
    uris = [await store.put(blob(index)) for index in range(8)]
    await backdate(store, uris, time.time() - 2 * HOUR)
    (tmp_path / 'roots.txt').write_text('not a uri\n')
    with pytest.raises(Exception, match='not a media'):
        await collect_garbage(store, [UriFileRoot(tmp_path / 'roots.txt')], grace=0, dry_run=False, shard=(0, 2))
    assert {uri async for uri in store.iter_uris()} == set(uris)


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, 'PYTHONPATH': str(REPO / 'src'), 'COLUMNS': '200', **(env or {})}
    return subprocess.run(
        [sys.executable, '-m', 'mediastash', *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=300,
    )


def test_cli_shards_as_separate_jobs(tmp_path: Path) -> None:
    uris = fill_sqlite(tmp_path / 'media.db', 400, time.time() - 2 * HOUR)
    (tmp_path / 'keep.txt').write_text('\n'.join(uris[:200]) + '\n')
    store = 'sqlite:///media.db'
    jobs = [
        subprocess.Popen(
            [
                sys.executable,
                '-m',
                'mediastash',
                'gc',
                '--store',
                store,
                '--roots',
                'uris:keep.txt',
                '--grace',
                '1h',
                '--delete',
                '--json',
                '--shard',
                f'{k}/3',
                '--uris-file',
                f'shard-{k}.txt',
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, 'PYTHONPATH': str(REPO / 'src')},
        )
        for k in range(3)
    ]
    documents = []
    for job in jobs:
        out, err = job.communicate(timeout=300)
        assert job.returncode == 0, err
        documents.append(json.loads(out))
    assert [document['shard'] for document in documents] == [[0, 3], [1, 3], [2, 3]]
    assert sum(document['deleted'] for document in documents) == 200
    assert stored_digests(tmp_path / 'media.db') == {uri[-64:] for uri in uris[:200]}
    lines = [line for k in range(3) for line in (tmp_path / f'shard-{k}.txt').read_text().splitlines()]
    assert sorted(lines) == sorted(f'deleted {uri}' for uri in uris[200:])

    table = run_cli('gc', '--store', store, '--roots', 'uris:keep.txt', '--shard', '2/3', cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert 'shard 2/3' in table.stdout
    for bad in ('3/3', 'x', '1/0', '-1/2'):
        refused = run_cli('gc', '--store', store, '--roots', 'uris:keep.txt', '--shard', bad, cwd=tmp_path)
        assert refused.returncode != 0 and '--shard' in refused.stderr and 'Traceback' not in refused.stderr


# -- memory ------------------------------------------------------------------------------------------


async def _traced_peak(tmp_path: Path, count: int) -> int:
    """Peak Python heap of a real collection of ``count`` blobs (half referenced) on SQLite."""
    folder = tmp_path / f'n{count}'
    folder.mkdir()
    uris = fill_sqlite(folder / 'media.db', count, time.time() - 2 * HOUR)
    roots = write_snapshots(folder / 'snapshots', uris[: count // 2])
    store = SqliteMediaStore(database=folder / 'media.db')
    try:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        report = await collect_garbage(store, [roots], grace=HOUR, dry_run=False, uris_file=folder / 'uris.txt')
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    finally:
        await store.aclose()
    assert report.deleted == count - count // 2 and report.references == count // 2
    assert stored_digests(folder / 'media.db') == {uri[-64:] for uri in uris[: count // 2]}
    return peak


async def test_memory_does_not_grow_with_the_number_of_blobs(tmp_path: Path) -> None:
    """4x the blobs and references, the same peak heap once both sizes fill the collector's batches (5,000
    listed blobs): the old in-memory sets grew ~200 bytes a blob, over 6 MiB for 36,000 more blobs."""
    small = await _traced_peak(tmp_path, 12_000)
    large = await _traced_peak(tmp_path, 48_000)
    assert large - small < 1 << 20, (small, large)


# -- killed part-way ---------------------------------------------------------------------------------

KILLED_RUN = """
import asyncio, os, signal, sys
from mediastash import SqliteMediaStore
from mediastash.gc import collect_garbage

class KilledMidway(SqliteMediaStore):
    calls = 0

    async def _delete_unless_touched(self, digests, written_before):
        deleted = await super()._delete_unless_touched(digests, written_before)
        KilledMidway.calls += 1
        if KilledMidway.calls == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return deleted

async def main():
    store = KilledMidway(database=sys.argv[1])
    await collect_garbage(store, ['uris:keep.txt'], grace=3600, dry_run=False, batch_size=50, uris_file='uris.txt')

asyncio.run(main())
"""


def test_a_run_killed_part_way_deleted_only_garbage_and_a_rerun_finishes(tmp_path: Path) -> None:
    uris = fill_sqlite(tmp_path / 'media.db', 1000, time.time() - 2 * HOUR)
    keep = set(uris[::2])
    (tmp_path / 'keep.txt').write_text('\n'.join(sorted(keep)) + '\n')
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    env = {**os.environ, 'PYTHONPATH': str(REPO / 'src'), 'SQLITE_TMPDIR': str(scratch), 'TMPDIR': str(scratch)}
    killed = subprocess.run(
        [sys.executable, '-c', KILLED_RUN, 'media.db'], cwd=tmp_path, env=env, capture_output=True, timeout=300
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = {media_uri(found) for found in stored_digests(tmp_path / 'media.db')}
    assert keep <= left, 'a killed run deleted a referenced blob'
    assert len(left) == 1000 - 150  # three batches of 50 went before the kill
    logged = (tmp_path / 'uris.txt').read_text().splitlines()
    assert len(logged) == 100 and all(line.startswith('deleted ') for line in logged)  # batches logged as done
    assert list(scratch.iterdir()) == []  # the mark set's temporary file went with the process

    rerun = run_cli('gc', '--store', 'sqlite:///media.db', '--roots', 'uris:keep.txt', '--delete', '--json',
                    '--grace', '1h', cwd=tmp_path, env={'SQLITE_TMPDIR': str(scratch)})  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)['deleted'] == 500 - 150
    assert {media_uri(found) for found in stored_digests(tmp_path / 'media.db')} == keep


# -- the report's URI sets, deprecated ---------------------------------------------------------------


async def test_the_old_uri_sets_read_the_uris_file_with_a_warning(tmp_path: Path) -> None:
    store = MemoryMediaStore()
    old = await store.put(b'old')
    await backdate(store, [old], time.time() - 2 * HOUR)
    report = await collect_garbage(store, [set()], grace=HOUR, dry_run=False, uris_file=tmp_path / 'uris.txt')
    with pytest.warns(DeprecationWarning, match=r"iter_uris\('deleted'\)") as caught:
        assert report.deleted_uris == {old}
    assert caught[0].filename == __file__  # the warning names the caller's line, not the report's module
    with pytest.warns(DeprecationWarning, match='iter_uris'):
        assert report.deletable_uris == {old}
    assert 'deletable_uris' not in report.as_dict() and report.as_dict()['deleted'] == 1

    counts_only = await collect_garbage(store, [set()], grace=HOUR)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        with pytest.raises(AttributeError, match='uris_file='):
            _ = counts_only.deleted_uris
    with pytest.raises(ValueError, match='outcome'):
        list(report.iter_uris('gone'))  # type: ignore[arg-type]


# -- verify and sync: the same bounded memory, and shards ------------------------------------------


class ListingCounter(MemoryMediaStore):
    """A memory store that counts how far its listing has been read."""

    def __init__(self) -> None:
        super().__init__()
        self.listed = 0

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        async for info in super()._list_blobs():
            self.listed += 1
            yield info

    async def _list_digests(self) -> AsyncIterator[str]:
        async for found in super()._list_digests():
            self.listed += 1
            yield found


async def test_verify_checks_the_listing_as_it_comes() -> None:
    store = ListingCounter()
    for index in range(300):
        await store.put(blob(index))
    ahead: list[int] = []
    checked = 0

    def on_checked(_uri: str) -> None:
        nonlocal checked
        checked += 1
        ahead.append(store.listed - checked)

    report = await verify_store(store, max_concurrency=2, on_checked=on_checked)
    assert report.checked == report.ok == 300 and report.clean
    assert max(ahead) <= 4 * 2 + 2 + 1, 'the listing ran ahead of the checks (held in memory)'


async def test_verify_shards_together_check_every_blob_once() -> None:
    store = MemoryMediaStore()
    uris = [await store.put(blob(index)) for index in range(64)]
    overwrite_blob(store, uris[5], b'rotten')
    reports = [await verify_store(store, shard=(k, SHARDS)) for k in range(SHARDS)]
    assert sum(report.checked for report in reports) == 64
    assert [report.corrupt for report in reports if report.corrupt] == [[uris[5]]]
    holder = next(k for k in range(SHARDS) if uris[5][-64:] in DigestRange.shard(k, SHARDS))
    assert reports[holder].corrupt == [uris[5]]
    given = await verify_store(store, uris[:10], shard=(holder, SHARDS))
    assert given.checked == sum(uri[-64:] in DigestRange.shard(holder, SHARDS) for uri in uris[:10])


async def test_sync_copies_as_it_lists_and_shards_delete_exactly_the_extra_blobs(tmp_path: Path) -> None:
    source = ListingCounter()
    for index in range(2500):
        await source.put(blob(index))
    destination = SqliteMediaStore(database=tmp_path / 'copy.db')
    try:
        extra = [await destination.put(blob(10_000 + index)) for index in range(30)]
        await backdate(destination, extra, time.time() - 2 * HOUR)
        ahead: list[int] = []
        copied = 0

        def on_progress(count: int) -> None:
            nonlocal copied
            copied += count
            ahead.append(source.listed - copied)

        first = await sync_stores(source, destination, jobs=4, on_progress=on_progress)
        assert first.copied == 2500 and not first.failures
        assert max(ahead) <= BATCH, 'the source listing ran more than a batch ahead of the copy'

        for index in range(2500, 2520):
            await source.put(blob(index))
        cutoff = time.time() - HOUR
        reports = [
            await sync_stores(
                source, destination, delete_written_before=cutoff, shard=(k, SHARDS), list_destination=k % 2 == 0
            )
            for k in range(SHARDS)
        ]
        assert sum(report.copied for report in reports) == 20
        assert sum(report.deleted for report in reports) == 30
        assert sum(report.skipped for report in reports) == 2500
        assert {uri async for uri in destination.iter_uris()} == {uri async for uri in source.iter_uris()}
    finally:
        await destination.aclose()


async def test_a_sync_with_a_bad_shard_changes_nothing(tmp_path: Path) -> None:
    source, destination = MemoryMediaStore(), MemoryMediaStore()
    await source.put(b'one')
    with pytest.raises(InvalidArgumentError, match='shard'):
        await sync_stores(source, destination, shard=(2, 2))
    with pytest.raises(InvalidArgumentError, match='shard'):
        await verify_store(source, shard=(0, 0))
    assert [uri async for uri in destination.iter_uris()] == []


async def test_a_uris_file_that_cannot_be_written_stops_the_run_before_any_root_is_read(tmp_path: Path) -> None:
    store = MemoryMediaStore()
    old = await store.put(b'old')
    await backdate(store, [old], time.time() - 2 * HOUR)
    read: list[bool] = []

    class Watched(UriRoot):
        async def reference_batches(self) -> AsyncIterator[set[str]]:
            read.append(True)
            async for batch in super().reference_batches():
                yield batch

    with pytest.raises(FileNotFoundError):
        await collect_garbage(store, [Watched([])], grace=0, dry_run=False, uris_file=tmp_path / 'absent' / 'uris')
    assert read == [] and [uri async for uri in store.iter_uris()] == [old]
