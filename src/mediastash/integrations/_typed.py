"""The typed fast path: externalize and restore pydantic-ai messages without base64.

Saving: large ``BinaryContent.data`` and large string ``content`` are taken
from the typed objects, looked up in the known-blob cache (one fingerprint and
one comparison for a payload already stored) or stored as raw bytes, and a
shallow copy of the message with those fields emptied is dumped to JSON. The
walker then writes, at the emptied places, exactly the markers
``externalize_media`` would write for the full dump, and handles anything the
typed pass does not recognise the ordinary way.

Restoring: markers are resolved to raw bytes (verified against the URI) and the
lean JSON is validated with the bytes already in place.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Final

from pydantic import ValidationError
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelMessagesTypeAdapter

from mediastash.errors import MalformedMarker, MediaNotFoundError, TreeDepthError, UnsupportedMarkerFormat
from mediastash.integrations._envelope import EnvelopeError, envelopes_for, has_reserved_key, lean_json_of
from mediastash.integrations._identifiers import IdentifierMemo
from mediastash.integrations._placeholders import Sizes
from mediastash.known_blobs import KnownBlobCache
from mediastash.stores.protocols import MediaStore
from mediastash.walker._common import select_cache
from mediastash.walker._payloads import (
    Job,
    PayloadBatch,
    TypedPayload,
    shallow_replace,
    typed_payloads,
    with_replaced_contents,
)
from mediastash.walker.externalize import _externalize_emptied
from mediastash.walker.restore import _restore_collecting

__all__ = ['Offloader']


class Offloader:
    """Turns message lists into lean ones (envelopes) and back, for one media store."""

    def __init__(
        self,
        media_store: MediaStore,
        *,
        threshold_bytes: int,
        known_blobs: KnownBlobCache | bool,
        max_concurrency: int,
    ) -> None:
        self.media_store = media_store
        self.threshold = threshold_bytes
        self.known_blobs = known_blobs
        self.max_concurrency = max_concurrency
        self._identifiers = IdentifierMemo()
        self._envelopes: dict[int, _Enveloped] = {}
        """The previous save's envelopes by ``id`` of the message they stand for (see ``offload``)."""

    # -- saving ------------------------------------------------------------------------

    async def lean_json(self, messages: list[ModelMessage]) -> tuple[list[Any], list[bool]]:
        """Each message's lean JSON and whether it differs from the message's plain JSON.

        The typed payloads join the same batch as anything the walk of the
        emptied dump finds; one flush stores them all.
        """
        lean, changed, _ = await self._lean_json_sized(messages)
        return lean, changed

    async def _lean_json_sized(self, messages: list[ModelMessage]) -> tuple[list[Any], list[bool], list[Sizes]]:
        """``lean_json`` plus, per message, the size of each typed payload it stored, by URI."""
        found = typed_payloads(messages, self.threshold)
        cache = select_cache(self.known_blobs, self.media_store)
        batch = PayloadBatch(self.media_store, cache, self.max_concurrency)
        for item in found:
            item.job = batch.add('text' if item.text else 'bytes', item.source, item.size, item.media_type)
        small, computed = self._emptied_copies(messages, found)
        dumped = _dump(small)
        emptied: dict[int, tuple[str, Job]] = {}
        for item in found:
            node = dumped[item.message]
            for step in item.path:
                node = node[step]
            assert item.job is not None
            emptied[id(node)] = ('content' if item.text else 'data', item.job)
        lean = await _externalize_emptied(dumped, batch, emptied, self.threshold)
        for job, identifier in computed:
            if job.uri is not None:
                self._identifiers.remember(job.uri, identifier)
        with_payload = {item.message for item in found}
        changed = [i in with_payload or lean[i] != dumped[i] for i in range(len(messages))]
        sizes: list[dict[str, int]] = [{} for _ in messages]
        for item in found:
            if item.job is not None and item.job.uri is not None:
                sizes[item.message][item.job.uri] = item.size
        return lean, changed, list(sizes)

    async def offload(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The messages with every payload message replaced by its envelope (blobs stored first).

        An envelope depends only on the lean JSON and payload sizes of its
        message, so one the previous save built for the same message object
        with equal lean JSON and sizes is handed over again (each snapshot
        repeats the history; the inner store only serializes envelopes).
        """
        lean, changed, sizes = await self._lean_json_sized(messages)
        out = list(messages)
        previous, current = self._envelopes, {}
        todo: list[int] = []
        for index, message in enumerate(messages):
            if not (changed[index] or has_reserved_key(message)):
                continue
            memo = previous.get(id(message))
            if memo is not None and memo.message is message and memo.lean == lean[index] and memo.sizes == sizes[index]:
                out[index] = memo.envelope
                current[id(message)] = memo
            else:
                todo.append(index)
        if todo:
            built = envelopes_for([lean[i] for i in todo], [sizes[i] for i in todo])
            for index, envelope in zip(todo, built, strict=True):
                out[index] = envelope
                current[id(messages[index])] = _Enveloped(messages[index], lean[index], sizes[index], envelope)
        self._envelopes = current
        return out

    def _identifier(self, content: BinaryContent, job: Job | None, computed: list[tuple[Job, str]]) -> str:
        """``content.identifier``; one computed here is remembered by URI once the batch knows it."""
        known = self._identifiers.known(content, None if job is None else job.uri)
        if known is not None:
            return known
        identifier = content.identifier
        if job is not None:
            computed.append((job, identifier))
        return identifier

    def _emptied_copies(
        self, messages: list[ModelMessage], found: list[TypedPayload]
    ) -> tuple[list[ModelMessage], list[tuple[Job, str]]]:
        """Shallow copies of the messages that hold payloads, with those payload fields emptied.

        Only public fields are set on shallow copies; a ``BinaryContent`` is
        rebuilt with ``dataclasses.replace`` and its public ``identifier``
        argument, never by writing pydantic-ai's private attributes.
        Also returns the identifiers computed on the way, to remember by URI.
        """
        computed: list[tuple[Job, str]] = []
        replacements: list[tuple[TypedPayload, Any]] = []
        for item in found:
            target = item.original
            if item.text and len(item.path) == 2:
                empty: Any = ''  # the part's own string content
            elif isinstance(target, BinaryContent):
                # `identifier` is BinaryContent's public constructor argument (the field is private).
                identifier = self._identifier(target, item.job, computed)
                empty = dataclasses.replace(target, data=b'', identifier=identifier)  # type: ignore[call-arg]
            else:
                empty = shallow_replace(target, content='')
            replacements.append((item, empty))
        return with_replaced_contents(messages, replacements), computed

    # -- restoring ---------------------------------------------------------------------

    async def restore(self, messages: list[ModelMessage], *, run_id: str, step_index: int) -> list[ModelMessage]:
        """The messages with every envelope replaced by the message it stands for."""
        places = [index for index, message in enumerate(messages) if has_reserved_key(message)]
        if not places:
            return list(messages)
        leans = [
            lean_json_of(messages[index], run_id=run_id, step_index=step_index, message_index=index) for index in places
        ]
        typed = await self._restore_leans(leans, run_id=run_id, step_index=step_index, first=places[0])
        out = list(messages)
        for index, message in zip(places, typed, strict=True):
            out[index] = message
        return out

    async def _restore_leans(
        self, leans: list[dict[str, Any]], *, run_id: str, step_index: int, first: int
    ) -> list[ModelMessage]:
        restored, slots = await self._restore_tree(leans, True, run_id, step_index, first)
        typed = self._validate(restored, run_id, step_index, first)
        raw_ids = Counter(id(holder[key]) for holder, key in slots if isinstance(holder[key], bytes))
        if raw_ids and not raw_ids <= _binary_data_ids(typed, raw_ids):
            # A binary marker sat where pydantic-ai keeps JSON (e.g. inside `metadata`): take the plain path.
            restored, _ = await self._restore_tree(leans, False, run_id, step_index, first)
            typed = self._validate(restored, run_id, step_index, first)
        return typed

    async def _restore_tree(
        self, leans: list[dict[str, Any]], raw: bool, run_id: str, step_index: int, first: int
    ) -> tuple[Any, list[tuple[dict[str, Any], str]]]:
        try:
            return await _restore_collecting(
                leans,
                media_store=self.media_store,
                known_blobs=self.known_blobs,
                max_concurrency=self.max_concurrency,
                raw_binary=raw,
            )
        except MediaNotFoundError as error:
            where = f'{error.where or type(self.media_store).__name__}, needed by run {run_id!r} step {step_index}'
            raise MediaNotFoundError(error.uri, where=where) from error
        except (UnsupportedMarkerFormat, MalformedMarker) as error:
            raise EnvelopeError(
                f'holds an unreadable marker ({error})', run_id=run_id, step_index=step_index, message_index=first
            ) from error

    @staticmethod
    def _validate(restored: Any, run_id: str, step_index: int, first: int) -> list[ModelMessage]:
        try:
            return ModelMessagesTypeAdapter.validate_python(restored)
        except ValidationError as error:
            raise EnvelopeError(
                f'does not hold valid messages ({error.error_count()} validation error(s))',
                run_id=run_id,
                step_index=step_index,
                message_index=first,
            ) from error


@dataclasses.dataclass(slots=True)
class _Enveloped:
    """An envelope ``offload`` built, with what it was built from."""

    message: ModelMessage
    lean: Any
    sizes: Sizes
    envelope: ModelMessage


_PYDANTIC_DEPTH: Final = 'Maximum serialization depth exceeded'
_PYDANTIC_CYCLE: Final = 'Circular reference detected'


def _dump(messages: list[ModelMessage]) -> list[Any]:
    """The messages' JSON form; pydantic-core's depth and cycle refusals become ``TreeDepthError``."""
    try:
        dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(messages, mode='json')
    except ValueError as error:
        text = str(error)
        if _PYDANTIC_DEPTH not in text and _PYDANTIC_CYCLE not in text:
            raise
        where = '$'
        for index, message in enumerate(messages):
            try:
                ModelMessagesTypeAdapter.dump_python([message], mode='json')
            except ValueError:
                where = f'$[{index}]'
                break
        cycle = _PYDANTIC_CYCLE in text
        raise TreeDepthError(limit=None, path=where, cycle=cycle, serializer='pydantic-core') from error
    return dumped


def _binary_data_ids(messages: list[ModelMessage], wanted: Counter[int]) -> Counter[int]:
    """How often each wanted ``bytes`` object is the ``data`` of a typed ``BinaryContent``."""
    ids: Counter[int] = Counter()
    for message in messages:
        for part in message.parts:
            content = getattr(part, 'content', None)
            items = content if isinstance(content, list) else [content]
            for item in items:
                if isinstance(item, BinaryContent) and id(item.data) in wanted:
                    ids[id(item.data)] += 1
    return ids
