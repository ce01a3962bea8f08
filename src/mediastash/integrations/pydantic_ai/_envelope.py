"""The per-message envelope: how a lean message travels through an unchanged step store.

A message with at least one externalized payload is replaced by an envelope: a
message of the same kind whose ``metadata`` holds exactly one reserved key with
a version and what restoring needs (``docs/integrations.md``). Every other
message is handed to the inner store untouched.

Version 2 (written) keeps every part, each payload shown as a stand-in text
(``_placeholders``), so a reader without mediastash sees the whole history; the
body holds the lean JSON of whatever differs from the envelope's own JSON.
Version 1 (still read) had no parts and the whole lean JSON in the body.

A place of a version 2 envelope (a part, or another top-level field) that no
longer shows exactly the stand-ins written for it was edited after a plain
read: the edit is kept as the envelope holds it, and the body's entry for that
place is stale and never restored over it (``docs/integrations.md``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from mediastash.errors import MediaStashError
from mediastash.integrations._envelope_seal import SEAL_KEY
from mediastash.integrations.pydantic_ai._placeholders import (
    DEFAULT_READER,
    Sizes,
    merged_edit,
    same_shown,
    shown_message,
    shows_stand_ins,
    visible_messages,
)
from mediastash.markers import RESERVED_KEY_PREFIX

__all__ = [
    'ENVELOPE_KEY',
    'ENVELOPE_VERSION',
    'READ_VERSIONS',
    'EntriesPlace',
    'EnvelopeError',
    'OpenedEnvelope',
    'Place',
    'SnapshotPlace',
    'envelope_seal',
    'envelopes_for',
    'has_reserved_key',
    'lean_json_of',
    'open_envelope',
    'reassembled',
    'to_walk',
    'with_kept_stand_ins',
    'written_back_lean',
]

ENVELOPE_KEY: Final = '__mediastash_envelope__'
"""The one ``metadata`` key of an envelope message."""

ENVELOPE_VERSION: Final = 2
"""Value of ``v`` in the envelopes written."""

READ_VERSIONS: Final = (1, 2)
"""Values of ``v`` readers accept; any other is refused."""

_SAME: Final = None
"""A ``parts`` entry of a version 2 body: the envelope's own part is the lean part."""
_MISSING: Final = object()


