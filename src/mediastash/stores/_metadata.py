"""The one codec for user metadata kept as JSON text (disk sidecars, SQLite and MongoDB columns).

Encoding matches pydantic-ai-harness byte for byte (``json.dumps`` defaults:
ASCII-escaped, the caller's key order, ``'{}'`` when empty). Decoding accepts
exactly a JSON object of strings and raises ``CorruptMetadataError`` naming
the blob for anything else, including JSON nested too deeply to parse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mediastash.context import MediaContextLike, context_metadata
from mediastash.errors import CorruptMetadataError

__all__ = ['decode_metadata_json', 'encode_metadata_json', 'metadata_object']


def encode_metadata_json(context: MediaContextLike) -> str:
    """The context's metadata as JSON text (validated by ``context_metadata`` first)."""
    return json.dumps(dict(context_metadata(context)))


def decode_metadata_json(raw: object, *, uri: str, where: str) -> dict[str, str]:
    """Parse stored metadata JSON; ``None`` (a nullable column) means no metadata."""
    if raw is None:
        return {}
    if not isinstance(raw, str | bytes | bytearray):
        raise CorruptMetadataError(uri, f'the stored metadata is {type(raw).__name__}, not JSON text', where=where)
    try:
        value = json.loads(raw)
    except RecursionError:
        raise CorruptMetadataError(uri, 'JSON nested too deeply', where=where) from None
    except ValueError as exc:
        raise CorruptMetadataError(uri, f'not JSON ({exc})', where=where) from None
    return metadata_object(value, uri=uri, where=where)


def metadata_object(value: object, *, uri: str, where: str) -> dict[str, str]:
    """``value`` as a ``str -> str`` dict, or ``CorruptMetadataError`` saying what is wrong with it."""
    if not isinstance(value, Mapping):
        raise CorruptMetadataError(uri, f'expected a JSON object, got {type(value).__name__}', where=where)
    for key, item in value.items():
        if not isinstance(item, str):
            raise CorruptMetadataError(uri, f'metadata[{key!r}] is {type(item).__name__}, expected str', where=where)
    return dict(value)
