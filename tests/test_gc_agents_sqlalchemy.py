"""Every session of an OpenAI Agents SDK ``SQLAlchemySession`` database as a garbage-collection root (issue 30 item 3).

On SQLite the SDK's SQLAlchemy session keeps the table layout of ``SQLiteSession`` (``agent_messages.message_data``),
so ``agents-sqlite:DB`` reads it; on PostgreSQL ``agents-postgres:postgresql://...`` (``PostgresSessionRoot``) reads
it with SQL in one read-only transaction. Both keep exactly what the sessions reference (compared with
``SessionRoot`` over the SDK's own session objects), delete the orphan, and show no credential.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from sqlalchemy.ext.asyncio import create_async_engine

from mediastash import DiskMediaStore
from mediastash.cli import main as cli_main
from mediastash.errors import InvalidArgumentError, RootReadError
from mediastash.gc import collect_garbage, root_from_spec
from mediastash.integrations.openai_agents import OffloadingSession, PostgresSessionRoot, SessionRoot, SQLiteSessionRoot
from tests.postgres_support import postgres_dsn

__all__ = ['postgres_dsn']  # the session fixture, imported so pytest finds it here


def items(number: int) -> list[Any]:
    image = f'data:image/png;base64,{os.urandom(60_000).hex()}'  # hex: valid base64 alphabet, canonical
    return [
        {'role': 'user', 'content': [{'type': 'input_image', 'image_url': image, 'detail': 'auto'}]},
        {'type': 'function_call_output', 'call_id': f'c{number}', 'output': 'y' * 90_000 + str(number)},
    ]


async def write_sessions(engine: Any, media: Path) -> list[OffloadingSession]:
    """Two wrapped ``SQLAlchemySession`` sessions on ``engine``, two payloads each, written through the wrapper."""
    store = DiskMediaStore(media)
    sessions = [
        OffloadingSession(SQLAlchemySession(name, engine=engine, create_tables=True), media_store=store)
        for name in ('first', 'second')
    ]
    for number, session in enumerate(sessions):
        await session.add_items(items(number))
    return sessions


async def uris_in(media: Path) -> set[str]:
    store = DiskMediaStore(media)
    try:
        return {uri async for uri in store.iter_uris()}
    finally:
        await store.aclose()


async def deletable(media: Path, root: Any, uris_file: Path) -> set[str]:
    store = DiskMediaStore(media)
    try:
        report = await collect_garbage(store, [root], grace=0, uris_file=uris_file)
        return set(report.iter_uris('deletable'))
    finally:
        await store.aclose()


async def referenced(root: Any) -> set[str]:
    found: set[str] = set()
    async for batch in root.reference_batches():
        found |= batch
    return found


async def orphan(media: Path) -> str:
    store = DiskMediaStore(media)
    try:
        return await store.put(os.urandom(7000))
    finally:
        await store.aclose()


async def test_agents_sqlite_reads_every_sqlalchemy_session_on_sqlite(tmp_path: Path) -> None:
    database, media = tmp_path / 'sessions.db', tmp_path / 'media'
    engine = create_async_engine(f'sqlite+aiosqlite:///{database}')
    try:
        first, second = await write_sessions(engine, media)
        used = await uris_in(media)
        assert len(used) == 4
        assert await referenced(SessionRoot(first)) | await referenced(SessionRoot(second)) == used
        assert len(await referenced(SessionRoot(first))) == 2
    finally:
        await engine.dispose()
    lost = await orphan(media)

    root = root_from_spec(f'agents-sqlite:{database}')
    assert isinstance(root, SQLiteSessionRoot)
    assert await referenced(root) == used
    assert await deletable(media, root, tmp_path / 'dry.txt') == {lost}
    assert (
        await asyncio.to_thread(
            cli_main,
            ['gc', '--store', str(media), '--roots', f'agents-sqlite:{database}', '--grace', '0', '--delete', '-q'],
        )
        == 0
    )
    assert await uris_in(media) == used


@pytest.fixture
async def schema(postgres_dsn: str) -> AsyncIterator[str]:
    """A schema of its own in the test database, dropped afterwards."""
    import asyncpg

    name = f'agents_gc_{uuid.uuid4().hex[:12]}'
    connection = await asyncpg.connect(postgres_dsn)
    try:
        await connection.execute(f'CREATE SCHEMA "{name}"')
        yield name
        await connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await connection.close()


async def test_agents_postgres_reads_every_sqlalchemy_session_on_postgresql(
    tmp_path: Path, postgres_dsn: str, schema: str, capsys: Any
) -> None:
    media = tmp_path / 'media'
    url = postgres_dsn.replace('postgresql://', 'postgresql+asyncpg://', 1)
    engine = create_async_engine(url, connect_args={'server_settings': {'search_path': schema}})
    try:
        first, second = await write_sessions(engine, media)
        used = await uris_in(media)
        assert len(used) == 4
        assert await referenced(SessionRoot(first)) | await referenced(SessionRoot(second)) == used
    finally:
        await engine.dispose()
    lost = await orphan(media)

    dsn = f'{postgres_dsn}{"&" if "?" in postgres_dsn else "?"}search_path={schema}'
    root = root_from_spec(f'agents-postgres:{dsn}')
    assert isinstance(root, PostgresSessionRoot)
    assert await referenced(root) == used
    assert await deletable(media, root, tmp_path / 'dry.txt') == {lost}

    elsewhere = PostgresSessionRoot(f'{postgres_dsn}{"&" if "?" in postgres_dsn else "?"}search_path=no_such_schema')
    with pytest.raises(RootReadError, match='not a session database of the OpenAI Agents SDK'):
        await deletable(media, elsewhere, tmp_path / 'x.txt')

    arguments = ['gc', '--store', str(media), '--roots', f'agents-postgres:{dsn}', '--grace', '0', '--delete']
    assert await asyncio.to_thread(cli_main, arguments) == 0
    assert await uris_in(media) == used
    printed = capsys.readouterr()
    assert dsn not in printed.out + printed.err


def test_agents_postgres_never_shows_the_credentials(tmp_path: Path) -> None:
    secret = 'pa55-w0rd-never-shown'
    for spec in (
        f'agents-postgres:postgresql://someone:{secret}@127.0.0.1/db',
        f'agents-postgres:postgresql://127.0.0.1/db?password={secret}',
        f'agents-postgres:postgresql+asyncpg://someone:{secret}@127.0.0.1/db',
    ):
        with pytest.raises(InvalidArgumentError, match='dsn') as refused:
            root_from_spec(spec)
        assert secret not in str(refused.value)
    with pytest.raises(InvalidArgumentError, match='messages_table') as bad_table:
        PostgresSessionRoot('postgresql://127.0.0.1/db', messages_table=f'x"; {secret}')
    assert secret not in str(bad_table.value)

    unreachable = root_from_spec('agents-postgres:postgresql://someone@127.0.0.1:1/sessions')
    with pytest.raises(RootReadError) as caught:
        asyncio.run(deletable(tmp_path / 'media', unreachable, tmp_path / 'x.txt'))
    assert 'someone' not in str(caught.value) and '127.0.0.1:1/sessions' in str(caught.value)
