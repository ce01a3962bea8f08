"""The per-message envelope: how a lean message travels through an unchanged step store.

A message with at least one externalized payload is replaced by an envelope: a
message of the same kind that keeps every part, each payload shown as a
stand-in text (``_placeholders``), so a reader without mediastash sees the
whole history; its ``metadata`` holds exactly one reserved key, and under it
the kit's envelope (``kit.envelope``, format ``mediastash-envelope-v2``) with
one slot for the original ``metadata``, one for each other top-level field
whose lean value differs from the envelope's own, and one per part that does
(path ``['parts', index]``), each holding that place's lean JSON
(``docs/integrations.md``). Every other message is handed to the inner store
untouched.

Still read: the bodies written before the kit (``{'v': 2, 'message': ...}``:
``kind``, ``metadata``, the differing fields and one entry per part, ``null``
where the envelope's part is the lean part; ``v: 1``: no parts, the whole
lean JSON). Each is turned into the same body and opened the same way.

A place (a part, or another top-level field) that no longer shows exactly the
stand-ins written for it was edited after a plain read: the edit is kept as
the envelope holds it, and the slot for that place is stale and never
restored over it (``docs/integrations.md``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from mediastash.errors import MalformedMarker, MediaStashError, UnsupportedMarkerFormat
from mediastash.integrations._envelope_seal import SEAL_KEY
from mediastash.integrations.kit.envelope import ENVELOPE_FORMAT, Slot, make_envelope, parse_envelope
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
    'in_current_format',
    'lean_json_of',
    'open_envelope',
    'reassembled',
    'to_walk',
    'with_kept_stand_ins',
    'written_back_lean',
]

ENVELOPE_KEY: Final = '__mediastash_envelope__'
"""The one ``metadata`` key of an envelope message."""

ENVELOPE_VERSION: Final = ENVELOPE_FORMAT
"""The ``format`` of the envelopes written: the kit's one format (``'mediastash-envelope-v2'``)."""

READ_VERSIONS: Final = (1, 2)
"""Values of ``v`` of the bodies written before the kit that readers accept; any other is refused."""

_SAME: Final = None
"""A ``parts`` entry of a body: the envelope's own part is the lean part (no slot for it)."""
_FORMAT_STAMP: Final = re.compile(r'mediastash-envelope-v[0-9]{1,6}')
"""A ``format`` an error may name (anything else is not echoed)."""
_FIELDS: Final = ('kind', 'metadata', 'parts')
"""Top-level keys no field slot may name (``kind`` is the envelope's own; the others have their own slots)."""
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
    """Envelopes for the lean message JSONs (``sizes``: known payload sizes per message).

    Each envelope is the lean message with stand-ins (``_placeholders``); its
    slots hold the original ``metadata``, every other top-level value whose
    lean JSON differs from the envelope's own, and each lean part the
    envelope's part does not dump to exactly. Only the lean JSON decides the
    envelope, so it is the same at every save. ``seal`` gives the seal of an
    envelope (``_envelope_seal``): a save honours an envelope in its input
    only when its seal verifies.
    """
    shown = visible_messages(leans, list(sizes), reader=reader)
    dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(shown, mode='json')
    for lean, visible, own in zip(leans, shown, dumped, strict=True):
        slots = [Slot(('metadata',), lean.get('metadata'))]
        slots.extend(
            Slot((key,), value) for key, value in lean.items() if key not in _FIELDS and own.get(key, _MISSING) != value
        )
        own_parts = own['parts']
        slots.extend(
            Slot(('parts', index), part)
            for index, part in enumerate(lean.get('parts', []))
            if not (index < len(own_parts) and own_parts[index] == part)
        )
        visible.metadata = {ENVELOPE_KEY: make_envelope(slots, seal)}
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
    if isinstance(body, dict) and 'format' in body and 'v' not in body:
        return _opened(message, _slots_body(message, body, fail), fail)
    if not isinstance(body, dict) or set(body) - {SEAL_KEY} != {'v', 'message'}:
        raise fail(f"must be a kit envelope, or a mapping with the keys 'v' and 'message' (and {SEAL_KEY!r})")
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


