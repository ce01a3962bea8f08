"""Scratch namespaces of a SQLite store: a new table ``mediastash_tune_<id>_<label>`` in the same database.

A database file the namespace had to create is removed again once no table is
left in it (with its ``-wal``, ``-shm`` and ``-journal`` files); a private
``:memory:`` database gets a private database of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from typing import TYPE_CHECKING

from mediastash.stores._scratch import ScratchSpace, scratch_name

if TYPE_CHECKING:  # the store module imports this one when asked for a namespace
    from mediastash.stores.sqlite._store import SqliteMediaStore

__all__ = ['open_scratch']


async def open_scratch(
    store: SqliteMediaStore, label: str, cls: type[SqliteMediaStore]
) -> ScratchSpace[SqliteMediaStore]:
    """A store on a table made for it in ``store``'s database (file or caller's connection), dropped afterwards."""
    table = scratch_name(label, separator='_')
    caller_connection = None if store._owns_connection else store._connection
    file = store.database
    if caller_connection is not None:
        scratch = cls(connection=caller_connection, table=table)
        where = f'table {table} of the connection given to {store!r}'

        async def remove() -> None:
            await asyncio.to_thread(caller_connection.execute, f'DROP TABLE IF EXISTS "{table}"')

    elif file is None or store._identity is None:  # a private database (':memory:', a temporary one)
        scratch = cls(database=':memory:', table=table)  # private: gone when closed
        where = f'table {table} of a private in-memory database'

        async def remove() -> None:
            return None

    else:
        existed = await asyncio.to_thread(os.path.exists, file)
        scratch = cls(database=file, table=table)
        where = f'table {table} of {file}'

        async def remove() -> None:
            await asyncio.to_thread(_drop_table, file, table, remove_unused_file=not existed)

    return ScratchSpace(scratch, table, where, remove)


def _drop_table(file: str, table: str, *, remove_unused_file: bool) -> None:
    """Drop ``table``; with ``remove_unused_file``, remove the file too when no table is left in it."""
    connection = sqlite3.connect(file, isolation_level=None)
    try:
        connection.execute(f'DROP TABLE IF EXISTS "{table}"')
        unused = connection.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] == 0
    finally:
        connection.close()
    if remove_unused_file and unused:
        for suffix in ('', '-wal', '-shm', '-journal'):
            with contextlib.suppress(FileNotFoundError):
                os.remove(file + suffix)
