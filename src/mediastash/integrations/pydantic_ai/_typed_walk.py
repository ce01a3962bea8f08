"""The typed walk: externalize and restore pydantic-ai messages in one call each, without base64.

Saving: large ``BinaryContent.data`` and large string ``content`` are taken
from the typed objects, looked up in the known-blob cache (one fingerprint and
one comparison for a payload already stored) or stored as raw bytes, and a
shallow copy of the messages with those fields emptied is dumped to JSON. The
JSON walk then writes, at the emptied places, exactly the markers
``externalize_media`` would write for the full dump, and handles anything the
typed pass does not recognise the ordinary way; one flush stores it all.

Restoring: markers are resolved to raw bytes (verified against the URI) and the
lean JSON is validated with the bytes already in place.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final

from pydantic_ai.messages import BinaryContent, ModelMessage, ModelMessagesTypeAdapter

from mediastash.errors import TreeDepthError
from mediastash.integrations.pydantic_ai._identifiers import IdentifierMemo
from mediastash.integrations.pydantic_ai._typed_payloads import (
    PlainJsonMemo,
    TypedPayload,
    shallow_replace,
    typed_payloads,
    with_replaced_contents,
)
from mediastash.markers import MARKER_KEY, URI_KEY
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import (
    Job,
    LeanMemo,
    PayloadBatch,
    externalize_emptied,
    new_marker,
    rejoin,
    restore_collecting,
    select_cache,
    settle,
    urlsafe_alphabet_used,
)

__all__ = ['LeanMessages', 'TypedBinaries', 'TypedWalker', 'binary_marker', 'known_urlsafe', 'read_blobs', 'urlsafe_of']


@dataclasses.dataclass(slots=True)
class LeanMessages:
    """What one typed save produced, one entry per message."""

    json: list[Any]
    """Each message's lean JSON (what ``externalize_media`` writes for its full dump)."""
    changed: list[bool]
    """Whether the lean JSON differs from the message's plain JSON."""
    sizes: list[dict[str, int]]
    """Size in bytes of each typed payload the message stored, by URI."""
    found: list[bool]
    """The walker's ``search``, per message: asked when the message's state is taken, and remembered with
    it, so a message met unchanged is not asked again."""


@dataclasses.dataclass(slots=True)
class _Walked(LeanMessages):
    """``LeanMessages`` of a full walk, with the distinct jobs each message's markers wait for."""

    jobs: list[list[Job]]


