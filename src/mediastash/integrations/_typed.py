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

import asyncio
import copy
import dataclasses
import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any, Final

import pybase64
from pydantic import ValidationError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    StructuredContent,
    TextContent,
)

from mediastash.codec import text_to_bytes
from mediastash.context import MediaContext
from mediastash.errors import MalformedMarker, MediaNotFoundError, UnsupportedMarkerFormat
from mediastash.integrations._envelope import EnvelopeError, envelope_for, has_reserved_key, lean_json_of
from mediastash.known_blobs import KnownBlobCache, fingerprint, fingerprint_bytes
from mediastash.markers import TEXT_MEDIA_TYPE
from mediastash.stores.protocols import MediaStore
from mediastash.walker import externalize_media
from mediastash.walker._common import run_all, select_cache
from mediastash.walker.externalize import AmbiguousReference, StoredPayload, externalize_with_stored
from mediastash.walker.restore import restore_collecting

__all__ = ['Offloader']

_URLSAFE_PROBE: Final = 3 << 16
"""Bytes encoded per step when checking whether URL-safe base64 of a payload uses ``-`` or ``_``."""

_IDENTIFIERS_KEPT: Final = 1 << 16

Path = tuple[int | str, ...]


@dataclass(slots=True)
class _Found:
    """One large payload found in a typed message, and where its dict sits in the message's JSON."""

    message: int
    path: Path
    text: bool
    source: bytes | str
    media_type: str | None
    original: object
    fp: int = 0
    uri: str = ''
    urlsafe: bool = False


def _text_size(text: str, threshold: int) -> int:
    if len(text) * 4 < threshold:
        return 0
    return len(text) if text.isascii() else len(text_to_bytes(text))


