"""The collector against a writer in another process: no snapshot the writer saves ever loses a blob.

Process A (spawned) keeps saving snapshots through ``OffloadingStepStore`` into a
``FileStepStore``, deleting its older runs as it goes. Each snapshot references
two blobs that are old and that no snapshot referenced yet (a ``put`` of stored
bytes, which must touch them) and two it referenced before (its known-blob
cache, re-checked with ``touch_many`` once older than a small ``trust_seconds``).
This process feeds A: before each collection it releases a few more old blobs
to A, then collects while A picks them up, at A's own pace. Besides, every pass
hands over once between listing and deleting: A saves a snapshot with two
released blobs the listing saw as old and unreferenced, and the collector must
spare both. Afterwards every snapshot A kept must restore.

Disk, SQLite, MongoDB and PostgreSQL run with the default intervals: released blobs are
backdated two hours behind the store's back and the grace period is 90
minutes. S3's ``LastModified`` cannot be backdated, so its variant runs in
real time: A's store touches blobs older than one second on a repeated put
(the module constant, patched in A only), A keeps no known-blob cache (the
walker's re-check touches with the fixed one-hour interval), blobs are
written at the start and released once older than the four-second grace. On
S3 A writes only at the hand-over: a touch between the collector's HEAD of a
blob and its ``DeleteObjects`` is the window ``docs/s3.md`` documents, which
no S3 store can close.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore, RunRecord

from mediastash import DiskMediaStore, KnownBlobCache, SqliteMediaStore
from mediastash.gc import FileStepStoreRoot, GcReport, Root, collect_garbage, referenced_uris
from mediastash.integrations import OffloadingStepStore
from mediastash.stores.protocols import CollectableMediaStore
from mediastash.uri import media_uri_for
from mediastash.walker import WalkOptions

THRESHOLD = 64
RELEASE = 24
"""Old blobs released to A before each collection."""
ORPHANS = 40
"""Old blobs nobody ever references: the collector must delete these."""
TRUST_SECONDS = 0.2
KEPT_RUNS = 3
"""A deletes its runs older than this many (their blobs stay referenced only through its cache)."""
AGE = 2 * 3600.0
GRACE = timedelta(minutes=90)
REAL_TIME_TOUCH_AFTER = 1.0
REAL_TIME_GRACE = timedelta(seconds=4)
REAL_TIME_POOL = 10 * RELEASE
COLLECTING_SECONDS = 2.0
MIN_PASSES = 3
WRITER_PAUSE = 0.015
"""Seconds A waits between snapshots (it takes two new blobs each time)."""
SPAWN = multiprocessing.get_context('spawn')


def pool_payload(index: int) -> bytes:
    return random.Random(index).randbytes(100 + index % 50)


def stored_form(index: int) -> bytes:
    """The blob A's snapshot stores for pool item ``index``: the image's bytes, or the text's UTF-8."""
    return pool_payload(index) if index % 2 else pool_payload(index).hex().encode()


def orphan_payload(index: int) -> bytes:
    return random.Random(-1 - index).randbytes(90)


# -- stores as both processes open them ------------------------------------------------------------


def open_media(spec: dict[str, Any]) -> Any:
    kind = spec['kind']
    if kind == 'disk':
        return DiskMediaStore(spec['path'])
    if kind == 'sqlite':
        return SqliteMediaStore(database=spec['path'])
    if kind == 'postgres':
        from mediastash.stores.postgres import PostgresMediaStore

        return PostgresMediaStore(dsn=spec['dsn'], table=spec['table'])
    if kind == 'mongo':
        from mediastash import MongoMediaStore

        return MongoMediaStore(db_url=spec['uri'], database=spec['database'], collection=spec['collection'])
    from mediastash import S3MediaStore

    return S3MediaStore(bucket=spec['bucket'], **spec['client'])


