"""Public-URL resolvers: turn a stored blob's URI into a URL a model provider can fetch."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from mediastash.context import MediaContextLike
from mediastash.uri import parse_media_uri

__all__ = ['PublicUrlResolver', 'make_static_public_url', 'resolve_public_url']

PublicUrlResolver = Callable[[str, MediaContextLike], 'str | Awaitable[str | None] | None']
"""Sync or async callable ``(uri, context) -> url | None``; ``None`` means "no URL for this blob"."""


def make_static_public_url(base: str, *, key_prefix: str = '', extension: str = '.bin') -> PublicUrlResolver:
    """Resolver for blobs served at a fixed base URL (public bucket, CDN, static file server).

    Returns ``{base}/{key_prefix}{hex}{extension}``. Raises ``ValueError`` for an
    empty ``base`` so a misconfiguration fails at start-up, not per request.
    """
    if not isinstance(base, str) or not base.strip():
        raise ValueError(f'make_static_public_url needs a non-empty base URL, got {base!r}')
    root = base.rstrip('/')

    def resolve(uri: str, context: MediaContextLike) -> str:
        return f'{root}/{key_prefix}{parse_media_uri(uri)}{extension}'

    return resolve


async def resolve_public_url(resolver: PublicUrlResolver | None, uri: str, context: MediaContextLike) -> str | None:
    """Call ``resolver`` (sync or async) after validating ``uri``; ``None`` without a resolver."""
    parse_media_uri(uri)
    if resolver is None:
        return None
    result = resolver(uri, context)
    if inspect.isawaitable(result):
        result = await result
    if result is not None and not isinstance(result, str):
        raise TypeError(f'public URL resolver returned {type(result).__name__}, expected str or None')
    return result
