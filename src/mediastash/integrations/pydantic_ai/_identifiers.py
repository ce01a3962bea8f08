"""``IdentifierMemo``: ``BinaryContent.identifier`` without hashing a payload again (typed walk, MediaUrls).

pydantic-ai derives a default identifier from the bytes (a sha1 prefix) each
time it is asked. It is a function of the bytes alone, so it is safe to
remember it under the blob's URI; an explicit identifier is read as it is.
"""

from __future__ import annotations

from typing import Final

from pydantic_ai.messages import BinaryContent

from mediastash._lru import BoundedLRU

__all__ = ['IdentifierMemo']

DEFAULT_KEPT: Final = 1 << 16


class IdentifierMemo:
    """Default identifiers remembered by blob URI (bounded, least recently used go first)."""

    def __init__(self, max_items: int = DEFAULT_KEPT) -> None:
        self._by_uri: BoundedLRU[str, str] = BoundedLRU(max_items=max_items)

    def known(self, content: BinaryContent, uri: str | None) -> str | None:
        """The explicit identifier, or the one remembered for ``uri``; ``None`` when it must be computed."""
        own = content._identifier  # read only: an explicit identifier wins
        if own:
            return own
        return None if uri is None else self._by_uri.get(uri)

    def remember(self, uri: str, identifier: str) -> None:
        self._by_uri.put(uri, identifier)

    def identifier(self, content: BinaryContent, uri: str) -> str:
        """``content.identifier``, computed (one hash) only when neither explicit nor remembered."""
        known = self.known(content, uri)
        if known is None:
            known = content.identifier
            self.remember(uri, known)
        return known
