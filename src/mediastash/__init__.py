"""mediastash: keep large payloads out of persisted AI-agent message histories.

Large binary and text parts of a JSON message history move to a
content-addressed store (``media+sha256://<hex>``) and are replaced by small
versioned markers; ``restore_media`` puts the exact bytes back.
"""

import logging
from typing import TYPE_CHECKING

from mediastash import errors, stores
from mediastash.context import EMPTY_CONTEXT, MediaContext, MediaContextLike
from mediastash.errors import *  # noqa: F403  (every public error: errors.__all__, re-exported below)
from mediastash.keys import KeyStrategy, default_key_strategy, sharded_key_strategy
from mediastash.known_blobs import KnownBlobCache
from mediastash.open_store import open_store
from mediastash.reference_keys import ReferenceKey
from mediastash.stores import *  # noqa: F403  (the store API: stores.__all__, re-exported below)
from mediastash.stores.verify import VerifyReport
from mediastash.uri import MEDIA_URI_SCHEME, is_media_uri, media_uri_for, parse_media_uri
from mediastash.urls import PublicUrlResolver, make_static_public_url
from mediastash.walker import DEFAULT_THRESHOLD_BYTES, WalkOptions, externalize_media, restore_media

if TYPE_CHECKING:  # `X as X` re-exports them for type checkers without listing them in __all__
    from mediastash.stores.mongo import MongoMediaStore as MongoMediaStore
    from mediastash.stores.mongo import MongoOptions as MongoOptions
    from mediastash.stores.postgres import PostgresMediaStore as PostgresMediaStore
    from mediastash.stores.postgres import PostgresOptions as PostgresOptions
    from mediastash.stores.s3 import PresignedUrls as PresignedUrls
    from mediastash.stores.s3 import S3MediaStore as S3MediaStore
    from mediastash.stores.s3 import S3Options as S3Options

# Silent unless the application configures logging: records of the `mediastash` logger hierarchy
# (one logger per module) go nowhere by default. docs/logging.md lists what is logged.
logging.getLogger('mediastash').addHandler(logging.NullHandler())

__version__ = '0.1.0'

# The stores behind extras (S3MediaStore, PresignedUrls, MongoMediaStore, PostgresMediaStore and their
# options) are importable by name (`from mediastash import S3MediaStore`) but kept out of __all__: they
# need an extra, and `from mediastash import *` must work without it.
__all__ = [
    'DEFAULT_THRESHOLD_BYTES',
    'KnownBlobCache',
    'WalkOptions',
    'externalize_media',
    'restore_media',
    'EMPTY_CONTEXT',
    'MEDIA_URI_SCHEME',
    'KeyStrategy',
    'MediaContext',
    'MediaContextLike',
    'PublicUrlResolver',
    'ReferenceKey',
    'VerifyReport',
    '__version__',
    'default_key_strategy',
    'is_media_uri',
    'make_static_public_url',
    'media_uri_for',
    'open_store',
    'parse_media_uri',
    'sharded_key_strategy',
]
# Every public error and the whole store API are importable from here: errors.__all__ and stores.__all__
# name them once (the star imports above bind them).
__all__ += [*errors.__all__, *stores.__all__]


def __getattr__(name: str) -> object:
    """Stores behind optional extras (S3, MongoDB, PostgreSQL) load on first access, as from ``mediastash.stores``."""
    return stores._load_optional(name, __name__)


def __dir__() -> list[str]:
    """The module's names plus the lazily loaded stores, which ``__all__`` leaves out."""
    return sorted({*globals(), *stores._OPTIONAL})
