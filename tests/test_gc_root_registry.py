"""Root kinds and object roots come from a registry the integrations fill: ``mediastash.roots``.

``tests/plugin_root/`` holds a package ``plugroot`` and its ``plugroot-0.1.dist-info``
(``notes = plugroot:notes_root`` in the ``mediastash.roots`` group), as an installed
distribution would leave them; mediastash never names it. With that folder on
``PYTHONPATH``, ``mediastash gc --roots notes:FILE`` must keep what the notes
reference and delete the rest, and ``--help`` must list the kind. Listing kinds and
reading gc's own kinds imports no framework and no integration.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mediastash import DiskMediaStore
from mediastash.errors import InvalidArgumentError, RootReadError
from mediastash.gc import JsonFileRoot, Root, as_root, collect_garbage, root_from_spec
from mediastash.roots import _registry, available_root_kinds, register_root_adapter, register_root_kind, root_kind

PLUGIN_PATH = Path(__file__).parent / 'plugin_root'


def environment(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    root = Path(__file__).parent.parent
    env['PYTHONPATH'] = os.pathsep.join([*map(str, paths), str(root / 'src'), str(root)])
    env.pop('COVERAGE_PROCESS_START', None)
    return env


def run(args: list[str], *, cwd: Path, paths: tuple[Path, ...] = (PLUGIN_PATH,)) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=environment(*paths), cwd=cwd, capture_output=True, text=True, timeout=180
    )


def stored(folder: Path, *payloads: bytes) -> list[str]:
    async def put() -> list[str]:
        store = DiskMediaStore(folder)
        try:
            return [await store.put(payload) for payload in payloads]
        finally:
            await store.aclose()

    return asyncio.run(put())


def listed(folder: Path) -> set[str]:
    async def uris() -> set[str]:
        store = DiskMediaStore(folder)
        try:
            return {uri async for uri in store.iter_uris()}
        finally:
            await store.aclose()

    return asyncio.run(uris())


def test_a_plugin_kind_from_its_entry_point_keeps_what_it_references(tmp_path: Path) -> None:
    kept, dropped = stored(tmp_path / 'media', b'a' * 5000, b'b' * 5000)
    (tmp_path / 'notes.txt').write_text(f'keep {kept}\n')
    result = run(
        ['-m', 'mediastash', 'gc', '--store', 'media', '--roots', 'notes:notes.txt', '--grace', '0', '--delete'],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert listed(tmp_path / 'media') == {kept}
    assert dropped not in listed(tmp_path / 'media')


def test_a_plugin_kind_that_cannot_read_stops_the_collection(tmp_path: Path) -> None:
    kept, dropped = stored(tmp_path / 'media', b'a' * 5000, b'b' * 5000)
    (tmp_path / 'notes.txt').write_text(f'keep {kept}\nforget everything\n')
    result = run(
        ['-m', 'mediastash', 'gc', '--store', 'media', '--roots', 'notes:notes.txt', '--grace', '0', '--delete'],
        cwd=tmp_path,
    )
    assert result.returncode != 0
    assert 'not "keep URI"' in result.stderr
    assert listed(tmp_path / 'media') == {kept, dropped}


def test_help_lists_every_kind_and_imports_no_framework(tmp_path: Path) -> None:
    script = """
import contextlib, io, os, sys
os.environ['COLUMNS'] = '5000'  # no line breaks inside a kind
from mediastash.cli import main
from mediastash.gc import root_from_spec
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    main(['gc', '--help'])
root_from_spec('json:missing.json')
loaded = sorted(name for name in sys.modules
                if name.partition('.')[0] in {'agents', 'langgraph', 'langchain_core', 'pydantic_ai', 'plugroot'}
                or name.startswith('mediastash.integrations'))
