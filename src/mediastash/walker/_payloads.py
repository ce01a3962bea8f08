"""The one route from a payload to the store: what counts as a payload, and the job batch.

Recognition rules for the two input forms sit side by side: dicts of a JSON
tree (``JsonPayloadFinder``) and typed pydantic-ai messages (``typed_payloads``).
Both feed one ``PayloadBatch``, which decides once per distinct payload
whether it is already stored (known-blob cache, re-checked with the store
when older than the cache's trust age), must be stored, or must stay inline,
and runs the store calls concurrently under one bound. Markers wait for their
job and are settled after the flush (``settle``): that is the only place a
payload is put back inline.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pybase64

from mediastash._tasks import run_all
from mediastash.codec import (
    decode_canonical_base64,
    encode_base64,
    is_urlsafe_alphabet,
    max_decoded_size,
    text_to_bytes,
)
from mediastash.context import MediaContext
from mediastash.known_blobs import KnownBlob, KnownBlobCache, PayloadKind, fingerprint, fingerprint_bytes
from mediastash.markers import (
    ESCAPE_FORMAT,
    ESCAPE_ORDER,
    ESCAPED_KEYS,
    FORMAT_KEY,
    LITERAL_KEY,
    MARKER_KEY,
    MARKER_OWNED_KEYS,
    TEXT_CONTENT_KINDS,
    TEXT_KEY,
    TEXT_MEDIA_TYPE,
    URI_KEY,
    URLSAFE_KEY,
    URLSAFE_STAMP,
    needs_literal_wrap,
    wrap_literal,
)
from mediastash.stores.protocols import MediaStore, confirm_in
from mediastash.walker._common import TreeCopier, in_thread_if_large

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = [
    'Job',
    'JsonPayloadFinder',
    'PayloadBatch',
    'Pending',
    'TypedPayload',
    'binary_size',
    'new_marker',
    'settle',
    'shallow_replace',
    'text_size',
    'typed_payloads',
    'urlsafe_alphabet_used',
    'with_replaced_contents',
]

_URLSAFE_PROBE: Final = 3 << 16
"""Bytes encoded per step when checking whether URL-safe base64 of a payload uses ``-`` or ``_``."""

_URLSAFE_IN_THREAD: Final = 1 << 22


# -- sizes: the one threshold rule -------------------------------------------------------


def text_size(text: str, threshold: int) -> int | None:
    """UTF-8 size of ``text`` when it reaches ``threshold``, else ``None`` (cheap for short and ASCII text)."""
    if len(text) * 4 < threshold:
        return None
    size = len(text) if text.isascii() else len(text_to_bytes(text))
    return size if size >= threshold else None


def binary_size(data: str, threshold: int) -> int | None:
    """Decoded size of base64 ``data`` when it reaches ``threshold`` and could be canonical base64, else ``None``."""
    length = len(data)
    if max_decoded_size(length) < threshold or length % 4 or not data.isascii():
        return None
    size = max_decoded_size(length) - (2 if data.endswith('==') else 1 if data.endswith('=') else 0)
    return size if size >= threshold else None


# -- recognition: JSON trees -------------------------------------------------------------


class JsonPayloadFinder(TreeCopier):
    """A tree copy that recognises payload dicts and hands each to ``found``; the rule for JSON trees.

    A payload is a ``kind == 'binary'`` dict's base64 ``data``, or the string
    ``content`` of a message part (it has a ``part_kind``) or of
    ``TextContent`` / ``StructuredContent``, at or above ``threshold``. The
    check runs inline in ``walk_dict`` because it runs for every dict of every
    history.
    """

    threshold: int

    def found(
        self,
        node: dict[str, Any],
        moved_key: str,
        kind: PayloadKind,
        source: str,
        size: int,
        media_type: str | None,
        depth: int,
    ) -> dict[str, Any] | None:
        """What replaces a payload dict (at ``depth``), or ``None`` to copy it as data."""
        raise NotImplementedError

    def walk_dict(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        kind = node.get('kind')
        if kind == 'binary' and isinstance(data := node.get('data'), str):
            size = binary_size(data, self.threshold)
            if size is not None:
                media_type = node.get('media_type')
                replaced = self.found(
                    node, 'data', 'base64', data, size, media_type if isinstance(media_type, str) else None, depth
                )
                if replaced is not None:
                    return replaced
        elif (
            isinstance(content := node.get('content'), str)
            and len(content) * 4 >= self.threshold  # the cheap half of text_size: most parts are short
            and (isinstance(node.get('part_kind'), str) or kind in TEXT_CONTENT_KINDS)
        ):
            size = text_size(content, self.threshold)
            if size is not None:
                replaced = self.found(node, 'content', 'text', content, size, TEXT_MEDIA_TYPE, depth)
                if replaced is not None:
                    return replaced
        out = self.copy_fields(node, depth)
        if MARKER_KEY in node or LITERAL_KEY in node:  # needs_literal_wrap, inline
            return wrap_literal(out)
        return out


# -- recognition: typed pydantic-ai messages ---------------------------------------------

Path = tuple[int | str, ...]


@dataclass(slots=True)
class TypedPayload:
    """A large payload of a typed message, and where its dict sits in that message's JSON."""

    message: int
    path: Path
    text: bool
    source: bytes | str
    size: int
    media_type: str | None
    original: object
    job: Job | None = None


