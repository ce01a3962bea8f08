"""Keys a store has seen stored recently, so a repeated ``put`` can skip its HEAD (opt-in).

A content-addressed object never changes, so once a store uploaded a key or
saw it stored, asking again only guards against the object being deleted or
damaged behind the store's back. ``KnownKeys`` trusts what it saw for ``ttl``
seconds: within that window a ``put`` of a blob deleted by someone else is
skipped, and only a later ``put`` (or a read, which raises) notices. That is
why ``S3MediaStore`` keeps it off unless ``known_ttl`` is given. Deletions made
through the store itself forget their keys at once. Memory is bounded by
``limit`` keys (oldest first out).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ['KnownKeys']


class KnownKeys:
    """Object keys seen stored, each trusted for ``ttl`` seconds from when it was seen."""

    def __init__(self, ttl: float, limit: int = 65_536) -> None:
        self._ttl = ttl
        self._limit = limit
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        """True while ``key`` was seen stored less than ``ttl`` seconds ago (an expired key is dropped)."""
        if not isinstance(key, str):
            return False
        seen = self._seen.get(key)
        if seen is None:
            return False
        if time.monotonic() - seen < self._ttl:
            return True
        del self._seen[key]
        return False

    def __len__(self) -> int:
        return len(self._seen)

    def add(self, key: str) -> None:
        self._seen[key] = time.monotonic()
        self._seen.move_to_end(key)
        while len(self._seen) > self._limit:
            self._seen.popitem(last=False)

    def forget(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._seen.pop(key, None)

    def clear(self) -> None:
        self._seen.clear()
