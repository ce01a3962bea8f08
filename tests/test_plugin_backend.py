"""A third-party backend found only through its ``mediastash.stores`` entry point (issue 18).

``tests/plugin_backend/`` holds the package ``plugstore`` and its
``plugstore-0.1.dist-info`` (``plug = plugstore:PlugMediaStore``), as an
installed distribution would leave them; mediastash never names it. The
subprocesses get that folder on ``PYTHONPATH`` and nothing else: ``open_store``
and every ``mediastash`` command must work on ``plug://`` URLs. The
conformance suite runs on ``PlugMediaStore`` in this process.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mediastash import (
    CachedMediaStore,
    IntegrityError,
    InvalidStoreConfiguration,
    MediaContext,
    MemoryMediaStore,
    NamespaceUnsupportedError,
    WrapperMediaStore,
    externalize_media,
    media_uri_for,
    restore_media,
)
from mediastash.stores import DeletableMediaStore, capabilities_of, class_capabilities
from mediastash.stores.protocols import confirm_in, exists_in
from mediastash.testing import StoreTests
from mediastash.uri import parse_media_uri
from mediastash.urls import PublicUrlResolver
from mediastash.walker import WalkOptions

PLUGIN_PATH = Path(__file__).parent / 'plugin_backend'

sys.path.insert(0, str(PLUGIN_PATH))
try:
    from plugstore import PlugMediaStore
finally:
    sys.path.remove(str(PLUGIN_PATH))


def environment(*paths: Path) -> dict[str, str]:
    """This process's environment with ``paths``, this checkout's ``src`` and the tests on ``PYTHONPATH``."""
    env = dict(os.environ)
    root = Path(__file__).parent.parent
    env['PYTHONPATH'] = os.pathsep.join([*map(str, paths), str(root / 'src'), str(root)])
    env.pop('COVERAGE_PROCESS_START', None)
    return env


def run_python(code: str, *paths: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-c', code], env=environment(*paths), cwd=cwd, capture_output=True, text=True, timeout=120
    )


def cli(*args: str, cwd: Path, paths: tuple[Path, ...] = (PLUGIN_PATH,)) -> subprocess.CompletedProcess[str]:
    """``mediastash ARGS`` in a fresh interpreter with ``paths`` on ``PYTHONPATH``."""
    return subprocess.run(
        [sys.executable, '-m', 'mediastash', *args],
        env=environment(*paths),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def json_of(result: subprocess.CompletedProcess[str]) -> Any:
    assert 'Traceback' not in result.stderr, result.stderr
    return json.loads(result.stdout)


# -- the conformance suite -----------------------------------------------------------------


class TestPlugMediaStore(StoreTests):
    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> PlugMediaStore:
        return PlugMediaStore(folder / 'blobs', public_url=public_url)

    async def reopen_store(self, store: Any) -> PlugMediaStore:
        return PlugMediaStore(store.folder)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        path = store.folder / f'{parse_media_uri(uri)}.blob'
        return path.read_bytes() if path.is_file() else None

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        (store.folder / f'{parse_media_uri(uri)}.blob').write_bytes(data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        (store.folder / f'{parse_media_uri(uri)}.blob').unlink()

    async def raw_count(self, store: Any) -> int | None:
        return len(list(store.folder.glob('*.blob')))

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        if when is None:
            raise NotImplementedError('a file always has an mtime')
        os.utime(store.folder / f'{parse_media_uri(uri)}.blob', (when, when))


# -- open_store ------------------------------------------------------------------------------

OPEN = """
import asyncio, sys
from mediastash import MediaContext, StoreNotFoundError, open_store
from mediastash.stores import available_schemes, store_class

assert 'plugstore' not in sys.modules
assert 'plug' in available_schemes(), available_schemes()
assert 'plugstore' not in sys.modules, 'listing the schemes imported the plug-in'

async def main():
    async with open_store('plug://blobs') as store:
        print(type(store).__module__, type(store).__name__)
        print(await store.put(b'plugged in', context=MediaContext(media_type='text/plain')))
    try:
        open_store('plug://missing', create=False)
    except StoreNotFoundError as error:
        print('not found:', error.name)

