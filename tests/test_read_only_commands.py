"""Read-only commands on SQLite files leave every file as it was (issue 28, item 2).

A read-only connection to a WAL database nobody has open used to create ``DB-wal`` and ``DB-shm`` and leave them
(``gc --roots sqlite-steps:DB`` or a bare ``DB``, a root folder holding one); ``tune DB`` opened the database through
the harness store, which switches it to WAL and sets its schema up (a rollback-journal database was rewritten).
Every read-only command runs here on a WAL and a rollback-journal database: the folders' listings, sizes,
modification times and contents are the same afterwards. ``mediastash._sqlite_read`` says how.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, RunRecord, SqliteStepStore

from mediastash import SqliteMediaStore, externalize_media
from mediastash._sqlite_read import read_only
from mediastash.cli import main
from mediastash.gc import RootReadError, SQLiteSessionRoot, SqliteStepStoreRoot
from mediastash.integrations import OffloadingStepStore
from mediastash.markers import MARKER_KEY, URI_KEY
from mediastash.uri import media_uri_for

JOURNALS = ('wal', 'delete')

FileState = dict[str, tuple[int, int, str]]


def folder_state(*folders: Path) -> FileState:
    """Every file below ``folders``: size, modification time (ns) and sha256 of its bytes."""
    found: FileState = {}
    for folder in folders:
        for path in sorted(folder.rglob('*')):
            if path.is_file():
                info = path.stat()
                found[str(path)] = (info.st_size, info.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def set_journal(database: Path, mode: str) -> None:
    connection = sqlite3.connect(database)
    try:
        assert connection.execute(f'PRAGMA journal_mode={mode}').fetchone()[0] == mode
    finally:
        connection.close()


async def write_run(steps: Path, media: Path) -> None:
    """A run saved the documented way: OffloadingStepStore over a harness SqliteStepStore, media in SQLite."""
    media_store = SqliteMediaStore(database=media)
    store = OffloadingStepStore(SqliteStepStore(database=steps, media_store=None), media_store=media_store)
    await store.register_run(RunRecord(run_id='run-1'))
    messages = [
        ModelRequest(parts=[UserPromptPart(['look', BinaryContent(os.urandom(90_000), media_type='image/png')])]),
        ModelResponse(parts=[TextPart('an answer line\n' * 8000)]),
    ]
    await store.save_snapshot(ContinuableSnapshot(run_id='run-1', step_index=1, messages=messages, state='complete'))
    await media_store.aclose()


@pytest.fixture(params=JOURNALS)
def files(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """``roots/steps.db`` (a step store), ``media/media.db`` and ``media/other.db`` (media stores), ``lean.json``,
    every database in the journal mode of the parameter, nobody holding any open."""
    journal = request.param
    (tmp_path / 'roots').mkdir()
    (tmp_path / 'media').mkdir()
    steps, media = tmp_path / 'roots' / 'steps.db', tmp_path / 'media' / 'media.db'
    asyncio.run(write_run(steps, media))

    async def lean() -> None:
        store = SqliteMediaStore(database=media)
        tree = {'kind': 'binary', 'data': 'QUJD' * 40_000, 'media_type': 'text/plain'}
        (tmp_path / 'lean' / 'lean.json').write_text(json.dumps(await externalize_media(tree, media_store=store)))
        await store.aclose()

    (tmp_path / 'lean').mkdir()
    asyncio.run(lean())
    shutil.copyfile(media, tmp_path / 'media' / 'other.db')
    for database in (steps, media, tmp_path / 'media' / 'other.db'):
        set_journal(database, journal)
    names = sorted(p.name for p in tmp_path.rglob('*') if p.is_file())
    assert names == ['lean.json', 'media.db', 'other.db', 'steps.db']
    return tmp_path


def commands(base: Path) -> dict[str, list[str]]:
    media = f'sqlite:///{base / "media" / "media.db"}'
    steps = str(base / 'roots' / 'steps.db')
    return {
        'gc sqlite-steps:DB': ['gc', '-q', '--store', media, '--roots', f'sqlite-steps:{steps}'],
        'gc DB': ['gc', '-q', '--store', media, '--roots', steps],
        'gc FOLDER': ['gc', '-q', '--store', media, '--roots', str(base / 'roots')],
        'stats': ['stats', '-q', media],
        'ls': ['ls', '-q', media],
        'verify': ['verify', '-q', media],
        'diff': ['diff', '-q', media, f'sqlite:///{base / "media" / "other.db"}'],
        'tune DB': ['tune', '-q', steps, '--media', media, '--store', 'memory://', '--thresholds', '64KiB'],
        'restore': ['restore', '-q', '--store', media, str(base / 'lean' / 'lean.json'), str(base / 'out.json')],
    }


@pytest.mark.parametrize('command', sorted(commands(Path())))
def test_a_read_only_command_changes_no_file(files: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = folder_state(files / 'roots', files / 'media', files / 'lean')
    code = main(commands(files)[command])
    output = capsys.readouterr()
    assert code == 0, output.err
    assert folder_state(files / 'roots', files / 'media', files / 'lean') == before


def test_the_commands_read_what_they_should(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not vacuous: gc marks the run's two blobs (of three), tune replays the run, restore writes the payload."""
    assert main([*commands(files)['gc sqlite-steps:DB'], '--json']) == 0
    report = json.loads(capsys.readouterr().out)
    assert report['referenced'] == 2 and report['scanned'] == 3
    assert main([*commands(files)['tune DB'], '--json']) == 0
    assert 'steps.db#run-1' in capsys.readouterr().out
    assert main(commands(files)['restore']) == 0
    assert json.loads((files / 'out.json').read_text())['data'] == 'QUJD' * 40_000


