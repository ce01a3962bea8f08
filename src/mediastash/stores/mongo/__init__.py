"""MongoDB media store on pymongo's async client; needs the ``mongo`` extra.

The store lives in ``_store``, its settings and URL form in ``_options`` and its
document layout in ``_layout``.
"""

from mediastash.stores.mongo._layout import DEFAULT_CHUNK_SIZE_BYTES, MAX_CHUNK_SIZE_BYTES
from mediastash.stores.mongo._options import MongoOptions
from mediastash.stores.mongo._store import MongoMediaStore

__all__ = ['DEFAULT_CHUNK_SIZE_BYTES', 'MAX_CHUNK_SIZE_BYTES', 'MongoMediaStore', 'MongoOptions']
