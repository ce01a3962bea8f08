"""``LeanMemo``: each message's lean JSON from the latest typed save; a save of the same history walks only the new.

Every step snapshot repeats the whole history, and a typed save used to dump,
walk and compare every earlier message again. The memo keeps, per message
object, the lean JSON that save produced together with the message's
``ObjectState`` then; a later save takes the entry only for that very object
in that very state (changed in place anywhere, it is walked again). The
entry's payloads go back into the save's batch, so each is answered by the
known-blob cache or stored again like any payload (a deleted blob is never
left dangling), and the save checks each gets the URI its marker names.
Entries the latest save did not meet are dropped: the memo holds one history.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mediastash.known_blobs import PayloadKind
from mediastash.walker._batch import Job, PayloadBatch
from mediastash.walker._unchanged import ObjectState, state_of

__all__ = ['LeanMemo', 'Remembered', 'rejoin']


@dataclasses.dataclass(slots=True, frozen=True)
class _Payload:
    kind: PayloadKind
    source: str | bytes
    fp: int
    size: int
    media_type: str | None
    uri: str


@dataclasses.dataclass(slots=True)
class Remembered:
    """One message's result from a save, with the state it was derived from."""

    message: object
    state: ObjectState
    lean: Any
    changed: bool
    sizes: dict[str, int]
    payloads: tuple[_Payload, ...]
    found: bool = False
    """The caller's yes/no about the message, asked when this state was taken (it holds while the state does)."""


class LeanMemo:
    """Lean JSON by message object, for the messages of the latest save (one per ``TypedWalker``)."""

    def __init__(self) -> None:
        self._entries: dict[int, Remembered] = {}
        self._next: dict[int, Remembered] = {}

    def start_save(self) -> None:
        """A save begins (what a failed one met is not kept)."""
        self._next = {}

    def take(self, message: object) -> tuple[Remembered | None, ObjectState | None]:
        """The entry for ``message`` when it is unchanged (kept for the next save), and its state now."""
        state = state_of(message)
        entry = self._entries.get(id(message))
        if state is None or entry is None or entry.message is not message or not entry.state.same_as(state):
            return None, state
        self._next[id(message)] = entry
        return entry, entry.state  # the state just taken is dropped now: one copy of each output's form is held

    def remember(
        self,
        message: object,
        state: ObjectState | None,
        lean: Any,
        changed: bool,
        sizes: dict[str, int],
        jobs: list[Job],
        found: bool = False,
    ) -> None:
        """What the save produced for ``message`` in ``state`` (``None``: it has none, nothing is kept)."""
        if state is None:
            return
        payloads = tuple(
            _Payload(job.kind, job.source, job.fp, job.size, job.media_type, job.uri)
            for job in jobs
            if job.uri is not None
        )
        self._next[id(message)] = Remembered(message, state, lean, changed, sizes, payloads, found)

    def end_save(self) -> None:
        """The save is done: keep what it met, drop the rest."""
        self._entries, self._next = self._next, {}

    def forget(self) -> None:
        """Drop every entry (a remembered payload came back under another URI)."""
        self._entries = {}
        self._next = {}


def rejoin(batch: PayloadBatch, entry: Remembered) -> list[tuple[Job | None, str]]:
    """Hand ``entry``'s payloads to ``batch`` again; each job with the URI its marker names."""
    return [
        (batch.add(payload.kind, payload.source, payload.size, payload.media_type, payload.fp), payload.uri)
        for payload in entry.payloads
    ]