def typed_payloads(messages: list[ModelMessage], threshold: int) -> list[TypedPayload]:
    """Every ``BinaryContent.data`` and string ``content`` at or above ``threshold``, the same places
    ``JsonPayloadFinder`` finds them in the messages' JSON dump."""
    from pydantic_ai.messages import BinaryContent, StructuredContent, TextContent

    found: list[TypedPayload] = []
    for index, message in enumerate(messages):
        for j, part in enumerate(message.parts):
            if not _content_is_field(type(part)):
                continue
            content = getattr(part, 'content', None)
            if isinstance(content, str):
                text = text_size(content, threshold)
                if text is not None:
                    found.append(TypedPayload(index, ('parts', j), True, content, text, TEXT_MEDIA_TYPE, part))
            elif isinstance(content, BinaryContent):
                if len(content.data) >= threshold:
                    path: Path = ('parts', j, 'content')
                    size = len(content.data)
                    found.append(TypedPayload(index, path, False, content.data, size, content.media_type, content))
            elif isinstance(content, list):
                for k, item in enumerate(content):
                    path = ('parts', j, 'content', k)
                    if isinstance(item, BinaryContent):
                        if len(item.data) >= threshold:
                            size = len(item.data)
                            found.append(TypedPayload(index, path, False, item.data, size, item.media_type, item))
                    elif isinstance(item, TextContent | StructuredContent) and isinstance(item.content, str):
                        text = text_size(item.content, threshold)
                        if text is not None:
                            found.append(TypedPayload(index, path, True, item.content, text, TEXT_MEDIA_TYPE, item))
    return found


def with_replaced_contents(
    messages: list[ModelMessage], replacements: Iterable[tuple[TypedPayload, object]]
) -> list[ModelMessage]:
    """A new message list where each found payload is replaced (the input is not changed).

    ``replacements`` pairs a ``TypedPayload`` with what takes its place: the
    part's new ``content`` for a part's own string, else the new item (a
    content object) at the payload's path. Messages and parts on the way are
    shallow copies with public fields set; untouched messages are the same objects.
    """
    by_message: dict[int, list[tuple[TypedPayload, object]]] = {}
    for item, value in replacements:
        by_message.setdefault(item.message, []).append((item, value))
    out = list(messages)
    for index, items in by_message.items():
        parts: list[Any] = list(messages[index].parts)
        changes: dict[int, dict[str, Any]] = {}
        for item, value in items:
            j = item.path[1]
            assert isinstance(j, int)
            change = changes.setdefault(j, {})
            if len(item.path) <= 3:
                change['content'] = value
            else:
                k = item.path[3]
                assert isinstance(k, int)
                content = change.get('content')
                if content is None:
                    content = change['content'] = list(parts[j].content)
                content[k] = value
        for j, change in changes.items():
            parts[j] = shallow_replace(parts[j], **change)
        out[index] = shallow_replace(messages[index], parts=parts)
    return out


def shallow_replace(obj: Any, **changes: Any) -> Any:
    """A shallow copy of a part, message or content object with public fields set (no re-validation)."""
    state = getattr(obj, '__dict__', None)
    if type(state) is dict and not hasattr(type(obj), '__slots__'):
        clone = object.__new__(type(obj))  # what copy.copy does for a plain instance, without its detours
        clone.__dict__.update(state)
    else:
        clone = copy.copy(obj)
    for name, value in changes.items():
        setattr(clone, name, value)
    return clone


