"""The MongoDB document layout of ``MongoMediaStore``: names, limits, manifest and chunk documents.

Kept apart from the store so the on-disk shape is readable in one place (see
``docs/mongo.md`` for the prose version).
"""

from __future__ import annotations

import math
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from mediastash.context import MediaContextLike, context_media_type, context_metadata
from mediastash.errors import CorruptMetadataError, InvalidStoreConfiguration
from mediastash.stores._metadata import decode_metadata_json

__all__ = [
    'DEFAULT_CHUNK_SIZE_BYTES',
    'MAX_CHUNK_SIZE_BYTES',
    'MAX_DOCUMENT_BYTES',
    'WRITTEN_AT',
    'Document',
    'ManifestFacts',
    'bson_time',
    'chunk_document',
    'chunk_id',
    'chunk_span',
    'check_chunk_size',
    'check_collection',
    'check_database',
    'chunk_filter',
    'chunk_sets_before',
    'manifest_size',
    'manifest_written_at',
    'new_chunk_set',
    'not_written_since',
    'parse_metadata',
    'stored_bytes',
    'written_before',
]

Document = dict[str, Any]

MAX_DOCUMENT_BYTES = 16 << 20
"""MongoDB's BSON document cap."""
_HEADROOM_BYTES = 64 << 10
MAX_CHUNK_SIZE_BYTES = MAX_DOCUMENT_BYTES - _HEADROOM_BYTES
"""Largest chunk: a chunk document keeps 64 KiB below the cap for its other fields."""
DEFAULT_CHUNK_SIZE_BYTES = 4 << 20
_INLINE_OVERHEAD_BYTES = 4 << 10
"""Room kept in an inline manifest for its fields other than ``data`` and ``metadata``."""

WRITTEN_AT = 'written_at'
"""Manifest field: UTC time of the write or of the latest touch that marked the blob in use (garbage collection)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_COLLECTION = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,99}')
_DATABASE_FORBIDDEN = frozenset('/\\. "$\0')
_DATABASE_MAX_BYTES = 63


def check_collection(name: object) -> str:
    """Validate the manifest collection name (the chunk collection is ``<name>_chunks``)."""
    if not isinstance(name, str) or _COLLECTION.fullmatch(name) is None:
        raise InvalidStoreConfiguration(
            'invalid MongoDB collection name (not repeated here): use 1-100 letters, digits or underscores, '
            'not starting with a digit'
        )
    return name


def check_database(name: object) -> str:
    """Validate a database name against MongoDB's rules (non-empty, no ``/\\. "$``, under 64 bytes)."""
    if (
        not isinstance(name, str)
        or not name
        or any('\ud800' <= char <= '\udfff' for char in name)  # before encode(), whose error holds the name
        or len(name.encode()) > _DATABASE_MAX_BYTES
        or any(char in _DATABASE_FORBIDDEN for char in name)
    ):
        raise InvalidStoreConfiguration(
            'invalid MongoDB database name (not repeated here): it is required, must be 1-63 bytes and '
            'must not contain / \\ . space " $ or NUL'
        )
    return name


def check_chunk_size(size: object) -> int:
    """Validate ``chunk_size_bytes``: an int from 1 to ``MAX_CHUNK_SIZE_BYTES``."""
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_CHUNK_SIZE_BYTES:
        raise InvalidStoreConfiguration(
            f'chunk_size_bytes must be an int from 1 to {MAX_CHUNK_SIZE_BYTES} '
            '(16 MiB document cap minus 64 KiB headroom)'
        )
    return size


def new_chunk_set(now: float | None = None) -> str:
    """A fresh id for the chunks of one write: creation time (8 hex digits of Unix seconds) and 12 random bytes.

    Never shared between writers; the time prefix lets a sweep find old sets with an index range scan.
    """
    return f'{int(time.time() if now is None else now):08x}{secrets.token_hex(12)}'


def chunk_sets_before(when: float) -> Document:
    """A query on chunk documents: those whose set was created before ``when`` (Unix seconds)."""
    return {'set': {'$lt': f'{max(0, int(when)):08x}'}}


def bson_time(when: float, *, round_up: bool = False) -> datetime:
    """``when`` (Unix seconds) as the millisecond UTC datetime BSON stores.

    A write time is rounded up and a cutoff down, so a blob never looks older
    than it is to garbage collection.
    """
    milliseconds = math.ceil(when * 1000) if round_up else math.floor(when * 1000)
    return _EPOCH + timedelta(milliseconds=milliseconds)


def unix_time(value: object) -> float | None:
    """A BSON datetime (naive means UTC, pymongo's default) as Unix seconds; ``None`` for anything else."""
    if not isinstance(value, datetime):
        return None
    return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).timestamp()


def manifest_written_at(manifest: Mapping[str, Any]) -> float | None:
    """The blob's last-write time: ``written_at``, else the ``created_at`` of manifests from before it existed.

    ``None`` (unknown age, never collected) for manifests with neither, as
    pydantic-ai-harness writes them, or with a ``written_at`` that is not a
    date. Agrees with ``written_before``.
    """
    if WRITTEN_AT in manifest:
        return unix_time(manifest[WRITTEN_AT])
    return unix_time(manifest.get('created_at'))


def written_before(when: float) -> Document:
    """A query on manifests: those whose last-write time is known and before ``when`` (Unix seconds)."""
    cutoff = bson_time(when)
    return {
        '$or': [
            {WRITTEN_AT: {'$lt': cutoff}},
            {WRITTEN_AT: {'$exists': False}, 'created_at': {'$lt': cutoff}},
        ]
    }


