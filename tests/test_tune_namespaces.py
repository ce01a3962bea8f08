"""Where ``tune`` measures: one scratch namespace per run (``store.namespace``), erased afterwards, and the clean-up
rule for runs that were killed (``mediastash.tuning._namespaces``, ``docs/tuning.md``).

On every backend's real storage: a tune run leaves the storage exactly as it was (folders, tables, keys,
collections), never touches the store's own blobs or a user namespace (one named like a scratch namespace
included), and a killed run's namespace is erased by the next run on the same store.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from mediastash import (
    BaseMediaStore,
    DiskMediaStore,
    MediaContextLike,
    MemoryMediaStore,
    NamespaceCleanupError,
    NamespaceUnsupportedError,
    SqliteMediaStore,
    WrapperMediaStore,
    open_store,
)
from mediastash.tuning import STALE_AFTER, StoreNamespaces, journal_folder
from tests.s3_servers import S3Endpoint, unique_bucket
from tests.storage_snapshots import folder_state, sqlite_state

REPO = Path(__file__).resolve().parents[1]
LOOKALIKE = 'mediastash-tune-0123456789ab'
"""A user namespace named as a scratch namespace would be: no record names it, so no run may erase it."""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, 'PYTHONPATH': str(REPO / 'src'), 'COLUMNS': '200'}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False
    )


def tune(url: str, history: Path) -> subprocess.CompletedProcess[str]:
    arguments = ['tune', str(history), '--store', url, '--thresholds', '4KiB,64KiB']
    done = run('-m', 'mediastash', *arguments, cwd=history.parent)
    assert done.returncode == 0, done.stderr
    return done


KILLED_RUN = """
import asyncio, os, signal, sys
from mediastash.tuning import UrlNamespaces

