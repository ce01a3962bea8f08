"""Snapshot messages to envelopes and back, for ``OffloadingStepStore``.

The walk itself is ``_typed_walk.TypedWalker`` (typed messages in, lean JSON
out, in one call each way, through the walker's one payload route). This module only adapts its
results to the step store: a message whose lean JSON differs becomes an
envelope (``_envelope``), reused when the same message object is saved again
unchanged, and an envelope read back is turned into the message it stands for,
with errors naming the run, step and message.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final, Literal

from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from mediastash._lru import BoundedLRU
from mediastash.errors import MalformedMarker, MediaNotFoundError, UnsupportedMarkerFormat
from mediastash.integrations._envelope_seal import SEAL_KEY, refuse_unvouched, seal_envelope
from mediastash.integrations.pydantic_ai._envelope import (
    ENVELOPE_KEY,
    EnvelopeError,
    OpenedEnvelope,
    Place,
    SnapshotPlace,
    envelope_seal,
    envelopes_for,
    has_reserved_key,
    in_current_format,
    open_envelope,
    reassembled,
    to_walk,
    with_kept_stand_ins,
    written_back_lean,
)
from mediastash.integrations.pydantic_ai._placeholders import DEFAULT_READER, Sizes
from mediastash.integrations.pydantic_ai._references import (
    has_reference_parts,
    namespace_of,
    references_to_markers,
    with_reference_parts,
)
from mediastash.integrations.pydantic_ai._typed_walk import LeanMessages, TypedWalker
from mediastash.markers import RESERVED_KEY_PREFIX
from mediastash.reference_keys import ReferenceKey, reference_key_of
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions

__all__ = ['RESTORE_MODES', 'Offloader', 'RestoreMode']

RestoreMode = Literal['bytes', 'references']
"""How a wrapper restores media: with their bytes, or as reference parts that read no blob."""

RESTORE_MODES: Final = ('bytes', 'references')


class Offloader:
    """Turns message lists into lean ones (envelopes) and back, for one media store."""

    def __init__(
        self,
        media_store: MediaStore,
        *,
        options: WalkOptions,
        reference_key: ReferenceKey | None = None,
        reader: str = DEFAULT_READER,
    ) -> None:
        self.media_store = media_store
        self.options = options
        self.reader = reader
        """The wrapper the placeholders name as the way to read a payload back."""
        self.reference_key = reference_key_of(reference_key)
        """Seals the reference parts a restore makes, and tells a save which ones it vouched for."""
        self._namespace = namespace_of(media_store)
        self._walker = TypedWalker(media_store, options, has_reference_parts)
        self._envelopes: dict[int, _Enveloped] = {}
        """The previous save's envelopes by ``id`` of the message they stand for (see ``offload``)."""
        self._restored: BoundedLRU[str, ModelMessage] = BoundedLRU(max_items=_RESTORED_ENVELOPES)
        """Envelopes restored as reference parts, by their lean JSON text (see ``offload``)."""

    # -- saving ------------------------------------------------------------------------

    def _seal(self, body: dict[str, Any]) -> str:
        return seal_envelope(self.reference_key, body, self._namespace)

    def _with_seal(self, envelope: ModelMessage) -> ModelMessage | None:
        """A stored envelope to save again as it is: one written before seals gets this offloader's seal
        (storage is trusted), so a plain read of what is saved can be written back; a sealed one stays
        byte for byte (its seal may be another process's key: only an application key carries across).
        One of an older format is written in today's (``in_current_format``), or not kept (``None``)."""
        current = in_current_format(envelope, self._seal)
        if current is not envelope:
            return current
        body, seal = envelope_seal(envelope)
        if seal is not None:
            return envelope
        assert isinstance(envelope.metadata, dict)
        sealed = {**envelope.metadata[ENVELOPE_KEY], SEAL_KEY: self._seal(body)}
        resealed: ModelMessage = dataclasses.replace(envelope, metadata={ENVELOPE_KEY: sealed})
        return resealed

    async def lean_json(self, messages: list[ModelMessage]) -> tuple[list[Any], list[bool]]:
        """Each message's lean JSON and whether it differs from the message's plain JSON."""
        lean, _ = await self._externalized(messages)
        return lean.json, lean.changed

    async def _externalized(self, messages: list[ModelMessage]) -> tuple[LeanMessages, set[int]]:
        """The walker's lean messages, every reference part written as its binary marker; which held one."""
        # The search runs with the walker's exact state check: a message met unchanged is not searched again.
        walked = await self._walker.externalize(messages)
        referencing: set[int] = set()
        for index, holds in enumerate(walked.found):
            if not holds:
                continue
            walked.json[index], replaced = await references_to_markers(
                walked.json[index], self.media_store, self.options, self.reference_key
            )
            if replaced:
                walked.changed[index] = True
                referencing.add(index)
        return walked, referencing

    async def offload(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The messages with every payload message replaced by its envelope (blobs stored first).

        An envelope depends only on the lean JSON and payload sizes of its
        message, so one the previous save built for the same message object
        with equal lean JSON and sizes is handed over again (each snapshot
        repeats the history; the inner store only serializes envelopes).
        A message holding reference parts whose lean JSON is that of an
        envelope this offloader restored gets that very envelope back (the
        run copies messages, and only the envelope knows the payload sizes).
        An envelope written back (a plain read saved again) must carry a seal
        of this offloader's key for its store's namespace (``UnvouchedEnvelopeError``
        otherwise: nothing is saved), and then stays lean: its
        live places keep their stored payloads, its edited places are walked
        like any message and its stale body entries are dropped.
        """
        written_back: dict[int, OpenedEnvelope] = {}
        walking = list(messages)
        for index, message in enumerate(messages):
            if has_reserved_key(message):
                try:
                    opened = open_envelope(message, place=SnapshotPlace('', 0), message_index=index)
                except EnvelopeError:
                    continue  # a caller's look-alike: the walk escapes it
                body, seal = envelope_seal(message)
                refuse_unvouched(self.reference_key, body, self._namespace, seal, f'message {index}')
                written_back[index] = opened
                walking[index] = to_walk(message, opened)
        walked, referencing = await self._externalized(walking)
        lean, changed, sizes = walked.json, walked.changed, walked.sizes
        out = list(messages)
        for index, opened in written_back.items():
            lean[index] = written_back_lean(opened, lean[index])
            changed[index] = RESERVED_KEY_PREFIX in json.dumps(lean[index], ensure_ascii=False)
            if not changed[index]:  # every payload of it was edited away: a plain message again
                out[index] = ModelMessagesTypeAdapter.validate_python([lean[index]])[0]
        previous, current = self._envelopes, {}
        todo: list[int] = []
        for index, message in enumerate(messages):
            if not (changed[index] or (has_reserved_key(message) and index not in written_back)):
                continue
            memo = previous.get(id(message))
            if memo is not None and memo.message is message and memo.lean == lean[index] and memo.sizes == sizes[index]:
                out[index] = memo.envelope
                current[id(message)] = memo
                continue
            restored = self._restored.get(_lean_key(lean[index])) if index in referencing else None
            if restored is not None:
                out[index] = restored
                current[id(message)] = _Enveloped(message, lean[index], sizes[index], restored)
            else:
                todo.append(index)
        if todo:
            built = envelopes_for([lean[i] for i in todo], [sizes[i] for i in todo], self._seal, reader=self.reader)
            for index, envelope in zip(todo, built, strict=True):
                if index in written_back:
                    envelope = with_kept_stand_ins(envelope, messages[index], written_back[index])
                out[index] = envelope
                current[id(messages[index])] = _Enveloped(messages[index], lean[index], sizes[index], envelope)
        self._envelopes = current
        return out

    # -- restoring ---------------------------------------------------------------------

    async def restore(
        self, messages: list[ModelMessage], *, run_id: str, step_index: int, references: bool = False
    ) -> list[ModelMessage]:
        """The messages of a snapshot with every envelope replaced by the message it stands for (``restore_at``)."""
        return await self.restore_at(messages, SnapshotPlace(run_id, step_index), references=references)

    async def restore_at(
        self, messages: list[ModelMessage], place: Place, *, references: bool = False
    ) -> list[ModelMessage]:
        """The messages with every envelope replaced by the message it stands for, in one batch.

        ``place`` says where the messages were read, for errors.
        ``references``: media of user prompts and tool returns come back as
        reference parts (``_references``) and their blobs are not read.
        """
        places = [index for index, message in enumerate(messages) if has_reserved_key(message)]
        if not places:
            return list(messages)
        opened = [open_envelope(messages[index], place=place, message_index=index) for index in places]
        leans = [envelope.restorable for envelope in opened]
        if references:
            referenced = with_reference_parts(leans, media_store=self.media_store, reference_key=self.reference_key)
            for index, envelope, before, after in zip(places, opened, leans, referenced, strict=True):
                kept = self._with_seal(messages[index]) if after is not before else None
                if kept is not None:
                    self._restored.put(_lean_key(envelope.full), kept)
            leans = referenced
        first = places[0]
        try:
            typed = await self._walker.restore(leans)
        except MediaNotFoundError as error:
            needing = next((i for i, lean in zip(places, leans, strict=True) if error.uri in _lean_key(lean)), first)
            where = f'{error.where or type(self.media_store).__name__}, needed by {place.needing(needing)}'
            raise MediaNotFoundError(error.uri, where=where) from error
        except (UnsupportedMarkerFormat, MalformedMarker) as error:
            raise place.error(f'holds an unreadable marker ({error})', first) from error
        except ValidationError as error:
            raise place.error(
                f'does not hold valid messages ({error.error_count()} validation error(s))', first
            ) from error
        out = list(messages)
        for index, envelope, message in zip(places, opened, typed, strict=True):
            out[index] = reassembled(messages[index], envelope, message)
        return out


_RESTORED_ENVELOPES: Final = 4096


def _lean_key(lean: Any) -> str:
    return json.dumps(lean, ensure_ascii=False, separators=(',', ':'), sort_keys=True)


@dataclasses.dataclass(slots=True)
class _Enveloped:
    """An envelope ``offload`` built, with what it was built from."""

    message: ModelMessage
    lean: Any
    sizes: Sizes
    envelope: ModelMessage
