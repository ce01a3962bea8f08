"""Media stores: the ``MediaStore`` protocol and its capability protocols, the base that enforces the rules,
the wrappers, the registry of URL schemes, and one package per backend (``disk``, ``sqlite``, ``s3``, ``mongo``,
``postgres``; ``memory`` is one module), each owning its store, its typed options (``DiskOptions``,
``S3Options``, ...) and its URL form.
"""

import importlib
from typing import TYPE_CHECKING

from mediastash.stores._options import StoreOptions
from mediastash.stores._plan import StorePlan
from mediastash.stores._range import DigestRange
from mediastash.stores.base import BaseMediaStore, BlobInfo, BlobStat, DriverError, EraseReport, Ingest
from mediastash.stores.cached import CachedMediaStore
from mediastash.stores.capabilities import StoreCapabilities, capabilities_of, class_capabilities
from mediastash.stores.disk import DiskMediaStore, DiskOptions
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.protocols import (
    BlobCheck,
    CacheAwareMediaStore,
    CheckableMediaStore,
    CollectableMediaStore,
    DeletableMediaStore,
    ListableMediaStore,
    MediaStore,
    S3AddressableMediaStore,
    StatableMediaStore,
    StreamingMediaStore,
)
from mediastash.stores.registry import available_schemes, register_store, store_class
from mediastash.stores.sqlite import SqliteMediaStore, SqliteOptions
from mediastash.stores.wrapper import WrapperMediaStore

if TYPE_CHECKING:  # `X as X` re-exports them for type checkers without listing them in __all__
    from mediastash.stores.mongo import MongoMediaStore as MongoMediaStore
    from mediastash.stores.mongo import MongoOptions as MongoOptions
    from mediastash.stores.postgres import PostgresMediaStore as PostgresMediaStore
    from mediastash.stores.postgres import PostgresOptions as PostgresOptions
    from mediastash.stores.s3 import PresignedUrls as PresignedUrls
    from mediastash.stores.s3 import S3MediaStore as S3MediaStore
    from mediastash.stores.s3 import S3Options as S3Options

# The stores behind extras are importable by name but kept out of __all__, so that
# `from mediastash.stores import *` works without the extras. They are imported on
# first use, so `import mediastash` neither needs nor pays for aiobotocore / pymongo.
_OPTIONAL = {
    'MongoMediaStore': ('mediastash.stores.mongo', 'mongo'),
    'MongoOptions': ('mediastash.stores.mongo', 'mongo'),
    'PostgresMediaStore': ('mediastash.stores.postgres', 'postgres'),
    'PostgresOptions': ('mediastash.stores.postgres', 'postgres'),
    'S3MediaStore': ('mediastash.stores.s3', 's3'),
    'S3Options': ('mediastash.stores.s3', 's3'),
    'PresignedUrls': ('mediastash.stores.s3', 's3'),
}

__all__ = [
    'BaseMediaStore',
    'BlobCheck',
    'CheckableMediaStore',
    'BlobInfo',
    'BlobStat',
    'CacheAwareMediaStore',
    'CachedMediaStore',
    'CollectableMediaStore',
    'DeletableMediaStore',
    'DigestRange',
    'DiskMediaStore',
    'DiskOptions',
    'DriverError',
    'EraseReport',
    'Ingest',
    'ListableMediaStore',
    'MediaStore',
    'MemoryMediaStore',
    'S3AddressableMediaStore',
    'SqliteMediaStore',
    'SqliteOptions',
    'StatableMediaStore',
    'StoreOptions',
    'StoreCapabilities',
    'StorePlan',
    'StreamingMediaStore',
    'WrapperMediaStore',
    'available_schemes',
    'capabilities_of',
    'class_capabilities',
    'register_store',
    'store_class',
]


def _load_optional(name: str, asked: str) -> object:
    """``name`` from its backend package behind an extra, for the ``__getattr__`` of module ``asked``.

    Without the extra, an ``ImportError`` saying which extra to install; a name that is not an optional store
    is the ``AttributeError`` a module raises.
    """
    if name not in _OPTIONAL:
        raise AttributeError(f'module {asked!r} has no attribute {name!r}')
    module_name, extra = _OPTIONAL[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(f'{name} needs the {extra!r} extra: pip install "mediastash[{extra}]"') from error
    return getattr(module, name)


def __getattr__(name: str) -> object:
    return _load_optional(name, __name__)
