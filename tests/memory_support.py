"""Reach behind a ``MemoryMediaStore``'s back, for tests of what damaged or aged storage does.

The public store offers no way to do this; these helpers touch its private
dicts, as the disk tests touch files and the SQLite tests run SQL.
"""

from __future__ import annotations

from mediastash.stores.memory import MemoryMediaStore
from mediastash.uri import parse_media_uri

__all__ = ['drop_blob', 'overwrite_blob', 'raw_bytes', 'set_written_at']


def raw_bytes(store: MemoryMediaStore, uri: str) -> bytes | None:
    """The stored bytes without verification, or ``None``."""
    return store._blobs.get(parse_media_uri(uri))


def overwrite_blob(store: MemoryMediaStore, uri: str, data: bytes) -> None:
    """Replace the stored bytes (a corrupted blob)."""
    store._blobs[parse_media_uri(uri)] = data


def drop_blob(store: MemoryMediaStore, uri: str) -> None:
    """Lose the stored bytes, as a vanished file would."""
    store._blobs.pop(parse_media_uri(uri), None)


def set_written_at(store: MemoryMediaStore, uri: str, when: float | None) -> None:
    """Set a blob's last-write time; ``None`` makes its age unknown."""
    store._written_at[parse_media_uri(uri)] = when