def _slots_body(
    message: ModelMessage, envelope: dict[str, Any], fail: Callable[[str], EnvelopeError]
) -> dict[str, Any]:
    """The body a kit envelope stands for: ``kind``, ``metadata``, the fields it names, one entry per part."""
    stamp = envelope['format']
    if stamp != ENVELOPE_FORMAT:
        named = repr(stamp) if isinstance(stamp, str) and _FORMAT_STAMP.fullmatch(stamp) else 'that is not one'
        raise fail(
            f'has unsupported format {named} (this reader knows {ENVELOPE_FORMAT!r} and the versions 1 and 2);'
            ' upgrade mediastash'
        )
    try:
        slots = parse_envelope(envelope, 'metadata', markers=False)
    except (MalformedMarker, UnsupportedMarkerFormat) as error:
        raise fail(f'is damaged ({error})') from None
    body: dict[str, Any] = {'kind': message.kind}
    parts: list[Any] = [_SAME] * len(message.parts)
    filled: set[int] = set()
    for slot in slots:
        path = slot.path
        if path == ('metadata',) and 'metadata' not in body:
            body['metadata'] = slot.lean
        elif len(path) == 2 and path[0] == 'parts' and type(path[1]) is int and path[1] not in filled:
            index = path[1]
            if not 0 <= index < len(parts):
                raise fail(f'names part {index}; the message has {len(parts)} part(s): one entry per part is needed')
            if not isinstance(slot.lean, dict):
                raise fail('must hold a mapping for each part it names')
            parts[index] = slot.lean
            filled.add(index)
        elif len(path) == 1 and type(path[0]) is str and path[0] not in _FIELDS and path[0] not in body:
            body[path[0]] = slot.lean
        else:
            raise fail('has a slot naming a place twice, or a place a message has not')
    if 'metadata' not in body:
        raise fail("must hold the message's 'metadata'")
    body['parts'] = parts
    return body


def envelope_seal(message: ModelMessage) -> tuple[Any, object]:
    """What an opened envelope's seal covers (the envelope without its seal, or an older body's message)
    and the seal (``None`` when it has none)."""
    assert isinstance(message.metadata, dict)
    envelope: dict[str, Any] = message.metadata[ENVELOPE_KEY]
    if 'v' in envelope:
        return envelope['message'], envelope.get(SEAL_KEY)
    return {key: value for key, value in envelope.items() if key != SEAL_KEY}, envelope.get(SEAL_KEY)


def in_current_format(envelope: ModelMessage, seal: Callable[[dict[str, Any]], str]) -> ModelMessage | None:
    """A stored envelope (opened without error) in today's format: itself, or a version 2 body turned into
    slots (the parts and their stand-ins kept, sealed with ``seal``); ``None`` for version 1, which shows no
    parts to keep (the next save builds its envelope afresh)."""
    assert isinstance(envelope.metadata, dict)
    value: dict[str, Any] = envelope.metadata[ENVELOPE_KEY]
    if 'v' not in value:
        return envelope
    if value['v'] != 2:
        return None
    body: dict[str, Any] = value['message']
    slots = [Slot(('metadata',), body.get('metadata'))]
    slots.extend(Slot((key,), lean) for key, lean in body.items() if key not in _FIELDS)
    slots.extend(Slot(('parts', index), part) for index, part in enumerate(body['parts']) if part is not _SAME)
    current: ModelMessage = dataclasses.replace(envelope, metadata={ENVELOPE_KEY: make_envelope(slots, seal)})
    return current


def lean_json_of(message: ModelMessage, *, place: Place, message_index: int) -> dict[str, Any]:
    """The lean JSON of the message an envelope stands for (edited places as the envelope holds them)."""
    return open_envelope(message, place=place, message_index=message_index).full


def _opened(message: ModelMessage, body: dict[str, Any], fail: Callable[[str], EnvelopeError]) -> OpenedEnvelope:
    """A body (of a kit envelope, or of version 2) laid over the envelope's own JSON, each stale entry left out."""
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
