"""``MediaContext``: the per-call bag of facts threaded through every store method."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

__all__ = ['EMPTY_CONTEXT', 'MediaContext', 'MediaContextLike', 'context_metadata', 'context_media_type']

_NO_METADATA: Mapping[str, str] = MappingProxyType({})


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
    """The context's metadata, checked to be a ``str -> str`` mapping.

    Raises ``TypeError`` naming the bad key or value so a store never persists
    something it could not give back.
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
    return metadata
