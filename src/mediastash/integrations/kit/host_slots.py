"""What every host-envelope integration does with slots: seal them, and read their payloads back in one batch.

LangGraph state values and OpenAI Agents session items differ in how hosts are
found and rebuilt, not in this: envelopes written are sealed under the
wrapper's reference key for the store's namespace and an envelope met in input
is honoured only when its seal verifies (``Seals``); a restore reads every live
slot's payload in one ``restore_collecting`` call, each string remembered in a
bounded cache so a repeated read needs no store round trip (``read_back``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mediastash._lru import BoundedLRU
from mediastash.errors import MalformedMarker
from mediastash.integrations._envelope_seal import SEAL_KEY, refuse_unvouched, seal_envelope, store_namespace
from mediastash.integrations.kit.envelope import Slot, Step
from mediastash.markers import URLSAFE_KEY, URLSAFE_STAMP
from mediastash.reference_keys import ReferenceKey
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import restore_collecting

__all__ = ['Joined', 'Seals', 'joined_key', 'read_back', 'where']

Joined = BoundedLRU[tuple[str, str, str], str]
"""Restored payload strings (``data:`` head included) by ``joined_key``: a repeated read skips the store."""


def where(path: tuple[Step, ...]) -> str:
    """A path from the root values, as errors name it: ``$[0]['content'][1]``."""
    return '$' + ''.join(f'[{step}]' if isinstance(step, int) else f'[{step!r}]' for step in path)


def joined_key(slot: Slot) -> tuple[str, str, str]:
    """The cache key of a slot's restored string: its URI, kept head, and form (text, standard or URL-safe base64)."""
    if slot.text:
        return slot.uri, slot.prefix, 'text'
    urlsafe = slot.marker.get(URLSAFE_KEY) == URLSAFE_STAMP
    return slot.uri, slot.prefix, 'urlsafe' if urlsafe else 'standard'


@dataclass(frozen=True, slots=True)
class Seals:
    """Seals envelopes written under ``key`` for a store's namespace, and checks those met in data to save."""

    key: ReferenceKey
    namespace: str | None

    @classmethod
    def for_store(cls, key: ReferenceKey, media_store: MediaStore) -> Seals:
        return cls(key, store_namespace(media_store))

    def seal(self, envelope: dict[str, Any]) -> str:
        return seal_envelope(self.key, envelope, self.namespace)

    def vouch(self, envelope: object, at: str) -> None:
        """Raise ``UnvouchedEnvelopeError`` at ``at`` unless this key sealed ``envelope``."""
        assert isinstance(envelope, dict)
        named = {k: v for k, v in envelope.items() if k != SEAL_KEY}
        refuse_unvouched(self.key, named, self.namespace, envelope.get(SEAL_KEY), at)


async def read_back(
    hosts: Sequence[tuple[tuple[Step, ...], Sequence[Slot]]],
    media_store: MediaStore,
    options: WalkOptions,
    joined: Joined | None,
) -> list[list[str]]:
    """The payload string (``data:`` head included) of every slot of each ``(host path, live slots)``.

    Slots found in ``joined`` need no store read (their blob was read and
    verified, or written, by this process); the others are restored in one
    batch, verified, and remembered.
    """
    keys = [joined_key(slot) for _, slots in hosts for slot in slots]
    known = [None if joined is None else joined.get(key) for key in keys]
    markers = [slot.marker for _, slots in hosts for slot in slots]
    wanted = [marker for marker, hit in zip(markers, known, strict=True) if hit is None]
    restored: list[Any] = []
    if wanted:
        restored, _ = await restore_collecting(wanted, media_store, options)
    results = iter(restored)
    found = iter(zip(keys, known, strict=True))
    out: list[list[str]] = []
    for path, slots in hosts:
        payloads: list[str] = []
        for slot in slots:
            key, hit = next(found)
            if hit is None:
                payload = next(results).get('content' if slot.text else 'data')
                if not isinstance(payload, str):
                    raise MalformedMarker('an envelope slot marker did not restore to a payload', path=where(path))
                hit = slot.prefix + payload
                if joined is not None:
                    joined.put(key, hit, len(hit))
            payloads.append(hit)
        out.append(payloads)
    return out
