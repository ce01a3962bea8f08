"""``--roots langgraph-sqlite:DB`` and ``--roots agents-sqlite:DB``: framework databases as garbage-collection roots,
read read-only with SQL and no framework code, through the ``mediastash gc`` command and in Python.

Each keeps exactly what the framework's own objects reference (compared with ``CheckpointerRoot`` and
``SessionRoot``), deletes the orphans, stops on a value it cannot read without running it, and names only the
database path in its errors.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from langgraph.checkpoint.sqlite import SqliteSaver

from mediastash import DiskMediaStore
from mediastash.cli import main as cli_main
from mediastash.errors import InvalidArgumentError
from mediastash.gc import (
    CheckpointerRoot,
    LangGraphPostgresRoot,
    LangGraphSQLiteRoot,
    MongoStepStoreRoot,
    PostgresStepStoreRoot,
    RootReadError,
    SQLiteSessionRoot,
    collect_garbage,
    root_from_spec,
)
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.integrations.openai_agents import OffloadingSession, SessionRoot
from tests.test_integrations_langgraph_graph import build_graph


def all_uris(folder: Path) -> set[str]:
    async def listed() -> set[str]:
        store = DiskMediaStore(folder)
        try:
            return {uri async for uri in store.iter_uris()}
        finally:
            await store.aclose()

    return asyncio.run(listed())


def put_orphan(folder: Path) -> str:
    async def put() -> str:
        store = DiskMediaStore(folder)
        try:
            return await store.put(os.urandom(9000))
        finally:
            await store.aclose()

    return asyncio.run(put())


def collected(store_folder: Path, root: Any, uris_file: Path) -> set[str]:
    """The URIs a dry run judges deletable with ``root`` alone."""

    async def run() -> set[str]:
        store = DiskMediaStore(store_folder)
        try:
            report = await collect_garbage(store, [root], grace=0, uris_file=uris_file)
            return set(report.iter_uris('deletable'))
        finally:
            await store.aclose()

    return asyncio.run(run())


def langgraph_database(tmp_path: Path) -> tuple[Path, Path, set[str]]:
    """A SqliteSaver database written through the wrapper by a 4-step graph; its media folder; the blobs it uses."""
    database, media = tmp_path / 'checkpoints.db', tmp_path / 'media'
    with (
        SqliteSaver.from_conn_string(str(database)) as inner,
        OffloadingCheckpointSaver(inner, media_store=DiskMediaStore(media)) as saver,
    ):
        build_graph(4, 70_000, 70_000).compile(checkpointer=saver).invoke(
            {'messages': [], 'step': 0}, {'configurable': {'thread_id': 'gc'}}
        )
    return database, media, all_uris(media)


def test_langgraph_sqlite_keeps_what_the_checkpointer_references(tmp_path: Path) -> None:
    database, media, used = langgraph_database(tmp_path)
    assert len(used) == 4 + 1  # four images and one tool output
    orphan = put_orphan(media)
    root = root_from_spec(f'langgraph-sqlite:{database}')
    assert isinstance(root, LangGraphSQLiteRoot)
    assert collected(media, root, tmp_path / 'sql.txt') == {orphan}

    async def through_langgraph() -> set[str]:
        store = DiskMediaStore(media)
        try:
            with SqliteSaver.from_conn_string(str(database)) as saver:
                report = await collect_garbage(
                    store, [CheckpointerRoot(saver)], grace=0, uris_file=tmp_path / 'objects.txt'
                )
            return set(report.iter_uris('deletable'))
        finally:
            await store.aclose()

    assert asyncio.run(through_langgraph()) == {orphan}  # the same answer as reading through LangGraph

    arguments = ['gc', '--store', str(media), '--roots', f'langgraph-sqlite:{database}', '--grace', '0', '--delete']
    assert cli_main([*arguments, '-q']) == 0
    assert all_uris(media) == used


def test_langgraph_sqlite_stops_on_a_value_it_would_have_to_run(tmp_path: Path, capsys: Any) -> None:
    database, media, used = langgraph_database(tmp_path)
    orphan = put_orphan(media)
    with sqlite3.connect(database) as connection:
        connection.execute(
            "INSERT INTO writes VALUES ('gc', '', 'x', 'task', '', 0, 'messages', 'pickle', ?)", (b'\x80\x04N.',)
        )
    with pytest.raises(RootReadError, match="serializer type 'pickle'"):
        collected(media, LangGraphSQLiteRoot(database), tmp_path / 'uris.txt')
    arguments = ['gc', '--store', str(media), '--roots', f'langgraph-sqlite:{database}', '--grace', '0', '--delete']
    assert cli_main(arguments) != 0
    assert all_uris(media) == used | {orphan}  # nothing deleted
    assert 'pickle' in capsys.readouterr().err


def test_langgraph_sqlite_refuses_another_database(tmp_path: Path) -> None:
    other = tmp_path / 'other.db'
    sqlite3.connect(other).execute('CREATE TABLE checkpoints (x)').connection.close()
    with pytest.raises(RootReadError, match='not a LangGraph SqliteSaver database'):
        collected(tmp_path / 'media', LangGraphSQLiteRoot(other), tmp_path / 'uris.txt')


def test_agents_sqlite_keeps_what_every_session_references(tmp_path: Path) -> None:
    database, media = tmp_path / 'sessions.db', tmp_path / 'media'

    async def write() -> tuple[OffloadingSession, OffloadingSession]:
        store = DiskMediaStore(media)
        sessions = (
            OffloadingSession(SQLiteSession('a', database), media_store=store),
            OffloadingSession(SQLiteSession('b', database), media_store=store),
        )
        for number, session in enumerate(sessions):
            image = f'data:image/png;base64,{os.urandom(90_000).hex()}'  # hex: valid base64 alphabet, canonical
            await session.add_items(
                [
                    {'role': 'user', 'content': [{'type': 'input_image', 'image_url': image, 'detail': 'auto'}]},
                    {'type': 'function_call_output', 'call_id': f'c{number}', 'output': 'x' * 100_000 + str(number)},
                ]
            )
        return sessions

    first, _second = asyncio.run(write())
    used = all_uris(media)
    assert len(used) == 4
    orphan = put_orphan(media)
    assert isinstance(root_from_spec(f'agents-sqlite:{database}'), SQLiteSessionRoot)
    assert collected(media, root_from_spec(f'agents-sqlite:{database}'), tmp_path / 'sql.txt') == {orphan}
    assert len(_uris_of(first)) == 2
    assert collected(media, SessionRoot(first), tmp_path / 'first.txt') == {orphan} | (used - _uris_of(first))

    arguments = ['gc', '--store', str(media), '--roots', f'agents-sqlite:{database}', '--grace', '0', '--delete']
    assert cli_main([*arguments, '-q']) == 0
    assert all_uris(media) == used


def _uris_of(session: OffloadingSession) -> set[str]:
    async def read() -> set[str]:
        found: set[str] = set()
        async for batch in SessionRoot(session).reference_batches():
            found |= batch
        return found

    return asyncio.run(read())


def test_kv_sqlite_keeps_what_an_offloading_kv_over_sqlite_references(tmp_path: Path) -> None:
    import base64
    import json

    from mediastash.gc import SQLiteKVRoot
    from mediastash.integrations import OffloadingKV
    from tests.test_provider_files import SqliteKV

    database, media = tmp_path / 'kv.db', tmp_path / 'media'
    payloads = [os.urandom(80_000) for _ in range(3)]

    async def write() -> None:
        store = DiskMediaStore(media)
        try:
            kv = OffloadingKV(SqliteKV(database), media_store=store)
            for number, payload in enumerate(payloads):
                part = {
                    'part_kind': 'user-prompt',
                    'content': [
                        {'kind': 'binary', 'data': base64.b64encode(payload).decode(), 'media_type': 'image/png'}
                    ],
                }
                await kv.put(f'run#{number}', 'step#1', json.dumps([{'kind': 'request', 'parts': [part]}]))
            await kv.put('note', 'plain', 'not JSON at all')
        finally:
            await store.aclose()

    asyncio.run(write())
    used = all_uris(media)
    assert len(used) == 3
    orphan = put_orphan(media)
    root = root_from_spec(f'kv-sqlite:{database}')
    assert isinstance(root, SQLiteKVRoot)
    assert collected(media, root, tmp_path / 'dry.txt') == {orphan}
    with sqlite3.connect(database) as connection:
        connection.execute("DELETE FROM kv WHERE pk = 'run#1'")
    arguments = ['gc', '--store', str(media), '--roots', f'kv-sqlite:{database}', '--grace', '0', '--delete', '-q']
    assert cli_main(arguments) == 0
    assert all_uris(media) == used - {orphan} - {_uri(payloads[1])}
    with pytest.raises(RootReadError, match='no records table'):
        collected(media, SQLiteKVRoot(database, table='records'), tmp_path / 'x.txt')
    with pytest.raises(InvalidArgumentError, match='column'):
        SQLiteKVRoot(database, column='data"; --')


def _uri(payload: bytes) -> str:
    from mediastash.uri import media_uri_for

    return media_uri_for(payload)


def with_query(dsn: str, parameter: str) -> str:
    return f'{dsn}{"&" if "?" in dsn else "?"}{parameter}'


def test_langgraph_postgres_keeps_what_the_checkpointer_references(
    tmp_path: Path, postgres_dsn: str, capsys: Any
) -> None:
    from tests.test_integrations_langgraph_sync import postgres_saver

    media = tmp_path / 'media'
    with postgres_saver(postgres_dsn) as inner:
        with OffloadingCheckpointSaver(inner, media_store=DiskMediaStore(media)) as saver:
            build_graph(4, 70_000, 70_000).compile(checkpointer=saver).invoke(
                {'messages': [], 'step': 0}, {'configurable': {'thread_id': 'pg-gc'}}
            )
        used = all_uris(media)
        assert len(used) == 4 + 1
        orphan = put_orphan(media)
        schema = inner.conn.execute('SHOW search_path').fetchone()['search_path']
        dsn = with_query(postgres_dsn, f'search_path={schema}')
        root = root_from_spec(f'langgraph-postgres:{dsn}')
        assert isinstance(root, LangGraphPostgresRoot)
        assert collected(media, root, tmp_path / 'sql.txt') == {orphan}
        assert collected(media, CheckpointerRoot(inner), tmp_path / 'objects.txt') == {orphan}  # a sync saver too
        wrong_schema = LangGraphPostgresRoot(with_query(postgres_dsn, 'search_path=no_such_schema'))
        with pytest.raises(RootReadError, match='not a LangGraph PostgresSaver database'):
            collected(media, wrong_schema, tmp_path / 'x.txt')

        arguments = ['gc', '--store', str(media), '--roots', f'langgraph-postgres:{dsn}', '--grace', '0', '--delete']
        assert cli_main(arguments) == 0
        assert all_uris(media) == used
        printed = capsys.readouterr()
        assert dsn not in printed.out + printed.err


def test_postgres_roots_never_show_the_credentials(tmp_path: Path) -> None:
    secret = 's3cret-pass-word'
    root = root_from_spec('langgraph-postgres:postgresql://someone@127.0.0.1:1/checkpoints')
    with pytest.raises(RootReadError) as caught:
        collected(tmp_path / 'media', root, tmp_path / 'x.txt')
    assert 'someone' not in str(caught.value) and '127.0.0.1:1/checkpoints' in str(caught.value)
    for spec in (
        f'langgraph-postgres:postgresql://someone:{secret}@127.0.0.1/db',
        f'pg-steps:postgresql://127.0.0.1/db?password={secret}',
        f'langgraph-postgres:mysql://someone:{secret}@host/db',
    ):
        with pytest.raises(InvalidArgumentError, match='dsn') as refused:
            root_from_spec(spec)
        assert secret not in str(refused.value)
    with pytest.raises(InvalidArgumentError, match='table'):
        PostgresStepStoreRoot('postgresql://127.0.0.1/db', table='x"; drop')


def test_pg_steps_keeps_what_a_harness_postgres_step_store_references(tmp_path: Path, postgres_dsn: str) -> None:
    import uuid

    import asyncpg
    from pydantic_ai import messages as m
    from pydantic_ai_harness.step_persistence import ContinuableSnapshot, PostgresStepStore, RunRecord

    schema = f'steps_{uuid.uuid4().hex[:12]}'
    media = tmp_path / 'media'
    images = [os.urandom(90_000) for _ in range(2)]

    async def write() -> None:
        admin = await asyncpg.connect(postgres_dsn)
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        await admin.close()
        pool = await asyncpg.create_pool(postgres_dsn, server_settings={'search_path': schema})
        store = DiskMediaStore(media)
        try:
            steps = PostgresStepStore(pool, media_store=store)
            for number, image in enumerate(images):
                run = f'run-{number}'
                await steps.register_run(RunRecord(run_id=run))
                part = m.UserPromptPart(content=['look', m.BinaryContent(data=image, media_type='image/png')])
                messages = [m.ModelRequest(parts=[part])]
                await steps.save_snapshot(ContinuableSnapshot(run_id=run, step_index=1, messages=messages))
        finally:
            await pool.close()
            await store.aclose()

    async def drop() -> None:
        admin = await asyncpg.connect(postgres_dsn)
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()

    asyncio.run(write())
    try:
        used = all_uris(media)
        assert used == {_uri(image) for image in images}
        orphan = put_orphan(media)
        dsn = with_query(postgres_dsn, f'search_path={schema}')
        root = root_from_spec(f'pg-steps:{dsn}')
        assert isinstance(root, PostgresStepStoreRoot)
        assert collected(media, root, tmp_path / 'dry.txt') == {orphan}
        arguments = ['gc', '--store', str(media), '--roots', f'pg-steps:{dsn}', '--grace', '0', '--delete', '-q']
        assert cli_main(arguments) == 0
        assert all_uris(media) == used
        with pytest.raises(RootReadError, match='not a PostgresStepStore database'):
            collected(media, PostgresStepStoreRoot(dsn, table='other_prefix'), tmp_path / 'x.txt')
    finally:
        asyncio.run(drop())


def test_mongo_steps_keeps_what_a_harness_mongo_step_store_references(tmp_path: Path, mongo_uri: str) -> None:
    from pydantic_ai import messages as m
    from pydantic_ai_harness.step_persistence import ContinuableSnapshot, MongoStepStore, RunRecord

    from tests.mongo_support import unique_name

    database = unique_name('steps')
    media = tmp_path / 'media'
    images = [os.urandom(90_000) for _ in range(2)]

    async def write() -> None:
        store = DiskMediaStore(media)
        steps = MongoStepStore(db_url=mongo_uri, database=database, media_store=store)
        try:
            for number, image in enumerate(images):
                run = f'run-{number}'
                await steps.register_run(RunRecord(run_id=run))
                part = m.UserPromptPart(content=['look', m.BinaryContent(data=image, media_type='image/png')])
                await steps.save_snapshot(
                    ContinuableSnapshot(run_id=run, step_index=1, messages=[m.ModelRequest(parts=[part])])
                )
        finally:
            await steps.aclose()
            await store.aclose()

    asyncio.run(write())
    used = all_uris(media)
    assert used == {_uri(image) for image in images}
    orphan = put_orphan(media)
    hosts, _, rest = mongo_uri.partition('://')[2].partition('/')
    url = f'mongodb://{hosts}/{database}' + (f'?{rest.partition("?")[2]}' if '?' in rest else '')
    root = root_from_spec(f'mongo-steps:{url}')
    assert isinstance(root, MongoStepStoreRoot) and root.database == database
    assert collected(media, root, tmp_path / 'dry.txt') == {orphan}
    arguments = ['gc', '--store', str(media), '--roots', f'mongo-steps:{url}', '--grace', '0', '--delete', '-q']
    assert cli_main(arguments) == 0
    assert all_uris(media) == used
    with pytest.raises(RootReadError, match='not a MongoStepStore database'):
        collected(media, MongoStepStoreRoot(url, database=unique_name('empty')), tmp_path / 'x.txt')
    secret = 's3cret-pass-word'
    with pytest.raises(InvalidArgumentError, match='naming the database') as refused:
        root_from_spec(f'mongo-steps:mongodb://someone:{secret}@{hosts}/')
    assert secret not in str(refused.value)
    assert secret not in MongoStepStoreRoot(f'mongodb://someone:{secret}@{hosts}/db').describe()