_CONTENT_FIELD: dict[type, bool] = {}


def _content_is_field(cls: type) -> bool:
    """Whether ``content`` is a dataclass field of the part class (not, say, a derived property)."""
    answer = _CONTENT_FIELD.get(cls)
    if answer is None:
        import dataclasses

        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
        answer = _CONTENT_FIELD[cls] = any(f.name == 'content' for f in fields)
    return answer


def urlsafe_alphabet_used(raw: bytes) -> bool:
    """Whether the URL-safe base64 of ``raw`` contains ``-`` or ``_`` (what decides a binary marker's stamp).

    Encodes ``raw`` in 3-byte-aligned slices and stops at the first hit, so
    ordinary media costs one small slice; only degenerate payloads are scanned whole.
    """
    view = memoryview(raw)
    for start in range(0, len(raw), _URLSAFE_PROBE):
        encoded = pybase64.b64encode(view[start : start + _URLSAFE_PROBE], altchars=b'-_')
        if b'-' in encoded or b'_' in encoded:
            return True
    return False


# -- the batch -----------------------------------------------------------------------------


@dataclass(slots=True)
class Job:
    """One distinct payload of a batch.

    ``uri`` is known at once for a trusted cache hit, after ``flush`` otherwise;
    it stays ``None`` when the payload must stay inline (base64 that is not
    canonical). ``recheck`` is a cache entry past its trust age, confirmed with
    the store before it is used.
    """

    kind: PayloadKind
    source: str | bytes
    fp: int
    size: int
    media_type: str | None
    urlsafe: bool = False
    uri: str | None = None
    recheck: KnownBlob | None = None


class PayloadBatch:
    """Collects payloads of one save, stores each distinct one once, under one concurrency bound."""

    def __init__(self, store: MediaStore, cache: KnownBlobCache | None, max_concurrency: int) -> None:
        self.store = store
        self.cache = cache
        self.max_concurrency = max_concurrency
        self._jobs: dict[tuple[PayloadKind, int], list[Job]] = {}
        self._open: list[Job] = []
        self.rechecked = 0
        """Cache entries past their trust age confirmed with the store (for the DEBUG record of a walk)."""
        self.stored = 0
        """Distinct payloads handed to the store."""

    def add(
        self, kind: PayloadKind, source: str | bytes, size: int, media_type: str | None, fp: int | None = None
    ) -> Job | None:
        """The job that will hold ``source``'s URI, or ``None`` when it must stay inline.

        The cache and this batch's own jobs are consulted before the base64
        alphabet scan, so a payload seen before costs one fingerprint and one
        comparison. ``fp``: the payload's fingerprint, when the caller knows it.
        """
        if fp is None:
            fp = fingerprint_bytes(source) if isinstance(source, bytes) else fingerprint(source)
        cache = self.cache
        known = cache.lookup(kind, source, fp) if cache is not None else None
        if known is not None and cache is not None and cache.is_trusted(known):
            return Job(kind, source, fp, size, media_type, known.urlsafe, known.uri)
        bucket = self._jobs.get((kind, fp))
        if bucket is not None:
            for job in bucket:
                if job.source is source or job.source == source:
                    return job
        if known is not None:
            job = Job(kind, source, fp, size, media_type, known.urlsafe, None, known)
        elif kind == 'base64':
            assert isinstance(source, str)
            alphabet = is_urlsafe_alphabet(source)
            if alphabet is None:
                return None
            job = Job(kind, source, fp, size, media_type, alphabet)
        else:
            job = Job(kind, source, fp, size, media_type)
        self._jobs.setdefault((kind, fp), []).append(job)
        self._open.append(job)
        return job

    async def flush(self) -> None:
        """Re-check stale cache entries in one batched existence check, then store what is left."""
        jobs, self._open = self._open, []
        self._jobs = {}
        if not jobs:
            return
        stale = [job for job in jobs if job.recheck is not None]
        if stale:
            await self._recheck(stale)
        gate = asyncio.Semaphore(self.max_concurrency)
        to_store = [job for job in jobs if job.uri is None]
        self.rechecked += len(stale)
        self.stored += len(to_store)
        await run_all(self._store(job, gate) for job in to_store)

    async def _recheck(self, stale: list[Job]) -> None:
        uris = [job.recheck.uri for job in stale if job.recheck is not None]
        present = await confirm_in(self.store, uris, max_concurrency=self.max_concurrency)
        for job in stale:
            entry = job.recheck
            assert entry is not None
            if entry.uri in present:
                job.uri = entry.uri
                if self.cache is not None:
                    self.cache.confirm(entry)
            elif self.cache is not None:
                self.cache.forget(entry)

    async def _store(self, job: Job, gate: asyncio.Semaphore) -> None:
        source = job.source
        async with gate:
            if job.kind == 'base64':
                assert isinstance(source, str)
                decoded = await in_thread_if_large(job.size, decode_canonical_base64, source)
                if decoded is None:
                    return  # not canonical: stays inline
                raw = decoded[0]
            elif job.kind == 'text':
                assert isinstance(source, str)
                raw = await in_thread_if_large(job.size, text_to_bytes, source)
            else:
                assert isinstance(source, bytes)
                raw = source
                if job.recheck is None:
                    if len(raw) >= _URLSAFE_IN_THREAD:
                        job.urlsafe = await asyncio.to_thread(urlsafe_alphabet_used, raw)
                    else:
                        job.urlsafe = urlsafe_alphabet_used(raw)
            uri = await self.store.put(raw, context=MediaContext(media_type=job.media_type))
            del raw
        if not isinstance(uri, str):
            raise TypeError(f'{type(self.store).__name__}.put returned {type(uri).__name__}, expected a URI str')
        job.uri = uri
        if self.cache is not None:
            self.cache.remember(job.kind, source, job.fp, uri, job.size, job.urlsafe)


