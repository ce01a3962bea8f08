"""Reference keys: how mediastash vouches for a ``media+sha256://`` reference it handed out.

A reference part made by a restore (``OffloadingStepStore(restore='references')``)
carries a *seal* after its URI: ``media+sha256://<hex>#ms1.<tag>.<mac>``. The
tag is an HMAC-SHA256 of the store's namespace under the key (96 bits), the MAC
an HMAC-SHA256 over a versioned message holding the tag and the digest (128
bits), both URL-safe base64. ``MediaUrls`` resolves a reference only when its
seal verifies under one of its keys for the namespace of its own store; anyone
who merely knows a digest cannot make one. ``docs/security.md`` has the threat
model. This module is pure (``hmac``, no I/O, no framework).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Final, Literal

from mediastash.errors import InvalidArgumentError

__all__ = ['MIN_REFERENCE_KEY_BYTES', 'ReferenceKey', 'SealCheck', 'process_reference_key', 'reference_key_of']

MIN_REFERENCE_KEY_BYTES: Final = 32
"""The shortest key accepted (256 bits, the HMAC-SHA256 block's natural strength)."""

SealCheck = Literal['vouched', 'unsigned', 'invalid', 'other-namespace']
"""What a seal check found: good; no seal; a seal no key made for this digest; made for another namespace."""

_VERSION: Final = 'ms1'
_TAG_BYTES: Final = 12
_MAC_BYTES: Final = 16
_TAG_CHARS: Final = 16  # URL-safe base64 of 12 bytes, no padding
_MAC_CHARS: Final = 22  # of 16 bytes
_TAG_DOMAIN: Final = b'mediastash/reference-namespace/v1\x00'
_MAC_DOMAIN: Final = b'mediastash/reference/v1\x00'


def _namespace_bytes(namespace: str | None) -> bytes:
    # None (the store without a namespace) and every name stay distinct: a flag byte, then the name.
    return b'\x00' if namespace is None else b'\x01' + namespace.encode('utf-8')


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b'=').decode('ascii')


def _unb64(text: str, size: int) -> bytes | None:
    try:
        raw = base64.urlsafe_b64decode(text + '=' * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == size and _b64(raw) == text else None


class ReferenceKey:
    """The application's key(s) for sealing reference parts: seal with ``current``, accept any of them.

    Rotation: construct with the new key first and the old ones after
    (``ReferenceKey(new, old)``); references sealed under ``old`` keep
    resolving until ``old`` is dropped. Every key is bytes of at least
    ``MIN_REFERENCE_KEY_BYTES``. The repr never shows key material.
    """

    __slots__ = ('_keys',)

    def __init__(self, current: bytes, *previous: bytes) -> None:
        keys = (current, *previous)
        for key in keys:
            if not isinstance(key, bytes) or len(key) < MIN_REFERENCE_KEY_BYTES:
                raise InvalidArgumentError('reference_key', f'bytes of at least {MIN_REFERENCE_KEY_BYTES}', key)
        self._keys: tuple[bytes, ...] = keys

    @classmethod
    def generate(cls) -> ReferenceKey:
        """A new random key (32 bytes from ``secrets``)."""
        return cls(secrets.token_bytes(MIN_REFERENCE_KEY_BYTES))

    def seal(self, digest: str, namespace: str | None) -> str:
        """The seal vouching for ``digest`` in ``namespace`` (``None``: the store without a namespace)."""
        key = self._keys[0]
        tag = _tag(key, namespace)
        return f'{_VERSION}.{_b64(tag)}.{_b64(_mac(key, tag, digest))}'

    def check(self, digest: str, namespace: str | None, seal: str | None) -> SealCheck:
        """Whether ``seal`` vouches for ``digest`` in ``namespace`` under one of the keys (constant-time compares)."""
        if seal is None:
            return 'unsigned'
        fields = seal.split('.')
        if len(fields) != 3 or fields[0] != _VERSION:
            return 'invalid'
        tag = _unb64(fields[1], _TAG_BYTES) if len(fields[1]) == _TAG_CHARS else None
        mac = _unb64(fields[2], _MAC_BYTES) if len(fields[2]) == _MAC_CHARS else None
        if tag is None or mac is None:
            return 'invalid'
        for key in self._keys:
            if hmac.compare_digest(mac, _mac(key, tag, digest)):
                return 'vouched' if hmac.compare_digest(tag, _tag(key, namespace)) else 'other-namespace'
        return 'invalid'

    def seal_names(self, digests: Iterable[str], namespace: str | None) -> str:
        """The seal vouching for a set of digests in ``namespace`` (an envelope a wrapper wrote).

        The same MAC as ``seal``, over a versioned canonical form (the sorted,
        distinct digests after a domain word), so a single reference's seal is
        never an envelope's and the reverse.
        """
        return self.seal(_names_message(digests), namespace)

    def check_names(self, digests: Iterable[str], namespace: str | None, seal: str | None) -> SealCheck:
        """Whether ``seal`` vouches for exactly this set of digests in ``namespace`` (see ``seal_names``)."""
        return self.check(_names_message(digests), namespace, seal)

    def __repr__(self) -> str:
        return f'ReferenceKey(<{len(self._keys)} key(s)>)'


_NAMES_DOMAIN: Final = 'names1:'


def _names_message(digests: Iterable[str]) -> str:
    return _NAMES_DOMAIN + ','.join(sorted(set(digests)))


def _tag(key: bytes, namespace: str | None) -> bytes:
    return hmac.digest(key, _TAG_DOMAIN + _namespace_bytes(namespace), hashlib.sha256)[:_TAG_BYTES]


def _mac(key: bytes, tag: bytes, digest: str) -> bytes:
    return hmac.digest(key, _MAC_DOMAIN + tag + digest.encode('ascii'), hashlib.sha256)[:_MAC_BYTES]


_PROCESS_KEY: Final = ReferenceKey.generate()


def process_reference_key() -> ReferenceKey:
    """The random key of this process: the default of every wrapper and ``MediaUrls`` given no ``reference_key``.

    A restore and a model request in the same process agree without setup;
    nothing sealed with it verifies in another process (give an application
    key there).
    """
    return _PROCESS_KEY


def reference_key_of(value: ReferenceKey | bytes | None) -> ReferenceKey:
    """The ``reference_key=`` argument as a ``ReferenceKey`` (``None``: the process key); bad input is refused."""
    if value is None:
        return _PROCESS_KEY
    if isinstance(value, ReferenceKey):
        return value
    if isinstance(value, bytes):
        return ReferenceKey(value)
    raise InvalidArgumentError('reference_key', f'a ReferenceKey or bytes of at least {MIN_REFERENCE_KEY_BYTES}', value)
