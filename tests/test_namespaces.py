"""Tenant namespaces beyond the conformance suite: the name rule, erase in batches, wrappers, views' lifecycle."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mediastash import (
    BaseMediaStore,
    DiskMediaStore,
    EraseReport,
    InvalidArgumentError,
    InvalidNamespaceError,
    InvalidStoreConfiguration,
    KeyStrategy,
    MemoryMediaStore,
    NamespaceUnsupportedError,
    SqliteMediaStore,
    StoreClosedError,
    StoreOperationError,
    UnsafeKeyError,
    default_key_strategy,
    media_uri_for,
    parse_media_uri,
    sharded_key_strategy,
)
from mediastash.cli import main
from mediastash.context import MediaContextLike
from mediastash.gc import collect_garbage
from mediastash.open_store import open_cached_store, open_store
from mediastash.stores import _namespaces
from mediastash.stores._namespaces import check_namespace_name, namespace_segment
from mediastash.stores._range import DigestRange
from mediastash.stores.disk import NAMESPACES_FOLDER
from mediastash.testing import CountingMediaStore
from mediastash.testing.store import BAD_NAMESPACES


@pytest.mark.parametrize('name', ['a', 'A', '0', 'tenant-42', 'Tenant_42.v2', '.hidden', 'a..b', '-x', 'x' * 64])
def test_valid_names_are_accepted(name: str) -> None:
    assert check_namespace_name(name) == name


@pytest.mark.parametrize('name', BAD_NAMESPACES)
def test_bad_names_are_refused_naming_the_parameter_never_the_value(name: object) -> None:
    with pytest.raises(InvalidNamespaceError) as raised:
        check_namespace_name(name, parameter='--namespace')
    error = raised.value
    assert isinstance(error, InvalidArgumentError) and isinstance(error, ValueError)
    assert error.name == '--namespace'
    assert str(error).startswith('--namespace must be a namespace name')
    assert 'zq' not in str(error)


async def test_a_view_names_its_namespace_in_repr_and_errors() -> None:
    view = MemoryMediaStore().namespace('tenant-a')
    assert repr(view) == "MemoryMediaStore (namespace 'tenant-a')"
    await view.aclose()
    with pytest.raises(StoreClosedError, match="namespace 'tenant-a'"):
        await view.put(b'closed')


class _DescribedStore(MemoryMediaStore):
    def _describe(self) -> str:
        return f'<{super()._describe()}>'


def test_a_view_is_named_once_when_a_subclass_describes_itself_through_its_parent() -> None:
    assert repr(_DescribedStore().namespace('tenant-a')) == "<_DescribedStore (namespace 'tenant-a')>()"


async def test_erase_works_through_batches_larger_than_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_namespaces, 'ERASE_BATCH', 7)
    store = MemoryMediaStore()
    view = store.namespace('big')
    sizes = [index + 1 for index in range(50)]
    for size in sizes:
        await view.put(bytes([size]) * size)
    kept = await store.put(b'x')
    progress: list[tuple[int, int]] = []
    report = await view.erase(progress=lambda count, size: progress.append((count, size)))
    assert report == EraseReport('big', 50, sum(sizes))
    assert len(progress) == 8 and progress[-1] == (50, sum(sizes))  # ceil(50 / 7) batches
    assert [count for count, _ in progress] == sorted(count for count, _ in progress)
    assert [uri async for uri in view.iter_uris()] == []
    assert await store.get(kept) == b'x'


class _UndeletableStore(MemoryMediaStore):
    """Lists blobs it never deletes: an erase must stop with an error instead of looping for ever."""

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        return False

    def _open_namespace(self, name: str) -> _UndeletableStore:
        view = _UndeletableStore()
        view._blobs = self._namespaces.setdefault(name, MemoryMediaStore())._blobs
        return view


async def test_erase_stops_when_listed_blobs_cannot_be_deleted() -> None:
    view = _UndeletableStore().namespace('stuck')
    await view.put(b'cannot be deleted')
    with pytest.raises(StoreOperationError, match='could not be deleted'):
        await view.erase()


class _TaggedMemoryStore(MemoryMediaStore):
    """A subclass whose constructor takes an argument of its own (as a plug-in's may)."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag


async def test_a_view_of_a_store_subclass_is_of_that_subclass() -> None:
    store = _TaggedMemoryStore('mine')
    view = store.namespace('tenant-a')
    assert type(view) is _TaggedMemoryStore and view.namespace_name == 'tenant-a'
    uri = await view.put(b'in a subclass view')
    assert await store.namespace('tenant-a').get(uri) == b'in a subclass view'
    assert not await store.exists(uri)


async def test_erase_refuses_the_store_itself_and_changes_nothing() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'the store itself')
    with pytest.raises(NamespaceUnsupportedError, match='not a namespace view'):
        await store.erase()
    assert await store.get(uri) == b'the store itself'