class TypedWalker:
    """Typed messages to lean JSON and back, for one media store and one ``WalkOptions``.

    Remembers default ``BinaryContent`` identifiers by URI, so a history saved
    again is not hashed for them again, which tool outputs hold only plain
    JSON, so they are not checked again (``PlainJsonMemo``), and each message's
    lean JSON from the latest save, so an unchanged message is not walked
    again (``LeanMemo``). ``search``: a yes/no the caller wants of each message
    (``LeanMessages.found``); fixed for the walker's life, so an answer kept with
    a message is always one of the same question.
    """

    def __init__(
        self,
        media_store: MediaStore,
        options: WalkOptions,
        search: Callable[[ModelMessage], bool] | None = None,
    ) -> None:
        self.media_store = media_store
        self.options = options
        self._search = search
        self._identifiers = IdentifierMemo()
        self._plain = PlainJsonMemo()
        self._lean = LeanMemo()

    # -- saving ------------------------------------------------------------------------

    async def externalize(self, messages: list[ModelMessage]) -> LeanMessages:
        """Store the messages' payloads; their lean JSON, what changed, and the stored sizes.

        The typed payloads join the same batch as anything the walk of the
        emptied dump finds; one flush stores them all. A message met
        unchanged since the previous save (``LeanMemo``) is not walked again:
        its payloads only rejoin the batch. The walker's ``search`` is asked
        of each message right when its state is taken (no await between), so
        the answer kept with an unchanged message is the one for that very
        state. Raises what
        ``externalize_media`` raises (``TreeDepthError`` also for messages
        pydantic-core cannot dump for depth or a cycle).
        """
        options, search = self.options, self._search
        cache = select_cache(options.known_blobs, self.media_store)
        batch = PayloadBatch(self.media_store, cache, options.max_concurrency)
        memo = self._lean
        memo.start_save()
        taken = [memo.take(message) for message in messages]
        found = [
            entry.found if entry is not None else search is not None and search(message)
            for message, (entry, _) in zip(messages, taken, strict=True)
        ]
        fresh = [index for index, (entry, _) in enumerate(taken) if entry is None]
        readded: list[tuple[Job | None, str]] = []
        for message, (entry, _) in zip(messages, taken, strict=True):
            if entry is not None:
                readded.extend(rejoin(batch, entry))
                for part in message.parts:  # its outputs stay checked for a message object that wraps them anew
                    self._plain.keep(getattr(part, 'content', None))
        walked = await self._walk([messages[index] for index in fresh], batch)
        if any(job is None or job.uri != uri for job, uri in readded):
            memo.forget()  # a remembered payload has another URI now: walk everything again
            return await self.externalize(messages)
        count = len(messages)
        out = LeanMessages([None] * count, [False] * count, [{} for _ in messages], found)
        for index, (entry, _) in enumerate(taken):
            if entry is not None:
                out.json[index], out.changed[index], out.sizes[index] = entry.lean, entry.changed, entry.sizes
        for position, index in enumerate(fresh):
            lean, changed, sizes = walked.json[position], walked.changed[position], walked.sizes[position]
            out.json[index], out.changed[index], out.sizes[index] = lean, changed, sizes
            memo.remember(messages[index], taken[index][1], lean, changed, sizes, walked.jobs[position], found[index])
        memo.end_save()
        return out

    async def _walk(self, messages: list[ModelMessage], batch: PayloadBatch) -> _Walked:
        """The full typed walk of ``messages``, its payloads in ``batch`` (flushed here, with what else it holds)."""
        options = self.options
        structured = options.structured is True
        found = typed_payloads(messages, options.threshold_bytes, structured=structured, memo=self._plain)
        jobs: list[Job | None] = [
            batch.add('text' if item.text else 'bytes', item.source, item.size, item.media_type) for item in found
        ]
        small, computed = self._emptied_copies(messages, found, jobs)
        dumped = _dump(small)
        emptied: dict[int, tuple[str, Job]] = {}
        for item, job in zip(found, jobs, strict=True):
            node = dumped[item.message]
            for step in item.path:
                node = node[step]
            assert job is not None
            emptied[id(node)] = ('content' if item.text or item.structured else 'data', job)
        lean, waited = await externalize_emptied(dumped, batch, emptied, options.threshold_bytes, structured=structured)
        for job, identifier in computed:
            if job.uri is not None:
                self._identifiers.remember(job.uri, identifier)
        with_payload = {item.message for item in found}
        changed = [i in with_payload or lean[i] != dumped[i] for i in range(len(messages))]
        sizes: list[dict[str, int]] = [{} for _ in messages]
        for item, job in zip(found, jobs, strict=True):
            if job is not None and job.uri is not None:
                sizes[item.message][job.uri] = item.size
        return _Walked(lean, changed, sizes, [False] * len(messages), waited)

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
        self, messages: list[ModelMessage], found: list[TypedPayload], jobs: list[Job | None]
    ) -> tuple[list[ModelMessage], list[tuple[Job, str]]]:
        """Shallow copies of the messages that hold payloads, with those payload fields emptied.

        Only public fields are set on shallow copies; a ``BinaryContent`` is
        rebuilt with ``dataclasses.replace`` and its public ``identifier``
        argument, never by writing pydantic-ai's private attributes.
        Also returns the identifiers computed on the way, to remember by URI.
        """
        computed: list[tuple[Job, str]] = []
        replacements: list[tuple[TypedPayload, Any]] = []
        for item, job in zip(found, jobs, strict=True):
            target = item.original
            if (item.text or item.structured) and len(item.path) == 2:
                empty: Any = ''  # the part's own content (a string, or a tool return's JSON)
            elif isinstance(target, BinaryContent):
                # `identifier` is BinaryContent's public constructor argument (the field is private).
                identifier = self._identifier(target, job, computed)
                empty = dataclasses.replace(target, data=b'', identifier=identifier)  # type: ignore[call-arg]
            else:
                empty = shallow_replace(target, content='')
            replacements.append((item, empty))
        return with_replaced_contents(messages, replacements), computed

    # -- restoring ---------------------------------------------------------------------

    async def restore(self, leans: list[dict[str, Any]]) -> list[ModelMessage]:
        """The typed messages the lean message JSONs stand for, binary payloads validated as raw bytes.

        Raises what ``restore_media`` raises, and pydantic's
        ``ValidationError`` when the restored JSON is not valid messages.
        """
        restored, slots = await restore_collecting(leans, self.media_store, self.options, raw_binary=True)
        typed = _validate(restored)
        raw_ids = Counter(id(holder[key]) for holder, key in slots if isinstance(holder[key], bytes))
        if raw_ids and not raw_ids <= _binary_data_ids(typed, raw_ids):
            # A binary marker sat where pydantic-ai keeps JSON (e.g. inside `metadata`): take the plain path.
            restored, _ = await restore_collecting(leans, self.media_store, self.options)
            typed = _validate(restored)
        return typed


