"""Scratch namespaces of a PostgreSQL store: a table ``mediastash_tune_<id>_<label>`` (and its side tables) in
the store's schema, on the store's pool, dropped afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mediastash.stores._scratch import ScratchSpace, scratch_name
from mediastash.stores.postgres._layout import Tables

if TYPE_CHECKING:  # the store module imports this one when asked for a namespace
    from mediastash.stores.postgres._store import PostgresMediaStore

__all__ = ['open_scratch']


async def open_scratch(
    store: PostgresMediaStore, label: str, cls: type[PostgresMediaStore]
) -> ScratchSpace[PostgresMediaStore]:
    """A store on new tables next to ``store``'s, sharing its pool (the namespace never closes it)."""
    table = scratch_name(label, separator='_').lower()
    pool = await store._get_pool()
    scratch = cls(pool, table=table, schema=store.schema, chunk_size_bytes=store.chunk_size_bytes)
    tables = Tables(store.schema, table)

    async def remove() -> None:
        async with pool.acquire() as connection:
            for name in (tables.chunks, tables.chunked, tables.main):
                await connection.execute(f'DROP TABLE IF EXISTS {name}')

    where = f'tables {table}, {tables.chunked_name} and {tables.chunks_name} of schema {store.schema}'
    return ScratchSpace(scratch, table, where, remove)