print(' '.join(out.getvalue().split()))
print('loaded:', loaded)
"""
    result = run(['-c', script], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    help_text, loaded = result.stdout.splitlines()
    assert loaded == 'loaded: []'
    for kind in ('notes:...', 'langgraph-sqlite:DB', 'agents-sqlite:DB', 'agents-postgres:', 'kv-sqlite:DB'):
        assert kind in help_text
    for kind in ('pg-steps:', 'mongo-steps:', 'json:PATH', 'sqlite-steps:DB'):
        assert kind in help_text
    without = run(['-m', 'mediastash', 'gc', '--help'], cwd=tmp_path, paths=())
    assert without.returncode == 0, without.stderr
    assert 'notes:' not in ' '.join(without.stdout.split())
    assert 'langgraph-sqlite:' in ' '.join(without.stdout.split())


def test_the_built_in_kinds_are_known_without_importing_them() -> None:
    assert {'langgraph-sqlite', 'langgraph-postgres', 'agents-sqlite', 'agents-postgres', 'kv-sqlite'} <= set(
        available_root_kinds()
    )
    assert {'pg-steps', 'mongo-steps'} <= set(available_root_kinds())
    assert root_kind('no-such-kind') is None


class _Notes:
    """A root by shape alone: no base class."""

    def __init__(self, uris: set[str]) -> None:
        self.uris = uris

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        yield set(self.uris)

    def describe(self) -> str:
        return 'notes'


@pytest.fixture
def restored_registry() -> Iterator[None]:
    kinds = dict(_registry._registered)
    adapters = [list(entry) for entry in _registry._adapters]
    try:
        yield
    finally:
        _registry._registered.clear()
        _registry._registered.update(kinds)
        _registry._adapters[:] = adapters


async def test_a_registered_kind_and_adapter_serve_root_from_spec_and_collect_garbage(
    tmp_path: Path, restored_registry: None
) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    kept = await store.put(b'k' * 5000)
    dropped = await store.put(b'd' * 5000)
    register_root_kind('notes-here', lambda argument: _Notes({argument}), about='notes', argument='URI')
    root = root_from_spec(f'notes-here:{kept}')
    assert isinstance(root, Root) and isinstance(root, _Notes)

    class Framework:
        """An object of a framework whose integration registered an adapter."""

    register_root_adapter(lambda value: _Notes({kept}) if isinstance(value, Framework) else None)
    assert isinstance(as_root(Framework()), _Notes)
    with pytest.raises(TypeError, match='Other is not a root'):
        as_root(type('Other', (), {})())

    report = await collect_garbage(store, [Framework(), root], grace=0, dry_run=False)
    assert report.deleted == 1
    assert {uri async for uri in store.iter_uris()} == {kept}
    assert dropped != kept
    await store.aclose()


def test_registering_a_kind_checks_its_name_and_factory(restored_registry: None) -> None:
    with pytest.raises(InvalidArgumentError, match=r'^kind must'):
        register_root_kind('Bad Kind', lambda argument: _Notes(set()))
    with pytest.raises(InvalidArgumentError, match=r'^factory must'):
        register_root_kind('fine-kind', 'no colon here')
    with pytest.raises(InvalidArgumentError, match=r'^adapter must'):
        register_root_adapter('not callable')  # type: ignore[arg-type]


def test_a_kind_whose_module_is_missing_says_so_without_the_argument(restored_registry: None) -> None:
    register_root_kind('gone-kind', 'mediastash_no_such_module:factory')
    with pytest.raises(RootReadError, match='gone-kind: root kind') as caught:
        root_from_spec('gone-kind:secret-argument')
    assert 'secret-argument' not in str(caught.value)


def test_an_unknown_prefix_is_a_path(tmp_path: Path) -> None:
    (tmp_path / 'odd:name.json').write_text(json.dumps({'x': 1}))
    assert isinstance(root_from_spec(str(tmp_path / 'odd:name.json')), JsonFileRoot)
    with pytest.raises(RootReadError, match='no such file or folder'):
        root_from_spec('unknown-kind:nothing-here')


def test_the_command_line_names_no_integration_kind() -> None:
    """``mediastash gc --roots`` learns every integration's kinds from the registry: the CLI's source names none."""
    cli = Path(__file__).parent.parent / 'src' / 'mediastash' / 'cli'
    kinds = sorted(set(available_root_kinds()) - {'notes'})
    assert 'langgraph-sqlite' in kinds
    named = [f'{path.name}: {kind}' for path in sorted(cli.glob('*.py')) for kind in kinds if kind in path.read_text()]
    assert not named, named


def test_the_names_mediastash_gc_exported_are_the_integrations_roots() -> None:
    """Roots that moved to their integration are still served by ``mediastash.gc``: the very same classes."""
    import mediastash.gc as gc
    from mediastash.integrations import langgraph, openai_agents, pydantic_ai

    homes = {
        langgraph: ('CheckpointerRoot', 'LangGraphPostgresRoot', 'LangGraphSQLiteRoot'),
        openai_agents: ('SQLiteSessionRoot',),
        pydantic_ai: (
            'ConversationStoreRoot',
            'KVRoot',
            'MongoStepStoreRoot',
            'PostgresStepStoreRoot',
            'SQLiteKVRoot',
            'ScannableKV',
            'StepStoreRoot',
        ),
    }
    for home, names in homes.items():
        for name in names:
            assert getattr(gc, name) is getattr(home, name), name
            assert name in dir(gc)
            assert name not in gc.__all__  # documented at its home
    with pytest.raises(AttributeError, match='NoSuchRoot'):
        gc.NoSuchRoot  # noqa: B018
