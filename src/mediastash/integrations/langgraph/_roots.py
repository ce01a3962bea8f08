"""LangGraph checkpoints as garbage-collection roots: a saver object, or its SQLite / PostgreSQL database.

``CheckpointerRoot`` reads a saver through its own API; ``LangGraphSQLiteRoot``
and ``LangGraphPostgresRoot`` read a ``SqliteSaver`` / ``PostgresSaver``
database with SQL, running no LangGraph code: a value is decoded as its
serializer wrote it (``msgpack``, ``json``, ``bytes``, ``null``), and one of
any other type (``pickle``, an encrypted one) stops the collection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from mediastash.errors import MalformedMarker, RootReadError, TreeDepthError, UnsupportedMarkerFormat
from mediastash.integrations.langgraph._state import envelope_markers
from mediastash.integrations.langgraph.saver import OffloadingCheckpointSaver
from mediastash.roots import PostgresTablesRoot, Root, SQLiteTablesRoot, add_references

__all__ = ['CheckpointerRoot', 'LangGraphPostgresRoot', 'LangGraphSQLiteRoot', 'root_for']


class CheckpointerRoot(Root):
    """Every checkpoint of every thread and namespace of a LangGraph saver, with its pending writes.

    Reads ``inner.alist(None)`` of an ``OffloadingCheckpointSaver`` (or of the
    saver it wraps: the lean checkpoints, nothing restored; ``list(None)`` in a
    worker thread for a synchronous saver such as ``SqliteSaver``) and counts the
    markers of every envelope in the channel values and pending writes. An
    envelope this version cannot read, or a saver that fails while listing,
    stops the collection (``RootReadError``).
    """

    def __init__(self, saver: Any) -> None:
        while isinstance(saver, OffloadingCheckpointSaver):
            saver = saver.inner
        if not callable(getattr(saver, 'alist', None)):
            raise TypeError(f'{type(saver).__name__} has no alist(): it is not a LangGraph checkpoint saver')
        self.saver = saver

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        try:
            async for found in _checkpoints(self.saver):
                references: set[str] = set()
                values = [*found.checkpoint['channel_values'].values()]
                values.extend(write[2] for write in found.pending_writes or ())
                for marker in envelope_markers(values):
                    add_references(marker, references, inside_literals=True)
                yield references
        except (UnsupportedMarkerFormat, MalformedMarker, TreeDepthError) as error:
            raise RootReadError(
                f'{self.describe()}: a checkpoint holds an envelope this reader cannot read ({error})'
            ) from error
        except RootReadError:
            raise
        except Exception as error:
            raise RootReadError(
                f'{self.describe()}: listing the checkpoints failed ({type(error).__name__})'
            ) from error

    def describe(self) -> str:
        return type(self.saver).__name__


async def _checkpoints(saver: Any) -> AsyncIterator[Any]:
    """Every checkpoint tuple of ``saver``: ``alist(None)``, or ``list(None)`` off the loop for a sync-only saver."""
    started = False
    try:
        async for found in saver.alist(None):
            started = True
            yield found
        return
    except NotImplementedError:
        if started:
            raise
    for found in await asyncio.to_thread(lambda: list(saver.list(None))):
        yield found


class LangGraphSQLiteRoot(SQLiteTablesRoot):
    """Every checkpoint and pending write of a LangGraph ``SqliteSaver`` / ``AsyncSqliteSaver`` database, read with
    SQL (read-only, no blob restored, no LangGraph code run).

    LangChain objects are read as the plain data they were packed from, so the
    markers of ``OffloadingCheckpointSaver`` envelopes count wherever they sit.
    ``mediastash gc --roots langgraph-sqlite:DB``. Python objects: ``CheckpointerRoot(saver)``.
    """

    reading: ClassVar[str] = 'the checkpoint database'

    def queries(self, tables: set[str]) -> list[str]:
        if not {'checkpoints', 'writes'} <= tables:
            raise RootReadError(
                f'{self.database}: no checkpoints and writes tables (not a LangGraph SqliteSaver database)'
            )
        return ['SELECT type, checkpoint FROM checkpoints', 'SELECT type, value FROM writes']

    def references(self, kind: Any, value: Any) -> set[str]:
        return _value_references(kind, value, self.database)


class LangGraphPostgresRoot(PostgresTablesRoot):
    """Every checkpoint, channel value and pending write of a LangGraph ``PostgresSaver`` / ``AsyncPostgresSaver``
    database, read with SQL in one read-only transaction (no blob restored, no LangGraph code run).

    ``dsn``: a ``postgresql://`` connection string without a password (a
    ``search_path=SCHEMA`` query parameter names a schema of its own). Values
    are decoded as in ``LangGraphSQLiteRoot``. Errors name the server and
    database, never the user. Needs ``asyncpg`` (extra ``postgres``).
    ``mediastash gc --roots langgraph-postgres:postgresql://...``.
    """

    what = 'LangGraph PostgresSaver database'

    def tables(self) -> tuple[str, ...]:
        return ('checkpoints', 'checkpoint_blobs', 'checkpoint_writes')

    def queries(self) -> tuple[str, ...]:
        return (
            "SELECT 'json', checkpoint::text FROM checkpoints",
            'SELECT type, blob FROM checkpoint_blobs',
            'SELECT type, blob FROM checkpoint_writes',
        )

    def references(self, kind: Any, value: Any) -> set[str]:
        return _value_references(kind, value, self.describe())


def _value_references(kind: object, data: object, where: object) -> set[str]:
    found: set[str] = set()
    add_references(_checkpoint_value(kind, data, where), found, inside_literals=True)
    return found


def _checkpoint_value(kind: object, data: object, where: object) -> object:
    """A stored LangGraph value as plain data (``ormsgpack`` extension types unpacked to their contents)."""
    if kind in (None, 'null', 'bytes', 'bytearray') or data is None:
        return None
    if not isinstance(data, bytes | str):
        raise RootReadError(f'{where}: a stored checkpoint value is not bytes or text')
    try:
        if kind == 'json':
            return json.loads(data)
        if kind == 'msgpack':
            return _unpack(data if isinstance(data, bytes) else data.encode())
    except RecursionError:
        raise RootReadError(f'{where}: a stored checkpoint value is nested too deeply to read') from None
    except (ValueError, TypeError):
        raise RootReadError(f'{where}: a stored checkpoint value is not the {kind} it claims to be') from None
    label = kind if isinstance(kind, str) and kind.isidentifier() else 'unknown'
    raise RootReadError(f'{where}: a checkpoint value of serializer type {label!r} cannot be read without running it')


def _unpack(data: bytes) -> object:
    import ormsgpack  # installed with langgraph-checkpoint

    def extension(_code: int, payload: bytes) -> object:
        return ormsgpack.unpackb(payload, ext_hook=extension, option=ormsgpack.OPT_NON_STR_KEYS)

    return ormsgpack.unpackb(data, ext_hook=extension, option=ormsgpack.OPT_NON_STR_KEYS)


def root_for(value: object) -> Root | None:
    """The root of a LangGraph saver (``OffloadingCheckpointSaver`` or any ``BaseCheckpointSaver``), else ``None``."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    if isinstance(value, BaseCheckpointSaver):
        return CheckpointerRoot(value)
    return None