async def test_a_wrapper_view_wraps_the_inner_view_and_forwards_the_name() -> None:
    store = MemoryMediaStore()
    counting = CountingMediaStore(store)
    assert counting.supports_namespaces and counting.namespace_name is None
    view = counting.namespace('tenant-a')
    assert type(view) is CountingMediaStore
    assert view.namespace_name == 'tenant-a'
    assert view.storage_key == store.namespace('tenant-a').storage_key != counting.storage_key
    uri = await view.put(b'counted in the view')
    assert view.calls['put'] == 1 and counting.calls['put'] == 0
    assert not await store.exists(uri)
    assert await store.namespace('tenant-a').get(uri) == b'counted in the view'
    report = await view.erase()
    assert (report.count, report.bytes) == (1, len(b'counted in the view'))
    with pytest.raises(NamespaceUnsupportedError):
        view.namespace('tenant-b')


async def test_a_wrapper_view_closes_with_its_wrapper_but_not_the_other_way() -> None:
    counting = CountingMediaStore(MemoryMediaStore())
    view = counting.namespace('tenant-a')
    await view.aclose()
    await counting.put(b'the wrapper is still open')
    other = counting.namespace('tenant-b')
    await counting.aclose()
    with pytest.raises(StoreClosedError):
        await other.put(b'closed with its wrapper')


async def test_a_wrapper_over_a_store_without_namespaces_refuses() -> None:
    class Plain:
        async def put(self, data: bytes, *, context: object = None) -> str:
            raise AssertionError('not called')

    wrapper = CountingMediaStore(Plain())  # type: ignore[arg-type]
    assert wrapper.supports_namespaces is False
    with pytest.raises(NamespaceUnsupportedError):
        wrapper.namespace('tenant-a')
    with pytest.raises(InvalidNamespaceError):
        wrapper.namespace('zq/x')


# -- the layout of a namespace on disk and in SQLite ------------------------------------


def test_namespace_segments_are_one_to_one_and_fold_no_case() -> None:
    names = ['alice', 'Alice', 'ALICE', 'a.', 'a', 'a^_', 'con', 'Con', 'nul.x', 'com1', 'x' * 64, 'a.b-c_d']
    valid = [name for name in names if '^' not in name]
    segments = [namespace_segment(name) for name in valid]
    assert len({segment.lower() for segment in segments}) == len(valid), 'two names share a folder'
    assert namespace_segment('alice') == 'alice'
    assert namespace_segment('Alice') == '^alice'
    assert namespace_segment('a.') == 'a^_'
    assert namespace_segment('con') == '~con' and namespace_segment('nul.x') == '~nul.x'
    assert all(segment == segment.lower() and not segment.endswith('.') for segment in segments)
    with pytest.raises(InvalidNamespaceError):
        namespace_segment('a^_')


def _files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob('*') if path.is_file())


