"""PostgreSQL media store on an asyncpg pool; needs the ``postgres`` extra.

The store lives in ``_store``, its tables and statements in ``_layout``.
"""

from mediastash.stores.postgres._store import DEFAULT_CHUNK_SIZE_BYTES, MAX_CHUNK_SIZE_BYTES, PostgresMediaStore

__all__ = ['DEFAULT_CHUNK_SIZE_BYTES', 'MAX_CHUNK_SIZE_BYTES', 'PostgresMediaStore']
