"""Root folders are read whole: every file below a root folder is read as the root it is, or the collection stops.

Regression tests for issue 17, items 1 (a step-store folder hid the lean files
kept beside it, and their blobs were deleted) and 10 (JSON nested deeper than
the parser's stack raised ``RecursionError`` instead of ``RootReadError``).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore, RunRecord, SqliteStepStore

from mediastash import DiskMediaStore, MemoryMediaStore, externalize_media, restore_media
from mediastash._path_kinds import PathKind, classify, is_file_step_store
from mediastash.cli import main as cli_main
from mediastash.context import MediaContext
from mediastash.gc import (
    FileStepStoreRoot,
    JsonFileRoot,
    JsonLinesFileRoot,
    KVRoot,
    Root,
    RootReadError,
    SqliteStepStoreRoot,
    collect_garbage,
    root_from_spec,
)
from mediastash.integrations import OffloadingStepStore
from mediastash.uri import media_uri_for
from mediastash.walker import WalkOptions
from tests.memory_support import set_written_at

THRESHOLD = 64
HOUR = 3600.0
REPO = Path(__file__).resolve().parents[1]
DEPTH = 200_000


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, 'PYTHONPATH': str(REPO / 'src'), 'COLUMNS': '200'}
    return subprocess.run(
        [sys.executable, '-m', 'mediastash', *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


async def stored(store: Any) -> set[str]:
    return {info.uri async for info in store.iter_blobs()}


def age_folder(folder: Path, when: float) -> None:
    for path in folder.rglob('*.bin'):
        os.utime(path, (when, when))


async def references_of(root: Root) -> set[str]:
    found: set[str] = set()
    async for batch in root.reference_batches():
        found |= batch
    return found


def history(seed: int, size: int = 300) -> list[ModelMessage]:
    rng = random.Random(seed)
    return [
        ModelRequest(
            parts=[
                UserPromptPart(
                    content=[f'look {seed}', BinaryContent(data=rng.randbytes(size), media_type='image/png')]
                )
            ]
        ),
        ModelResponse(parts=[TextPart(f'seen {seed}')]),
    ]


def dumped(messages: Any) -> Any:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode='json')


def deep_json(depth: int = DEPTH) -> str:
    return '[' * depth + ']' * depth


# -- item 1: the end-to-end case of the issue -------------------------------------------------------


def test_cli_a_step_store_folder_does_not_hide_lean_files_beside_it(tmp_path: Path) -> None:
    """``gc --roots DIR``: DIR is a FileStepStore and also holds ``exports/lean.json`` written by ``externalize``."""
    runs = tmp_path / 'runs'
    saved = history(1)

    async def write_runs() -> None:
        steps = OffloadingStepStore(
            FileStepStore(runs, media_store=None),
            media_store=DiskMediaStore(tmp_path / 'media'),
            options=WalkOptions(threshold_bytes=64),
        )
        await steps.register_run(RunRecord(run_id='r1'))
        await steps.save_snapshot(ContinuableSnapshot(run_id='r1', step_index=1, messages=saved))

    asyncio.run(write_runs())
    source = tmp_path / 'history.json'
    source.write_text(json.dumps(dumped(history(2))))
    (runs / 'exports').mkdir()
    made = run_cli(
        'externalize', str(source), 'runs/exports/lean.json', '--store', 'media', '--threshold', '64', cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    orphan = asyncio.run(DiskMediaStore(tmp_path / 'media').put(b'no root references this blob' * 4))
    age_folder(tmp_path / 'media', time.time() - 2 * HOUR)
    blobs = asyncio.run(stored(DiskMediaStore(tmp_path / 'media')))
    assert len(blobs) == 3 and is_file_step_store(runs)

    result = run_cli('gc', '--store', 'media', '--roots', 'runs', '--grace', '1h', '--delete', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert asyncio.run(stored(DiskMediaStore(tmp_path / 'media'))) == blobs - {orphan}

    restored = run_cli('restore', 'runs/exports/lean.json', 'restored.json', '--store', 'media', cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert json.loads((tmp_path / 'restored.json').read_text()) == json.loads(source.read_text())

    async def read_runs() -> list[ModelMessage]:
        steps = OffloadingStepStore(
            FileStepStore(runs, media_store=None), media_store=DiskMediaStore(tmp_path / 'media')
        )
        snapshot = await steps.latest_snapshot(run_id='r1')
        assert snapshot is not None
        return list(snapshot.messages)

    assert dumped(asyncio.run(read_runs())) == dumped(saved)


@pytest.mark.parametrize('layout', ['wrapped', 'harness-media'])
def test_cli_on_the_folder_a_real_agent_run_leaves(tmp_path: Path, layout: str) -> None:
    """Every file an agent run through StepPersistence writes (events, tool effects, snapshot keys) is understood."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai_harness.step_persistence import StepPersistence

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(part, ToolCallPart) for message in messages for part in message.parts):
            return ModelResponse(parts=[ToolCallPart(tool_name='fetch', args={'n': 1}, tool_call_id='c0')])
        return ModelResponse(parts=[TextPart('done')])

    async def run() -> list[ModelMessage]:
        media = DiskMediaStore(tmp_path / 'runs' / 'media')
        if layout == 'wrapped':
            store: Any = OffloadingStepStore(FileStepStore(tmp_path / 'runs', media_store=None), media_store=media)
        else:
            store = FileStepStore(tmp_path / 'runs', media_store=media)  # the harness externalizes itself
        agent: Any = Agent(FunctionModel(scripted), capabilities=[StepPersistence(store=store)])

        @agent.tool_plain
        def fetch(n: int) -> str:
            return 'report ' * 20_000

        result = await agent.run(
            ['look', BinaryContent(data=random.Random(3).randbytes(90_000), media_type='image/png')]
        )
        return list(result.all_messages())

    messages = asyncio.run(run())
    names = {path.name for path in (tmp_path / 'runs').rglob('*') if path.is_file()}
    assert {'events.jsonl', 'run.json'} <= names
    media = DiskMediaStore(tmp_path / 'runs' / 'media')
    referenced = asyncio.run(stored(media))
    orphan = asyncio.run(media.put(b'left over from a deleted run' * 3))
    age_folder(tmp_path / 'runs' / 'media', time.time() - 2 * HOUR)

    result = run_cli('gc', '--store', 'runs/media', '--roots', 'runs', '--grace', '1h', '--delete', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert asyncio.run(stored(DiskMediaStore(tmp_path / 'runs' / 'media'))) == referenced
    assert orphan not in referenced and len(referenced) == 2

    async def latest() -> list[ModelMessage]:
        reader = DiskMediaStore(tmp_path / 'runs' / 'media')
        if layout == 'wrapped':
            store: Any = OffloadingStepStore(FileStepStore(tmp_path / 'runs', media_store=None), media_store=reader)
        else:
            store = FileStepStore(tmp_path / 'runs', media_store=reader)
        (record,) = await store.list_runs()
        snapshot = await store.latest_snapshot(run_id=record.run_id)
        assert snapshot is not None
        return list(snapshot.messages)

    assert dumped(asyncio.run(latest())) == dumped(messages)


# -- item 1: random mixes of step-store folders and loose lean files under one root ----------------

PLACES = ('', 'a', 'a/b', 'c')
entries = st.lists(
    st.tuples(
        st.sampled_from(('wrapped-steps', 'harness-steps', 'lean')),
        st.sampled_from(PLACES),
        st.lists(st.integers(0, 9), min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=entries, media_inside=st.booleans(), orphans=st.sets(st.integers(0, 9), max_size=4))
def test_every_lean_file_restores_after_gc_of_a_mixed_root(
    plan: list[tuple[str, str, list[int]]], media_inside: bool, orphans: set[int]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_mixed_root(Path(folder), plan, media_inside, orphans))


def _payload(pick: int) -> bytes:
    return random.Random(pick).randbytes(100 + pick)


def _step_messages(picks: list[int]) -> list[ModelMessage]:
    parts = [BinaryContent(data=_payload(pick), media_type='image/png') for pick in picks]
    return [ModelRequest(parts=[UserPromptPart(content=['step', *parts])]), ModelResponse(parts=[TextPart('ok')])]


async def _mixed_root(tmp: Path, plan: list[tuple[str, str, list[int]]], media_inside: bool, orphans: set[int]) -> None:
    root = tmp / 'root'
    root.mkdir()
    media_folder = root / 'media' if media_inside else tmp / 'media'
    media = DiskMediaStore(media_folder)
    lean_files: dict[Path, Any] = {}
    step_runs: list[tuple[str, Path, str, list[ModelMessage]]] = []
    for number, (kind, place, picks) in enumerate(plan):
        where = root / place
        where.mkdir(parents=True, exist_ok=True)
        if kind == 'lean':
            full = [{'kind': 'binary', 'data': _b64(_payload(pick)), 'media_type': 'image/png'} for pick in picks]
            lean = await externalize_media(full, media_store=media, threshold_bytes=THRESHOLD, known_blobs=False)
            path = where / f'export-{number}.json'
            path.write_text(json.dumps(lean))
            lean_files[path] = full
            continue
        if kind == 'wrapped-steps':
            steps: Any = OffloadingStepStore(
                FileStepStore(where, media_store=None),
                media_store=media,
                options=WalkOptions(threshold_bytes=THRESHOLD),
            )
        else:
            steps = FileStepStore(where, media_store=media, media_threshold_bytes=THRESHOLD)
        run_id = f'run-{number}'
        messages = _step_messages(picks)
        await steps.register_run(RunRecord(run_id=run_id))
        await steps.save_snapshot(ContinuableSnapshot(run_id=run_id, step_index=1, messages=messages))
        step_runs.append((kind, where, run_id, messages))
    referenced = await stored(media)
    unreferenced = {await media.put(b'orphan %d ' % pick + _payload(pick)) for pick in orphans}
    age_folder(media_folder, time.time() - 2 * HOUR)

    arguments = ['gc', '--store', str(media_folder), '--roots', str(root), '--grace', '1h', '--delete', '-q']
    code = await asyncio.to_thread(cli_main, arguments)  # the command runs its own event loop
    assert code == 0
    assert await stored(media) == referenced  # every orphan went, nothing referenced did
    assert not unreferenced & referenced

    reader = DiskMediaStore(media_folder)
    for path, full in lean_files.items():
        restored = await restore_media(json.loads(path.read_text()), media_store=reader, known_blobs=False)
        assert restored == full, path
    for kind, where, run_id, messages in step_runs:
        if kind == 'wrapped-steps':
            steps = OffloadingStepStore(
                FileStepStore(where, media_store=None), media_store=reader, options=WalkOptions(known_blobs=False)
            )
        else:
            steps = FileStepStore(where, media_store=reader)
        snapshot = await steps.latest_snapshot(run_id=run_id)
        assert snapshot is not None and dumped(snapshot.messages) == dumped(messages), (kind, where)


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


# -- item 1: what a root folder does with each kind of file ----------------------------------------


async def test_files_beside_a_step_store_are_read_as_what_they_are(tmp_path: Path) -> None:
    media = MemoryMediaStore()
    uris = [await media.put(f'blob {number}'.encode() * 20) for number in range(5)]
    steps = FileStepStore(tmp_path, media_store=None)
    await steps.register_run(RunRecord(run_id='r'))
    (tmp_path / 'notes').mkdir()
    (tmp_path / 'notes' / 'keep.txt').write_text(f'# pinned\n{uris[0]}\n')
    lean = await externalize_media(
        {'data': [{'kind': 'binary', 'data': _b64(b'x' * 100)}]}, media_store=media, threshold_bytes=THRESHOLD
    )
    (tmp_path / 'notes' / 'lean.json').write_text(json.dumps(lean))
    marker = json.dumps(lean['data'][0])
    (tmp_path / 'log.jsonl').write_text(f'{{"a": {marker}}}\n\n[1]\n{{"unfinished')  # an append in flight
    database = tmp_path / 'other-steps.db'
    await SqliteStepStore(database=database, media_store=None).register_run(RunRecord(run_id='r'))
    assert classify(database) is PathKind.SQLITE_STEP_STORE
    found = await references_of(root_from_spec(str(tmp_path)))
    assert isinstance(root_from_spec(str(tmp_path)), FileStepStoreRoot)
    assert found == {uris[0], media_uri_for(b'x' * 100)}
    assert await references_of(JsonLinesFileRoot(tmp_path / 'log.jsonl')) == {media_uri_for(b'x' * 100)}
    assert await references_of(root_from_spec(str(tmp_path / 'log.jsonl'))) == {media_uri_for(b'x' * 100)}

    (tmp_path / 'log.jsonl').write_text('{"a": 1}\nnot json\n{"b": 2}\n')
    with pytest.raises(RootReadError, match=r'log\.jsonl, line 2: not JSON'):
        await references_of(FileStepStoreRoot(tmp_path))


async def test_files_that_hold_no_references_are_passed_over(tmp_path: Path) -> None:
    """Blobs and sidecars of a disk store, writers' temporaries, SQLite side files and media databases."""
    disk = DiskMediaStore(tmp_path / 'media')
    uri = await disk.put(
        b'{"not": "a root"' * 10, context=MediaContext(metadata={'k': 'v'})
    )  # starts like JSON; never read as a root
    assert classify(disk.path_for(uri)) is PathKind.BLOB
    (tmp_path / 'media' / '.mediastash-tmp-0123abcd').write_bytes(b'\x89PNG partial')
    (tmp_path / 'snap.json.0123456789abcdef0123456789abcdef.tmp').write_text('{"half')
    (tmp_path / 'lean.json').write_text(json.dumps({'uris': []}))
    from mediastash import SqliteMediaStore

    async with SqliteMediaStore(database=tmp_path / 'media.db') as database:
        await database.put(b'a blob in a database')
    assert classify(tmp_path / 'media.db') is PathKind.SQLITE_MEDIA_STORE
    (tmp_path / 'media.db-wal').write_bytes(b'\x37\x7f\x06\x82')
    assert classify(tmp_path / 'media.db-wal') is PathKind.SQLITE_SIDE_FILE
    root = JsonFileRoot(tmp_path)
    batches = [batch async for batch in root.reference_batches()]
    assert batches == [set()]  # lean.json alone was read


@pytest.mark.parametrize(
    ('name', 'content', 'problem'),
    [
        ('README.md', b'Some notes about these runs', 'cannot tell what kind of root'),
        ('photo.png', b'\x89PNG\r\n\x1a\n', 'cannot tell what kind of root'),
        ('empty.json', b'', r'empty\.json: not JSON'),
        ('image.json', b'\x89PNG', r'image\.json: not JSON'),
        ('custom-layout.png', b'\x89PNG', 'cannot tell what kind of root'),
    ],
)
async def test_a_file_no_reader_understands_stops_the_collection(
    tmp_path: Path, name: str, content: bytes, problem: str
) -> None:
    media = MemoryMediaStore()
    orphan = await media.put(b'unreferenced')
    set_written_at(media, orphan, time.time() - 2 * HOUR)
    steps = FileStepStore(tmp_path / 'runs', media_store=None)
    await steps.register_run(RunRecord(run_id='r'))
    (tmp_path / 'runs' / 'exports').mkdir()
    (tmp_path / 'runs' / 'exports' / name).write_bytes(content)
    with pytest.raises(RootReadError, match=problem) as caught:
        await collect_garbage(media, [tmp_path / 'runs'], grace=HOUR, dry_run=False)
    assert str(tmp_path / 'runs' / 'exports' / name) in str(caught.value)
    assert await stored(media) == {orphan}


async def test_special_files_and_unknown_databases_are_refused(tmp_path: Path) -> None:
    (tmp_path / 'lean.json').write_text('[]')
    with sqlite3.connect(tmp_path / 'app.db') as connection:
        connection.execute('CREATE TABLE notes (body TEXT)')
    with pytest.raises(RootReadError, match=r'app\.db: a SQLite database that is neither'):
        await references_of(JsonFileRoot(tmp_path))
    (tmp_path / 'app.db').unlink()
    os.mkfifo(tmp_path / 'pipe')
    with pytest.raises(RootReadError, match='pipe: a FIFO'):
        await references_of(JsonFileRoot(tmp_path))


async def test_symlinked_folders_are_followed_once(tmp_path: Path) -> None:
    (tmp_path / 'root').mkdir()
    (tmp_path / 'elsewhere').mkdir()
    (tmp_path / 'elsewhere' / 'keep.txt').write_text(media_uri_for(b'kept') + '\n')
    (tmp_path / 'root' / 'linked').symlink_to(tmp_path / 'elsewhere')
    (tmp_path / 'elsewhere' / 'loop').symlink_to(tmp_path / 'root')
    batches = [batch async for batch in JsonFileRoot(tmp_path / 'root').reference_batches()]
    assert batches == [{media_uri_for(b'kept')}]


async def test_classifier_answers_tune_and_gc_alike(tmp_path: Path) -> None:
    """A run folder with snapshots but no run.json is a step store for both (gc and tune disagreed before)."""
    (tmp_path / 'r1' / 'snapshots').mkdir(parents=True)
    assert classify(tmp_path) is PathKind.FILE_STEP_STORE
    from mediastash.tuning._inputs import step_store_kind

    assert step_store_kind(tmp_path) == 'folder'
    (tmp_path / 'empty').mkdir()
    assert classify(tmp_path / 'empty') is PathKind.FOLDER


# -- item 10: JSON nested deeper than the parser's stack --------------------------------------------


async def test_deep_json_roots_raise_root_read_error(tmp_path: Path) -> None:
    media = MemoryMediaStore()
    orphan = await media.put(b'unreferenced')
    set_written_at(media, orphan, time.time() - 2 * HOUR)
    (tmp_path / 'deep.json').write_text(deep_json())
    (tmp_path / 'deep.jsonl').write_text('[]\n' + deep_json() + '\n')
    for spec in (f'json:{tmp_path / "deep.json"}', str(tmp_path / 'deep.json'), f'jsonl:{tmp_path / "deep.jsonl"}'):
        with pytest.raises(RootReadError, match='nested too deeply'):
            await collect_garbage(media, [spec], grace=0, dry_run=False)
    with pytest.raises(RootReadError, match=r'deep\.json'):
        await collect_garbage(media, [tmp_path], grace=0, dry_run=False)
    assert await stored(media) == {orphan}


async def test_deep_rows_and_records_raise_root_read_error(tmp_path: Path) -> None:
    database = tmp_path / 'steps.db'
    await SqliteStepStore(database=database, media_store=None).register_run(RunRecord(run_id='r'))
    with sqlite3.connect(database) as connection:
        connection.execute(
            "INSERT INTO snapshots (run_id, step_index, timestamp, messages) VALUES ('r', 1, '', ?)", (deep_json(),)
        )
    with pytest.raises(RootReadError, match='nested too deeply'):
        await references_of(SqliteStepStoreRoot(database))

    class DeepKV:
        async def query(self, pk: str) -> list[tuple[str, str]]:
            return [('sk', '{"__harness_external_": ' + deep_json() + '}')]

    with pytest.raises(RootReadError, match='nested too deeply'):
        await references_of(KVRoot(DeepKV(), partitions=['p']))


def test_cli_deep_json_root_is_one_line_and_deletes_nothing(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    orphan = asyncio.run(media.put(b'unreferenced'))
    age_folder(tmp_path / 'media', time.time() - 2 * HOUR)
    (tmp_path / 'deep.json').write_text(deep_json())
    result = run_cli('gc', '--store', 'media', '--roots', 'json:deep.json', '--grace', '0', '--delete', cwd=tmp_path)
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr and 'RecursionError' not in result.stderr
    assert result.stderr.strip().count('\n') == 0 and 'deep.json' in result.stderr
    assert asyncio.run(stored(DiskMediaStore(tmp_path / 'media'))) == {orphan}