asyncio.run(main())
"""


def test_open_store_finds_the_plugin_through_its_entry_point(tmp_path: Path) -> None:
    result = run_python(OPEN, PLUGIN_PATH, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    kind, uri, missing = result.stdout.splitlines()
    assert kind == 'plugstore PlugMediaStore'
    assert uri == media_uri_for(b'plugged in')
    assert (tmp_path / 'blobs' / f'{parse_media_uri(uri)}.blob').read_bytes() == b'plugged in'
    assert missing == 'not found: missing'
    assert not (tmp_path / 'missing').exists()


def test_without_the_distribution_the_scheme_is_unknown(tmp_path: Path) -> None:
    result = cli('ls', 'plug://blobs', cwd=tmp_path, paths=())
    assert result.returncode == 1
    assert "unknown store URL scheme 'plug'" in result.stderr
    assert 's3://<bucket>[/<key prefix>] (needs pip install "mediastash[s3]")' in result.stderr
    assert 'Traceback' not in result.stderr
    assert os.listdir(tmp_path) == []


def test_an_unknown_scheme_lists_the_installed_plugin(tmp_path: Path) -> None:
    result = cli('ls', 'nope://x', cwd=tmp_path)
    assert result.returncode == 1
    assert 'plug://... (plug-in)' in result.stderr
    assert 'memory://' in result.stderr


@pytest.mark.parametrize('command', ['ls', 'stats', 'verify', 'sync', 'diff', 'gc', 'tune'])
def test_every_commands_help_names_the_installed_plugin_scheme(tmp_path: Path, command: str) -> None:
    """The store forms in ``--help`` come from the registry: built-ins (PostgreSQL included) and plug-ins."""
    with_plugin = ' '.join(cli(command, '--help', cwd=tmp_path).stdout.split())
    without = ' '.join(cli(command, '--help', cwd=tmp_path, paths=()).stdout.split())
    assert 'plug://...' in with_plugin
    assert 'plug://' not in without
    assert 'postgresql://host/db' in without


def write_distribution(folder: Path, name: str, entry_points: str, module: str | None = None) -> Path:
    """A ``<name>-0.1.dist-info`` with ``entry_points`` (and, optionally, a module ``name.py``) in ``folder``."""
    info = folder / f'{name}-0.1.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n')
    (info / 'entry_points.txt').write_text(entry_points)
    if module is not None:
        (folder / f'{name}.py').write_text(module)
    return folder


def test_a_plugin_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    site = write_distribution(tmp_path / 'site', 'brokenplug', '[mediastash.stores]\nbroken = brokenplug_gone:Store\n')
    result = cli('ls', 'broken://x', cwd=tmp_path, paths=(site,))
    assert result.returncode == 1
    assert 'broken = brokenplug_gone:Store in brokenplug' in result.stderr
    assert 'cannot be imported' in result.stderr
    assert 'Traceback' not in result.stderr
    assert not (tmp_path / 'x').exists()


def test_a_plugin_entry_point_that_is_no_store_class_is_named(tmp_path: Path) -> None:
    site = write_distribution(
        tmp_path / 'site',
        'notastore',
        '[mediastash.stores]\nodd = notastore:Thing\n',
        module='class Thing:\n    pass\n',
    )
    result = cli('ls', 'odd://x', cwd=tmp_path, paths=(site,))
    assert result.returncode == 1
    assert 'odd = notastore:Thing in notastore' in result.stderr
    assert 'not a BaseMediaStore class' in result.stderr


def test_two_plugins_claiming_one_scheme_are_refused_and_a_builtin_is_never_replaced(tmp_path: Path) -> None:
    site = write_distribution(tmp_path / 'site', 'rival', '[mediastash.stores]\nplug = rival:Other\ns3 = rival:Other\n')
    result = cli('ls', 'plug://blobs', cwd=tmp_path, paths=(PLUGIN_PATH, site))
    assert result.returncode == 1
    assert 'more than one installed plug-in declares the plug:// store scheme' in result.stderr
    assert 'plugstore' in result.stderr and 'rival' in result.stderr
    code = "from mediastash.stores import store_class\nprint(store_class('s3').__module__)"
    assert run_python(code, site, cwd=tmp_path).stdout.strip() == 'mediastash.stores.s3._store'


# -- every command -------------------------------------------------------------------------------


async def fill(folder: Path) -> dict[str, bytes]:
    """Three blobs in a plug store at ``folder``; their bytes by URI."""
    blobs = {b'small text' * 10: 'text/plain', os.urandom(5000): 'image/png', os.urandom(300): None}
    async with PlugMediaStore(folder) as store:
        return {
            await store.put(data, context=MediaContext(media_type=media_type)): data
            for data, media_type in blobs.items()
        }


async def test_every_command_works_on_a_plugin_store(tmp_path: Path) -> None:
    blobs = await fill(tmp_path / 'a')
    uris = sorted(blobs)

    listed = json_of(cli('ls', 'plug://a', '--json', cwd=tmp_path))
    assert [item['uri'] for item in listed] == uris
    long = cli('ls', 'plug://a', '--long', cwd=tmp_path)
    assert long.returncode == 0, long.stderr
    assert {line.split()[0] for line in long.stdout.splitlines()} == {'100', '300', '5,000'}

    stats = json_of(cli('stats', 'plug://a', '--json', cwd=tmp_path))
    assert (stats['store'], stats['blobs'], stats['bytes']) == ("PlugMediaStore('a')", 3, 100 + 5000 + 300)

    assert json_of(cli('verify', 'plug://a', '--json', cwd=tmp_path))['ok'] == 3
    (tmp_path / 'a' / f'{parse_media_uri(uris[0])}.blob').write_bytes(b'tampered')
    corrupt = cli('verify', 'plug://a', '--json', cwd=tmp_path)
    assert corrupt.returncode == 1
    assert json_of(corrupt)['corrupt'] == [uris[0]]
    (tmp_path / 'a' / f'{parse_media_uri(uris[0])}.blob').write_bytes(blobs[uris[0]])

    synced = json_of(cli('sync', 'plug://a', 'plug://b', '--json', cwd=tmp_path))
    assert (synced['copied'], synced['failed']) == (3, 0)
    for uri, data in blobs.items():
        assert (tmp_path / 'b' / f'{parse_media_uri(uri)}.blob').read_bytes() == data

    assert json_of(cli('diff', 'plug://a', 'plug://b', '--json', cwd=tmp_path)) == {
        'only_in_source': [],
        'only_in_destination': [],
    }
    (tmp_path / 'b' / f'{parse_media_uri(uris[1])}.blob').unlink()
    differ = cli('diff', 'plug://a', 'plug://b', '--json', cwd=tmp_path)
    assert differ.returncode == 1
    assert json_of(differ) == {'only_in_source': [uris[1]], 'only_in_destination': []}

    (tmp_path / 'roots.txt').write_text(uris[2] + '\n')
    old = time.time() - 7 * 86400
    for uri in uris:
        os.utime(tmp_path / 'a' / f'{parse_media_uri(uri)}.blob', (old, old))
    swept = json_of(
        cli(
            'gc',
            '--store',
            'plug://a',
            '--roots',
            'uris:roots.txt',
            '--grace',
            '1h',
            '--delete',
            '--json',
            '--uris-file',
            'swept.txt',
            cwd=tmp_path,
        )
    )
    assert swept['deleted'] == 2
    assert sorted((tmp_path / 'swept.txt').read_text().splitlines()) == sorted(f'deleted {uri}' for uri in uris[:2])
    assert sorted(path.stem for path in (tmp_path / 'a').glob('*.blob')) == [parse_media_uri(uris[2])]


def test_read_only_commands_create_no_plugin_storage(tmp_path: Path) -> None:
    for command in (['ls', 'plug://gone'], ['stats', 'plug://gone'], ['verify', 'plug://gone']):
        result = cli(*command, cwd=tmp_path)
        assert result.returncode == 1
        assert 'gone' in result.stderr and 'Traceback' not in result.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('url', ['plug:/blobs', 'plug:blobs', 'plug//blobs'])
def test_a_plugin_scheme_without_its_slashes_is_a_typo(tmp_path: Path, url: str) -> None:
    result = cli('ls', url, cwd=tmp_path)
    assert result.returncode == 1
    assert 'plug://' in result.stderr and 'Nothing was created' in result.stderr
    assert os.listdir(tmp_path) == []


def test_tune_measures_in_a_namespace_of_a_plugin_store(tmp_path: Path) -> None:
    """The plug-in's namespaces (its ``_open_namespace``) are all tune needs; the folder is as it was after."""
    from pydantic_ai.messages import BinaryContent, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

    pictures = [BinaryContent(data=os.urandom(size), media_type='image/png') for size in (8 << 10, 32 << 10)]
    history = [ModelRequest(parts=[UserPromptPart(content=['two pictures', *pictures])])]
    (tmp_path / 'history.json').write_bytes(ModelMessagesTypeAdapter.dump_json(history))
    kept = PlugMediaStore(tmp_path / 'a')
    (tmp_path / 'a' / 'note.txt').write_text('not a blob')
    before = sorted(path.name for path in (tmp_path / 'a').iterdir())
    result = cli(
        'tune', 'history.json', '--store', 'plug://a', '--thresholds', '4KiB,16KiB,64KiB', '--json', cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    rows = {row['threshold_bytes']: row for row in json_of(result)['rows']}
    assert {threshold: row['blobs'] for threshold, row in rows.items()} == {4 << 10: 2, 16 << 10: 1, 64 << 10: 0}
    assert rows[4 << 10]['media_bytes'] == (8 << 10) + (32 << 10)
    assert sorted(path.name for path in kept.folder.iterdir()) == before  # the scratch namespace's folder is gone


FLAT_PLUGIN = """
from mediastash import BaseMediaStore
from plugstore import PlugMediaStore


class FlatStore(PlugMediaStore):
    \"\"\"A plug-in written without namespaces (no _open_namespace of its own).\"\"\"

    _open_namespace = BaseMediaStore._open_namespace

    @classmethod
    def from_url(cls, url, *, create=True, **overrides):
        return super().from_url('plug://' + url.removeprefix('flat://'), create=create, **overrides)
"""


def test_tune_refuses_a_plugin_without_namespaces_and_leaves_nothing(tmp_path: Path) -> None:
    """tune measures in ``store.namespace()``: a plug-in without namespaces is a one-line error naming the hook."""
    site = write_distribution(
        tmp_path / 'site', 'flatplug', '[mediastash.stores]\nflat = flatplug:FlatStore\n', FLAT_PLUGIN
    )
    (tmp_path / 'history.json').write_text('[]')
    result = cli('tune', 'history.json', '--store', 'flat://blobs', cwd=tmp_path, paths=(PLUGIN_PATH, site))
    assert result.returncode == 1, result.stderr
    assert 'Traceback' not in result.stderr
    assert 'FlatStore has no namespaces' in result.stderr
    assert 'store.namespace(name)' in result.stderr and '_open_namespace' in result.stderr
    assert not (tmp_path / 'blobs').exists(), 'the store folder tune had to create is removed again'


async def test_ls_long_stats_and_sync_use_the_media_types_the_plugin_records(tmp_path: Path) -> None:
    """The CLI and sync ask the store's public ``stat`` (no backend named), so a plug-in's media types show."""
    await fill(tmp_path / 'a')
    long = cli('ls', 'plug://a', '--long', cwd=tmp_path)
    assert long.returncode == 0, long.stderr
    assert {tuple(line.split()[:2]) for line in long.stdout.splitlines()} == {
        ('100', 'text/plain'),
        ('5,000', 'image/png'),
        ('300', 'unknown'),
    }
    stats = json_of(cli('stats', 'plug://a', '--json', cwd=tmp_path))
    assert {row['media_type']: row['bytes'] for row in stats['media_types']} == {
        'text/plain': 100,
        'image/png': 5000,
        None: 300,
    }
    assert json_of(cli('sync', 'plug://a', 'plug://b', '--json', cwd=tmp_path))['copied'] == 3
    record = json.loads((tmp_path / 'b' / f'{parse_media_uri(media_uri_for(b"small text" * 10))}.json').read_text())
    assert record['media_type'] == 'text/plain'


# -- declared capabilities -------------------------------------------------------------------


def test_the_plugin_declares_what_it_has(tmp_path: Path) -> None:
    declared = capabilities_of(PlugMediaStore(tmp_path / 'blobs'))
    assert declared == class_capabilities(PlugMediaStore)
    assert declared.listing and declared.deletes and declared.collection and declared.namespaces
    assert not declared.stream_writes and not declared.stream_reads and not declared.temp_sweep
    assert PlugMediaStore.supports_listing is True and PlugMediaStore.supports_streaming is False
    assert PlugMediaStore.put_stream is None and PlugMediaStore.get_stream is None


async def test_a_plugin_declaring_a_capability_off_loses_its_methods(tmp_path: Path) -> None:
    class ReadOnlyPlug(PlugMediaStore):
        supports_deletes = False
        supports_namespaces = False

    class StillReadOnly(ReadOnlyPlug):
        """A parent's ``False`` stays."""

    for cls in (ReadOnlyPlug, StillReadOnly):
        store = cls(tmp_path / cls.__name__)
        uri = await store.put(b'kept')
        declared = capabilities_of(store)
        assert not declared.deletes and not declared.namespaces and not declared.erase and declared.listing
        assert store.delete is None and store.delete_many is None  # what plug-ins tested before the flags
        assert not isinstance(store, DeletableMediaStore)
        with pytest.raises(NamespaceUnsupportedError):
            store.namespace('tenant')
        assert await store.exists(uri)


@pytest.mark.parametrize(
    ('declaration', 'named'),
    [
        ('supports_stream_writes = True', '_write_stream'),
        ('supports_stream_reads = True', '_raw_chunks'),
        ('supports_streaming = True', 'supports_stream_writes'),
        ('supports_collection = True', 'supports_guarded_deletes'),
        ("supports_listing = 'yes'", 'True or False'),
    ],
)
def test_a_declaration_the_class_cannot_keep_is_refused_at_class_creation(declaration: str, named: str) -> None:
    flag = declaration.split()[0]
    with pytest.raises(InvalidStoreConfiguration) as raised:
        exec(f'class Claims(PlugMediaStore):\n    {declaration}\n', {'PlugMediaStore': PlugMediaStore})
    assert flag in str(raised.value) and named in str(raised.value) and 'Claims' in str(raised.value)


class ProtocolOnlyStore:
    """A plug-in written against the ``MediaStore`` protocol alone: no base class, no declarations."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    async def put(self, data: bytes, *, context: Any = None) -> str:
        uri = media_uri_for(data)
        self.blobs[uri] = bytes(data)
        return uri

    async def get(self, uri: str, *, context: Any = None) -> bytes:
        return self.blobs[uri]

    async def exists(self, uri: str, *, context: Any = None) -> bool:
        return uri in self.blobs

    async def public_url(self, uri: str, *, context: Any = None) -> str | None:
        return None

    async def get_metadata(self, uri: str, *, context: Any = None) -> dict[str, str]:
        return {}

    async def delete(self, uri: str, *, context: Any = None) -> bool:
        return self.blobs.pop(uri, None) is not None

    async def delete_many(self, uris: Any) -> int:
        return sum([await self.delete(uri) for uri in uris])

    async def iter_uris(self) -> AsyncIterator[str]:
        for uri in list(self.blobs):
            yield uri


async def test_confirm_and_a_wrapper_pass_touch_after_to_a_store_that_keeps_ages() -> None:
    from tests.memory_support import set_written_at

    store = MemoryMediaStore()
    uri = await store.put(b'aged blob')
    set_written_at(store, uri, time.time() - 120)
    assert await confirm_in(store, [uri]) == {uri}  # the default touch_after (1 h): two minutes is young
    assert store._written_at[parse_media_uri(uri)] < time.time() - 100
    assert await confirm_in(store, [uri], touch_after=60) == {uri}
    assert store._written_at[parse_media_uri(uri)] > time.time() - 10
    set_written_at(store, uri, time.time() - 120)
    assert await WrapperMediaStore(store).touch_many([uri], touch_after=60) == {uri}
    assert store._written_at[parse_media_uri(uri)] > time.time() - 10


async def test_a_protocol_only_plugin_gets_its_capabilities_from_its_methods() -> None:
    store = ProtocolOnlyStore()
    declared = capabilities_of(store)
    assert declared == class_capabilities(ProtocolOnlyStore)
    assert declared.deletes and declared.listing
    assert not (declared.exists_many or declared.touch or declared.stat or declared.namespaces)
    assert not (declared.stream_writes or declared.verifies_reads or declared.collection)
    first, second = await store.put(b'one'), await store.put(b'two')
    missing = media_uri_for(b'never put')
    assert await exists_in(store, [first, missing, second]) == {first, second}  # exists() one by one
    assert await confirm_in(store, [first, missing]) == {first}  # no touch_many: a plain check
    wrapped = WrapperMediaStore(store)  # forwards exactly what the plug-in has
    assert capabilities_of(wrapped).deletes and not capabilities_of(wrapped).stream_writes
    assert wrapped.put_stream is None and wrapped.stat is None
    assert await wrapped.touch_many([first, missing]) == {first}
    assert await wrapped.delete(first) and not await store.exists(first)
    async with CachedMediaStore(MemoryMediaStore(), cache=store) as cached:  # a cache needs deletes only
        assert capabilities_of(cached).verifies_reads


class ChangesBytes(WrapperMediaStore):
    """A wrapper whose ``get`` changes the bytes: it declares so, and the walks hash again."""

    verifies_reads = False

    async def get(self, uri: str, *, context: Any = None) -> bytes:
        return b'changed ' + await super().get(uri)


async def test_a_wrapper_declaring_unverified_reads_gets_its_reads_hashed() -> None:
    inner = MemoryMediaStore()
    store = ChangesBytes(inner)
    assert capabilities_of(inner).verifies_reads and not capabilities_of(store).verifies_reads
    image = base64.b64encode(bytes(range(256)) * 400).decode()
    lean = await externalize_media([{'kind': 'binary', 'media_type': 'image/png', 'data': image}], media_store=inner)
    with pytest.raises(IntegrityError):  # no known-blob cache: the bytes come from get
        await restore_media(lean, media_store=store, options=WalkOptions(known_blobs=False))
