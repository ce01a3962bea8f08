"""Key strategies: where a blob lives inside a folder or bucket."""

from __future__ import annotations

from collections.abc import Callable

from mediastash.context import MediaContextLike
from mediastash.uri import parse_media_uri

__all__ = ['KeyStrategy', 'default_key_strategy', 'sharded_key_strategy']

KeyStrategy = Callable[[str, MediaContextLike], str]
"""Maps ``(uri, context)`` to a relative storage key such as ``'<hex>.bin'``.

A strategy that reads the context (for example to pick an extension from the
media type) must be given the same context on reads, or the blob is not found.
"""


def default_key_strategy(uri: str, context: MediaContextLike | None = None) -> str:
    """``<hex>.bin``: the layout pydantic-ai-harness uses, so existing folders and buckets stay readable."""
    return f'{parse_media_uri(uri)}.bin'


def sharded_key_strategy(uri: str, context: MediaContextLike | None = None) -> str:
    """``<h0h1>/<h2h3>/<hex>.bin``: keeps directories small when a store holds millions of blobs."""
    digest = parse_media_uri(uri)
    return f'{digest[:2]}/{digest[2:4]}/{digest}.bin'
