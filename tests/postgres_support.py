"""Where the PostgreSQL tests find their server, and direct (store-bypassing) access to a store's tables.

``MEDIASTASH_POSTGRES_DSN`` names the server (``scripts/test`` starts one with
``scripts/postgres-server`` and sets it). When it is unset the tests skip,
unless ``MEDIASTASH_REQUIRE_POSTGRES`` is set (``scripts/test`` and CI set
it): then they fail, so a missing server is never a silent pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

DSN_VARIABLE = 'MEDIASTASH_POSTGRES_DSN'
REQUIRE_VARIABLE = 'MEDIASTASH_REQUIRE_POSTGRES'


@pytest.fixture(scope='session')
def postgres_dsn() -> str:
    """The server's DSN, or skip (fail when ``MEDIASTASH_REQUIRE_POSTGRES`` is set)."""
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        return dsn
    message = f'{DSN_VARIABLE} is unset: start a server with  eval "$(scripts/postgres-server start)"'
    if os.environ.get(REQUIRE_VARIABLE):
        pytest.fail(f'{message} ({REQUIRE_VARIABLE} is set, so this is a failure)', pytrace=False)
    pytest.skip(message)


def unique_table(prefix: str = 't') -> str:
    """A table name no other test uses."""
    return f'{prefix}_{uuid.uuid4().hex[:16]}'


def digest_of(uri: str) -> str:
    return uri.removeprefix('media+sha256://')