class TypedBinaries:
    """Binary payloads of typed messages on their way to the store, each distinct one stored once.

    Made synchronously (the known-blob cache answers the payloads it knows);
    ``store`` then makes the store calls. ``fingerprints``: each payload's
    fingerprint when the caller remembers it, else ``None``.
    """

    def __init__(
        self,
        media_store: MediaStore,
        options: WalkOptions,
        payloads: Sequence[TypedPayload],
        fingerprints: Sequence[int | None],
    ) -> None:
        self._batch = batch = PayloadBatch(
            media_store, select_cache(options.known_blobs, media_store), options.max_concurrency
        )
        self._jobs = [
            batch.add('bytes', item.source, item.size, item.media_type, fp)
            for item, fp in zip(payloads, fingerprints, strict=True)
        ]

    async def store(self) -> list[str]:
        """Store what the cache did not know; every payload's URI, in order (the store's error on failure)."""
        await self._batch.flush()
        uris: list[str] = []
        for job in self._jobs:
            assert job is not None and job.uri is not None  # raw bytes always get a URI
            uris.append(job.uri)
        return uris


# -- blobs by reference (``_references``) --------------------------------------------------


def binary_marker(fields: dict[str, Any], uri: str, urlsafe: bool) -> dict[str, Any]:
    """The marker a binary dict gets when its ``data`` is stored under ``uri``: built as every save builds it.

    ``fields``: the dict's other keys in their order, already walked (for a
    ``BinaryContent``: ``media_type``, ``vendor_metadata``, ``kind``,
    ``identifier``). ``urlsafe``: whether the URL-safe base64 of the bytes
    uses ``-`` or ``_`` (what the save of the bytes would have found).
    """
    job = Job('bytes', b'', 0, 0, None, urlsafe, uri)
    pending = new_marker({'data': None, **fields}, 'data', dict(fields), job)
    settle([pending])
    return pending.marker


def known_urlsafe(media_store: MediaStore, options: WalkOptions, uri: str) -> bool | None:
    """The URL-safe flag of ``uri``'s bytes when the known-blob cache holds them, else ``None`` (no store call)."""
    cache = select_cache(options.known_blobs, media_store)
    entry = None if cache is None else cache.by_uri(uri, 'bytes')
    return None if entry is None else entry.urlsafe


async def read_blobs(media_store: MediaStore, options: WalkOptions, wanted: dict[str, str | None]) -> dict[str, bytes]:
    """The verified bytes of each URI in ``wanted`` (URI to media type), read as a restore reads them.

    Each distinct blob is read once, concurrently under the bound, from the
    known-blob cache when it holds it, and remembered there.
    """
    markers = [
        {'kind': 'binary', 'media_type': media_type, MARKER_KEY: True, URI_KEY: uri}
        for uri, media_type in wanted.items()
    ]
    restored, _ = await restore_collecting(markers, media_store, options, raw_binary=True)
    return {uri: node['data'] for uri, node in zip(wanted, restored, strict=True)}


def urlsafe_of(raw: bytes) -> bool:
    """Whether the URL-safe base64 of ``raw`` uses ``-`` or ``_`` (decides a binary marker's stamp)."""
    return urlsafe_alphabet_used(raw)


def _validate(restored: Any) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_python(restored)


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
