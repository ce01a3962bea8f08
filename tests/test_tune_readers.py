"""``tune`` finds the reader of each input in a registry: tuning imports no framework (issue 30).

``tests/plugin_tune/`` holds a package ``plugtune`` and its ``plugtune-0.1.dist-info``
(``chat-log = plugtune`` in the ``mediastash.tune_inputs`` group), as an installed
distribution would leave them; mediastash never names it. With that folder on
``PYTHONPATH``, ``mediastash tune talk.chatlog`` must replay the chat log. The
built-in reader of harness step stores lives in ``integrations/pydantic_ai/``;
without pydantic-ai-harness a step store is refused naming the extra. This module
runs on both stacks (the latest one has no harness: the refusal is real there).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mediastash import MemoryMediaStore
from mediastash.errors import InvalidArgumentError
from mediastash.stores.protocols import MediaStore
from mediastash.tuning import (
    History,
    HistoryInputError,
    _readers,
    available_history_readers,
    load_inputs,
    load_step_store,
    register_history_reader,
)

pytestmark = pytest.mark.pydantic_ai

PLUGIN_PATH = Path(__file__).parent / 'plugin_tune'
ROOT = Path(__file__).parent.parent
FRAMEWORKS = ('pydantic_ai', 'pydantic_ai_harness', 'pydantic_ai_persistence', 'langgraph', 'langchain_core', 'agents')
HARNESS_MODULES = (
    'pydantic_ai_harness',
    'mediastash.integrations.pydantic_ai._tune_inputs',
    'mediastash.integrations.pydantic_ai.step_store',
)


def python(code_or_args: list[str], *, cwd: Path, plugins: bool = True) -> subprocess.CompletedProcess[str]:
    paths = [*([str(PLUGIN_PATH)] if plugins else []), str(ROOT / 'src'), str(ROOT)]
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(paths), 'COLUMNS': '200'}
    env.pop('COVERAGE_PROCESS_START', None)
    return subprocess.run(
        [sys.executable, *code_or_args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry as shipped, restored after the test (registrations are process-wide)."""
    monkeypatch.setattr(_readers, '_registered', dict(_readers._registered))


def chat_log(path: Path, *lines: str) -> Path:
    path.write_text(''.join(f'{line}\n' for line in lines), encoding='utf-8')
    return path


