"""User metadata as S3 ``x-amz-meta-*`` headers: validation and a lossless encoding.

S3 sends metadata as HTTP headers, which carry only printable ASCII, lose
leading and trailing blanks, and (on some servers) drop empty values. Keys are
therefore limited to ASCII letters, digits, ``-``, ``_`` and ``.``, and sent
lowercased, as S3 stores them anyway (so ``Tenant`` comes back as ``tenant``;
two keys that differ only in case are refused, one would be lost), control
characters are refused, and any value that would not survive the trip as is
(non-ASCII, empty, padded with blanks, or itself looking like an encoded word)
is sent as an RFC 2047 encoded word ``=?UTF-8?B?<base64>?=``, the form S3 itself
uses for non-ASCII metadata. Everything is checked before a request is sent.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping

__all__ = ['MAX_METADATA_BYTES', 'decode_metadata', 'encode_metadata']

MAX_METADATA_BYTES = 2048
"""S3's limit on user metadata: the UTF-8 bytes of every key plus every value, as sent."""

_KEY = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]*')
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_PLAIN = re.compile(r'[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?')
_ENCODED_WORD = re.compile(r'=\?utf-8\?([bq])\?(.*)\?=', re.IGNORECASE | re.DOTALL)
_B_PREFIX = '=?UTF-8?B?'
_B_SUFFIX = '?='


def encode_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Check ``metadata`` and return the header-safe form to send; raises ``ValueError`` naming the bad key."""
    encoded: dict[str, str] = {}
    total = 0
    for key, value in metadata.items():
        if not _KEY.fullmatch(key):
            raise ValueError(
                f'S3 metadata key {key!r} is not allowed: use ASCII letters, digits, '
                "'-', '_' and '.', starting with a letter or digit (keys are sent as headers)"
            )
        if _CONTROL.search(value):
            raise ValueError(f'S3 metadata value for key {key!r} contains a control character')
        name = key.lower()  # what S3 stores and get_metadata returns
        if name in encoded:
            clash = next(other for other in metadata if other != key and other.lower() == name)
            raise ValueError(
                f'S3 metadata keys {clash!r} and {key!r} differ only in case: S3 stores names lowercased, '
                'so one would be lost'
            )
        wire = value if _PLAIN.fullmatch(value) and not value.startswith('=?') else _encode_word(value)
        encoded[name] = wire
        total += len(name) + len(wire)
    if total > MAX_METADATA_BYTES:
        raise ValueError(
            f'S3 metadata is {total} bytes once encoded (keys {sorted(metadata)!r}); S3 allows {MAX_METADATA_BYTES}'
        )
    return encoded


def decode_metadata(headers: Mapping[str, str]) -> dict[str, str]:
    """Metadata as the caller gave it, from what S3 returns (encoded words decoded, others as is)."""
    return {key: _decode_word(value) for key, value in headers.items()}


def _encode_word(value: str) -> str:
    return _B_PREFIX + base64.b64encode(value.encode('utf-8')).decode('ascii') + _B_SUFFIX


def _decode_word(value: str) -> str:
    match = _ENCODED_WORD.fullmatch(value)
    if match is None:
        return value
    kind, text = match.groups()
    try:
        if kind in 'bB':
            return base64.b64decode(text, validate=True).decode('utf-8')
        return _decode_q(text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return value


def _decode_q(text: str) -> str:
    """RFC 2047 "Q" encoding (``_`` is a space, ``=XX`` a byte), which some servers return."""
    raw = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == '_':
            raw.append(0x20)
        elif char == '=':
            raw.append(int(text[index + 1 : index + 3], 16))
            index += 2
        else:
            raw.extend(char.encode('ascii'))
        index += 1
    return raw.decode('utf-8')
