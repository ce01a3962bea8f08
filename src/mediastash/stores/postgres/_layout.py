"""The tables ``PostgresMediaStore`` keeps, and the SQL that creates and reads them.

``<table>``: pydantic-ai-harness's media table (``sha256 TEXT PRIMARY KEY,
media_type TEXT, bytes BYTEA NOT NULL, size_bytes BIGINT NOT NULL, metadata
TEXT``) plus a nullable ``written_at`` (Unix time) and a nullable
``checked_xid``: one row per blob of at most the chunk size, readable by the
harness as it is.

``checked_xid`` is the stamp that lets a ``put`` of stored bytes skip hashing
the stored copy: a writer that knows the row's bytes hash to its key (it sent
them, or the server just hashed them) sets it to its own transaction id, which
is also the row version's ``xmin``. Any later ``UPDATE`` of the row (a script,
a restore, anything but a writer that re-checks) makes a new row version with
another ``xmin``, so the stamp no longer matches and the next ``put`` of the
blob hashes the stored copy on the server again (see ``docs/postgres.md``).

``<table>_chunked`` and ``<table>_chunks``: a larger blob is one row in the
first (its size, media type, metadata, ``written_at`` and the id of its chunk
set) and its bytes in rows of the second, ``chunk_bytes`` each. The harness
does not know them: it finds no row for such a blob, which it reports as not
stored (never as other bytes).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

__all__ = ['IDENTIFIER', 'Layout', 'Tables', 'namespace_table']

IDENTIFIER: Final = re.compile(r'[a-z_][a-z0-9_]{0,62}')
"""A table or schema name: lowercase, at most 63 bytes (PostgreSQL cuts longer names), as the harness requires."""

_MAX_NAME: Final = 63
_NAMESPACE_TAG: Final = 24
_NAMESPACE_TABLE_HEAD: Final = 20
_STAMP: Final = 'txid_current() % 4294967296'
"""The current transaction's id as a row version's ``xmin`` shows it (32 bits): the ``checked_xid`` to write."""
_STAMP_HOLDS: Final = 'checked_xid = xmin::text::bigint'
"""The row version was written by the writer that stamped it: its bytes are the ones found sound."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Which of the store's tables exist, as the catalog says (read without changing anything)."""

    main: bool
    written_at: bool
    chunked: bool
    checked_xid: bool = False

    @property
    def complete(self) -> bool:
        """Everything a write sets up is there; no later write or read changes it."""
        return self.main and self.written_at and self.checked_xid and self.chunked