@pytest.mark.parametrize('strategy', [default_key_strategy, sharded_key_strategy])
async def test_disk_namespaces_live_in_their_own_folder_the_store_never_enters(
    tmp_path: Path, strategy: KeyStrategy
) -> None:
    store = DiskMediaStore(tmp_path / 'media', key_strategy=strategy)
    root_uri = await store.put(b'the store itself')
    before = _files(store.directory)
    unknown = store.namespace('never-written')
    assert not await unknown.exists(root_uri) and [uri async for uri in unknown.iter_uris()] == []
    assert [info async for info in unknown.iter_blobs_in_range(DigestRange.shard(0, 2))] == []
    assert await unknown.erase() == EraseReport('never-written', 0, 0)
    assert not (store.directory / NAMESPACES_FOLDER).exists(), 'reading a namespace creates nothing'

    views = {name: store.namespace(name) for name in ('tenant-a', 'Tenant-A', 'con')}
    uris = {name: await view.put(f'blob of {name}'.encode()) for name, view in views.items()}
    assert len({view.directory for view in views.values()}) == 3, 'names differing in case get separate folders'
    for name, view in views.items():
        assert view.directory.parent == store.directory / NAMESPACES_FOLDER
        assert view.path_for(uris[name]).is_relative_to(view.directory)
    assert _files(store.directory / NAMESPACES_FOLDER) != []
    assert [path for path in _files(store.directory) if not path.startswith(NAMESPACES_FOLDER)] == before

    # Old crash leftovers in a namespace's folder and a temporary file are the namespace's, not the store's.
    leftover = views['tenant-a'].directory / '.mediastash-tmp-0123'
    leftover.write_bytes(b'half written')
    os.utime(leftover, (time.time() - 7200, time.time() - 7200))
    assert await store.sweep_temp_files() == 0 and leftover.exists()
    assert [uri async for uri in store.iter_uris()] == [root_uri]
    in_halves = [info.uri for index in (0, 1) async for info in store.iter_blobs_in_range(DigestRange.shard(index, 2))]
    assert in_halves == [root_uri]
    assert (await store.verify()).checked == 1
    await asyncio.sleep(0.05)
    report = await collect_garbage(store, [frozenset()], grace=0, dry_run=False, include_unknown_age=True)
    assert report.deleted == 1
    for name, view in views.items():
        assert await view.get(uris[name]) == f'blob of {name}'.encode(), 'the store GC reached a namespace'
    assert await views['tenant-a'].sweep_temp_files() == 1 and not leftover.exists()


async def test_a_disk_key_strategy_cannot_write_into_the_namespaces_folder(tmp_path: Path) -> None:
    def sneaky(uri: str, context: object) -> str:
        return f'{NAMESPACES_FOLDER}/tenant-a/{parse_media_uri(uri)}.bin'

    store = DiskMediaStore(tmp_path, key_strategy=sneaky)
    with pytest.raises(UnsafeKeyError, match='folder of namespaces'):
        await store.put(b'aimed at a tenant')
    assert not (tmp_path / NAMESPACES_FOLDER).exists()


async def test_disk_views_of_two_instances_share_storage_and_deletions(tmp_path: Path) -> None:
    first, second = DiskMediaStore(tmp_path), DiskMediaStore(tmp_path)
    uri = await first.namespace('tenant-a').put(b'shared')
    assert await second.namespace('tenant-a').get(uri) == b'shared'
    assert first.namespace('tenant-a').storage_key == second.namespace('tenant-a').storage_key
    generation = first.namespace('tenant-a').deletion_generation
    assert await second.namespace('tenant-a').delete(uri)
    assert first.namespace('tenant-a').deletion_generation > generation


