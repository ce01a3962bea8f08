"""Seals on the envelopes the wrappers write: an envelope from untrusted input never makes a restore read a blob.

An envelope names stored blobs, and the next restore reads them. A save that
meets an envelope in its input (a plain read of the inner store, written back)
keeps it only if a wrapper sealed it: an HMAC under the reference key
(``ReferenceKey.seal_names``) over every ``media+sha256://`` digest the
envelope names anywhere, bound to the media store's namespace. Anything else
is refused (``UnvouchedEnvelopeError``). Restores trust what the application
stored (old unsealed envelopes included). ``docs/security.md`` has the model.
"""

from __future__ import annotations

import re
from typing import Any, Final

from mediastash.errors import UnvouchedEnvelopeError
from mediastash.reference_keys import ReferenceKey, SealCheck
from mediastash.stores.capabilities import namespace_name_of
from mediastash.uri import MEDIA_URI_SCHEME

__all__ = ['SEAL_KEY', 'check_envelope', 'named_digests', 'refuse_unvouched', 'seal_envelope', 'store_namespace']

SEAL_KEY: Final = 'seal'
"""The key of an envelope mapping that holds its seal."""

_NAMED: Final = re.compile(re.escape(MEDIA_URI_SCHEME) + r'([0-9a-f]{64})')


def named_digests(value: Any) -> set[str]:
    """Every digest a ``media+sha256://`` URI names in any string (or key) of the JSON-shaped ``value``.

    A superset of what a restore may read: whatever field a marker's
    reference is taken from, its digest is in here.
    """
    found: set[str] = set()
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if MEDIA_URI_SCHEME in node:
                found.update(_NAMED.findall(node))
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return found


def store_namespace(media_store: object) -> str | None:
    """The namespace a store (or a namespace view) is confined to; ``None`` for the whole store.

    (Here rather than ``_references`` so integrations without pydantic-ai import it.)
    """
    return namespace_name_of(media_store)


def seal_envelope(key: ReferenceKey, named: Any, namespace: str | None) -> str:
    """The seal for an envelope whose content (without its seal) is ``named``."""
    return key.seal_names(named_digests(named), namespace)


def check_envelope(key: ReferenceKey, named: Any, namespace: str | None, seal: object) -> SealCheck:
    """Whether ``seal`` (the envelope's seal field, ``None`` when absent) vouches for what ``named`` names."""
    if seal is None:
        return 'unsigned'
    if not isinstance(seal, str):
        return 'invalid'
    return key.check_names(named_digests(named), namespace, seal)


def refuse_unvouched(key: ReferenceKey, named: Any, namespace: str | None, seal: object, where: str) -> None:
    """Raise ``UnvouchedEnvelopeError`` at ``where`` unless ``seal`` vouches for ``named``."""
    found = check_envelope(key, named, namespace, seal)
    if found != 'vouched':
        raise UnvouchedEnvelopeError(where=where, reason=found)