class RawTables:
    """A store's tables, reached through a connection of the test's own (the "backend bypass")."""

    def __init__(self, connection: Any, table: str, schema: str = 'public') -> None:
        self.connection = connection
        self.table = table
        self.main = f'"{schema}"."{table}"'
        self.chunked = f'"{schema}"."{table}_chunked"'
        self.chunks = f'"{schema}"."{table}_chunks"'
        self.schema = schema

    async def exists(self, name: str) -> bool:
        return bool(await self.connection.fetchval('SELECT to_regclass($1) IS NOT NULL', f'"{self.schema}"."{name}"'))

    async def manifest(self, uri: str) -> Any:
        if not await self.exists(f'{self.table}_chunked'):
            return None
        return await self.connection.fetchrow(f'SELECT * FROM {self.chunked} WHERE sha256 = $1', digest_of(uri))

    async def row(self, uri: str) -> Any:
        if not await self.exists(self.table):
            return None
        return await self.connection.fetchrow(f'SELECT * FROM {self.main} WHERE sha256 = $1', digest_of(uri))

    async def read(self, uri: str) -> bytes | None:
        """The blob's bytes as stored: the inline row, else its chunks joined in order."""
        row = await self.row(uri)
        if row is not None:
            return bytes(row['bytes'])
        manifest = await self.manifest(uri)
        if manifest is None:
            return None
        rows = await self.connection.fetch(
            f'SELECT bytes FROM {self.chunks} WHERE chunk_set = $1 ORDER BY seq', manifest['chunk_set']
        )
        return b''.join(bytes(found['bytes']) for found in rows)

    async def overwrite(self, uri: str, data: bytes) -> None:
        """Replace the stored bytes with SQL, keeping the recorded size (and chunk size)."""
        if await self.row(uri) is not None:
            await self.connection.execute(f'UPDATE {self.main} SET bytes = $2 WHERE sha256 = $1', digest_of(uri), data)
            return
        manifest = await self.manifest(uri)
        assert manifest is not None, uri
        chunk_set, size = manifest['chunk_set'], manifest['chunk_bytes']
        async with self.connection.transaction():
            await self.connection.execute(f'DELETE FROM {self.chunks} WHERE chunk_set = $1', chunk_set)
            for seq, start in enumerate(range(0, len(data), size)):
                await self.connection.execute(
                    f'INSERT INTO {self.chunks} (chunk_set, seq, bytes) VALUES ($1, $2, $3)',
                    chunk_set,
                    seq,
                    data[start : start + size],
                )

    async def delete(self, uri: str) -> None:
        if await self.exists(self.table):
            await self.connection.execute(f'DELETE FROM {self.main} WHERE sha256 = $1', digest_of(uri))
        manifest = await self.manifest(uri)
        if manifest is not None:
            await self.connection.execute(f'DELETE FROM {self.chunked} WHERE sha256 = $1', digest_of(uri))
            await self.connection.execute(f'DELETE FROM {self.chunks} WHERE chunk_set = $1', manifest['chunk_set'])

    async def count(self) -> int:
        """Distinct blobs stored (inline rows and chunked manifests)."""
        parts = [f'SELECT sha256 FROM {self.main}'] if await self.exists(self.table) else []
        if await self.exists(f'{self.table}_chunked'):
            parts.append(f'SELECT sha256 FROM {self.chunked}')
        if not parts:
            return 0
        return int(await self.connection.fetchval(f'SELECT count(*) FROM ({" UNION ".join(parts)}) AS blobs'))

    async def chunk_rows(self) -> int:
        if not await self.exists(f'{self.table}_chunks'):
            return 0
        return int(await self.connection.fetchval(f'SELECT count(*) FROM {self.chunks}'))

    async def set_written_at(self, uri: str, when: float | None) -> None:
        await self.connection.execute(f'UPDATE {self.main} SET written_at = $2 WHERE sha256 = $1', digest_of(uri), when)
        if await self.exists(f'{self.table}_chunked'):
            await self.connection.execute(
                f'UPDATE {self.chunked} SET written_at = $2 WHERE sha256 = $1', digest_of(uri), when
            )

    async def stamped(self, uri: str) -> bool | None:
        """Whether the inline row's ``checked_xid`` stamp holds (its row version was written by the stamping
        writer); ``None`` when there is no inline row."""
        value = await self.connection.fetchval(
            f'SELECT coalesce(checked_xid = xmin::text::bigint, false) FROM {self.main} WHERE sha256 = $1',
            digest_of(uri),
        )
        return None if value is None else bool(value)

    async def columns(self, table: str | None = None) -> list[str]:
        rows = await self.connection.fetch(
            'SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 '
            'ORDER BY ordinal_position',
            self.schema,
            table or self.table,
        )
        return [str(row[0]) for row in rows]

    async def tables_like(self, prefix: str) -> list[str]:
        rows = await self.connection.fetch(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename LIKE $2 || '%' "
            'ORDER BY tablename',
            self.schema,
            prefix,
        )
        return [str(row[0]) for row in rows]

    async def drop(self) -> None:
        for name in await self.tables_like(self.table):
            await self.connection.execute(f'DROP TABLE IF EXISTS "{self.schema}"."{name}"')


async def raw_connection(dsn: str) -> Any:
    """A connection of the test's own, independent of any store's pool."""
    return await asyncpg.connect(dsn)


class CountingProxy:
    """A TCP forwarder in front of the server that counts the bytes clients send it (``sent``)."""

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self._upstream = (parts.hostname or '127.0.0.1', parts.port or 5432)
        self._parts = parts
        self.sent = 0
        self.dsn = ''
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> CountingProxy:
        self._server = await asyncio.start_server(self._serve, '127.0.0.1', 0)
        port = self._server.sockets[0].getsockname()[1]
        user = self._parts.netloc.rpartition('@')[0]
        self.dsn = urlunsplit(self._parts._replace(netloc=f'{user}@127.0.0.1:{port}'))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self._upstream)
        upstream = asyncio.ensure_future(self._pipe(client_reader, server_writer, count=True))
        downstream = asyncio.ensure_future(self._pipe(server_reader, client_writer, count=False))
        self._tasks.update((upstream, downstream))
        try:
            await asyncio.wait([upstream, downstream], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (upstream, downstream):
                task.cancel()
                self._tasks.discard(task)
            client_writer.close()
            server_writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, count: bool) -> None:
        while data := await reader.read(65536):
            if count:
                self.sent += len(data)
            writer.write(data)
            await writer.drain()
