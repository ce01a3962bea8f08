"""PostgreSQL media store on an asyncpg pool; needs the ``postgres`` extra.

The store lives in ``_store``, its settings and URL form in ``_options``, its
tables and statements in ``_layout``.
"""

from mediastash.stores.postgres._options import DEFAULT_CHUNK_SIZE_BYTES, MAX_CHUNK_SIZE_BYTES, PostgresOptions
from mediastash.stores.postgres._store import PostgresMediaStore

__all__ = ['DEFAULT_CHUNK_SIZE_BYTES', 'MAX_CHUNK_SIZE_BYTES', 'PostgresMediaStore', 'PostgresOptions']