async def backdate(media: Any, spec: dict[str, Any], uris: list[str], when: float) -> None:
    """Make blobs look last written at ``when``, behind the store's back."""
    digests = [uri.removeprefix('media+sha256://') for uri in uris]
    if spec['kind'] == 'disk':
        for uri in uris:
            os.utime(media.path_for(uri), (when, when))
    elif spec['kind'] == 'sqlite':
        with sqlite3.connect(spec['path'], timeout=30) as connection:
            connection.executemany('UPDATE media SET created_at = ? WHERE sha256 = ?', [(when, d) for d in digests])
    elif spec['kind'] == 'mongo':
        from tests.mongo_support import RawCollections, raw_client

        client = raw_client(spec['uri'])
        try:
            raw = RawCollections(client, spec['database'], spec['collection'])
            stamp = datetime.fromtimestamp(when, UTC)
            await raw.manifests.update_many({'_id': {'$in': digests}}, {'$set': {'written_at': stamp}})
        finally:
            await client.close()
    elif spec['kind'] == 'postgres':
        from tests.postgres_support import raw_connection

        connection = await raw_connection(spec['dsn'])
        try:
            await connection.execute(
                f'UPDATE "{spec["table"]}" SET written_at = $1 WHERE sha256 = ANY($2::text[])', when, digests
            )
        finally:
            await connection.close()
    else:
        raise AssertionError('S3 runs in real time')


# -- process A --------------------------------------------------------------------------------------


def step_message(picks: list[int], step: int) -> ModelMessage:
    images = [BinaryContent(data=pool_payload(pick), media_type='image/png') for pick in picks if pick % 2]
    texts = [UserPromptPart(content=pool_payload(pick).hex()) for pick in picks if not pick % 2]
    return ModelRequest(parts=[UserPromptPart(content=[f'step {step}', *images]), *texts])


def writer_main(spec: dict[str, Any], steps_dir: str, seed: int, shared: tuple[Any, ...]) -> None:
    """Process A: save snapshots re-referencing old blobs until told to stop."""
    if spec['kind'] == 's3':
        from mediastash.stores.s3 import _store as s3_store

        s3_store.TOUCH_AFTER_SECONDS = REAL_TIME_TOUCH_AFTER  # type: ignore[misc]
    asyncio.run(_write(spec, Path(steps_dir), seed, *shared))


async def _write(
    spec: dict[str, Any],
    steps_dir: Path,
    seed: int,
    ready: Any,
    released: Any,
    stop: Any,
    saved: Any,
    listed: Any,
    handed_over: Any,
) -> None:
    media = open_media(spec)
    only_at_hand_over = spec['kind'] == 's3'
    try:
        cache: KnownBlobCache | bool = not only_at_hand_over and KnownBlobCache(trust_seconds=TRUST_SECONDS)
        steps = OffloadingStepStore(
            FileStepStore(steps_dir, media_store=None),
            media_store=media,
            options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=cache),
        )
        rng = random.Random(seed)
        taken = 0
        used: list[int] = []
        run = 0
        ready.set()
        while not stop.is_set():
            run_id = f'run-{run}'
            await steps.register_run(RunRecord(run_id=run_id))
            history: list[ModelMessage] = []
            for step in range(5):
                while only_at_hand_over and not listed.wait(0.05):
                    if stop.is_set():
                        return
                hand_over = listed.is_set()  # the collector has listed and waits: touch what it saw as old
                latest = released.value
                taken = max(taken, latest - RELEASE)  # from the blobs released last (the collector is on them)
                new = list(range(taken, min(taken + 2, latest)))  # old blobs: a put of stored bytes
                taken += len(new)
                again = rng.sample(used, min(2, len(used)))  # the known-blob cache, re-checked when stale
                used.extend(new)
                history = [*history, step_message(new + again, step)]
                await steps.save_snapshot(ContinuableSnapshot(run_id=run_id, step_index=step, messages=history))
                with saved.get_lock():
                    saved.value += 1
                if hand_over:
                    listed.clear()
                    handed_over.set()
                else:
                    await asyncio.sleep(WRITER_PAUSE)
            shutil.rmtree(steps_dir / f'run-{run - KEPT_RUNS}', ignore_errors=True)
            run += 1
    finally:
        await media.aclose()


# -- process B (this one) ------------------------------------------------------------------------------