async def main():
    async with UrlNamespaces(sys.argv[1]) as namespaces:
        async with namespaces.namespace('4096') as store:
            await store.put(os.urandom(300_000))
            await store.put(b'a small payload')
            print(namespaces.name, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def killed_run(url: str, cwd: Path) -> str:
    """A tune run killed (SIGKILL) while its namespace holds two blobs; its namespace's name."""
    done = run('-c', KILLED_RUN, url, cwd=cwd)
    assert done.returncode == -9, done.stderr
    name = done.stdout.strip()
    assert (journal_folder() / f'{name}.json').is_file(), 'the killed run left its record'
    return name


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A history of two pictures (8 KiB and 32 KiB): blobs at 4 KiB, none at 64 KiB."""
    from pydantic_ai.messages import BinaryContent, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

    folder = tmp_path / 'inputs'
    folder.mkdir()
    pictures = [BinaryContent(data=os.urandom(size), media_type='image/png') for size in (8 << 10, 32 << 10)]
    path = folder / 'history.json'
    path.write_bytes(ModelMessagesTypeAdapter.dump_json([ModelRequest(parts=[UserPromptPart(['two', *pictures])])]))
    return path


async def seed(url: str) -> list[tuple[str | None, str]]:
    """A blob of the store's own, one of a user namespace and one of a user namespace named like a scratch one."""
    placed: list[tuple[str | None, str]] = []
    async with open_store(url) as store:
        placed.append((None, await store.put(b"the store's own blob")))
        for name in ('tenant-a', LOOKALIKE):
            placed.append((name, await store.namespace(name).put(f'{name} blob'.encode() * 5000)))
    return placed


async def still_there(url: str, placed: list[tuple[str | None, str]]) -> None:
    async with open_store(url) as store:
        for name, uri in placed:
            view = store if name is None else store.namespace(name)
            assert [info.uri async for info in view.iter_blobs()] == [uri]
            await view.get(uri)


Snapshot = Callable[[], Awaitable[object]]


async def check_tune_leaves_nothing(url: str, snapshot: Snapshot, history: Path, *, kill: bool = False) -> None:
    """Seed the store, snapshot it, (kill a run,) tune; the snapshot is the same and every seeded blob stays."""
    placed = await seed(url)
    before = await snapshot()
    if kill:
        name = killed_run(url, history.parent)
        assert await snapshot() != before, 'the killed run left its namespace'
        async with open_store(url) as store:
            assert len([uri async for uri in store.namespace(name).iter_uris()]) == 2
    done = tune(url, history)
    if kill:
        assert 'erased 1 scratch namespace(s) left by interrupted tune runs' in done.stderr
    assert await snapshot() == before
    await still_there(url, placed)
    assert not journal_folder().exists(), 'no record is left (and no empty journal folder)'


# -- every backend, through the CLI --------------------------------------------------------------


@pytest.mark.parametrize('kill', [False, True], ids=['run', 'killed-run'])
async def test_disk(tmp_path: Path, history: Path, kill: bool) -> None:
    folder = tmp_path / 'media'

    async def snapshot() -> object:
        return folder_state(folder)

    await check_tune_leaves_nothing(str(folder), snapshot, history, kill=kill)


@pytest.mark.parametrize('kill', [False, True], ids=['run', 'killed-run'])
async def test_sqlite(tmp_path: Path, history: Path, kill: bool) -> None:
    database = tmp_path / 'db' / 'media.db'
    database.parent.mkdir()

    async def snapshot() -> object:
        return sqlite_state(database)

    await check_tune_leaves_nothing(f'sqlite:///{database}', snapshot, history, kill=kill)


async def test_s3(moto_server: S3Endpoint, history: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    monkeypatch.setenv('AWS_ACCESS_KEY_ID', moto_server.access_key_id)
    monkeypatch.setenv('AWS_SECRET_ACCESS_KEY', moto_server.secret_access_key)

    client = boto3.client('s3', **moto_server.client_options())
    bucket = unique_bucket('tune')
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key='notes/theirs.txt', Body=b'not a blob')

    async def snapshot() -> object:
        listed = client.list_objects_v2(Bucket=bucket).get('Contents', [])
        return sorted((item['Key'], item['ETag'], item['LastModified']) for item in listed)

    url = f's3://{bucket}/media?endpoint_url={moto_server.url}&region={moto_server.region_name}'
    await check_tune_leaves_nothing(url, snapshot, history)


@pytest.mark.parametrize('kill', [False, True], ids=['run', 'killed-run'])
async def test_mongodb(mongo_uri: str, history: Path, kill: bool) -> None:
    from tests.mongo_support import raw_client, unique_name
    from tests.storage_snapshots import mongo_state

    database = unique_name('tune')
    client = raw_client(mongo_uri)
    await client[database]['theirs'].insert_one({'_id': 'a document of theirs'})
    base, _, query = mongo_uri.partition('?')
    url = f'{base.rstrip("/")}/{database}' + (f'?{query}' if query else '')

    async def snapshot() -> object:
        return await mongo_state(client[database], '')

    try:
        await check_tune_leaves_nothing(url, snapshot, history, kill=kill)
    finally:
        await client.drop_database(database)
        await client.close()


@pytest.mark.parametrize('kill', [False, True], ids=['run', 'killed-run'])
async def test_postgresql(postgres_dsn: str, history: Path, kill: bool) -> None:
    import asyncpg

    from tests.postgres_support import unique_table

    table = unique_table('t')  # at most 20 characters: namespace tables start with it (namespace_table)
    url = f'{postgres_dsn}?table={table}'
    connection = await asyncpg.connect(postgres_dsn)

    async def snapshot() -> object:
        rows = await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1 ORDER BY 1", f'{table}%'
        )
        return [(row[0], await connection.fetchval(f'SELECT count(*) FROM "{row[0]}"')) for row in rows]

    try:
        await check_tune_leaves_nothing(url, snapshot, history, kill=kill)
    finally:
        for row in await connection.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1", f'{table}%'
        ):
            await connection.execute(f'DROP TABLE IF EXISTS "{row[0]}"')
        await connection.close()


