"""``MediaContext``: the per-call bag of facts threaded through every store method."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from mediastash.errors import MetadataTooLargeError

__all__ = [
    'EMPTY_CONTEXT',
    'METADATA_LIMIT_BYTES',
    'MediaContext',
    'MediaContextLike',
    'context_media_type',
    'context_metadata',
]

METADATA_LIMIT_BYTES = 1 << 20
"""Most bytes a blob's user metadata may take as JSON text (``json.dumps`` defaults: what a disk sidecar holds).

One bound for every store, checked before anything is written, so no store
accepts metadata that it (or another store it is synced to) could not give back."""

_NO_METADATA: Mapping[str, str] = MappingProxyType({})
_WORST_CHARACTER_BYTES = 12
"""The most JSON text one character can take (an astral character escaped as a surrogate pair)."""
_WORST_ITEM_OVERHEAD = 6
"""Quotes, colon, comma and space around one key and value."""


@runtime_checkable
class MediaContextLike(Protocol):
    """Anything with the three context attributes: ours, pydantic-ai-harness's, or a caller's own."""

    @property
    def media_type(self) -> str | None: ...

    @property
    def filename(self) -> str | None: ...

    @property
    def metadata(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class MediaContext:
    """Facts about one blob: its media type, original filename and user metadata.

    Frozen so a context can be shared between concurrent calls; every field
    has a default so callers pass only what they know.
    """

    media_type: str | None = None
    filename: str | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: _NO_METADATA)


EMPTY_CONTEXT = MediaContext()


def context_media_type(context: object) -> str | None:
    """The context's media type when it is a string, else ``None``."""
    value = getattr(context, 'media_type', None)
    return value if isinstance(value, str) else None


def context_metadata(context: object) -> Mapping[str, str]:
    """The context's metadata, checked to be a ``str -> str`` mapping within ``METADATA_LIMIT_BYTES``.

    Raises ``TypeError`` naming the bad key or value, and ``MetadataTooLargeError``
    past the bound, so a store never persists something it could not give back.
    """
    metadata = getattr(context, 'metadata', None)
    if metadata is None:
        return _NO_METADATA
    if not isinstance(metadata, Mapping):
        raise TypeError(f'context.metadata must be a mapping of str to str, got {type(metadata).__name__}')
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise TypeError(f'context.metadata keys must be str, got {key!r}')
        if not isinstance(value, str):
            raise TypeError(f'context.metadata[{key!r}] must be str, got {type(value).__name__}')
    _check_metadata_size(metadata)
    return metadata


def _check_metadata_size(metadata: Mapping[str, str]) -> None:
    """``MetadataTooLargeError`` when the metadata's JSON text exceeds ``METADATA_LIMIT_BYTES``.

    A worst-case estimate from the character counts settles the common case
    without encoding; only metadata near the bound is encoded to measure it.
    """
    if not metadata:
        return
    characters = sum(len(key) + len(value) for key, value in metadata.items())
    worst = 2 + characters * _WORST_CHARACTER_BYTES + len(metadata) * _WORST_ITEM_OVERHEAD
    if worst <= METADATA_LIMIT_BYTES:
        return
    size = len(json.dumps(dict(metadata)))  # ASCII text: one byte per character
    if size > METADATA_LIMIT_BYTES:
        raise MetadataTooLargeError(size=size, limit=METADATA_LIMIT_BYTES)