@pytest.fixture(params=['disk', 'sqlite', 'mongo', 'postgres', 's3'])
async def spec(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    kind = request.param
    if kind == 'disk':
        yield {'kind': 'disk', 'path': str(tmp_path / 'media')}
    elif kind == 'sqlite':
        yield {'kind': 'sqlite', 'path': str(tmp_path / 'media.db')}
    elif kind == 'postgres':
        from tests.postgres_support import RawTables, raw_connection, unique_table

        dsn: str = request.getfixturevalue('postgres_dsn')
        table = unique_table('gc')
        yield {'kind': 'postgres', 'dsn': dsn, 'table': table}
        connection = await raw_connection(dsn)
        await RawTables(connection, table).drop()
        await connection.close()
    elif kind == 'mongo':
        from tests.mongo_support import TEST_DATABASE, RawCollections, raw_client, unique_name

        uri: str = request.getfixturevalue('mongo_uri')
        collection = unique_name('gc')
        yield {'kind': 'mongo', 'uri': uri, 'database': TEST_DATABASE, 'collection': collection}
        client = raw_client(uri)
        await RawCollections(client, TEST_DATABASE, collection).drop()
        await client.close()
    else:
        from aiobotocore.session import get_session

        from tests.s3_servers import S3Endpoint, unique_bucket

        endpoint: S3Endpoint = request.getfixturevalue('moto_server')
        bucket = unique_bucket('gc')
        async with get_session().create_client('s3', **endpoint.client_options()) as client:
            await client.create_bucket(Bucket=bucket)
        yield {'kind': 's3', 'bucket': bucket, 'client': endpoint.client_options()}


class Feeder:
    """Hands A old blobs: backdated ones as they are released, or (S3) ones written early that aged for real.

    In real time the pool items not released yet are a root of their own (a URI set), so the
    collector keeps them until A may use them.
    """

    def __init__(self, media: Any, spec: dict[str, Any]) -> None:
        self.media = media
        self.spec = spec
        self.real_time = spec['kind'] == 's3'
        self.grace = REAL_TIME_GRACE if self.real_time else GRACE
        self.released = 0

    def unreleased(self) -> frozenset[str]:
        if not self.real_time:
            return frozenset()
        return frozenset(media_uri_for(stored_form(index)) for index in range(self.released, REAL_TIME_POOL))

    async def prepare(self, orphans: list[bytes]) -> list[str]:
        """Store the orphans (and in real time the whole pool), old by the time collection starts."""
        uris = [await self.media.put(data) for data in orphans]
        if self.real_time:
            started = time.time()
            for index in range(REAL_TIME_POOL):
                await self.media.put(stored_form(index))
            await asyncio.sleep(max(0.0, started + self.grace.total_seconds() + 1.5 - time.time()))
        else:
            await backdate(self.media, self.spec, uris, time.time() - AGE)
        return uris

    async def release(self) -> bool:
        """Make the next ``RELEASE`` pool items old and stored for A; False when the pool is used up."""
        start = self.released
        if self.real_time:
            if start + RELEASE > REAL_TIME_POOL:
                return False
        else:
            uris = [await self.media.put(stored_form(index)) for index in range(start, start + RELEASE)]
            await backdate(self.media, self.spec, uris, time.time() - AGE)
        self.released = start + RELEASE
        return True


async def test_a_concurrent_writer_never_loses_a_blob(spec: dict[str, Any], tmp_path: Path) -> None:
    media = open_media(spec)
    try:
        assert isinstance(media, CollectableMediaStore)
        feeder = Feeder(media, spec)
        ready, released, stop, saved = SPAWN.Event(), SPAWN.Value('i', 0), SPAWN.Event(), SPAWN.Value('i', 0)
        listed, handed_over = SPAWN.Event(), SPAWN.Event()
        steps_dir = tmp_path / 'steps'
        steps_dir.mkdir()
        writer = SPAWN.Process(
            target=writer_main,
            args=(spec, str(steps_dir), 7, (ready, released, stop, saved, listed, handed_over)),
            daemon=True,
        )
        writer.start()

        def hand_over(phase: str, done: int, total: int | None) -> None:
            """Between listing and deleting, let A save a snapshot referencing two blobs just listed as old."""
            if phase == 'list' and total is not None:
                listed.set()
                assert handed_over.wait(30), 'the writer did not take its turn'
                handed_over.clear()

        reports: list[GcReport] = []
        try:
            orphans = await feeder.prepare([orphan_payload(index) for index in range(ORPHANS)])
            assert await asyncio.to_thread(ready.wait, 60), 'the writer process did not start'
            deadline = time.monotonic() + COLLECTING_SECONDS
            # At least MIN_PASSES passes however slow the machine is (each hands a turn to the writer), then
            # as many more as fit in COLLECTING_SECONDS.
            while (
                writer.is_alive()
                and (len(reports) < MIN_PASSES or time.monotonic() < deadline)
                and await feeder.release()
            ):
                released.value = feeder.released
                report = await collect_garbage(
                    media,
                    [FileStepStoreRoot(steps_dir), feeder.unreleased()],
                    grace=feeder.grace,
                    dry_run=False,
                    # Deletions stream in batches while the listing goes on; one batch larger than every
                    # deletable blob of a pass defers them all to the end of the listing, the window handed over.
                    batch_size=10_000,
                    progress=hand_over,
                    uris_file=tmp_path / f'pass-{len(reports)}.txt',
                )
                reports.append(report)
        finally:
            stop.set()
            await asyncio.to_thread(writer.join, 60)
        assert writer.exitcode == 0
        assert saved.value >= MIN_PASSES and len(reports) >= MIN_PASSES, (saved.value, len(reports))

        # Every snapshot A kept restores, blob for blob (a dangling reference raises).
        files = sorted(steps_dir.glob('*/snapshots/*.json'))
        assert files
        referenced = referenced_uris([json.loads(file.read_text()) for file in files])
        assert await media.exists_many(referenced) == referenced
        reader = OffloadingStepStore(
            FileStepStore(steps_dir, media_store=None),
            media_store=media,
            options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=False),
        )
        restored = 0
        for run in sorted({file.parent.parent.name for file in files}):
            restored += len(await reader.list_snapshots(run_id=run, include_interrupted=True))
        assert restored == len(files)

        deleted = set().union(*(report.iter_uris('deleted') for report in reports))
        assert set(orphans) <= deleted  # the collector did collect
        spared = sum(report.deletable - report.deleted for report in reports)
        assert spared >= 2 * len(reports)  # at least the two blobs of each hand-over
    finally:
        await media.aclose()


