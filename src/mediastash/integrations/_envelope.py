"""The per-message envelope: how a lean message travels through an unchanged step store.

A message with at least one externalized payload is replaced by an envelope: a
message of the same kind whose ``metadata`` holds exactly one reserved key with
a version and what restoring needs (``docs/integrations.md``). Every other
message is handed to the inner store untouched.

Version 2 (written) keeps every part, each payload shown as a stand-in text
(``_placeholders``), so a reader without mediastash sees the whole history; the
body holds the lean JSON of whatever differs from the envelope's own JSON.
Version 1 (still read) had no parts and the whole lean JSON in the body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from mediastash.errors import MediaStashError
from mediastash.integrations._placeholders import Sizes, visible_messages

__all__ = [
    'ENVELOPE_KEY',
    'ENVELOPE_VERSION',
    'READ_VERSIONS',
    'EnvelopeError',
    'envelopes_for',
    'has_reserved_key',
    'lean_json_of',
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
    """A stored envelope message is damaged or from an unknown version (nothing was restored)."""

    def __init__(self, reason: str, *, run_id: str, step_index: int, message_index: int) -> None:
        self.run_id = run_id
        self.step_index = step_index
        self.message_index = message_index
        super().__init__(
            f'snapshot of run {run_id!r} at step {step_index}, message {message_index}: '
            f'mediastash envelope {reason}; the snapshot cannot be restored'
        )


def has_reserved_key(message: ModelMessage) -> bool:
    """True when the message's ``metadata`` carries the envelope key (an envelope, or a caller's look-alike)."""
    metadata = message.metadata
    return isinstance(metadata, dict) and ENVELOPE_KEY in metadata


def envelopes_for(leans: list[dict[str, Any]], sizes: Sequence[Sizes]) -> list[ModelMessage]:
    """Version 2 envelopes for the lean message JSONs (``sizes``: known payload sizes per message).

    Each envelope is the lean message with stand-ins (``_placeholders``); its
    body keeps ``kind``, the original ``metadata``, every other top-level key
    whose lean value differs from the envelope's own JSON, and per part the
    lean part, or ``null`` where the envelope's part dumps to exactly that.
    Only the lean JSON decides the envelope, so it is the same at every save.
    """
    shown = visible_messages(leans, list(sizes))
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
        visible.metadata = {ENVELOPE_KEY: {'v': ENVELOPE_VERSION, 'message': body}}
    return shown


def lean_json_of(message: ModelMessage, *, run_id: str, step_index: int, message_index: int) -> dict[str, Any]:
    """The lean JSON of the message an envelope stands for, after checking its shape and version."""

    def fail(reason: str) -> EnvelopeError:
        return EnvelopeError(reason, run_id=run_id, step_index=step_index, message_index=message_index)

    metadata = message.metadata
    if not isinstance(metadata, dict) or set(metadata) != {ENVELOPE_KEY}:
        raise fail(f'metadata must hold only the {ENVELOPE_KEY!r} key')
    body = metadata[ENVELOPE_KEY]
    if not isinstance(body, dict) or set(body) != {'v', 'message'}:
        raise fail("must be a mapping with exactly the keys 'v' and 'message'")
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
        return lean
    return _merged(message, lean, fail)


def _merged(message: ModelMessage, body: dict[str, Any], fail: Callable[[str], EnvelopeError]) -> dict[str, Any]:
    """A version 2 body laid over the envelope's own JSON: the lean message."""
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
    lean['parts'] = [own['parts'][index] if part is _SAME else part for index, part in enumerate(parts)]
    return lean
