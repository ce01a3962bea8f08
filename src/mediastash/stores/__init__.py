"""Media stores: one module per backend, all implementing ``MediaStore``."""

from mediastash.stores.base import BaseMediaStore
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.protocols import (
    DeletableMediaStore,
    ListableMediaStore,
    MediaStore,
    StreamingMediaStore,
)

__all__ = [
    'BaseMediaStore',
    'DeletableMediaStore',
    'ListableMediaStore',
    'MediaStore',
    'MemoryMediaStore',
    'StreamingMediaStore',
]