def test_an_immutable_read_disturbed_by_a_writer_is_refused(tmp_path: Path) -> None:
    """A WAL database nobody had open is read without locks; a writer arriving meanwhile is detected."""
    database = tmp_path / 'steps.db'
    asyncio.run(write_run(database, tmp_path / 'media.db'))
    set_journal(database, 'wal')
    opened = read_only(database)
    assert opened.immutable and opened.unchanged()
    assert opened.connection.execute('SELECT count(*) FROM snapshots').fetchone() == (1,)
    writer = sqlite3.connect(database)
    try:
        writer.execute("UPDATE runs SET agent_name = 'x'")
        writer.commit()
        assert not opened.unchanged()
    finally:
        writer.close()
        opened.connection.close()

    async def collect_while_a_writer_works() -> None:
        root = SqliteStepStoreRoot(database)
        batches = root.reference_batches()
        await anext(batches)  # the first page is read; now a writer comes
        other = sqlite3.connect(database)
        try:
            other.execute("UPDATE runs SET agent_name = 'y'")
            other.commit()
            with pytest.raises(RootReadError, match='a writer opened the database while it was read'):
                async for _ in batches:
                    pass
        finally:
            other.close()

    asyncio.run(collect_while_a_writer_works())


def test_a_database_a_writer_holds_open_is_read_with_locks(tmp_path: Path) -> None:
    """Its -wal exists (the writer's): read with SQLite's locking, nothing else created, no retry needed."""
    database = tmp_path / 'steps.db'
    asyncio.run(write_run(database, tmp_path / 'media.db'))
    set_journal(database, 'wal')
    writer = sqlite3.connect(database)
    try:
        writer.execute('SELECT count(*) FROM runs').fetchone()
        assert (tmp_path / 'steps.db-wal').exists()
        names = sorted(p.name for p in tmp_path.iterdir())
        opened = read_only(database)
        assert not opened.immutable
        writer.execute("UPDATE runs SET agent_name = 'z'")
        writer.commit()
        assert opened.connection.execute('SELECT agent_name FROM runs').fetchone() == ('z',)
        assert opened.unchanged()
        opened.connection.close()
        assert sorted(p.name for p in tmp_path.iterdir()) == names
    finally:
        writer.close()


