"""The per-message envelope: how a lean message travels through an unchanged step store.

A message with at least one externalized payload is replaced by a message of
the same kind with no parts, whose ``metadata`` holds exactly one reserved key
with a version and the message's lean JSON (``docs/integrations.md``). Every
other message is handed to the inner store untouched.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse

from mediastash.errors import MediaStashError

__all__ = ['ENVELOPE_KEY', 'ENVELOPE_VERSION', 'EnvelopeError', 'envelope_for', 'has_reserved_key', 'lean_json_of']

ENVELOPE_KEY: Final = '__mediastash_envelope__'
"""The one ``metadata`` key of an envelope message."""

ENVELOPE_VERSION: Final = 1
"""Value of ``v`` in the envelope; readers refuse any other."""


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


def envelope_for(message: ModelMessage, lean: dict[str, Any]) -> ModelMessage:
    """A part-less message of the same kind carrying ``lean`` (the timestamp is kept so stores can dedupe)."""
    metadata: dict[str, Any] = {ENVELOPE_KEY: {'v': ENVELOPE_VERSION, 'message': lean}}
    if isinstance(message, ModelRequest):
        return ModelRequest(
            parts=[],
            timestamp=message.timestamp,
            run_id=message.run_id,
            conversation_id=message.conversation_id,
            metadata=metadata,
        )
    return ModelResponse(
        parts=[],
        timestamp=message.timestamp,
        run_id=message.run_id,
        conversation_id=message.conversation_id,
        metadata=metadata,
    )


def lean_json_of(message: ModelMessage, *, run_id: str, step_index: int, message_index: int) -> dict[str, Any]:
    """The lean JSON an envelope carries, after checking its shape and version."""

    def fail(reason: str) -> EnvelopeError:
        return EnvelopeError(reason, run_id=run_id, step_index=step_index, message_index=message_index)

    metadata = message.metadata
    if not isinstance(metadata, dict) or set(metadata) != {ENVELOPE_KEY}:
        raise fail(f'metadata must hold only the {ENVELOPE_KEY!r} key')
    if message.parts:
        raise fail('message must have no parts')
    body = metadata[ENVELOPE_KEY]
    if not isinstance(body, dict) or set(body) != {'v', 'message'}:
        raise fail("must be a mapping with exactly the keys 'v' and 'message'")
    version = body['v']
    if version != ENVELOPE_VERSION or isinstance(version, bool):
        raise fail(f'has unsupported version {version!r} (this reader knows {ENVELOPE_VERSION}); upgrade mediastash')
    lean = body['message']
    if not isinstance(lean, dict) or lean.get('kind') != message.kind:
        raise fail(f'must hold a {message.kind!r} message')
    return lean
