"""Keys a store has seen stored recently, so a repeated ``put`` can skip its HEAD (opt-in).

A content-addressed object never changes, so once a store uploaded a key or
saw it stored, asking again only guards against the object being deleted or
damaged behind the store's back. ``KnownKeys`` trusts what it saw for ``ttl``
seconds: within that window a ``put`` of a blob deleted by another process is
skipped, and only a later ``put`` (or a read, which raises) notices. That is
why ``S3MediaStore`` keeps it off unless ``known_ttl`` is given.

Deletions made in this process through any store on the same bucket and
prefix are seen: each entry records the storage's deletion generation read
before the check that found the key, and is trusted only while that
generation is unchanged. Memory is bounded by ``limit`` keys (least recently
refreshed first out).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from mediastash._lru import BoundedLRU

__all__ = ['KnownKeys']


class KnownKeys:
    """Object keys seen stored, each trusted for ``ttl`` seconds and while no deletion was noted since."""

    def __init__(self, ttl: float, limit: int = 65_536) -> None:
        self._ttl = ttl
        self._seen: BoundedLRU[str, tuple[float, int]] = BoundedLRU(max_items=limit)

    def __len__(self) -> int:
        return len(self._seen)

    def trusted(self, key: str, generation: int) -> bool:
        """True while ``key`` was seen less than ``ttl`` seconds ago at deletion ``generation`` (else dropped)."""
        entry = self._seen.peek(key)
        if entry is None:
            return False
        seen_at, seen_generation = entry
        if seen_generation == generation and time.monotonic() - seen_at < self._ttl:
            return True
        self._seen.pop(key)
        return False

    def add(self, key: str, generation: int) -> None:
        """Remember ``key`` as stored; ``generation`` is the deletion generation read before it was checked."""
        self._seen.put(key, (time.monotonic(), generation))

    def forget(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._seen.pop(key)

    def clear(self) -> None:
        self._seen.clear()