class EnvelopeError(MediaStashError, ValueError):
    """A stored envelope message is damaged or from an unknown version (nothing was restored).

    Names where it was read: a step store snapshot (``run_id``, ``step_index``,
    ``message_index``) or a conversation entry (``entry_id``).
    """

    def __init__(
        self,
        reason: str,
        *,
        run_id: str | None = None,
        step_index: int | None = None,
        message_index: int | None = None,
        entry_id: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.step_index = step_index
        self.message_index = message_index
        self.entry_id = entry_id
        if entry_id is not None:
            where, what = f'conversation entry {entry_id!r}', 'entry'
        else:
            where, what = f'snapshot of run {run_id!r} at step {step_index}, message {message_index}', 'snapshot'
        super().__init__(f'{where}: mediastash envelope {reason}; the {what} cannot be restored')


class Place(Protocol):
    """Where a list of stored messages was read, for errors: a snapshot, or a conversation's entries."""

    def error(self, reason: str, message_index: int) -> EnvelopeError:
        """The error for the message at ``message_index`` of the list."""
        ...

    def needing(self, message_index: int) -> str:
        """Who needs a blob the message at ``message_index`` references (for ``MediaNotFoundError``)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotPlace:
    """The messages of one step store snapshot."""

    run_id: str
    step_index: int

    def error(self, reason: str, message_index: int) -> EnvelopeError:
        return EnvelopeError(reason, run_id=self.run_id, step_index=self.step_index, message_index=message_index)

    def needing(self, message_index: int) -> str:
        return f'run {self.run_id!r} step {self.step_index}'


@dataclasses.dataclass(frozen=True, slots=True)
class EntriesPlace:
    """The messages of conversation entries, one per entry, in this order."""

    entry_ids: Sequence[str]

    def error(self, reason: str, message_index: int) -> EnvelopeError:
        return EnvelopeError(reason, entry_id=self.entry_ids[message_index])

    def needing(self, message_index: int) -> str:
        return f'conversation entry {self.entry_ids[message_index]!r}'


def has_reserved_key(message: ModelMessage) -> bool:
    """True when the message's ``metadata`` carries the envelope key (an envelope, or a caller's look-alike)."""
    metadata = message.metadata
    return isinstance(metadata, dict) and ENVELOPE_KEY in metadata


def envelopes_for(
    leans: list[dict[str, Any]],
    sizes: Sequence[Sizes],
    seal: Callable[[dict[str, Any]], str],
    *,
    reader: str = DEFAULT_READER,
) -> list[ModelMessage]:
    """Version 2 envelopes for the lean message JSONs (``sizes``: known payload sizes per message).

    Each envelope is the lean message with stand-ins (``_placeholders``); its
    body keeps ``kind``, the original ``metadata``, every other top-level key
    whose lean value differs from the envelope's own JSON, and per part the
    lean part, or ``null`` where the envelope's part dumps to exactly that.
    Only the lean JSON decides the envelope, so it is the same at every save.
    ``seal`` gives the seal of a body (``_envelope_seal``): a save honours an
    envelope in its input only when its seal verifies.
    """
    shown = visible_messages(leans, list(sizes), reader=reader)
    dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(shown, mode='json')
    for lean, visible, own in zip(leans, shown, dumped, strict=True):
        body: dict[str, Any] = {'kind': lean['kind'], 'metadata': lean.get('metadata')}
        for key, value in lean.items():
            if key not in ('parts', 'kind', 'metadata') and own.get(key, _MISSING) != value:
                body[key] = value
        own_parts = own['parts']
        body['parts'] = [
            _SAME if index < len(own_parts) and own_parts[index] == part else part
            for index, part in enumerate(lean.get('parts', []))
        ]
        visible.metadata = {ENVELOPE_KEY: {'v': ENVELOPE_VERSION, 'message': body, SEAL_KEY: seal(body)}}
    return shown


@dataclasses.dataclass(frozen=True, slots=True)
class OpenedEnvelope:
    """What an envelope stands for: the whole lean message, and the part of it the body restores.

    ``restorable`` is the lean JSON the walker restores: ``kind``, the original
    ``metadata``, the parts at ``restored_parts`` and the fields in ``live_keys``.
    Every other part and field is the envelope's own (``reassembled``): parts
    that never held a payload, and places edited after a plain read.
    ``full`` is the whole lean message with the edits in place.
    """

    full: dict[str, Any]
    restorable: dict[str, Any]
    live_parts: tuple[int, ...]
    live_keys: tuple[str, ...]
    whole: bool = False
    """A version 1 envelope: ``restorable`` is the whole message (it has no parts of its own)."""
    stale: bool = False
    """The body has an entry whose place was edited (left out of ``restorable``, or merged)."""
    restored_parts: tuple[int, ...] = ()
    """The parts ``restorable`` holds, in order: ``live_parts`` and the edited parts that kept stored media."""
    edits: tuple[tuple[int, Any, Any], ...] = ()
    """Each edited part: its index, the envelope's JSON of it and the body's stale lean part."""


def open_envelope(message: ModelMessage, *, place: Place, message_index: int) -> OpenedEnvelope:
    """Check an envelope's shape and version and say what it stands for (``EnvelopeError``, naming ``place``)."""

    def fail(reason: str) -> EnvelopeError:
        return place.error(reason, message_index)

    metadata = message.metadata
    if not isinstance(metadata, dict) or set(metadata) != {ENVELOPE_KEY}:
        raise fail(f'metadata must hold only the {ENVELOPE_KEY!r} key')
    body = metadata[ENVELOPE_KEY]
    if not isinstance(body, dict) or set(body) - {SEAL_KEY} != {'v', 'message'}:
        raise fail(f"must be a mapping with the keys 'v' and 'message' (and {SEAL_KEY!r}), nothing else")
    version = body['v']
    if isinstance(version, bool) or version not in READ_VERSIONS:
        known = ' and '.join(str(v) for v in READ_VERSIONS)
        raise fail(f'has unsupported version {version!r} (this reader knows {known}); upgrade mediastash')
    lean = body['message']
    if not isinstance(lean, dict) or lean.get('kind') != message.kind:
        raise fail(f'must hold a {message.kind!r} message')
    if version == 1:
        if message.parts:
            raise fail('of version 1 must have no parts')
        parts = lean.get('parts')
        count = len(parts) if isinstance(parts, list) else 0
        every = tuple(range(count))
        return OpenedEnvelope(lean, lean, every, (), whole=True, restored_parts=every)
    return _opened(message, lean, fail)