# -- the clean-up rule ---------------------------------------------------------------------------


def write_record(name: str, store: Any, *, host: str | None = None, pid: int | None = None, age: float = 0) -> Path:
    """A run record as a run writes it (``_store_tag`` is the one way a store's records are told apart)."""
    from mediastash.tuning._namespaces import _store_tag

    folder = journal_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f'{name}.json'
    record = {
        'namespace': name,
        'store': _store_tag(store),
        'host': socket.gethostname() if host is None else host,
        'pid': os.getpid() if pid is None else pid,
        'written': time.time() - age,
    }
    path.write_text(json.dumps(record))
    return path


def gone_pid() -> int:
    """The id of a process that has ended."""
    done = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True)
    return int(done.stdout)


async def test_only_stale_records_of_this_store_are_erased(tmp_path: Path) -> None:
    async with DiskMediaStore(tmp_path / 'media') as store, DiskMediaStore(tmp_path / 'other') as other:
        cases = {
            'mediastash-tune-00000000000a': dict(pid=gone_pid()),  # same host, process gone: stale
            'mediastash-tune-00000000000b': dict(age=STALE_AFTER + 60),  # process runs, but too old: stale
            'mediastash-tune-00000000000c': dict(),  # this process runs, recent: a live run
            'mediastash-tune-00000000000d': dict(host='another-host', pid=gone_pid()),  # cannot tell: kept
        }
        for name, facts in cases.items():
            await store.namespace(name).put(name.encode())
            write_record(name, store, **facts)  # type: ignore[arg-type]
        await other.namespace('mediastash-tune-00000000000e').put(b'another store')
        write_record('mediastash-tune-00000000000e', other, pid=gone_pid())
        await store.namespace(LOOKALIKE).put(b'no record names it')
        (journal_folder() / 'mediastash-tune-00000000000f.json').write_text('not a record')
        await store.namespace('mediastash-tune-00000000000f').put(b'its record is unreadable')

        namespaces = StoreNamespaces(store)
        stale = ['mediastash-tune-00000000000a', 'mediastash-tune-00000000000b']
        assert sorted(await namespaces.clean_stale()) == stale
        assert await namespaces.clean_stale() == [], 'once per run'
        remaining = sorted(path.name for path in journal_folder().iterdir())
        assert remaining == [f'mediastash-tune-00000000000{letter}.json' for letter in 'cdef']
        for name in [*cases, LOOKALIKE, 'mediastash-tune-00000000000f']:
            listed = [uri async for uri in store.namespace(name).iter_uris()]
            assert len(listed) == (0 if name in stale else 1), name
        assert len([uri async for uri in other.namespace('mediastash-tune-00000000000e').iter_uris()]) == 1


async def test_a_run_erases_its_namespace_after_every_block_and_on_failure(tmp_path: Path) -> None:
    async with DiskMediaStore(tmp_path / 'media') as store:
        root = await store.put(b'kept')
        namespaces = StoreNamespaces(store)
        record = journal_folder() / f'{namespaces.name}.json'
        async with namespaces.namespace('4096') as scratch:
            assert record.is_file()
            assert not await scratch.exists(root), 'the scratch namespace sees none of the store'
            first = await scratch.put(b'first threshold')
        assert not record.exists()
        async with namespaces.namespace('65536') as scratch:
            assert not await scratch.exists(first), 'each threshold starts empty'
        for failure in (LookupError('the sweep failed'), KeyboardInterrupt()):

            async def failing(failure: BaseException = failure) -> None:
                async with namespaces.namespace('1') as scratch:
                    await scratch.put(b'written before the failure')
                    raise failure

            with pytest.raises(type(failure)):
                await failing()
            assert not record.exists()
            assert folder_state(tmp_path / 'media') == folder_state_with_only(tmp_path / 'media', root)
        assert namespaces.leftovers == [] and namespaces.warnings == []