# -- markers waiting for their job -----------------------------------------------------------


@dataclass(slots=True)
class Pending:
    """A marker in an output tree waiting for its job's URI.

    ``node`` is the input dict; ``preserved`` its other fields, walked.
    ``emptied`` is True when the caller removed the payload from ``node``
    already (the typed path), so putting it back inline takes it from the job.
    """

    marker: dict[str, Any]
    node: dict[str, Any]
    moved_key: str
    preserved: dict[str, Any]
    job: Job
    emptied: bool = False


def new_marker(node: dict[str, Any], moved_key: str, preserved: dict[str, Any], job: Job) -> Pending:
    """The marker standing for ``node`` (every field but ``moved_key``), still empty and without its reference.

    ``preserved`` may still be filling (a deep walk fills it from its explicit
    stack), so the marker's fields are written by ``settle``.
    """
    return Pending({}, node, moved_key, preserved, job)


def _fill_marker(pending: Pending) -> dict[str, Any]:
    marker = pending.marker
    marker.update(pending.preserved)
    if not marker.keys().isdisjoint(MARKER_OWNED_KEYS):
        stash = {key: marker.pop(key) for key in ESCAPE_ORDER if key in marker}
        marker[FORMAT_KEY] = ESCAPE_FORMAT
        marker[ESCAPED_KEYS] = stash
    marker[MARKER_KEY] = True
    if pending.job.kind == 'text':
        marker[TEXT_KEY] = True
    return marker


def settle(pendings: Iterable[Pending]) -> None:
    """Give every waiting marker its reference, or turn it back into the inline dict.

    A payload stays inline when it has no URI (not canonical base64) or when
    the dict's own ``uri`` equals it (a reader would take that field for the
    marker's mirror and drop it).
    """
    for pending in pendings:
        job = pending.job
        uri = job.uri
        node = pending.node
        if uri is None or node.get('uri') == uri:
            _revert(pending)
            continue
        marker = _fill_marker(pending)
        if job.urlsafe and job.kind != 'text':
            marker[URLSAFE_KEY] = URLSAFE_STAMP
        marker[URI_KEY] = uri
        if 'uri' not in node:
            marker['uri'] = uri


def _revert(pending: Pending) -> None:
    """Turn a marker back into the inline dict it replaced, in place (it is already in the tree)."""
    node = pending.node
    moved = pending.moved_key
    if pending.emptied:
        source = pending.job.source
        # pydantic serialises bytes as URL-safe base64 in JSON mode.
        payload: object = encode_base64(source, urlsafe=True) if isinstance(source, bytes) else source
    else:
        payload = node[moved]
    inline = {key: (payload if key == moved else pending.preserved[key]) for key in node}
    marker = pending.marker
    marker.clear()
    marker.update(wrap_literal(inline) if needs_literal_wrap(node) else inline)