# -- a cache entry learned from a read is re-confirmed (and its blob touched) before use -----------------


async def test_a_writer_resuming_from_a_read_snapshot_keeps_its_blobs(tmp_path: Path) -> None:
    """A resumed run saves its next step (pruning the one it resumed from) while a collection is marking."""
    media = DiskMediaStore(tmp_path / 'media')
    image = pool_payload(1)
    first = [ModelRequest(parts=[UserPromptPart(content=['x', BinaryContent(data=image, media_type='image/png')])])]
    earlier = OffloadingStepStore(
        FileStepStore(tmp_path / 'steps', media_store=None, max_snapshots_per_run=1),
        media_store=media,
        options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=False),
    )
    await earlier.register_run(RunRecord(run_id='r'))
    await earlier.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=first))
    (uri,) = referenced_uris(_lean_of(tmp_path / 'steps'))
    await backdate(media, {'kind': 'disk'}, [uri], time.time() - AGE)  # saved long ago

    resumed_store = OffloadingStepStore(
        FileStepStore(tmp_path / 'steps', media_store=None, max_snapshots_per_run=1),
        media_store=media,
        options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=KnownBlobCache(trust_seconds=600)),
    )
    resumed = await resumed_store.latest_snapshot(run_id='r')  # the cache learns the image from this read
    assert resumed is not None

    class ListedBeforeTheSave(Root):
        """The collector listed the run's files (step 1 only); step 1 was pruned before it was read."""

        async def reference_batches(self) -> AsyncIterator[set[str]]:
            more = [*resumed.messages, ModelRequest(parts=[UserPromptPart(content='next')])]
            await resumed_store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=2, messages=more))
            yield set()

        def describe(self) -> str:
            return 'interleaved'

    await collect_garbage(media, [ListedBeforeTheSave()], grace=GRACE, dry_run=False)
    assert await media.exists(uri)


def _lean_of(steps_dir: Path) -> Any:
    return [json.loads(file.read_text()) for file in steps_dir.glob('*/snapshots/*.json')]
