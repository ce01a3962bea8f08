"""Media stores: one module per backend, all implementing ``MediaStore``."""

from mediastash.stores.base import BaseMediaStore
from mediastash.stores.disk import DiskMediaStore
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.protocols import (
    DeletableMediaStore,
    ListableMediaStore,
    MediaStore,
    StreamingMediaStore,
)
from mediastash.stores.sqlite import SqliteMediaStore

__all__ = [
    'BaseMediaStore',
    'DeletableMediaStore',
    'DiskMediaStore',
    'ListableMediaStore',
    'MediaStore',
    'MemoryMediaStore',
    'SqliteMediaStore',
    'StreamingMediaStore',
]
