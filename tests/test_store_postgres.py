"""``PostgresMediaStore`` against a real PostgreSQL server: the conformance suite (caller's pool, DSN-owned
pool, small chunks), harness interoperability both ways, tampering and healing, streaming in bounded memory,
concurrent writers in several processes, and the wrappers over pydantic-ai-harness's ``PostgresStepStore``.

The server comes from ``MEDIASTASH_POSTGRES_DSN`` (see ``tests/postgres_support.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from mediastash.stores.postgres import PostgresMediaStore
from mediastash.testing.store import StoreTests
from mediastash.urls import PublicUrlResolver
from tests.postgres_support import RawTables, postgres_dsn, raw_connection, unique_table

__all__ = ['postgres_dsn']  # the session fixture, imported so pytest finds it here

MiB = 1 << 20


class TestPostgresStorePool(StoreTests):
    """The suite on stores sharing one caller-owned asyncpg pool (never closed by the stores)."""

    chunk_size: int | None = None

    @pytest.fixture(autouse=True)
    async def _server(self, postgres_dsn: str) -> AsyncIterator[None]:
        self.dsn = postgres_dsn
        self.connection = await raw_connection(postgres_dsn)
        self.pool = await asyncpg.create_pool(postgres_dsn, min_size=0, max_size=8)
        self.raw: dict[int, RawTables] = {}
        yield
        await self.pool.close()
        for raw in {raw.table: raw for raw in self.raw.values()}.values():
            await raw.drop()
        await self.connection.close()

    def options(self) -> dict[str, Any]:
        return {} if self.chunk_size is None else {'chunk_size_bytes': self.chunk_size}

    def open(self, table: str, public_url: PublicUrlResolver | None = None) -> PostgresMediaStore:
        return PostgresMediaStore(self.pool, table=table, public_url=public_url, **self.options())

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> PostgresMediaStore:
        table = unique_table()
        store = self.open(table, public_url)
        self.raw[id(store)] = RawTables(self.connection, table)
        return store

    async def reopen_store(self, store: Any) -> PostgresMediaStore:
        again = self.open(store.table)
        self.raw[id(again)] = self.raw[id(store)]
        return again

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return await self.raw[id(store)].read(uri)

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        await self.raw[id(store)].overwrite(uri, data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        await self.raw[id(store)].delete(uri)

    async def raw_count(self, store: Any) -> int | None:
        return await self.raw[id(store)].count()

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        await self.raw[id(store)].set_written_at(uri, when)

    async def raw_storage_snapshot(self, store: Any) -> object | None:
        raw = self.raw[id(store)]
        return await raw.tables_like(raw.table), await raw.count()


class TestPostgresStoreSmallChunks(TestPostgresStorePool):
    """The same suite with 4 KiB chunks, so nearly every blob is split into chunk rows."""

    chunk_size = 4096


class TestPostgresStoreDsn(TestPostgresStorePool):
    """The suite on stores that open (and close) their own pool from a DSN."""

    def open(self, table: str, public_url: PublicUrlResolver | None = None) -> PostgresMediaStore:
        return PostgresMediaStore(dsn=self.dsn, table=table, public_url=public_url, **self.options())