def test_a_plugin_reader_from_its_entry_point_feeds_tune(tmp_path: Path) -> None:
    chat_log(tmp_path / 'talk.chatlog', 'user: ' + 'a' * 30_000, 'model: hello', 'user: thanks')
    result = python(
        ['-m', 'mediastash', 'tune', 'talk.chatlog', '--store', 'memory://', '--thresholds', '4KiB,64KiB', '--json'],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report['histories'] == [{'name': 'talk.chatlog (chat log)', 'messages': 3}]
    blobs = {row['threshold_bytes']: row['blobs'] for row in report['rows']}
    assert blobs == {4096: 1, 65536: 0}  # the 30,000-character prompt leaves the history at 4 KiB only

    chat_log(tmp_path / 'bad.chatlog', 'someone: hi')
    result = python(['-m', 'mediastash', 'tune', 'bad.chatlog', '--store', 'memory://'], cwd=tmp_path)
    assert result.returncode != 0
    assert 'bad.chatlog: a line that is not "user: TEXT" or "model: TEXT"' in result.stderr
    assert 'Traceback' not in result.stderr

    listed = python(['-c', 'from mediastash.tuning import available_history_readers as a; print(a())'], cwd=tmp_path)
    assert listed.stdout.strip() == "['harness-steps', 'chat-log']"
    without = python(['-m', 'mediastash', 'tune', 'talk.chatlog', '--store', 'memory://'], cwd=tmp_path, plugins=False)
    assert 'talk.chatlog is not JSON' in without.stderr  # no reader claims it: read as a history file


def test_tune_help_names_every_installed_reader(tmp_path: Path) -> None:
    def histories_help(plugins: bool) -> str:
        result = python(['-m', 'mediastash', 'tune', '--help'], cwd=tmp_path, plugins=plugins)
        assert result.returncode == 0, result.stderr
        return ' '.join(result.stdout.split())  # argparse wraps to the terminal's width

    with_plugin = histories_help(plugins=True)
    assert 'claims: harness-steps (pydantic-ai-harness FileStepStore folders, SqliteStepStore databases), chat-log' in (
        with_plugin
    )
    assert 'chat-log' not in histories_help(plugins=False)


def test_reading_a_history_file_imports_no_framework(tmp_path: Path) -> None:
    (tmp_path / 'history.json').write_text(
        json.dumps([{'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': 'hi'}]}])
    )
    code = (
        'import asyncio, sys\nfrom pathlib import Path\nfrom mediastash.tuning import load_inputs\n'
        "(history,) = asyncio.run(load_inputs([Path('history.json')]))\n"
        'print(history.messages[0]["parts"][0]["content"])\n'
        f'print(sorted(m for m in sys.modules if m.split(".")[0] in {FRAMEWORKS!r} '
        "or m.startswith('mediastash.integrations')))\n"
    )
    result = python(['-c', code], cwd=tmp_path, plugins=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ['hi', '[]']


async def test_a_registered_reader_is_asked_before_the_history_file_reading(tmp_path: Path, registry: None) -> None:
    seen: list[tuple[Path, MediaStore | None]] = []

    async def read(path: Path, *, media_store: MediaStore | None) -> list[History]:
        seen.append((path, media_store))
        return [History(f'{path}#1', [{'kind': 'request', 'parts': []}]), History(f'{path}#2', [])]

    register_history_reader('dot-runs', read, claims=lambda path: path.suffix == '.runs')
    assert available_history_readers()[:2] == ['harness-steps', 'dot-runs']
    store = MemoryMediaStore()
    (tmp_path / 'a.runs').write_text('anything')
    (tmp_path / 'b.json').write_text('[{"kind": "response", "parts": []}]')
    histories = await load_inputs([tmp_path / 'a.runs', tmp_path / 'b.json'], media_store=store)
    assert [history.name for history in histories] == [
        f'{tmp_path}/a.runs#1',
        f'{tmp_path}/a.runs#2',
        str(tmp_path / 'b.json'),
    ]
    assert seen == [(tmp_path / 'a.runs', store)]


async def test_a_reader_that_breaks_is_named_and_its_message_kept_out(tmp_path: Path, registry: None) -> None:
    async def read(path: Path, *, media_store: MediaStore | None) -> list[History]:
        raise RuntimeError('token=hunter2')

    register_history_reader('broken', read, claims=lambda path: path.name == 'x.bin')
    (tmp_path / 'x.bin').write_bytes(b'x')
    with pytest.raises(HistoryInputError) as raised:
        await load_inputs([tmp_path / 'x.bin'])
    assert 'the tune input reader broken (registered) failed on' in str(raised.value)
    assert 'RuntimeError' in str(raised.value) and 'hunter2' not in str(raised.value)

    def claims(path: Path) -> bool:
        raise OSError('token=hunter2')

    register_history_reader('broken', read, claims=claims)
    with pytest.raises(HistoryInputError, match='reader broken') as raised:
        await load_inputs([tmp_path / 'x.bin'])
    assert 'hunter2' not in str(raised.value)


@pytest.mark.parametrize(
    ('arguments', 'named'),
    [
        (('Bad Kind', 'm:f'), 'kind'),
        (('ok-kind', 'no colon'), 'read'),
        (('ok-kind', 42), 'read'),
    ],
)
def test_register_refuses_bad_arguments_by_name(arguments: tuple[Any, Any], named: str, registry: None) -> None:
    with pytest.raises(InvalidArgumentError, match=rf'^{named}') as raised:
        register_history_reader(*arguments, claims=bool)
    assert 'no colon' not in str(raised.value) and 'Bad Kind' not in str(raised.value)
    with pytest.raises(InvalidArgumentError, match=r'^claims'):
        register_history_reader('ok-kind', 'm:f', claims='yes')  # type: ignore[arg-type]
    assert 'ok-kind' not in available_history_readers()


def harness_step_stores(folder: Path) -> list[Path]:
    """A ``FileStepStore`` folder and a ``SqliteStepStore`` database as the classifier sees them (no harness)."""
    runs = folder / 'runs'
    (runs / 'r1').mkdir(parents=True)
    (runs / 'r1' / 'run.json').write_text('{}')
    database = folder / 'steps.db'
    with sqlite3.connect(database) as connection:
        connection.execute('CREATE TABLE snapshots (run_id TEXT, data TEXT)')
    connection.close()
    return [runs, database]


@pytest.fixture
def no_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic-ai-harness as not installed (on the latest stack it is not; on the harness stack it is hidden)."""
    for name in [*HARNESS_MODULES, *(name for name in sys.modules if name.startswith('pydantic_ai_harness.'))]:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, 'pydantic_ai_harness', None)
    built_in = _readers._registered[_readers.HARNESS_STEPS]
    monkeypatch.setattr(built_in, 'read', 'mediastash.integrations.pydantic_ai._tune_inputs:read_step_store')


@pytest.mark.parametrize('form', [0, 1], ids=['folder', 'sqlite'])
async def test_a_step_store_without_the_harness_names_the_extra(form: int, tmp_path: Path, no_harness: None) -> None:
    path = harness_step_stores(tmp_path)[form]
    expected = f'reading the step store {path} needs pydantic-ai-harness: pip install "mediastash[harness]"'
    with pytest.raises(HistoryInputError) as raised:
        await load_inputs([path])
    assert str(raised.value) == expected
    with pytest.raises(HistoryInputError) as raised:
        await load_step_store(path)
    assert str(raised.value) == expected


@pytest.mark.parametrize(
    ('returned', 'got'),
    [
        ([], 'returned no history'),
        (None, 'returned a NoneType'),
        ({'name': [{'kind': 'request', 'parts': []}]}, 'returned a dict'),
        ([History('ok', [{'kind': 'request', 'parts': []}]), [{'kind': 'request'}]], 'returned a list holding a list'),
    ],
    ids=['empty', 'none', 'dict', 'not-history'],
)
async def test_a_reader_returning_no_histories_is_refused(
    returned: Any, got: str, tmp_path: Path, registry: None
) -> None:
    """A claimed input gives its histories or fails: nothing is dropped silently, nothing else is replayed."""

    async def read(path: Path, *, media_store: MediaStore | None) -> Any:
        return returned

    register_history_reader('odd-runs', read, claims=lambda path: path.suffix == '.runs')
    (tmp_path / 'a.runs').write_text('anything')
    with pytest.raises(HistoryInputError) as raised:
        await load_inputs([tmp_path / 'a.runs'])
    assert str(raised.value).startswith(f'the tune input reader odd-runs (registered) {got} for {tmp_path}/a.runs')


async def test_a_registered_read_that_cannot_be_imported_is_named(
    tmp_path: Path, registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo in ``module:attribute`` or a module failing as it runs is a ``HistoryInputError`` naming the
    reader and its target, never the module's own message."""
    (tmp_path / 'failing_tune_reader.py').write_text("raise RuntimeError('token=hunter2')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / 'a.runs').write_text('anything')
    for target, problem in [
        ('json:no_such_reader', 'cannot be imported: AttributeError'),
        ('failing_tune_reader:read', 'cannot be imported: RuntimeError'),
    ]:
        register_history_reader('odd-runs', target, claims=lambda path: path.suffix == '.runs')
        with pytest.raises(HistoryInputError) as raised:
            await load_inputs([tmp_path / 'a.runs'])
        assert str(raised.value) == f'the tune input reader odd-runs ({target}) {problem}'
    monkeypatch.delitem(sys.modules, 'failing_tune_reader', raising=False)


@pytest.mark.parametrize(
    ('messages', 'problem'),
    [
        ({'kind': 'request', 'parts': []}, 'expected a JSON list of messages, got a JSON object'),
        (['request'], 'message 0 is a JSON string, not an object'),
        ([{'kind': 'response', 'parts': []}, {'parts': []}], 'message 1 has no "kind" of "request" or "response"'),
        ([{'kind': 'request', 'parts': 'hi'}], 'message 0 has no "parts" list'),
    ],
    ids=['object', 'string', 'no-kind', 'no-parts'],
)
async def test_histories_a_reader_gives_are_checked_as_history_files_are(
    messages: Any, problem: str, tmp_path: Path, registry: None
) -> None:
    """What the sweep cannot replay is refused naming the reader, as a history file would be: never half replayed."""

    async def read(path: Path, *, media_store: MediaStore | None) -> list[History]:
        return [History(f'{path}#1', [{'kind': 'request', 'parts': []}]), History(f'{path}#2', messages)]

    register_history_reader('odd-runs', read, claims=lambda path: path.suffix == '.runs')
    (tmp_path / 'a.runs').write_text('anything')
    with pytest.raises(HistoryInputError) as raised:
        await load_inputs([tmp_path / 'a.runs'])
    expected = f'the tune input reader odd-runs gave {tmp_path}/a.runs#2, which is not a pydantic-ai message history'
    assert str(raised.value) == f'{expected}: {problem}'


async def test_a_registration_while_readers_are_asked_does_not_break_the_asking(tmp_path: Path, registry: None) -> None:
    """The readers asked about one input are those registered when the asking began; a registration made
    meanwhile (by a claims(), or another thread) counts from the next input on."""

    async def read(path: Path, *, media_store: MediaStore | None) -> list[History]:
        return [History(str(path), [{'kind': 'request', 'parts': []}])]

    def claims_and_registers(path: Path) -> bool:
        register_history_reader('late-runs', read, claims=lambda path: path.suffix == '.late')
        return False

    register_history_reader('eager-runs', read, claims=claims_and_registers)
    (tmp_path / 'a.late').write_text('anything')
    (tmp_path / 'b.late').write_text('anything')
    with pytest.raises(HistoryInputError, match=r'a\.late is not JSON'):
        await load_inputs([tmp_path / 'a.late'])  # late-runs was not there when a.late was asked about
    assert [history.name for history in await load_inputs([tmp_path / 'b.late'])] == [str(tmp_path / 'b.late')]