def folder_state_with_only(folder: Path, uri: str) -> list[Any]:
    """What a disk store folder holds when ``uri`` is its one blob (no namespace folder)."""
    state = folder_state(folder)
    assert not any('.mediastash-namespaces' in str(entry[0]) for entry in state)
    return state


async def test_cleanup_failures_keep_the_record_and_never_hide_the_sweeps_error(tmp_path: Path) -> None:
    """The store goes away during the block (closed here; a server that stopped alike): the erase fails."""
    for index, failing in enumerate([True, False]):
        store = DiskMediaStore(tmp_path / f'media-{index}')
        namespaces = StoreNamespaces(store)
        record = journal_folder() / f'{namespaces.name}.json'

        async def store_goes_away(
            store: DiskMediaStore = store, namespaces: StoreNamespaces = namespaces, failing: bool = failing
        ) -> None:
            async with namespaces.namespace('4096') as scratch:
                await scratch.put(b'x')
                await store.aclose()
                if failing:
                    raise ValueError('the sweep failed')

        with pytest.raises(ValueError if failing else NamespaceCleanupError) as raised:
            await store_goes_away()
        if failing:
            assert str(raised.value) == 'the sweep failed'
            (leftover,) = namespaces.leftovers
        else:
            assert namespaces.leftovers == []
            leftover = str(raised.value)
        assert f'could not erase the scratch namespace {namespaces.name}' in leftover
        assert 'after threshold 4096 (StoreClosedError' in leftover
        assert 'the next tune run on this store erases it' in leftover
        assert record.is_file(), 'the record stays, so the next run erases the namespace'
        async with DiskMediaStore(tmp_path / f'media-{index}') as reopened:
            later = StoreNamespaces(reopened)
            assert await later.clean_stale() == []  # this process still runs: not stale yet
            record.write_text(record.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {gone_pid()}'))
            assert await StoreNamespaces(reopened).clean_stale() == [namespaces.name]
        assert folder_state(tmp_path / f'media-{index}') == []


async def test_an_unwritable_journal_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / 'state').write_text('a file where the state folder would be')
    monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'state'))
    async with DiskMediaStore(tmp_path / 'media') as store:
        namespaces = StoreNamespaces(store)
        async with namespaces.namespace('1') as scratch:
            await scratch.put(b'measured all the same')
        assert len(namespaces.warnings) == 1
        assert f'mediastash erase --namespace {namespaces.name}' in namespaces.warnings[0]
        assert not (tmp_path / 'media' / '.mediastash-namespaces').exists()


class Unnamespaced(BaseMediaStore):
    """A plug-in written without namespaces (no ``_open_namespace``)."""

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        raise NotImplementedError

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        raise NotImplementedError

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return False

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        raise NotImplementedError


@pytest.mark.parametrize('make', [Unnamespaced, lambda: WrapperMediaStore(Unnamespaced()), object])
def test_a_store_without_namespaces_is_refused_naming_what_it_needs(make: Callable[[], Any]) -> None:
    store = make()
    with pytest.raises(NamespaceUnsupportedError) as raised:
        StoreNamespaces(store)
    message = str(raised.value)
    assert 'store.namespace(name)' in message and '_open_namespace' in message
    assert type(store).__name__ in message


async def test_memory_runs_keep_no_journal(history: Path) -> None:
    tune('memory://', history)
    assert not journal_folder().exists()
    store = MemoryMediaStore()
    assert StoreNamespaces(store, record_runs=False).journal is None


async def test_sqlite_file_the_run_created_is_removed(tmp_path: Path, history: Path) -> None:
    before = sorted(os.listdir(tmp_path))
    tune(f'sqlite:///{tmp_path}/new/deeper/media.db', history)
    assert sorted(os.listdir(tmp_path)) == before
    async with SqliteMediaStore(database=tmp_path / 'kept.db') as store:
        await store.put(b'the store holds a blob')
    tune(f'sqlite:///{tmp_path}/kept.db', history)
    assert (tmp_path / 'kept.db').is_file()
