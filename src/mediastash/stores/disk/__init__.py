"""Disk media store: one file per blob in a local folder (pydantic-ai-harness's layout).

The store lives in ``_store``; this package owns everything about the backend.
"""

from mediastash.stores.disk._store import (
    MAX_KEY_DEPTH,
    MEDIA_TYPE_LIMIT_BYTES,
    MEDIA_TYPE_SUFFIX,
    METADATA_LIMIT_BYTES,
    SIDECAR_SUFFIX,
    TEMP_FILE_MAX_AGE,
    DiskMediaStore,
)

__all__ = [
    'MAX_KEY_DEPTH',
    'MEDIA_TYPE_LIMIT_BYTES',
    'MEDIA_TYPE_SUFFIX',
    'METADATA_LIMIT_BYTES',
    'SIDECAR_SUFFIX',
    'TEMP_FILE_MAX_AGE',
    'DiskMediaStore',
]