def envelope_seal(message: ModelMessage) -> tuple[Any, object]:
    """What an opened envelope's seal covers (its body's message) and the seal (``None`` when it has none)."""
    assert isinstance(message.metadata, dict)
    envelope: dict[str, Any] = message.metadata[ENVELOPE_KEY]
    return envelope['message'], envelope.get(SEAL_KEY)


def lean_json_of(message: ModelMessage, *, place: Place, message_index: int) -> dict[str, Any]:
    """The lean JSON of the message an envelope stands for (edited places as the envelope holds them)."""
    return open_envelope(message, place=place, message_index=message_index).full


def _opened(message: ModelMessage, body: dict[str, Any], fail: Callable[[str], EnvelopeError]) -> OpenedEnvelope:
    """A version 2 body laid over the envelope's own JSON, each stale entry left out."""
    parts = body.get('parts')
    if not isinstance(parts, list) or len(parts) != len(message.parts):
        raise fail(f'must list one entry per part of the message ({len(message.parts)})')
    if 'metadata' not in body:
        raise fail("must hold the message's 'metadata'")
    if not all(part is _SAME or isinstance(part, dict) for part in parts):
        raise fail('must hold a mapping or null for each part')
    own: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([message], mode='json')[0]
    lean = {key: value for key, value in own.items() if key != 'metadata'}
    lean.update(body)
    own_parts = own['parts']
    lean['parts'] = [own_parts[index] if part is _SAME else part for index, part in enumerate(parts)]
    keys = [key for key in body if key not in ('kind', 'metadata', 'parts')]
    live_keys = [key for key in keys if key in own and shows_stand_ins(own[key], body[key], part=False)]
    live_parts = [
        index
        for index, part in enumerate(parts)
        if part is not _SAME and shows_stand_ins(own_parts[index], part, part=True)
    ]
    doubtful = [index for index, part in enumerate(parts) if part is not _SAME and index not in live_parts]
    if doubtful or len(live_keys) < len(keys):
        # Shown otherwise than directly (pydantic-ai refused the stand-in), or edited: compare with what it shows.
        shown = shown_message(lean)
        live_parts = sorted([*live_parts, *(i for i in doubtful if same_shown(own_parts[i], shown['parts'][i]))])
        live_keys = [
            key for key in keys if key in live_keys or key == 'timestamp' or same_shown(own.get(key), shown.get(key))
        ]
    stale = len(live_keys) < len(keys) or len(live_parts) < sum(part is not _SAME for part in parts)
    restored = {index: parts[index] for index in live_parts}
    edits: list[tuple[int, Any, Any]] = []
    if stale:
        for key in keys:
            if key not in live_keys:
                lean[key] = own.get(key)
        for index, part in enumerate(parts):
            if part is not _SAME and index not in live_parts:
                edits.append((index, own_parts[index], part))
                lean['parts'][index] = restored[index] = _kept_media(own_parts[index], part)
                if restored[index] is own_parts[index]:
                    del restored[index]
    order = sorted(restored)
    restorable: dict[str, Any] = {'kind': body['kind'], 'metadata': body['metadata']}
    restorable.update((key, body[key]) for key in live_keys)
    restorable['parts'] = [restored[index] for index in order]
    return OpenedEnvelope(
        lean,
        restorable,
        tuple(live_parts),
        tuple(live_keys),
        stale=stale,
        restored_parts=tuple(order),
        edits=tuple(edits),
    )