def not_written_since(when: float) -> Document:
    """A query on manifests: those to touch, last written before ``when`` or of unknown age."""
    return {WRITTEN_AT: {'$not': {'$gte': bson_time(when)}}}


def manifest_size(manifest: Mapping[str, Any]) -> int:
    """The blob's size as its manifest records it (ours: ``size``; pydantic-ai-harness's: ``size_bytes``)."""
    for field in ('size', 'size_bytes'):
        value = manifest.get(field)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def chunk_id(chunk_set: str, n: int) -> str:
    """The ``_id`` of chunk ``n`` of ``chunk_set``: reads look chunks up by it, the one index every server uses."""
    return f'{chunk_set}:{n}'


def chunk_document(chunk_set: str, n: int, data: bytes) -> Document:
    """Chunk ``n`` (0-based) of the chunk set ``chunk_set``."""
    return {'_id': chunk_id(chunk_set, n), 'set': chunk_set, 'n': n, 'data': data}


def chunk_span(manifest: Mapping[str, Any]) -> tuple[str, int] | None:
    """Our chunked manifest's chunk set and chunk count, for lookups by chunk ``_id``.

    ``None`` for a manifest pydantic-ai-harness wrote (no ``chunk_set``) or one
    whose ``chunk_count`` is not a non-negative int: those chunks are found by
    ``chunk_filter``. A query on ``set`` needs the partial ``(set, n)`` index,
    which a simple query planner (the MongoDB-wire test server's) never picks,
    so it would scan the whole chunk collection.
    """
    chunk_set = manifest.get('chunk_set')
    count = manifest.get('chunk_count')
    if not isinstance(chunk_set, str) or not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return None
    return chunk_set, count


@dataclass(frozen=True, slots=True)
class ManifestFacts:
    """What a manifest records about a blob besides its bytes: media type and user metadata."""

    media_type: str | None
    metadata: list[list[str]]
    """``[[key, value], ...]``: pairs, not a sub-document, so keys with ``.`` or ``$`` are plain data."""

    @classmethod
    def of(cls, context: MediaContextLike) -> ManifestFacts:
        """Read (and validate, raising ``TypeError``) the facts a put's context carries."""
        metadata = context_metadata(context)
        return cls(context_media_type(context), [[key, value] for key, value in metadata.items()])

    def fits_inline(self, size: int, chunk_size: int) -> bool:
        """True when a blob of ``size`` bytes goes into the manifest itself instead of chunk documents."""
        if size > chunk_size:
            return False
        metadata_bytes = sum(len(key.encode()) + len(value.encode()) + 32 for key, value in self.metadata)
        return size + metadata_bytes + _INLINE_OVERHEAD_BYTES <= MAX_CHUNK_SIZE_BYTES

    def manifest(self, digest: str, size: int, chunk_size: int) -> Document:
        """The manifest fields shared by inline and chunked blobs."""
        now = time.time()
        return {
            '_id': digest,
            'size': size,
            'media_type': self.media_type,
            'metadata': self.metadata,
            'chunk_size': chunk_size,
            'chunk_count': 0,
            'created_at': datetime.fromtimestamp(now, UTC),
            WRITTEN_AT: bson_time(now, round_up=True),
        }

    def inline_manifest(self, digest: str, data: bytes, chunk_size: int) -> Document:
        """A manifest holding the blob's bytes in ``data`` (blobs no larger than one chunk)."""
        return {**self.manifest(digest, len(data), chunk_size), 'data': data}

    def chunked_manifest(self, digest: str, size: int, chunk_size: int, chunk_set: str, chunk_count: int) -> Document:
        """A manifest pointing at ``chunk_count`` chunk documents of the set ``chunk_set``."""
        return {**self.manifest(digest, size, chunk_size), 'chunk_set': chunk_set, 'chunk_count': chunk_count}


def chunk_filter(digest: str, manifest: Mapping[str, Any]) -> Document | None:
    """The query selecting a chunked manifest's chunk documents; ``None`` when it names none.

    Our manifests name a chunk set. Manifests pydantic-ai-harness wrote have
    no ``chunk_set``: their chunks carry ``files_id`` (the digest) and, in its
    newer layout, the ``chunk_size`` they were cut with.
    """
    chunk_set = manifest.get('chunk_set')
    if isinstance(chunk_set, str):
        return {'set': chunk_set}
    if 'chunk_count' not in manifest:
        return None
    chunk_size = manifest.get('chunk_size')
    return {'files_id': digest, 'chunk_size': chunk_size if isinstance(chunk_size, int) else {'$exists': False}}


def parse_metadata(uri: str, raw: object, where: str) -> dict[str, str]:
    """A manifest's ``metadata`` field back as a ``str -> str`` dict (missing means none).

    Ours is a list of ``[key, value]`` pairs; pydantic-ai-harness stores a JSON
    object as text, which is accepted too.
    """
    if raw is None:
        return {}
    if isinstance(raw, str):
        return decode_metadata_json(raw, uri=uri, where=where)
    if not isinstance(raw, list):
        raise CorruptMetadataError(uri, f'metadata is {type(raw).__name__}, expected a list of pairs', where=where)
    result: dict[str, str] = {}
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item)):
            raise CorruptMetadataError(uri, f'metadata entry {item!r} is not a [str, str] pair', where=where)
        result[item[0]] = item[1]
    return result


def stored_bytes(value: object) -> bytes | None:
    """A ``data`` field as bytes; ``None`` when it holds something else (written behind our back)."""
    if type(value) is bytes:
        return value
    if isinstance(value, bytes):  # bson.Binary with a non-default subtype
        return bytes(value)
    return None
