"""``PostgresMediaStore``: blobs in PostgreSQL tables over an asyncpg pool (the layout is in ``_layout``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Hashable, Mapping
from typing import Any, Final

import asyncpg

from mediastash.context import MediaContextLike, context_media_type
from mediastash.errors import IntegrityError, StoreNotFoundError
from mediastash.stores._blob import OFFLOAD_BYTES, sha256_hex, verify_digest
from mediastash.stores._metadata import decode_metadata_json, encode_metadata_json
from mediastash.stores._range import DigestRange
from mediastash.stores._tokens import token_for
from mediastash.stores.base import TOUCH_AFTER_SECONDS, VERIFY_ON_PUT_BYTES, BaseMediaStore, DriverError, Ingest
from mediastash.stores.postgres._address import address_of, parse_dsn_address
from mediastash.stores.postgres._batch import Coalescer, fail
from mediastash.stores.postgres._errors import SCHEMA_LOSS, classify
from mediastash.stores.postgres._layout import Layout, Tables, namespace_table
from mediastash.stores.postgres._options import (
    DEFAULT_CHUNK_SIZE_BYTES,
    MAX_CHUNK_SIZE_BYTES,
    PostgresOptions,
    PostgresPool,
)
from mediastash.stores.postgres._upload import ChunkUpload
from mediastash.stores.protocols import BlobInfo, BlobStat
from mediastash.uri import DIGEST_PATTERN, media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['DEFAULT_CHUNK_SIZE_BYTES', 'MAX_CHUNK_SIZE_BYTES', 'PostgresMediaStore', 'PostgresPool']

_STREAM_WINDOW: Final = 8 << 20
"""Bytes a streaming read fetches per query (one chunk row at least)."""
_LIST_PAGE: Final = 1000
_BATCH: Final = 10_000
"""Digests per ``= ANY($1)`` statement."""
_WHOLE: Final = 1 << 62
_LAYOUT_COMPLETE: Final = Layout(main=True, written_at=True, chunked=True, checked_xid=True)
_SOUND: Final = object()
_ABSENT: Final = object()
_UNSOUND: Final = object()
_ALONE: Final = object()


class PostgresMediaStore(BaseMediaStore):
    """Content-addressed blobs in the table ``table`` (schema ``schema``) of a PostgreSQL database.

    Pass exactly one of ``pool`` (an asyncpg pool you own: the store never
    closes it) or ``dsn`` (a ``postgresql://`` connection string: the store
    opens a pool of at most ``max_connections`` on first use and closes it in
    ``aclose``). The password comes from the DSN, ``PGPASSWORD`` or a
    ``.pgpass`` file; no description or error of the store repeats it.

    Layout: pydantic-ai-harness's media table plus nullable ``written_at``
    and ``checked_xid``; blobs larger than ``chunk_size_bytes`` go to two side
    tables (see ``docs/postgres.md``). The first write creates what is missing
    under the advisory lock the harness takes, and adds the two columns to a
    harness table; reads never change the database. Writes are ``ON CONFLICT DO
    NOTHING``: the first ``put`` of a blob fixes its metadata. A ``put`` of
    stored bytes sends no body: the server checks a small stored copy by its
    ``checked_xid`` stamp, or hashes it when the stamp does not hold; the puts
    of one event-loop turn share that look (``_batch``).

    Capabilities: listing, deleting, streaming in bounded memory (no size cap),
    garbage collection (rows the harness wrote have no age and are never
    collected until a writer's ``put`` or ``touch_many`` dates them), ``stat``
    without reading bytes, namespaces. ``storage_key``: host, port,
    database, schema and table.
    """

    options_class = PostgresOptions

    def __init__(
        self,
        pool: PostgresPool | None = None,
        *,
        dsn: str | None = None,
        table: str = 'media',
        schema: str = 'public',
        chunk_size_bytes: int = DEFAULT_CHUNK_SIZE_BYTES,
        max_connections: int = 10,
        public_url: PublicUrlResolver | None = None,
        options: PostgresOptions | None = None,
    ) -> None:
        self._options = options = PostgresOptions.settled(options, locals())  # the keywords above, by name
        super().__init__(public_url=options.public_url)
        pool, dsn = options.pool, options.dsn
        address = parse_dsn_address(dsn) if dsn is not None else address_of(pool)
        self._pool: PostgresPool | None = pool
        self._dsn = dsn
        self._owns_pool = pool is None
        self._max_connections = options.max_connections
        self._pool_lock = asyncio.Lock()
        self._tables = Tables(options.schema, options.table)
        self._chunk_bytes = options.chunk_size_bytes
        self._address = address
        self._pool_token = None if address is not None else token_for(pool)
        self._layouts: dict[str, Layout] = {}  # complete layouts by table, shared with the namespace views
        self._pool_owner: PostgresMediaStore | None = None  # on a namespace view: the store whose pool it uses
        self._schema_lock = asyncio.Lock()
        self._looks: Coalescer[str, None, Any] = Coalescer(self._look_many, [])
        self._releasing: set[asyncio.Task[None]] = set()

    async def require_storage(self) -> None:
        """``StoreNotFoundError`` when the table does not exist (nothing is created): what read-only openers such
        as ``mediastash stats`` call. A namespace view whose tables are not there yet (nothing was put in it) is
        an empty namespace of the store, which must exist then."""
        self._check_open()
        async with self._connection() as connection:
            layout = await self._read_layout(connection)
        if layout.main or layout.chunked:
            return
        if self._namespace_parent is not None:
            await self._namespace_parent.require_storage()
            return
        raise StoreNotFoundError('PostgreSQL table', f'{self.schema}.{self.table}', hint='nothing was created')

    def _open_namespace(self, name: str) -> PostgresMediaStore:
        """A store on the namespace's own three tables (``namespace_table``: ``<table>_ns_<tag>`` and its side
        tables, created by the first write into it) in the same schema and on the same pool: the store's own
        tables, which pydantic-ai-harness shares, are never touched by a view."""
        view = type(self)(options=self._options.replace(table=namespace_table(self.table, name)))
        view._owns_pool = False
        view._pool_owner = self
        view._layouts = self._layouts
        view._releasing = self._releasing
        return view

    async def _remove_kept_namespace_storage(self) -> None:
        """Drop the emptied namespace's three tables (``erase(exclusive=True)``: nobody else uses them), under
        the advisory lock writers take to create them; a row put meanwhile keeps them."""
        async with self._connection() as connection, connection.transaction():
            await connection.execute('SELECT pg_advisory_xact_lock(hashtext($1))', self.table)
            layout = await self._read_layout(connection)
            for present, name in ((layout.main, self._tables.main), (layout.chunked, self._tables.chunked)):
                if present and await connection.fetchval(f'SELECT EXISTS (SELECT 1 FROM {name})'):
                    return
            await connection.execute(
                f'DROP TABLE IF EXISTS {self._tables.chunks}, {self._tables.chunked}, {self._tables.main}'
            )
        self._layout = None

    @property
    def table(self) -> str:
        """The table holding the blobs (the side tables' names start with it)."""
        return self._tables.table

    @property
    def schema(self) -> str:
        """The schema of the tables."""
        return self._tables.schema

    @property
    def chunk_size_bytes(self) -> int:
        """Blobs larger than this are stored as chunk rows of this size."""
        return self._chunk_bytes

    def _describe(self) -> str:
        where = str(self._address) if self._address is not None else 'pool'
        return f"PostgresMediaStore({where}, table='{self.schema}.{self.table}')"

    def _storage_identity(self) -> Hashable:
        place: Hashable
        if self._address is not None:
            place = (self._address.host, self._address.port, self._address.database)
        else:
            assert self._pool_token is not None
            place = ('pool', self._pool_token.number)
        return ('postgres', place, self.schema, self.table)

    def _classify_error(self, exc: Exception) -> DriverError | None:
        return classify(exc) or super()._classify_error(exc)

    # -- connections and the tables ----------------------------------------------------

    @property
    def _layout(self) -> Layout | None:
        """The layout of this store's tables once it is complete (remembered with the views'; see ``_layouts``)."""
        return self._layouts.get(self._tables.main)

    @_layout.setter
    def _layout(self, layout: Layout | None) -> None:
        if layout is None:
            self._layouts.pop(self._tables.main, None)
        else:
            self._layouts[self._tables.main] = layout

    async def _get_pool(self) -> PostgresPool:
        if self._pool_owner is not None:
            return await self._pool_owner._get_pool()
        if self._pool is None:
            async with self._pool_lock:
                if self._pool is None:
                    self._check_open()
                    self._pool = await asyncpg.create_pool(
                        self._dsn, min_size=0, max_size=self._max_connections, reset=_keep_session
                    )
        return self._pool

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        pool = await self._get_pool()
        async with pool.acquire() as connection:
            yield connection

    async def _read_layout(self, connection: Any) -> Layout:
        """The tables as they are, asked of the catalog until they are complete (then remembered)."""
        if self._layout is not None:
            return self._layout
        rows = await connection.fetch(self._tables.inspect(), self.schema, self._tables.names())
        layout = self._tables.layout_of([(str(row[0]), str(row[1])) for row in rows])
        if layout.complete:
            self._layout = layout
        return layout

    async def _ready(self, connection: Any) -> None:
        """Create what a write needs (first write of this instance): under the advisory lock the harness takes
        for its table, the table when missing, ``written_at`` and ``checked_xid`` on a harness table, and the two
        side tables."""
        if self._layout is not None:
            return
        async with self._schema_lock:
            if self._layout is not None:
                return
            layout = await self._read_layout(connection)
            if not layout.complete:
                async with connection.transaction():
                    await connection.execute('SELECT pg_advisory_xact_lock(hashtext($1))', self.table)
                    # Looked at again under the lock: another writer may have made some of it meanwhile, and an
                    # ALTER of a table in use would wait for (and can deadlock with) that writer's transaction.
                    layout = await self._read_layout(connection)
                    statements = []
                    if not layout.main:
                        statements += [self._tables.create_main(), self._tables.store_main_uncompressed()]
                    elif not (layout.written_at and layout.checked_xid):
                        statements.append(self._tables.add_columns())
                    if not layout.chunked:
                        statements += [
                            self._tables.create_chunked(),
                            self._tables.create_chunks(),
                            self._tables.store_chunks_uncompressed(),
                        ]
                    if statements:  # one round trip: asyncpg sends a call without arguments as one simple query
                        await connection.execute('; '.join(statements))
            self._layout = _LAYOUT_COMPLETE

    def _forget_layout(self, exc: BaseException) -> bool:
        """True (and the remembered layout dropped) when ``exc`` says a table or column went away."""
        if isinstance(exc, asyncpg.PostgresError) and getattr(exc, 'sqlstate', None) in SCHEMA_LOSS:
            self._layout = None
            return True
        return False

    async def _fetch(self, query: Any, *args: Any) -> list[Any]:
        """Rows of a read: ``query(layout)`` builds it for the tables there are; none when there is no table."""
        for attempt in (1, 2):
            async with self._connection() as connection:
                layout = await self._read_layout(connection)
                if not (layout.main or layout.chunked):
                    return []
                try:
                    return list(await connection.fetch(query(layout), *args))
                except asyncpg.PostgresError as exc:
                    if attempt == 2 or not self._forget_layout(exc):
                        raise
        raise AssertionError('unreachable')  # pragma: no cover

    # -- primitives --------------------------------------------------------------------

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        media_type, metadata = _row_facts(context)
        if self._layout is None:
            async with self._connection() as connection:
                await self._ready(connection)
        if len(data) <= self._chunk_bytes:
            await self._write_inline(digest, data, media_type, metadata)
            return
        found = await self._look(digest, len(data))
        if found is None:
            async with self._connection() as connection:
                found = await self._stored_copies(connection, digest, len(data))
        if found is _SOUND:
            return  # stored: no chunk is sent
        await self._write_chunked(_slices(data, self._chunk_bytes), lambda: digest, media_type, metadata)

    async def _write_inline(self, digest: str, data: bytes, media_type: str | None, metadata: str) -> None:
        """Look first (no body is sent for a sound stored copy), then insert, or replace an unsound copy.

        The look is one statement shared with the other puts of the same event-loop turn (see ``_batch``); each
        insert is its own, so that the server writes several blobs at once on several connections. A put alone in
        its turn looks and inserts on one connection (one reset fewer)."""
        for _ in range(3):
            found = await self._look(digest, len(data))
            if found is _SOUND:
                return
            async with self._connection() as connection:
                if found is None:
                    found = await self._stored_copies(connection, digest, len(data))
                    if found is _SOUND:
                        return
                if found is _ABSENT:  # the common first put: one statement, no transaction
                    if await self._insert_inline(connection, digest, data, media_type, metadata):
                        return
                    continue  # another writer's row landed meanwhile: look at it
                async with connection.transaction():
                    row_type, row_metadata = await self._take_unsound(connection, digest) or (media_type, metadata)
                    if await self._insert_inline(connection, digest, data, row_type, row_metadata):
                        return
        raise RuntimeError('another writer kept replacing the blob')  # pragma: no cover

    async def _insert_inline(
        self, connection: Any, digest: str, data: bytes, media_type: str | None, metadata: str
    ) -> bool:
        """Insert the blob as one row of the harness's table; ``False`` when a row was there already."""
        inserted = await connection.fetchval(
            self._tables.insert_inline(), digest, media_type, data, len(data), metadata, time.time()
        )
        return inserted is not None

    async def _rewrite(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Replace the stored copy (suspect to this instance): ``_write`` already does, as the digest is suspect."""
        await self._write(digest, data, context)

    async def _holds_sound_copy(self, connection: Any, digest: str, size: int) -> bool:
        """True when a stored copy passes the base's cheap checks; marks it in use (``written_at``) meanwhile."""
        return await self._stored_copies(connection, digest, size) is _SOUND

    async def _look(self, digest: str, size: int) -> object | None:
        """``_stored_copies`` with the look shared by the puts of this event-loop turn (see ``_batch``); ``None``
        for a put alone in its turn, which looks on the connection it then inserts with."""
        rows = await self._looks.load(digest, None)
        if rows is _ALONE:
            return None
        if rows and self._stale(digest, rows):
            async with self._connection() as connection:
                return await self._stored_copies(connection, digest, size)  # dates (and stamps) it on its own
        return self._judge(digest, size, rows)

    async def _look_many(self, digests: dict[str, None]) -> Mapping[str, Any]:
        """The stored copies of ``digests`` (``probe`` rows), by digest, in one statement (``_ALONE`` for a
        digest alone in its batch: its put looks itself).

        The answer comes as soon as the rows do: the connection goes back to the pool (the pool's reset, one
        more round trip on a caller's pool) in a task of its own, which ``aclose`` waits for; a pool's
        ``close()`` waits for it too."""
        if len(digests) == 1:
            return dict.fromkeys(digests, _ALONE)
        answer: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(self._look_then_release(sorted(digests), answer))
        self._releasing.add(task)
        task.add_done_callback(_forget_release(self._releasing))
        found: dict[str, list[Any]] = {}
        for row in await answer:
            found.setdefault(str(row[0]), []).append(row)
        return found

    async def _look_then_release(self, digests: list[str], answer: asyncio.Future[list[Any]]) -> None:
        try:
            async with self._connection() as connection:
                rows = await connection.fetch(
                    self._tables.probe(), digests, VERIFY_ON_PUT_BYTES, time.time() - TOUCH_AFTER_SECONDS
                )
                answer.set_result(rows)
        except BaseException as exc:
            fail(answer, exc)
            if not isinstance(exc, Exception):
                raise
            # After the answer, only the release failed: the pool closes that connection and opens another.

    async def _stored_copies(self, connection: Any, digest: str, size: int) -> object:
        """``_SOUND`` when a stored copy passes the base's cheap checks, ``_ABSENT`` when none is stored, else
        ``_UNSOUND``. One read-only statement (``probe``); a second (``refresh``) only when a copy is old or
        unstamped: it dates it (marks the blob in use) and stamps a sound one."""
        touch_before = time.time() - TOUCH_AFTER_SECONDS
        for _ in range(2):
            rows = await connection.fetch(self._tables.probe(), [digest], VERIFY_ON_PUT_BYTES, touch_before)
            if not rows or not self._stale(digest, rows):
                break
            refresh = self._tables.refresh()
            if await connection.fetchval(refresh, digest, VERIFY_ON_PUT_BYTES, time.time(), touch_before):
                break
            # Nothing was left to refresh: another writer did it, or the copies went away since the look.
        return self._judge(digest, size, rows)

    @staticmethod
    def _stale(digest: str, rows: list[Any]) -> bool:
        """A copy is old (or of unknown age), or sound but without a holding stamp: ``refresh`` has work."""
        return any(row[3] or (not row[4] and row[2] == digest) for row in rows)

    def _judge(self, digest: str, size: int, rows: list[Any]) -> object:
        """``_SOUND`` only when every stored copy passes the checks: a damaged inline row beside a sound chunked
        copy (or the reverse) is replaced by the put like any unsound copy, so the put heals it in any process."""
        if not rows:
            return _ABSENT
        return _SOUND if all(self._copy_is_sound(digest, size, int(row[1]), row[2]) for row in rows) else _UNSOUND

    def _copy_is_sound(self, digest: str, size: int, stored_size: int, stored_digest: str | None) -> bool:
        """The base's check on a stored copy (``_stored_copy_is_sound``) without its bytes travelling: for a copy
        small enough to be hashed, ``stored_digest`` is what the server knows it hashes to (from the row's
        ``checked_xid`` stamp, else by hashing it; see ``_layout``)."""
        if size > VERIFY_ON_PUT_BYTES:
            return self._stored_copy_is_sound(digest, size, stored_size, _never_read)
        return stored_size == size and self._trusts_stored(digest) and stored_digest == digest

    async def _take_unsound(self, connection: Any, digest: str) -> tuple[str | None, str] | None:
        """Delete whatever copy of ``digest`` is stored (in the caller's transaction; it failed the checks), keeping
        the media type and metadata the first put recorded; ``None`` when nothing was stored."""
        rows = await connection.fetch(self._tables.take_row_facts(), digest)
        if not rows:
            return None
        media_type = rows[0][0]
        return (None if media_type is None else str(media_type)), str(rows[0][1] if rows[0][1] is not None else '{}')

    async def _write_chunked(
        self, pieces: AsyncIterable[bytes], digest: Callable[[], str], media_type: str | None, metadata: str
    ) -> None:
        """Insert chunk rows from ``pieces`` (each one chunk, the last one shorter), then the manifest, in one
        transaction (see ``_upload``); ``digest()`` is asked once ``pieces`` is exhausted (a stream's is
        known only then)."""
        async with self._connection() as connection:
            await self._ready(connection)
            async with ChunkUpload(connection, self._tables.insert_chunk()) as upload:
                size = 0
                async for piece in pieces:
                    await upload.add(piece)
                    size += len(piece)
                await self._finish(upload, digest(), size, media_type, metadata)

    async def _finish(self, upload: ChunkUpload, digest: str, size: int, media_type: str | None, metadata: str) -> None:
        """Commit the upload with its manifest, or roll it back when a sound copy is stored already."""
        connection = upload.connection
        if await self._holds_sound_copy(connection, digest, size):
            await upload.rollback()
            await self._holds_sound_copy(connection, digest, size)  # mark it in use outside the rolled-back work
            return
        for _ in range(3):
            facts = await self._take_unsound(connection, digest)
            row_type, row_metadata = facts or (media_type, metadata)
            inserted = await connection.fetchval(
                self._tables.insert_manifest(),
                digest,
                row_type,
                size,
                row_metadata,
                time.time(),
                upload.chunk_set,
                self._chunk_bytes,
            )
            if inserted is not None:
                await upload.commit()
                return
            # Another writer's manifest committed after our look: keep it if it is sound.
            if await self._holds_sound_copy(connection, digest, size):
                await upload.rollback()
                return
        raise RuntimeError('another writer kept replacing the blob')  # pragma: no cover

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        """Collect up to one chunk in memory: a blob that fits is one row (``_write``); past that, chunks are
        inserted as they fill, in one transaction committed with the manifest (see ``_upload``)."""
        media_type, metadata = _row_facts(context)
        chunk = self._chunk_bytes
        buffer = bytearray()
        source = aiter(ingest)
        async for piece in source:
            buffer += piece
            if len(buffer) > chunk:
                break
        else:
            await self._write(ingest.digest, bytes(buffer), context)
            return

        await self._write_chunked(_rechunked(source, buffer, chunk), lambda: ingest.digest, media_type, metadata)

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        """The inline row by its key first (the statement the harness runs: most blobs are there), else the
        chunked blob."""
        inline = await self._fetch(self._tables.read_inline, digest)
        if inline:
            return bytes(inline[0][0])
        return await self._read_chunked(digest)

    async def _read_chunked(self, digest: str) -> bytes:
        """The chunked copy of the blob whole (the inline row instead when only that one is there now)."""
        rows = await self._fetch(self._tables.locate, digest, _WHOLE)
        if not rows:
            raise self._not_found(digest)
        _, inline, chunk_set, _, size = rows[-1]  # ordered by kind: the chunked copy last
        if chunk_set is None:
            return bytes(inline)
        return b''.join([piece async for piece in self._chunk_set_pieces(digest, str(chunk_set), int(size))])

    async def _read_verified(self, digest: str, context: MediaContextLike) -> bytes:
        """``_read`` checked against ``digest``, where either of a blob's two copies serves the read: beside an
        inline row that fails verification, a sound chunked copy is returned and the digest marked suspect (the
        next ``put`` through this instance rewrites the blob; ``verify(repair=True)`` removes the damaged row).
        The read changes nothing in the database. ``IntegrityError`` (for the inline row) when no copy is sound."""
        inline = await self._fetch(self._tables.read_inline, digest)
        if not inline:
            return await verify_digest(digest, await self._read_chunked(digest), where=self._describe())
        data = bytes(inline[0][0])
        actual = await sha256_hex(data)
        if actual == digest:
            return data
        with contextlib.suppress(FileNotFoundError):  # no other copy: the inline row's failure stands
            other = await self._read_chunked(digest)
            if await sha256_hex(other) == digest:
                self._mark_suspect(digest)
                return other
        raise IntegrityError(media_uri(digest), actual_digest=actual, where=self._describe())

    def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        return self._stream(digest, chunk_size)

    async def _stream(self, digest: str, chunk_size: int) -> AsyncGenerator[bytes, None]:
        """The inline row when there is one, else the chunked copy; with both, the inline row is checked before
        anything is yielded (here when it came with the look, else by the server) and, when damaged, the chunked
        copy streamed instead and the digest marked suspect, the damaged row left as it is (see
        ``_read_verified``)."""
        rows = await self._fetch(self._tables.locate, digest, _STREAM_WINDOW)
        if not rows:
            raise self._not_found(digest)
        _, inline, chunk_set, _, size = rows[0]
        if chunk_set is None and len(rows) > 1 and not await self._inline_is_sound(digest, inline):
            self._mark_suspect(digest)
            _, inline, chunk_set, _, size = rows[1]
        if chunk_set is not None:
            pieces = self._chunk_set_pieces(digest, str(chunk_set), int(size))
        elif inline is not None:
            pieces = _one(bytes(inline))
        else:
            pieces = self._inline_pieces(digest, int(size))
        async with contextlib.aclosing(pieces):
            async for piece in pieces:
                view = memoryview(piece)
                for start in range(0, len(piece), chunk_size):
                    yield bytes(view[start : start + chunk_size])

    async def _inline_is_sound(self, digest: str, inline: Any) -> bool:
        """Whether the inline row hashes to ``digest``: its bytes when the look brought them, else asked of the
        server (a row larger than a stream window is never fetched whole)."""
        if inline is not None:
            return await sha256_hex(bytes(inline)) == digest
        rows = await self._fetch(lambda layout: self._tables.inline_is_sound(), digest)
        return bool(rows and rows[0][0])

    async def _check_extra_copies(self, digest: str, remove: bool) -> tuple[int, int]:
        """With both an inline row and a chunked copy, hash each (the row on the server, the chunks streamed here):
        how many fail, and how many of those were removed (``remove``, only while the other copy is sound; the
        statement checks again on the server, so a copy another writer replaced meanwhile stays)."""
        rows = await self._fetch(self._tables.locate, digest, 0)
        if len(rows) < 2:
            return 0, 0
        _, _, chunk_set, _, size = rows[1]
        inline_sound = await self._inline_is_sound(digest, None)
        try:
            chunked_sound = await self._chunk_set_is_sound(digest, str(chunk_set), int(size))
        except FileNotFoundError:  # replaced or removed since the look: one copy now, the read checked it
            return (0, 0) if inline_sound else (1, 0)
        damaged = (not inline_sound) + (not chunked_sound)
        if not remove or damaged != 1:
            return damaged, 0
        if inline_sound:
            removed = await self._fetch(lambda layout: self._tables.drop_damaged_chunked(), digest, str(chunk_set))
        else:
            removed = await self._fetch(lambda layout: self._tables.drop_damaged_inline(), digest)
        return damaged, len(removed)

    async def _chunk_set_is_sound(self, digest: str, chunk_set: str, size: int) -> bool:
        """Whether the chunk set's bytes hash to ``digest`` (streamed, never whole in memory)."""
        hasher = hashlib.sha256()
        async with contextlib.aclosing(self._chunk_set_pieces(digest, chunk_set, size)) as pieces:
            async for piece in pieces:
                if len(piece) >= OFFLOAD_BYTES:
                    await asyncio.to_thread(hasher.update, piece)
                else:
                    hasher.update(piece)
        return hasher.hexdigest() == digest

    async def _inline_pieces(self, digest: str, size: int) -> AsyncGenerator[bytes, None]:
        """A large inline row (the harness's, up to 1 GB) a window at a time, never whole in memory."""
        offset = 0
        while offset < size:
            async with self._connection() as connection:
                piece = await connection.fetchval(self._tables.slice_inline(), digest, offset + 1, _STREAM_WINDOW)
            if piece is None:
                raise self._not_found(digest)
            if not piece:
                return  # shorter than it was: verification reports it
            offset += len(piece)
            yield bytes(piece)

    async def _chunk_set_pieces(self, digest: str, chunk_set: str, size: int) -> AsyncGenerator[bytes, None]:
        """The chunk rows of a set in order, a window per query; ``MediaNotFoundError`` when the set went away."""
        per_page = max(1, _STREAM_WINDOW // self._chunk_bytes)
        seq = 0
        total = 0
        while True:
            async with self._connection() as connection:
                page = await connection.fetch(self._tables.chunk_page(), chunk_set, seq, per_page)
                if not page and total < size:
                    alive = await connection.fetchval(self._tables.chunk_set_alive(), digest, chunk_set)
                    if alive is None:
                        raise self._not_found(digest)
            if not page:
                return
            for row in page:
                data = bytes(row[1])
                total += len(data)
                yield data
            seq = int(page[-1][0]) + 1

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return bool(await self._fetch(self._tables.present, [digest]))

    async def _contains_many(self, digests: list[str], max_concurrency: int) -> set[str]:
        """One ``= ANY($1)`` query per 10,000 digests."""
        found: set[str] = set()
        for start in range(0, len(digests), _BATCH):
            rows = await self._fetch(self._tables.present, digests[start : start + _BATCH])
            found.update(str(row[0]) for row in rows)
        return found

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        rows = await self._fetch(self._tables.describe, digest)
        if not rows:
            raise self._not_found(digest)
        return decode_metadata_json(rows[0][4], uri=media_uri(digest), where=self._describe())

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        """From the row: ``octet_length(bytes)`` (or the chunked blob's recorded size), media type, ``written_at``."""
        rows = await self._fetch(self._tables.describe, digest)
        if not rows:
            raise self._not_found(digest)
        _, size, media_type, written_at, _ = rows[0]
        return BlobStat(int(size), None if media_type is None else str(media_type), _unix_time(written_at))

    # -- optional capabilities ---------------------------------------------------------

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        """Every blob in digest order, a page of 1,000 per query (keyset, no open cursor); no bytes read."""
        after = ''
        while page := await self._fetch(self._tables.blob_page, after, _LIST_PAGE):
            for digest, size, written_at in page:
                if digest != after and DIGEST_PATTERN.fullmatch(digest):  # a blob in both tables is listed once
                    yield BlobInfo(media_uri(digest), int(size), _unix_time(written_at))
                after = str(digest)

    async def _list_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        """The blobs of one digest range: keyset pages of the primary-key index from the range's start,
        stopping at its end (the listing is in digest order)."""
        start = digest_range.start.ljust(64, '0')
        end = digest_range.end
        after = start[:-1]  # sorts before every digest of the range and after all but a few before it
        while page := await self._fetch(self._tables.blob_page, after, _LIST_PAGE):
            for digest, size, written_at in page:
                if end is not None and digest >= end:
                    return
                if digest != after and digest >= start and DIGEST_PATTERN.fullmatch(digest):
                    yield BlobInfo(media_uri(digest), int(size), _unix_time(written_at))
                after = str(digest)

    async def _list_digests(self) -> AsyncIterator[str]:
        async for info in self._list_blobs():
            yield info.uri.removeprefix('media+sha256://')

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        """One statement per 10,000 digests: date the old rows and answer which are stored."""
        found: set[str] = set()
        async with self._connection() as connection:
            await self._ready(connection)
            for start in range(0, len(digests), _BATCH):
                rows = await connection.fetch(
                    self._tables.touch(), digests[start : start + _BATCH], time.time(), touch_before
                )
                found.update(str(row[0]) for row in rows)
        return found

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        """``DELETE ... WHERE written_at < $2 RETURNING sha256``: the age check and the delete are one statement."""
        return await self._delete_rows(digests, written_before)

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        return bool(await self._delete_rows([digest], None))

    async def _delete_many(self, digests: list[str]) -> int:
        return len(await self._delete_rows(digests, None))

    async def _delete_rows(self, digests: list[str], written_before: float | None) -> list[str]:
        """Delete (only rows written before ``written_before`` when given) and return the digests deleted."""
        deleted: list[str] = []
        older = written_before is not None
        for start in range(0, len(digests), _BATCH):
            batch = digests[start : start + _BATCH]
            args: tuple[Any, ...] = (batch, written_before) if older else (batch,)
            rows = await self._fetch(functools.partial(self._tables.delete, older_than=older), *args)
            deleted.extend(dict.fromkeys(str(row[0]) for row in rows))
        return deleted

    # -- lifecycle ---------------------------------------------------------------------

    async def _aclose(self) -> None:
        """Close the pool when the store opened it from ``dsn=``; a caller's pool stays open. Connections still
        going back to the pool (see ``_look_many``) are waited for first."""
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
        if self._owns_pool and self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()  # type: ignore[attr-defined]


def _forget_release(tasks: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
    def forget(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failure was already handed to the callers, or was only the release

    return forget


async def _keep_session(connection: Any) -> None:
    """Nothing to reset when a connection of the store's own pool goes back: the store leaves no session state
    (no ``SET``, ``LISTEN``, cursor or session lock; asyncpg still rolls back an open transaction). asyncpg's
    default reset is one more round trip per operation."""


def _never_read() -> bytes:
    raise AssertionError('the base reads a stored copy only when it is small')  # pragma: no cover


async def _rechunked(source: AsyncIterator[bytes], first: bytearray, size: int) -> AsyncIterator[bytes]:
    """``first`` and then ``source`` cut into pieces of ``size`` bytes (the last one shorter).

    The caller's pieces are kept as they are and joined once per chunk, so a chunk costs one exact-size copy
    (a growing buffer over-allocates, and the allocator keeps what it grew)."""
    held: list[bytes] = [bytes(first)]
    first.clear()
    count = len(held[0])
    while True:
        while count > size:
            joined = b''.join(held)
            held = [joined[size:]]
            count = len(held[0])
            yield joined[:size]
        more = await anext(source, None)
        if more is None:
            break
        held.append(more)
        count += len(more)
    if count:
        yield b''.join(held)


async def _one(data: bytes) -> AsyncGenerator[bytes, None]:
    yield data


async def _slices(data: bytes, size: int) -> AsyncIterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def _row_facts(context: MediaContextLike) -> tuple[str | None, str]:
    """The ``media_type`` and ``metadata`` column values for a put (metadata JSON as the harness writes it)."""
    return context_media_type(context), encode_metadata_json(context)


def _unix_time(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