def _kept_media(own: Any, lean: Any) -> Any:
    """An edited part to restore: its stored media kept where the edit left their stand-ins (``merged_edit``),
    or ``own`` itself (restored as the envelope holds it). Not when the part holds a reserved key: only a walk
    of the typed part could tell a caller's look-alike from a marker."""
    if RESERVED_KEY_PREFIX in json.dumps(own, ensure_ascii=False):
        return own
    merged, kept = merged_edit(own, lean, own)
    return merged if kept else own


def reassembled(envelope: ModelMessage, opened: OpenedEnvelope, restored: ModelMessage) -> ModelMessage:
    """The message an envelope stands for: ``restored`` (the walk of ``opened.restorable``) in the
    envelope's own message, at the live places; everything else stays as the envelope holds it."""
    if opened.whole:
        return restored
    parts: list[Any] = list(envelope.parts)
    for index, part in zip(opened.restored_parts, restored.parts, strict=True):
        parts[index] = part
    changes: dict[str, Any] = {key: getattr(restored, key) for key in opened.live_keys}
    changes.update(parts=parts, metadata=restored.metadata)
    rebuilt: ModelMessage = dataclasses.replace(envelope, **changes)
    return rebuilt


# -- an envelope written back (a plain read saved through the wrapper) --------------------------------


def to_walk(envelope: ModelMessage, opened: OpenedEnvelope) -> ModelMessage:
    """What of a written-back envelope the walk must see: the parts and fields the body does not restore.

    Those are the envelope's own (parts that never held a payload, and edits,
    which may hold new payloads); the live places stay stored as they are.
    """
    parts: list[Any] = [part for index, part in enumerate(envelope.parts) if index not in opened.live_parts]
    message: ModelMessage = dataclasses.replace(envelope, parts=parts, metadata=None)  # type: ignore[arg-type]
    return message


def written_back_lean(opened: OpenedEnvelope, walked: dict[str, Any]) -> dict[str, Any]:
    """The lean JSON of a written-back envelope: ``walked`` (the walk of ``to_walk``) with the live places
    and the original ``metadata`` laid back in from the body."""
    if opened.whole:
        return opened.full
    restorable = opened.restorable
    lean = dict(walked)
    lean.update((key, restorable[key]) for key in opened.live_keys)
    lean['metadata'] = restorable['metadata']
    live = iter(restorable['parts'][opened.restored_parts.index(i)] for i in opened.live_parts)
    rest = iter(walked['parts'])
    count = len(opened.full['parts'])
    parts = [next(live) if index in opened.live_parts else next(rest) for index in range(count)]
    for index, own, stale in opened.edits:  # an edited part keeps the media whose stand-ins it left in place
        parts[index], _ = merged_edit(own, stale, parts[index])
    lean['parts'] = parts
    return lean


def with_kept_stand_ins(built: ModelMessage, envelope: ModelMessage, opened: OpenedEnvelope) -> ModelMessage:
    """``built`` (the new envelope of a written-back one) showing the old stand-ins at the live places
    where they differ only in size labels (the new save did not know the stored payloads' sizes)."""
    if opened.whole or not opened.live_parts:
        return built
    new: list[Any] = ModelMessagesTypeAdapter.dump_python([built], mode='json')[0]['parts']
    old: list[Any] = ModelMessagesTypeAdapter.dump_python([envelope], mode='json')[0]['parts']
    parts: list[Any] = list(built.parts)
    for index in opened.live_parts:
        if same_shown(old[index], new[index]):
            parts[index] = envelope.parts[index]
    message: ModelMessage = dataclasses.replace(built, parts=parts)  # type: ignore[arg-type]
    return message
