"""Base64 and UTF-8 conversions used by the walker, on the fast SIMD codec (pybase64).

Only *canonical* base64 is externalized: the exact string must come back on
restore, so input whose padding bits are not zero, that mixes the standard and
URL-safe alphabets, or that is not valid base64 at all stays inline.
"""

from __future__ import annotations

import binascii

import pybase64

__all__ = [
    'bytes_to_text',
    'decode_canonical_base64',
    'encode_base64',
    'is_urlsafe_alphabet',
    'max_decoded_size',
    'text_to_bytes',
]

_URLSAFE = b'-_'


def max_decoded_size(encoded_length: int) -> int:
    """Upper bound on the bytes a base64 string of this length can decode to."""
    return (encoded_length // 4) * 3


def is_urlsafe_alphabet(data: str) -> bool | None:
    """``True`` for the URL-safe alphabet, ``False`` for the standard one, ``None`` when mixed."""
    urlsafe = '-' in data or '_' in data
    if urlsafe and ('+' in data or '/' in data):
        return None
    return urlsafe


def decode_canonical_base64(data: str) -> tuple[bytes, bool] | None:
    """Decode canonical base64 in either alphabet: ``(raw, urlsafe)``, or ``None`` when not canonical.

    Canonical means ``encode_base64(raw, urlsafe=urlsafe) == data``. Instead of
    re-encoding the whole payload, only the final quantum is re-encoded: under
    strict validation every earlier 4-character group maps one-to-one onto 3 bytes.
    """
    if not data.isascii() or len(data) % 4:
        return None
    urlsafe = is_urlsafe_alphabet(data)
    if urlsafe is None:
        return None
    altchars = _URLSAFE if urlsafe else None
    try:
        raw = pybase64.b64decode(data, altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        return None
    if data:
        tail_start = (len(data) // 4 - 1) * 3
        if pybase64.b64encode(raw[tail_start:], altchars=altchars) != data[-4:].encode('ascii'):
            return None
    return raw, urlsafe


def encode_base64(raw: bytes, *, urlsafe: bool) -> str:
    """Standard or URL-safe base64 of ``raw``, with padding, as ``str``."""
    return pybase64.b64encode_as_string(raw, altchars=_URLSAFE if urlsafe else None)


def text_to_bytes(text: str) -> bytes:
    """UTF-8, letting unpaired surrogates through so any JSON string round-trips exactly."""
    return text.encode('utf-8', 'surrogatepass')


def bytes_to_text(raw: bytes) -> str:
    """Inverse of ``text_to_bytes``."""
    return raw.decode('utf-8', 'surrogatepass')