def test_tune_refuses_a_schema_it_would_have_to_upgrade(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An older harness's database: the harness store would add a column; a read-only tune says so instead."""
    database = tmp_path / 'steps.db'
    asyncio.run(write_run(database, tmp_path / 'media.db'))
    connection = sqlite3.connect(database)
    connection.execute('ALTER TABLE runs DROP COLUMN registration_id')
    connection.close()
    before = folder_state(tmp_path)
    media = f'sqlite:///{tmp_path / "media.db"}'
    code = main(['tune', '-q', str(database), '--media', media, '--store', 'memory://', '--thresholds', '64KiB'])
    assert code == 1
    assert 'schema is older than the installed pydantic-ai-harness' in capsys.readouterr().err
    assert folder_state(tmp_path) == before


@pytest.mark.parametrize('journal', JOURNALS)
def test_a_session_database_root_changes_no_file(tmp_path: Path, journal: str) -> None:
    """``SQLiteSessionRoot`` (an OpenAI Agents ``SQLiteSession`` database) reads through the same opening."""
    uri = media_uri_for(b'session payload')
    marker = {'kind': 'binary', MARKER_KEY: True, URI_KEY: uri, 'uri': uri}
    database = tmp_path / 'sessions.db'
    connection = sqlite3.connect(database)
    connection.execute('CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, message_data TEXT)')
    connection.execute("INSERT INTO agent_messages (session_id, message_data) VALUES ('s', ?)", (json.dumps(marker),))
    connection.commit()
    connection.close()
    set_journal(database, journal)
    before = folder_state(tmp_path)

    async def read() -> set[str]:
        return {found async for batch in SQLiteSessionRoot(database).reference_batches() for found in batch}

    assert asyncio.run(read()) == {uri}
    assert folder_state(tmp_path) == before


async def write_checkpoints(database: Path, media: Path) -> None:
    """One checkpoint with an image and a long text, through OffloadingCheckpointSaver on AsyncSqliteSaver."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from mediastash.integrations.langgraph import OffloadingCheckpointSaver

    image = base64.b64encode(os.urandom(90_000)).decode()
    messages = [
        HumanMessage(content=[{'type': 'image', 'base64': image, 'mime_type': 'image/png'}], id='h'),
        AIMessage(content='an answer line\n' * 8000, id='a'),
    ]
    media_store = SqliteMediaStore(database=media)
    async with AsyncSqliteSaver.from_conn_string(str(database)) as inner:
        saver = OffloadingCheckpointSaver(inner, media_store=media_store)
        checkpoint = empty_checkpoint()
        checkpoint['channel_values'] = {'messages': messages}
        checkpoint['channel_versions'] = {'messages': 1}
        config: Any = {'configurable': {'thread_id': 't', 'checkpoint_ns': ''}}
        await saver.aput(config, checkpoint, {'source': 'loop', 'step': 1, 'parents': {}}, {'messages': 1})
    await media_store.aclose()


@pytest.mark.parametrize('journal', JOURNALS)
def test_gc_with_a_langgraph_sqlite_root_changes_no_file(
    tmp_path: Path, journal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    database, media = tmp_path / 'checkpoints.db', tmp_path / 'media.db'
    asyncio.run(write_checkpoints(database, media))
    set_journal(database, journal)
    set_journal(media, journal)
    before = folder_state(tmp_path)
    code = main(['gc', '-q', '--json', '--store', f'sqlite:///{media}', '--roots', f'langgraph-sqlite:{database}'])
    output = capsys.readouterr()
    assert code == 0, output.err
    assert json.loads(output.out)['referenced'] == 2
    assert folder_state(tmp_path) == before
