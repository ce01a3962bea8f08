"""Scratch namespaces of a MongoDB store: collections ``<collection>_tune_<id>_<label>`` and its ``_chunks``.

The namespace store uses the store's client (never closing it: it stays the
store's) and chunk size, in the same database; both collections are dropped
afterwards through the driver's public API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mediastash.stores._scratch import SCRATCH_PREFIX, ScratchSpace, scratch_name

if TYPE_CHECKING:  # the store module imports this one when asked for a namespace
    from mediastash.stores.mongo._store import MongoMediaStore

__all__ = ['open_scratch']

_LONGEST = 90
"""A longer name falls back to ``tune_<id>_<label>`` (collection names stay under the store's 100)."""


async def open_scratch(store: MongoMediaStore, label: str, cls: type[MongoMediaStore]) -> ScratchSpace[MongoMediaStore]:
    """A store on two new collections of ``store``'s database, on ``store``'s client, dropped afterwards."""
    name = scratch_name(label, separator='_')
    suffix = name.removeprefix(SCRATCH_PREFIX.replace('-', '_') + '_')
    collection = f'{store.collection}_tune_{suffix}'
    if len(collection) > _LONGEST:
        collection = f'tune_{suffix}'
    client = store._client
    scratch = cls(
        client=client, database=store.database, collection=collection, chunk_size_bytes=store.chunk_size_bytes
    )
    chunks = scratch.chunks_collection

    async def remove() -> None:
        database = client[store.database]
        await database.drop_collection(collection)
        await database.drop_collection(chunks)

    where = f'collections {collection} and {chunks} of database {store.database}'
    return ScratchSpace(scratch, collection, where, remove)