async def test_sqlite_namespaces_are_tables_of_their_own_beside_the_harness_table(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    store = SqliteMediaStore(database=database)
    root_uri = await store.put(b'the store itself')
    unknown = store.namespace('never-written')
    await unknown.require_storage()
    assert [uri async for uri in unknown.iter_uris()] == []
    uris = {name: await store.namespace(name).put(f'blob of {name}'.encode()) for name in ('alice', 'Alice')}
    with sqlite3.connect(database) as connection:
        tables = sorted(row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        assert tables == ['media', 'media@^alice', 'media@alice']
        assert [row[0] for row in connection.execute('SELECT sha256 FROM media')] == [parse_media_uri(root_uri)]
        columns = [row[1] for row in connection.execute('PRAGMA table_info("media@alice")')]
        assert columns == ['sha256', 'media_type', 'bytes', 'size_bytes', 'metadata', 'created_at']
    for name, uri in uris.items():
        assert await store.namespace(name).get(uri) == f'blob of {name}'.encode()
    assert not await store.namespace('alice').exists(uris['Alice'])
    await asyncio.sleep(0.05)
    report = await collect_garbage(store, [frozenset()], grace=0, dry_run=False)
    assert report.deleted == 1
    assert await store.namespace('alice').get(uris['alice']) == b'blob of alice'
    await store.aclose()


async def test_sqlite_views_share_the_store_connection_and_thread(tmp_path: Path) -> None:
    store = SqliteMediaStore(database=tmp_path / 'media.db')
    view = store.namespace('tenant-a')
    await asyncio.gather(*(view.put(bytes([index])) for index in range(20)), store.put(b'root'))
    assert view._executor is store._executor and view._connect() is store._connect()
    other = store.namespace('tenant-b')
    await view.aclose()
    assert await store.get(media_uri_for(b'root')) == b'root', 'closing a view leaves the connection open'
    await other.put(b'still open')
    await store.aclose()
    with pytest.raises(StoreClosedError):
        await other.put(b'closed with its store')
    with pytest.raises(StoreClosedError):
        store.namespace('tenant-c')


# -- random interleavings: every view lists exactly its own blobs ------------------------

_SPACES = [None, 'tenant-a', 'Tenant-A', 'tenant-b']
_operations = st.lists(
    st.tuples(st.sampled_from(['put', 'delete']), st.integers(0, len(_SPACES) - 1), st.integers(0, 5)),
    max_size=30,
)


def _embedded_stores(folder: Path) -> list[Any]:
    return [
        MemoryMediaStore(),
        DiskMediaStore(folder / 'disk'),
        DiskMediaStore(folder / 'sharded', key_strategy=sharded_key_strategy),
        SqliteMediaStore(database=folder / 'media.db'),
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=_operations)
def test_random_interleavings_leave_each_view_exactly_its_blobs(
    tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[str, int, int]]
) -> None:
    async def run() -> None:
        for store in _embedded_stores(tmp_path_factory.mktemp('interleaved')):
            views = [store if name is None else store.namespace(name) for name in _SPACES]
            model: list[set[str]] = [set() for _ in _SPACES]
            for operation, space, payload in operations:
                data = f'payload {payload}'.encode()
                if operation == 'put':
                    model[space].add(await views[space].put(data))
                else:
                    uri = media_uri_for(data)
                    assert await views[space].delete(uri) is (uri in model[space])
                    model[space].discard(uri)
            for view, expected in zip(views, model, strict=True):
                assert {uri async for uri in view.iter_uris()} == expected
                assert {info.uri async for info in view.iter_blobs()} == expected
            await store.aclose()

    asyncio.run(run())


# -- open_store(url, namespace=...) and the namespace= URL parameter ---------------------


class _NoNamespacesStore(MemoryMediaStore):
    """A memory store whose backend declares no namespaces."""

    _open_namespace = BaseMediaStore._open_namespace


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    from mediastash.stores import registry

    monkeypatch.setattr(registry, '_registered', dict(registry._registered))
    return registry


async def test_open_store_opens_a_namespace_by_keyword_or_url_parameter(tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path}/media.db'
    async with open_store(url) as store:
        root_uri = await store.put(b'the store itself')
    async with open_store(url, namespace='tenant-a') as by_keyword:
        assert by_keyword.namespace_name == 'tenant-a'
        uri = await by_keyword.put(b'a tenant blob')
        assert not await by_keyword.exists(root_uri)
    async with open_store(f'{url}?namespace=tenant-a') as by_url:
        assert by_url.namespace_name == 'tenant-a' and await by_url.get(uri) == b'a tenant blob'
    async with open_store(f'{url}?namespace=tenant-a', namespace='tenant-a', create=False) as both:
        assert await both.get(uri) == b'a tenant blob'
    async with open_store(url, create=False) as store:
        assert [found async for found in store.iter_uris()] == [root_uri]
    disk = open_store(f'file://{tmp_path}/disk?fsync=true&namespace=tenant-b')
    assert disk.namespace_name == 'tenant-b' and disk._fsync is True
    await disk.aclose()
    assert disk.closed and disk._namespace_parent is not None and disk._namespace_parent.closed, (
        'the view open_store made owns its store'
    )


@pytest.mark.parametrize(
    ('url', 'keyword', 'error', 'words'),
    [
        ('memory://?namespace=zq-a&namespace=zq-b', None, InvalidStoreConfiguration, 'twice'),
        ('memory://?namespace=zq-a', 'zq-b', InvalidStoreConfiguration, 'different namespaces'),
        ('memory://?namespace=zq/..', None, InvalidNamespaceError, 'the namespace= URL parameter'),
        ('memory://', 'zq/..', InvalidNamespaceError, 'namespace must be'),
        ('nons://', 'zq-a', NamespaceUnsupportedError, 'has no namespaces'),
    ],
)
def test_open_store_refuses_a_bad_namespace_without_echo(
    registry: Any, url: str, keyword: str | None, error: type[Exception], words: str
) -> None:
    registry.register_store('nons', _NoNamespacesStore)
    with pytest.raises(error) as raised:
        open_store(url, namespace=keyword)
    assert words in str(raised.value) and 'zq' not in str(raised.value)


def test_a_path_keeps_a_question_mark_as_part_of_its_name(tmp_path: Path) -> None:
    folder = tmp_path / 'odd?namespace=x'
    store = open_store(str(folder))
    assert store.namespace_name is None and store.directory == folder  # type: ignore[attr-defined]


async def test_open_cached_store_namespaces_the_store_and_its_cache(tmp_path: Path) -> None:
    cached = open_cached_store(f'sqlite:///{tmp_path}/media.db', cache=str(tmp_path / 'cache'), namespace='tenant-a')
    uri = await cached.put(b'cached per tenant')
    assert cached.namespace_name == 'tenant-a'
    assert cached.cache.namespace_name == 'tenant-a'  # type: ignore[attr-defined]
    assert await DiskMediaStore(tmp_path / 'cache').namespace('tenant-a').get(uri) == b'cached per tenant'
    assert not await DiskMediaStore(tmp_path / 'cache').exists(uri)
    await cached.aclose()


# -- the command line: --namespace and erase ---------------------------------------------


def _cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main([*args, '--json']) == 0
    return json.loads(capsys.readouterr().out)


def _ls(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    return [entry['uri'] for entry in _cli_json(capsys, 'ls', *args)]


def _seed(url: str) -> dict[str, list[str]]:
    async def seed() -> dict[str, list[str]]:
        async with open_store(url) as store:
            first, second = store.namespace('tenant-a'), store.namespace('tenant-b')
            return {
                'root': [await store.put(b'root blob')],
                'tenant-a': [await first.put(bytes(size)) for size in (10, 200, 3000)],
                'tenant-b': [await second.put(b'b blob')],
            }

    return asyncio.run(seed())


@pytest.mark.parametrize('kind', ['disk', 'sqlite'])
def test_cli_erase_counts_then_deletes_one_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    url = str(tmp_path / 'media') if kind == 'disk' else f'sqlite:///{tmp_path}/media.db'
    uris = _seed(url)
    dry = _cli_json(capsys, 'erase', '--store', url, '--namespace', 'tenant-a')
    assert (dry['dry_run'], dry['namespace'], dry['blobs'], dry['bytes']) == (True, 'tenant-a', 3, 3210)
    assert sorted(_ls(capsys, url, '--namespace', 'tenant-a')) == sorted(uris['tenant-a'])
    done = _cli_json(capsys, 'erase', '--store', url, '--namespace', 'tenant-a', '--yes')
    assert (done['dry_run'], done['blobs'], done['bytes']) == (False, 3, 3210)
    again = _cli_json(capsys, 'erase', '--store', url, '--namespace', 'tenant-a', '--yes')
    assert (again['blobs'], again['bytes']) == (0, 0)
    assert _ls(capsys, url, '--namespace', 'tenant-a') == []
    assert _ls(capsys, url, '--namespace', 'tenant-b') == uris['tenant-b']
    assert _ls(capsys, url) == uris['root']
    assert main(['erase', '--store', url, '--namespace', 'tenant-b']) == 0
    assert 'Dry run' in capsys.readouterr().out
    assert _ls(capsys, url, '--namespace', 'tenant-b') == uris['tenant-b']


def test_cli_namespace_reaches_stats_verify_gc_and_restore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f'sqlite:///{tmp_path}/media.db'
    uris = _seed(url)
    stats = _cli_json(capsys, 'stats', url, '--namespace', 'tenant-a')
    assert (stats['blobs'], stats['bytes']) == (3, 3210)
    assert _cli_json(capsys, 'verify', url, '--namespace', 'tenant-b')['checked'] == 1
    history = tmp_path / 'history.json'
    history.write_text(json.dumps([{'kind': 'binary', 'data': base64.b64encode(bytes(5000)).decode()}]))
    assert main(['externalize', str(history), str(tmp_path / 'lean.json'), '--store', url, '--namespace', 'tenant-b',
                 '--threshold', '1KiB']) == 0  # fmt: skip
    assert main(['restore', str(tmp_path / 'lean.json'), str(tmp_path / 'back.json'), '--store', url]) == 1
    assert main(['restore', str(tmp_path / 'lean.json'), str(tmp_path / 'back.json'), '--store', url,
                 '--namespace', 'tenant-b']) == 0  # fmt: skip
    assert json.loads((tmp_path / 'back.json').read_text()) == json.loads(history.read_text())
    capsys.readouterr()
    time.sleep(0.05)
    gc = _cli_json(capsys, 'gc', '--store', url, '--namespace', 'tenant-a', '--roots', str(tmp_path / 'lean.json'),
                   '--grace', '0', '--delete')  # fmt: skip
    assert gc['deleted'] == 3
    assert _ls(capsys, url) == uris['root']
    assert len(_ls(capsys, url, '--namespace', 'tenant-b')) == 2


def test_cli_refuses_a_bad_namespace_without_repeating_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(['ls', str(tmp_path), '--namespace', 'zq/../x']) == 2
    error = capsys.readouterr().err
    assert 'argument --namespace: expected a namespace name' in error and 'zq' not in error
    assert main(['erase', '--store', str(tmp_path)]) == 2  # --namespace is required
    assert 'the following arguments are required: --namespace' in capsys.readouterr().err
    assert main(['ls', f'file://{tmp_path}?namespace=zq-a', '--namespace', 'zq-b']) == 1
    error = capsys.readouterr().err
    assert 'different namespaces' in error and 'zq' not in error


# -- erase leaves nothing of the namespace behind ----------------------------------------


async def test_erase_removes_an_emptied_disk_namespace_folder(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path, key_strategy=sharded_key_strategy)
    kept = await store.namespace('tenant-b').put(b'another tenant')
    view = store.namespace('tenant-a')
    await view.put(b'erased with its folder')
    await view.erase()
    assert not view.directory.exists(), 'the emptied namespace folder (and its shard folders) is removed'
    assert await store.namespace('tenant-b').get(kept) == b'another tenant'
    assert await store.namespace('tenant-b').erase() == EraseReport('tenant-b', 1, len(b'another tenant'))
    assert not (tmp_path / NAMESPACES_FOLDER).exists(), 'the last namespace takes the namespaces folder with it'
    uri = await view.put(b'written again after the erase')
    assert await view.get(uri) == b'written again after the erase'


async def test_erase_drops_an_emptied_sqlite_namespace_table_and_other_views_recover(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    store = SqliteMediaStore(database=database)
    await store.put(b'the store itself')
    view, other_view = store.namespace('tenant-a'), store.namespace('tenant-a')
    await view.put(b'erased with its table')
    assert await other_view.exists(media_uri_for(b'erased with its table'))
    await view.erase()
    with sqlite3.connect(database) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ['media']
    assert not await other_view.exists(media_uri_for(b'erased with its table'))
    uri = await other_view.put(b'written by a view opened before the erase')
    assert await view.get(uri) == b'written by a view opened before the erase'
    await store.aclose()