class Tables:
    """Quoted, schema-qualified names of one store's three tables and the statements over them."""

    def __init__(self, schema: str, table: str) -> None:
        self.schema = schema
        self.table = table
        self.chunked_name = _side_name(table, '_chunked')
        self.chunks_name = _side_name(table, '_chunks')
        self.main = f'"{schema}"."{table}"'
        self.chunked = f'"{schema}"."{self.chunked_name}"'
        self.chunks = f'"{schema}"."{self.chunks_name}"'

    # -- schema ------------------------------------------------------------------------

    def create_main(self) -> str:
        return (
            f'CREATE TABLE IF NOT EXISTS {self.main} ('
            'sha256 TEXT PRIMARY KEY, media_type TEXT, bytes BYTEA NOT NULL, '
            'size_bytes BIGINT NOT NULL, metadata TEXT, written_at DOUBLE PRECISION, checked_xid BIGINT)'
        )

    def store_main_uncompressed(self) -> str:
        """For a table this store creates: media rarely compresses, so skip the attempt (as for chunks)."""
        return f'ALTER TABLE {self.main} ALTER COLUMN bytes SET STORAGE EXTERNAL'

    def add_columns(self) -> str:
        """What a harness table lacks: ``written_at`` and ``checked_xid`` (nullable; the harness never names them)."""
        return (
            f'ALTER TABLE {self.main} ADD COLUMN IF NOT EXISTS written_at DOUBLE PRECISION, '
            'ADD COLUMN IF NOT EXISTS checked_xid BIGINT'
        )

    def create_chunked(self) -> str:
        return (
            f'CREATE TABLE IF NOT EXISTS {self.chunked} ('
            'sha256 TEXT PRIMARY KEY, media_type TEXT, size_bytes BIGINT NOT NULL, metadata TEXT, '
            'written_at DOUBLE PRECISION, chunk_set TEXT NOT NULL UNIQUE, chunk_bytes INTEGER NOT NULL)'
        )

    def create_chunks(self) -> str:
        return (
            f'CREATE TABLE IF NOT EXISTS {self.chunks} ('
            'chunk_set TEXT NOT NULL, seq INTEGER NOT NULL, bytes BYTEA NOT NULL, PRIMARY KEY (chunk_set, seq))'
        )

    def store_chunks_uncompressed(self) -> str:
        """Media rarely compresses: skip the attempt (a third of a chunk insert's time) and keep slices cheap."""
        return f'ALTER TABLE {self.chunks} ALTER COLUMN bytes SET STORAGE EXTERNAL'

    def inspect(self) -> str:
        """Columns of the three tables: ``$1`` schema, ``$2`` table names (``relname, attname`` rows)."""
        return (
            'SELECT c.relname, a.attname FROM pg_catalog.pg_class c '
            'JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace '
            'JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped '
            "WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) AND c.relkind IN ('r', 'p')"
        )

    def layout_of(self, rows: list[tuple[str, str]]) -> Layout:
        columns: dict[str, set[str]] = {}
        for relation, column in rows:
            columns.setdefault(relation, set()).add(column)
        main = columns.get(self.table, set())
        return Layout(
            main=bool(main),
            written_at='written_at' in main,
            checked_xid='checked_xid' in main,
            chunked=self.chunked_name in columns and self.chunks_name in columns,
        )

    def names(self) -> list[str]:
        return [self.table, self.chunked_name, self.chunks_name]

    # -- reads -------------------------------------------------------------------------

    def locate(self, layout: Layout) -> str:
        """Where the blob ``$1`` is: ``(kind, inline bytes or NULL, chunk_set, chunk size, stored size)`` rows,
        the inline row first. Inline bytes come along when there are at most ``$2`` of them."""
        parts = []
        if layout.main:
            parts.append(
                'SELECT 0 AS kind, CASE WHEN octet_length(bytes) <= $2::bigint THEN bytes END AS bytes, '
                'NULL::text AS chunk_set, '
                f'0 AS chunk_bytes, octet_length(bytes)::bigint AS size FROM {self.main} WHERE sha256 = $1'
            )
        if layout.chunked:
            parts.append(
                'SELECT 1, NULL::bytea, chunk_set, chunk_bytes, size_bytes '
                f'FROM {self.chunked} WHERE sha256 = $1 AND $2::bigint >= 0'
            )
        return ' UNION ALL '.join(parts) + ' ORDER BY kind'

    def describe(self, layout: Layout) -> str:
        """``(size, media_type, written_at, metadata)`` of the blob ``$1``, the inline row first."""
        written_at = 'written_at' if layout.written_at else 'NULL::double precision'
        parts = []
        if layout.main:
            parts.append(
                f'SELECT 0 AS kind, octet_length(bytes)::bigint AS size, media_type, {written_at} AS written_at, '
                f'metadata FROM {self.main} WHERE sha256 = $1'
            )
        if layout.chunked:
            parts.append(
                f'SELECT 1, size_bytes, media_type, written_at, metadata FROM {self.chunked} WHERE sha256 = $1'
            )
        return ' UNION ALL '.join(parts) + ' ORDER BY kind LIMIT 1'

    def present(self, layout: Layout) -> str:
        """The digests among ``$1`` (a text array) that are stored."""
        parts = []
        if layout.main:
            parts.append(f'SELECT sha256 FROM {self.main} WHERE sha256 = ANY($1::text[])')
        if layout.chunked:
            parts.append(f'SELECT sha256 FROM {self.chunked} WHERE sha256 = ANY($1::text[])')
        return ' UNION '.join(parts)

    def blob_page(self, layout: Layout) -> str:
        """``(sha256, size, written_at)`` of up to ``$2`` blobs after the digest ``$1``, in digest order."""
        written_at = 'written_at' if layout.written_at else 'NULL::double precision'
        parts = []
        if layout.main:
            parts.append(
                f'SELECT sha256, octet_length(bytes)::bigint AS size, {written_at} AS written_at '
                f'FROM {self.main} WHERE sha256 > $1'
            )
        if layout.chunked:
            parts.append(f'SELECT sha256, size_bytes, written_at FROM {self.chunked} WHERE sha256 > $1')
        return f'SELECT sha256, size, written_at FROM ({" UNION ALL ".join(parts)}) AS blobs ORDER BY sha256 LIMIT $2'

    def read_inline(self, layout: Layout) -> str:
        """The bytes of the inline blob ``$1`` (a row, or none; no row at all without the table)."""
        if not layout.main:
            return 'SELECT NULL::bytea WHERE $1::text IS NULL'
        return f'SELECT bytes FROM {self.main} WHERE sha256 = $1'

    def slice_inline(self) -> str:
        """Bytes ``$3`` long from 1-based offset ``$2`` of the inline blob ``$1`` (a row, or none)."""
        return f'SELECT substring(bytes FROM $2 FOR $3) FROM {self.main} WHERE sha256 = $1'

    def inline_is_sound(self) -> str:
        """Whether the inline row of ``$1`` hashes to its key, hashed on the server (a row too large to fetch)."""
        return f"SELECT encode(sha256(bytes), 'hex') = sha256 FROM {self.main} WHERE sha256 = $1"

    def drop_damaged_inline(self) -> str:
        """Delete the inline row of ``$1`` when it does not hash to its key and a chunked copy is beside it (what
        ``verify(repair=True)`` removes once it found the chunked copy sound); the server hashes it again, so a
        row another writer replaced with sound bytes meanwhile stays. One row per row deleted."""
        return (
            f"DELETE FROM {self.main} WHERE sha256 = $1 AND encode(sha256(bytes), 'hex') <> sha256 "
            f'AND EXISTS (SELECT 1 FROM {self.chunked} WHERE sha256 = $1) RETURNING 1'
        )

    def drop_damaged_chunked(self) -> str:
        """Delete the chunked copy of ``$1`` whose chunk set is ``$2`` (found damaged) and its chunks, while a
        sound inline row is beside it (the server hashes that row again). A copy another writer put meanwhile has
        another chunk set and stays. One row per copy deleted."""
        return (
            f'WITH b AS (DELETE FROM {self.chunked} WHERE sha256 = $1 AND chunk_set = $2 AND EXISTS (SELECT 1 '
            f"FROM {self.main} WHERE sha256 = $1 AND encode(sha256(bytes), 'hex') = sha256) RETURNING chunk_set), "
            f'c AS (DELETE FROM {self.chunks} WHERE chunk_set IN (SELECT chunk_set FROM b)) '
            'SELECT 1 FROM b'
        )

    def chunk_page(self) -> str:
        """Up to ``$3`` chunks of the set ``$1`` from number ``$2`` on, in order."""
        return f'SELECT seq, bytes FROM {self.chunks} WHERE chunk_set = $1 AND seq >= $2 ORDER BY seq LIMIT $3'

    def chunk_set_alive(self) -> str:
        return f'SELECT 1 FROM {self.chunked} WHERE sha256 = $1 AND chunk_set = $2'

    # -- writes ------------------------------------------------------------------------

    def probe(self) -> str:
        """What is stored under the digests of the text array ``$1`` (complete layout), read without changing
        anything: ``(sha256, size, digest or NULL, old, stamped)`` rows, one per stored copy. ``digest`` is the
        sha256 hex the stored bytes are known to have: the key itself for an inline row whose ``checked_xid`` stamp
        holds (no byte is read), else computed by the server for copies of at most ``$2`` bytes. ``old``: written
        before ``$3`` or of unknown age (``refresh`` dates it); ``stamped``: the stamp holds (always true for a
        chunked copy, which has none)."""
        return (
            'SELECT sha256, octet_length(bytes)::bigint AS size, '
            f'CASE WHEN {_STAMP_HOLDS} THEN sha256 '
            "WHEN octet_length(bytes) <= $2 THEN encode(sha256(bytes), 'hex') END AS digest, "
            f'(written_at IS NULL OR written_at < $3) AS old, coalesce({_STAMP_HOLDS}, false) AS stamped '
            f'FROM {self.main} WHERE sha256 = ANY($1::text[]) '
            'UNION ALL '
            f'SELECT m.sha256, (SELECT coalesce(sum(octet_length(c.bytes)), 0)::bigint FROM {self.chunks} c '
            'WHERE c.chunk_set = m.chunk_set), '
            "CASE WHEN m.size_bytes <= $2 THEN (SELECT encode(sha256(coalesce(string_agg(c.bytes, ''::bytea "
            f"ORDER BY c.seq), ''::bytea)), 'hex') FROM {self.chunks} c WHERE c.chunk_set = m.chunk_set) END, "
            '(m.written_at IS NULL OR m.written_at < $3), true '
            f'FROM {self.chunked} m WHERE m.sha256 = ANY($1::text[])'
        )

    def refresh(self) -> str:
        """Date the stored copies of ``$1`` written before ``$4`` (or of unknown age) ``written_at = $3``, and stamp
        an inline row of at most ``$2`` bytes whose stamp does not hold once the server found it sound (an update
        carries a holding stamp over to the new row version); how many rows changed. A put of stored bytes runs it
        after ``probe`` when a copy is old or unstamped: it marks the blob in use for garbage collection."""
        return (
            f'WITH a AS (UPDATE {self.main} SET '
            'written_at = CASE WHEN written_at IS NULL OR written_at < $4 THEN $3 ELSE written_at END, '
            f'checked_xid = CASE WHEN {_STAMP_HOLDS} OR (octet_length(bytes) <= $2 '
            f"AND encode(sha256(bytes), 'hex') = sha256) THEN {_STAMP} END "
            'WHERE sha256 = $1 AND (written_at IS NULL OR written_at < $4 '
            'OR (checked_xid IS DISTINCT FROM xmin::text::bigint AND octet_length(bytes) <= $2)) RETURNING 1), '
            f'b AS (UPDATE {self.chunked} SET written_at = $3 WHERE sha256 = $1 '
            'AND (written_at IS NULL OR written_at < $4) RETURNING 1) '
            'SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)'
        )

    def insert_inline(self) -> str:
        """Insert a row whose bytes the caller hashed: stamped (``checked_xid``) as sound."""
        return (
            f'INSERT INTO {self.main} (sha256, media_type, bytes, size_bytes, metadata, written_at, checked_xid) '
            f'VALUES ($1, $2, $3, $4, $5, $6, {_STAMP}) ON CONFLICT (sha256) DO NOTHING RETURNING 1'
        )

    def insert_chunk(self) -> str:
        return f'INSERT INTO {self.chunks} (chunk_set, seq, bytes) VALUES ($1, $2, $3)'

    def insert_manifest(self) -> str:
        return (
            f'INSERT INTO {self.chunked} '
            '(sha256, media_type, size_bytes, metadata, written_at, chunk_set, chunk_bytes) '
            'VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (sha256) DO NOTHING RETURNING 1'
        )

    def take_row_facts(self) -> str:
        """Delete every stored copy of ``$1`` (in a transaction), returning ``(media_type, metadata)`` of each."""
        return (
            f'WITH a AS (DELETE FROM {self.main} WHERE sha256 = $1 RETURNING 0 AS kind, media_type, metadata), '
            f'b AS (DELETE FROM {self.chunked} WHERE sha256 = $1 RETURNING chunk_set, media_type, metadata), '
            f'c AS (DELETE FROM {self.chunks} WHERE chunk_set IN (SELECT chunk_set FROM b)) '
            'SELECT media_type, metadata FROM a UNION ALL SELECT media_type, metadata FROM b'
        )

    def touch(self) -> str:
        """Mark the stored blobs among ``$1`` written before ``$3`` (or of unknown age) as written at ``$2``; return
        which of ``$1`` are stored. A valid ``checked_xid`` stamp is carried over to the new row version."""
        return (
            f'WITH a AS (UPDATE {self.main} SET written_at = $2, '
            f'checked_xid = CASE WHEN {_STAMP_HOLDS} THEN {_STAMP} END WHERE sha256 = ANY($1::text[]) '
            'AND (written_at IS NULL OR written_at < $3) RETURNING 1), '
            f'b AS (UPDATE {self.chunked} SET written_at = $2 WHERE sha256 = ANY($1::text[]) '
            'AND (written_at IS NULL OR written_at < $3) RETURNING 1) '
            f'SELECT sha256 FROM {self.main} WHERE sha256 = ANY($1::text[]) '
            f'UNION SELECT sha256 FROM {self.chunked} WHERE sha256 = ANY($1::text[])'
        )

    def delete(self, layout: Layout, *, older_than: bool) -> str:
        """Delete the blobs among ``$1``; the digests deleted, one row per copy.

        With ``older_than``, only blobs written before ``$2``: a blob with an inline row and a chunked copy (two
        writers raced, or the chunk size changed) goes only when both are that old, since either copy serves
        reads; a copy of unknown age (``written_at`` NULL, a harness row) keeps the blob."""
        deletes = []
        selects = []
        age = ' AND written_at < $2 AND sha256 NOT IN (SELECT sha256 FROM young)' if older_than else ''
        if layout.main and (layout.written_at or not older_than):
            deletes.append(f'a AS (DELETE FROM {self.main} WHERE sha256 = ANY($1::text[]){age} RETURNING sha256)')
            selects.append('SELECT sha256 FROM a')
        if layout.chunked:
            selects.append('SELECT sha256 FROM b')
            deletes.append(
                f'b AS (DELETE FROM {self.chunked} WHERE sha256 = ANY($1::text[]){age} RETURNING sha256, chunk_set)'
            )
            deletes.append(f'c AS (DELETE FROM {self.chunks} WHERE chunk_set IN (SELECT chunk_set FROM b))')
        if not deletes:
            return 'SELECT NULL::text WHERE $1::text[] IS NULL' + (' AND $2::float8 IS NULL' if older_than else '')
        if older_than:
            young = '(written_at IS NULL OR written_at >= $2)'
            copies = []
            if layout.main:
                when = young if layout.written_at else 'true'
                copies.append(f'SELECT sha256 FROM {self.main} WHERE sha256 = ANY($1::text[]) AND {when}')
            if layout.chunked:
                copies.append(f'SELECT sha256 FROM {self.chunked} WHERE sha256 = ANY($1::text[]) AND {young}')
            deletes.insert(0, f'young AS ({" UNION ALL ".join(copies)})')
        return f'WITH {", ".join(deletes)} ' + ' UNION ALL '.join(selects)


def namespace_table(table: str, namespace: str) -> str:
    """The blob table of ``namespace`` beside the store's ``table``: ``<table>_ns_<tag>`` (its side tables follow).

    A namespace name (``A-Z a-z 0-9 . _ -``, up to 64) is no PostgreSQL identifier of this layout, so the tag is 24
    hex digits (96 bits) of the sha256 of the table and the name: one table per namespace and store, no table of
    another store or namespace, and with ``_chunked`` added still within 63 bytes (``table`` is cut to 20)."""
    tag = hashlib.sha256(f'{table}\0{namespace}'.encode()).hexdigest()[:_NAMESPACE_TAG]
    return f'{table[:_NAMESPACE_TABLE_HEAD]}_ns_{tag}'


def _side_name(table: str, suffix: str) -> str:
    """``table + suffix``, or a shortened ``table`` with a hash of it when that would pass 63 bytes."""
    name = table + suffix
    if len(name) <= _MAX_NAME:
        return name
    tag = hashlib.sha256(table.encode()).hexdigest()[:8]
    return f'{table[: _MAX_NAME - len(suffix) - len(tag) - 1]}_{tag}{suffix}'