def urlsafe_alphabet_used(raw: bytes) -> bool:
    """Whether the URL-safe base64 of ``raw`` contains ``-`` or ``_`` (what decides the marker's stamp).

    Encodes ``raw`` in 3-byte-aligned slices and stops at the first hit, so
    ordinary media costs one small slice; only degenerate payloads are scanned whole.
    """
    view = memoryview(raw)
    for start in range(0, len(raw), _URLSAFE_PROBE):
        encoded = pybase64.b64encode(view[start : start + _URLSAFE_PROBE], altchars=b'-_')
        if b'-' in encoded or b'_' in encoded:
            return True
    return False


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
        self._identifiers: OrderedDict[str, str] = OrderedDict()

    # -- saving ------------------------------------------------------------------------

    async def lean_json(self, messages: list[ModelMessage]) -> tuple[list[Any], list[bool]]:
        """Each message's lean JSON and whether it differs from the message's plain JSON."""
        found = self._scan(messages)
        cache = select_cache(self.known_blobs, self.media_store)
        await self._resolve(found, cache)
        small = self._emptied_copies(messages, found)
        dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(small, mode='json')
        stored: dict[int, StoredPayload] = {}
        for item in found:
            node = dumped[item.message]
            for step in item.path:
                node = node[step]
            stored[id(node)] = StoredPayload('content' if item.text else 'data', item.text, item.urlsafe, item.uri)
        try:
            lean = await externalize_with_stored(
                dumped,
                stored,
                media_store=self.media_store,
                threshold_bytes=self.threshold,
                known_blobs=cache if cache is not None else False,
                max_concurrency=self.max_concurrency,
            )
        except AmbiguousReference:
            full = ModelMessagesTypeAdapter.dump_python(messages, mode='json')
            lean = await externalize_media(
                full,
                media_store=self.media_store,
                threshold_bytes=self.threshold,
                known_blobs=cache if cache is not None else False,
                max_concurrency=self.max_concurrency,
            )
            return lean, [a != b for a, b in zip(lean, full, strict=True)]
        with_payload = {item.message for item in found}
        changed = [i in with_payload or lean[i] != dumped[i] for i in range(len(messages))]
        return lean, changed

    async def offload(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The messages with every payload message replaced by its envelope (blobs stored first)."""
        lean, changed = await self.lean_json(messages)
        out: list[ModelMessage] = []
        for message, lean_message, differs in zip(messages, lean, changed, strict=True):
            if differs or has_reserved_key(message):
                out.append(envelope_for(message, lean_message))
            else:
                out.append(message)
        return out

    def _scan(self, messages: list[ModelMessage]) -> list[_Found]:
        threshold = self.threshold
        found: list[_Found] = []
        for index, message in enumerate(messages):
            for j, part in enumerate(message.parts):
                if not _content_is_field(type(part)):
                    continue
                content = getattr(part, 'content', None)
                if isinstance(content, str):
                    if _text_size(content, threshold) >= threshold:
                        found.append(_Found(index, ('parts', j), True, content, TEXT_MEDIA_TYPE, part))
                elif isinstance(content, BinaryContent):
                    if len(content.data) >= threshold:
                        found.append(
                            _Found(index, ('parts', j, 'content'), False, content.data, content.media_type, content)
                        )
                elif isinstance(content, list):
                    for k, item in enumerate(content):
                        if isinstance(item, BinaryContent):
                            if len(item.data) >= threshold:
                                path: Path = ('parts', j, 'content', k)
                                found.append(_Found(index, path, False, item.data, item.media_type, item))
                        elif (
                            isinstance(item, TextContent | StructuredContent)
                            and isinstance(item.content, str)
                            and _text_size(item.content, threshold) >= threshold
                        ):
                            found.append(
                                _Found(index, ('parts', j, 'content', k), True, item.content, TEXT_MEDIA_TYPE, item)
                            )
        return found

    async def _resolve(self, found: list[_Found], cache: KnownBlobCache | None) -> None:
        """Give every payload its URI: from the cache, from another payload of this save, or by storing it."""
        fresh: dict[tuple[bool, int], list[_Found]] = {}
        waiting: list[tuple[_Found, _Found]] = []
        for item in found:
            source = item.source
            if isinstance(source, bytes):
                item.fp = fingerprint_bytes(source)
                known = cache.lookup('bytes', source, item.fp) if cache is not None else None
            else:
                item.fp = fingerprint(source)
                known = cache.lookup('text', source, item.fp) if cache is not None else None
            if known is not None:
                item.uri, item.urlsafe = known.uri, known.urlsafe
                continue
            bucket = fresh.setdefault((item.text, item.fp), [])
            twin = next((other for other in bucket if other.source is source or other.source == source), None)
            if twin is None:
                bucket.append(item)
            else:
                waiting.append((item, twin))
        if not fresh:
            return
        gate = asyncio.Semaphore(self.max_concurrency)
        await run_all(self._store(item, cache, gate) for bucket in fresh.values() for item in bucket)
        for item, twin in waiting:
            item.uri, item.urlsafe = twin.uri, twin.urlsafe

    async def _store(self, item: _Found, cache: KnownBlobCache | None, gate: asyncio.Semaphore) -> None:
        source = item.source
        async with gate:
            if isinstance(source, bytes):
                raw = source
                item.urlsafe = (
                    await asyncio.to_thread(urlsafe_alphabet_used, raw)
                    if len(raw) >= 1 << 22
                    else (urlsafe_alphabet_used(raw))
                )
            else:
                raw = text_to_bytes(source)
            uri = await self.media_store.put(raw, context=MediaContext(media_type=item.media_type))
        if not isinstance(uri, str):
            raise TypeError(f'{type(self.media_store).__name__}.put returned {type(uri).__name__}, expected a URI str')
        item.uri = uri
        if cache is not None:
            if isinstance(source, bytes):
                cache.remember('bytes', source, item.fp, uri, len(raw), item.urlsafe)
            else:
                cache.remember('text', source, item.fp, uri, len(raw), False)

    def _identifier(self, content: BinaryContent, uri: str) -> str:
        """``content.identifier`` without re-hashing a payload whose identifier is remembered by URI."""
        own = content._identifier
        if own:
            return own
        known = self._identifiers.get(uri)
        if known is None:
            known = hashlib.sha1(content.data, usedforsecurity=False).hexdigest()[:6]
            if known != content.identifier:  # pragma: no cover - pydantic-ai changed its identifier rule
                known = content.identifier
            self._identifiers[uri] = known
            if len(self._identifiers) > _IDENTIFIERS_KEPT:
                self._identifiers.popitem(last=False)
        else:
            self._identifiers.move_to_end(uri)
        return known

    def _emptied_copies(self, messages: list[ModelMessage], found: list[_Found]) -> list[ModelMessage]:
        """Shallow copies of the messages that hold payloads, with those payload fields emptied."""
        by_message: dict[int, list[_Found]] = {}
        for item in found:
            by_message.setdefault(item.message, []).append(item)
        small = list(messages)
        for index, items in by_message.items():
            message: Any = copy.copy(messages[index])
            parts: list[Any] = list(message.parts)
            copied: dict[int, Any] = {}
            for item in items:
                j = item.path[1]
                assert isinstance(j, int)
                part = copied.get(j)
                if part is None:
                    part = copied[j] = copy.copy(parts[j])
                    if isinstance(part.content, list):
                        part.content = list(part.content)
                    parts[j] = part
                if item.text and len(item.path) == 2:
                    part.content = ''
                    continue
                target = item.original
                empty: Any = copy.copy(target)
                if isinstance(empty, BinaryContent):
                    assert isinstance(target, BinaryContent)
                    empty._identifier = self._identifier(target, item.uri)
                    empty.data = b''
                else:
                    empty.content = ''
                if len(item.path) == 3:
                    part.content = empty
                else:
                    k = item.path[3]
                    assert isinstance(k, int)
                    part.content[k] = empty
            message.parts = parts
            small[index] = message
        return small

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
            return await restore_collecting(
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


_CONTENT_FIELD: dict[type, bool] = {}


def _content_is_field(cls: type) -> bool:
    """Whether ``content`` is a dataclass field of the part class (not, say, a derived property)."""
    answer = _CONTENT_FIELD.get(cls)
    if answer is None:
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        answer = _CONTENT_FIELD[cls] = any(field.name == 'content' for field in fields)
    return answer


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
