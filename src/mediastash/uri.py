"""The ``media+sha256://<hex>`` URI: compute, parse, validate."""

from __future__ import annotations

import hashlib
import re

from mediastash.errors import InvalidMediaURI

__all__ = [
    'DIGEST_PATTERN',
    'EMBEDDED_DIGEST_PATTERN',
    'MEDIA_URI_SCHEME',
    'digest_of',
    'is_digest',
    'is_media_uri',
    'media_uri',
    'media_uri_for',
    'parse_media_uri',
]

MEDIA_URI_SCHEME = 'media+sha256://'
DIGEST_PATTERN = re.compile(r'[0-9a-f]{64}')
"""A lowercase hex sha256 digest (use ``fullmatch``); the one definition every module shares."""
EMBEDDED_DIGEST_PATTERN = re.compile(r'(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])')
"""A digest inside a longer name (a file or object key); use ``search``."""
_DIGEST = DIGEST_PATTERN
_PREFIX_LEN = len(MEDIA_URI_SCHEME)
_URI_LEN = _PREFIX_LEN + 64


def digest_of(data: bytes | bytearray | memoryview) -> str:
    """Lowercase hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def media_uri(digest: str) -> str:
    """URI for a digest the caller already validated (the hot path: no check)."""
    return MEDIA_URI_SCHEME + digest


def is_digest(value: object) -> bool:
    """True when ``value`` is 64 lowercase hex characters."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def media_uri_for(data: bytes | bytearray | memoryview) -> str:
    """Canonical content address of ``data``: the same bytes give the same URI in every store."""
    return MEDIA_URI_SCHEME + hashlib.sha256(data).hexdigest()


def parse_media_uri(uri: object) -> str:
    """Return the 64-hex digest of ``uri``; anything else raises ``InvalidMediaURI``."""
    if not isinstance(uri, str):
        raise InvalidMediaURI(uri, f'expected a str, got {type(uri).__name__}')
    if not uri.startswith(MEDIA_URI_SCHEME):
        raise InvalidMediaURI(uri, f'must start with {MEDIA_URI_SCHEME!r}')
    if len(uri) != _URI_LEN:
        raise InvalidMediaURI(uri, 'the digest must be exactly 64 lowercase hex characters')
    digest = uri[_PREFIX_LEN:]
    if _DIGEST.fullmatch(digest) is None:
        raise InvalidMediaURI(uri, 'the digest must be exactly 64 lowercase hex characters')
    return digest


def is_media_uri(value: object) -> bool:
    """True when ``value`` is a well-formed media URI."""
    return (
        isinstance(value, str)
        and len(value) == _URI_LEN
        and value.startswith(MEDIA_URI_SCHEME)
        and _DIGEST.fullmatch(value, _PREFIX_LEN) is not None
    )
