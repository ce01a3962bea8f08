"""langgraph-checkpoint-conformance over ``OffloadingCheckpointSaver``: every capability the inner saver passes,
the wrapper passes, and the wrapper offers exactly the capabilities the inner saver offers.

Inner savers: ``InMemorySaver``, ``AsyncSqliteSaver`` (a SQLite file) and
``AsyncPostgresSaver`` on the project's PostgreSQL test server (a schema of
its own, dropped afterwards). Each is validated plain and wrapped in the same
run, and the two reports compared capability by capability.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.conformance.report import CapabilityReport
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from mediastash import DiskMediaStore, MemoryMediaStore
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.walker import WalkOptions
from tests.postgres_support import postgres_dsn

__all__ = ['postgres_dsn']  # the session fixture, imported so pytest finds it here

InnerFactory = Callable[[], AbstractAsyncContextManager[BaseCheckpointSaver[Any]]]


async def _reports(name: str, inner: InnerFactory, tmp_path: Path) -> tuple[CapabilityReport, CapabilityReport]:
    """The conformance reports of the plain inner saver and of the wrapper around a fresh one."""

    async def plain() -> AsyncGenerator[BaseCheckpointSaver[Any], None]:
        async with inner() as saver:
            yield saver

    async def wrapped() -> AsyncGenerator[BaseCheckpointSaver[Any], None]:
        async with inner() as saver:
            store = DiskMediaStore(tmp_path / f'media-{uuid.uuid4().hex}')
            try:
                yield OffloadingCheckpointSaver(saver, media_store=store, options=WalkOptions(threshold_bytes=1))
            finally:
                await store.aclose()

    plain_report = await validate(checkpointer_test(name=f'{name} (plain)')(plain))
    wrapped_report = await validate(checkpointer_test(name=f'{name} (wrapped)')(wrapped))
    return plain_report, wrapped_report


def _check(plain: CapabilityReport, wrapped: CapabilityReport) -> None:
    plain_detected = {name for name, result in plain.results.items() if result.detected}
    wrapped_detected = {name for name, result in wrapped.results.items() if result.detected}
    assert wrapped_detected == plain_detected
    assert {'put', 'put_writes', 'get_tuple', 'list', 'delete_thread'} <= plain_detected
    for name, result in plain.results.items():
        if result.passed is True:
            assert wrapped.results[name].passed is True, (name, wrapped.results[name].failures)
            assert wrapped.results[name].tests_passed == result.tests_passed
    assert wrapped.passed_all(), wrapped.to_dict()


async def test_conformance_in_memory(tmp_path: Path) -> None:
    @asynccontextmanager
    async def inner() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        yield InMemorySaver()

    _check(*await _reports('InMemorySaver', inner, tmp_path))


async def test_conformance_async_sqlite(tmp_path: Path) -> None:
    @asynccontextmanager
    async def inner() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / f'{uuid.uuid4().hex}.db')) as saver:
            yield saver

    _check(*await _reports('AsyncSqliteSaver', inner, tmp_path))


async def test_conformance_async_postgres(tmp_path: Path, postgres_dsn: str) -> None:
    schemas: list[str] = []

    @asynccontextmanager
    async def inner() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        schema = f'lg_{uuid.uuid4().hex[:12]}'
        schemas.append(schema)
        async with postgres_saver(postgres_dsn, schema) as saver:
            yield saver

    try:
        plain, wrapped = await _reports('AsyncPostgresSaver', inner, tmp_path)
    finally:
        await drop_schemas(postgres_dsn, schemas)
    assert 'prune' in {name for name, result in plain.results.items() if result.detected}
    _check(plain, wrapped)


@asynccontextmanager
async def postgres_saver(dsn: str, schema: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """An ``AsyncPostgresSaver`` whose tables live in a new schema of their own (``drop_schemas`` removes it)."""
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f'-c search_path={schema}'
    ) as connection:
        saver = AsyncPostgresSaver(connection)
        await saver.setup()
        yield saver


async def drop_schemas(dsn: str, schemas: list[str]) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        for schema in schemas:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_the_wrapper_offers_what_the_inner_class_offers() -> None:
    """Capability detection reads class overrides: the wrapper's class mirrors the inner saver's."""

    class WithCopy(InMemorySaver):
        async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
            raise AssertionError('not called here')

    store = MemoryMediaStore()
    plain = DetectedCapabilities.from_instance(OffloadingCheckpointSaver(InMemorySaver(), media_store=store))
    with_copy = OffloadingCheckpointSaver(WithCopy(), media_store=store)
    assert plain.detected == DetectedCapabilities.from_instance(InMemorySaver()).detected
    assert (
        DetectedCapabilities.from_instance(with_copy).detected
        == DetectedCapabilities.from_instance(WithCopy()).detected
    )
    assert isinstance(with_copy, OffloadingCheckpointSaver)
    assert type(with_copy).__name__ == 'OffloadingCheckpointSaver'
