"""Re-hash stored blobs and, on request, remove the corrupt ones (``BaseMediaStore.verify``, ``mediastash verify``).

Repair can only remove: a corrupt blob is deleted so that the next ``put`` of
the right bytes stores them fresh. No store can invent the original bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mediastash._checks import positive_int
from mediastash._tasks import raise_first
from mediastash.errors import IntegrityError, MediaNotFoundError
from mediastash.stores.protocols import DeletableMediaStore, ListableMediaStore, MediaStore, StreamingMediaStore
from mediastash.uri import parse_media_uri

__all__ = ['VERIFY_CHUNK_BYTES', 'VerifyReport', 'verify_store']

VERIFY_CHUNK_BYTES = 1 << 20
"""Piece size when a blob is streamed for verification."""


@dataclass
class VerifyReport:
    """What a verification found: blobs checked, intact, corrupt, missing and repaired (deleted), and intact bytes."""

    checked: int = 0
    ok: int = 0
    bytes: int = 0
    corrupt: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True when nothing was corrupt or missing."""
        return not self.corrupt and not self.missing

    def as_json(self) -> dict[str, Any]:
        """A JSON document of the report (URIs sorted)."""
        return {
            'checked': self.checked,
            'ok': self.ok,
            'corrupt': sorted(self.corrupt),
            'missing': sorted(self.missing),
            'repaired': sorted(self.repaired),
            'bytes': self.bytes,
        }


async def verify_store(
    store: MediaStore,
    uris: Iterable[str] | None = None,
    *,
    repair: bool = False,
    max_concurrency: int = 4,
    on_checked: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Read every blob of ``uris`` (default: every blob the store lists) and check its sha256.

    Blobs are streamed when the store can, ``max_concurrency`` at a time.
    With ``repair=True`` each corrupt blob is deleted (the store must support
    ``delete``); missing blobs cannot be repaired. ``on_checked(uri)`` is
    called after each blob (progress bars).
    """
    positive_int('max_concurrency', max_concurrency)
    if repair and not isinstance(store, DeletableMediaStore):
        raise TypeError(f'{store!r} cannot delete blobs, so verify cannot repair it')
    if uris is None:
        if not isinstance(store, ListableMediaStore):
            raise TypeError(f'{store!r} cannot list its blobs; pass the URIs to verify')
        todo = [uri async for uri in store.iter_uris()]
    else:
        todo = list(dict.fromkeys(uris))
        for uri in todo:
            parse_media_uri(uri)
    report = VerifyReport()
    pending = iter(todo)

    async def worker() -> None:
        for uri in pending:
            try:
                size = await _read_size(store, uri)
            except IntegrityError:
                report.corrupt.append(uri)
                if repair and isinstance(store, DeletableMediaStore) and await store.delete(uri):
                    report.repaired.append(uri)
            except MediaNotFoundError:
                report.missing.append(uri)
            else:
                report.ok += 1
                report.bytes += size
            report.checked += 1
            if on_checked is not None:
                on_checked(uri)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(max_concurrency, len(todo))):
                group.create_task(worker())
    except BaseExceptionGroup as error:  # a store error (not a corrupt or missing blob) is raised as it is
        raise_first(error)
    return report


async def _read_size(store: MediaStore, uri: str) -> int:
    """Read the whole blob (verified by the store) and return its size."""
    if isinstance(store, StreamingMediaStore):
        size = 0
        async for chunk in store.get_stream(uri, chunk_size=VERIFY_CHUNK_BYTES):
            size += len(chunk)
        return size
    return len(await store.get(uri))
