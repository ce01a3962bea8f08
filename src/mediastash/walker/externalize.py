"""``externalize_media``: move large payloads of a JSON tree to a media store, leave markers.

Two phases. A synchronous pass copies the tree, recognises payloads, answers
the ones the known-blob cache already holds, and groups the rest by content
(identical payloads in one tree are stored once). Then the store calls for the
distinct payloads run concurrently under a bound, and each one's URI is
written into the markers that wait for it. No await happens per JSON node.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from mediastash.codec import decode_canonical_base64, is_urlsafe_alphabet, max_decoded_size, text_to_bytes
from mediastash.context import MediaContext
from mediastash.known_blobs import KnownBlobCache, PayloadKind, fingerprint
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
from mediastash.stores.protocols import MediaStore
from mediastash.walker._common import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_THRESHOLD_BYTES,
    NotJSON,
    TreeCopier,
    check_concurrency,
    check_threshold,
    in_thread_if_large,
    not_json_error,
    run_all,
    select_cache,
)

__all__ = ['AmbiguousReference', 'StoredPayload', 'externalize_media', 'externalize_with_stored']


@dataclass(slots=True)
class _Pending:
    """A marker in the output tree still waiting for its URI."""

    marker: dict[str, Any]
    node: dict[str, Any]
    moved_key: str
    preserved: dict[str, Any]


@dataclass(slots=True)
class _Job:
    """One distinct payload to store, and every marker that refers to it."""

    kind: PayloadKind
    source: str
    fp: int
    size: int
    urlsafe: bool
    media_type: str | None
    waiting: list[_Pending] = field(default_factory=list)


class _Externalizer(TreeCopier):
    def __init__(self, threshold: int, cache: KnownBlobCache | None) -> None:
        self.threshold = threshold
        self.cache = cache
        self.jobs: dict[tuple[PayloadKind, int], list[_Job]] = {}
        self.job_count = 0

    # -- the synchronous copy ------------------------------------------------------------

    def walk_dict(self, node: dict[str, Any]) -> dict[str, Any]:
        kind = node.get('kind')
        if kind == 'binary' and isinstance(data := node.get('data'), str):
            marker = self.binary(node, data)
            if marker is not None:
                return marker
        elif isinstance(content := node.get('content'), str) and (
            isinstance(node.get('part_kind'), str) or kind in TEXT_CONTENT_KINDS
        ):
            marker = self.text(node, content)
            if marker is not None:
                return marker
        out = self.copy_fields(node)
        if MARKER_KEY in node or LITERAL_KEY in node:
            return wrap_literal(out)
        return out

    def copy_except(self, node: dict[str, Any], moved_key: str) -> dict[str, Any]:
        """Walked copy of every field but the one whose payload moves to the store."""
        return self.copy_fields({key: value for key, value in node.items() if key != moved_key})

    # -- payload recognition -------------------------------------------------------------

    def binary(self, node: dict[str, Any], data: str) -> dict[str, Any] | None:
        length = len(data)
        if max_decoded_size(length) < self.threshold or length % 4 or not data.isascii():
            return None
        size = max_decoded_size(length) - (2 if data.endswith('==') else 1 if data.endswith('=') else 0)
        if size < self.threshold:
            return None
        media_type = node.get('media_type')
        if not isinstance(media_type, str):
            media_type = None
        return self.payload(node, 'data', 'base64', data, size, media_type)

    def text(self, node: dict[str, Any], content: str) -> dict[str, Any] | None:
        length = len(content)
        if length * 4 < self.threshold:
            return None
        size = length if content.isascii() else len(text_to_bytes(content))
        if size < self.threshold:
            return None
        return self.payload(node, 'content', 'text', content, size, TEXT_MEDIA_TYPE)

    def payload(
        self,
        node: dict[str, Any],
        moved_key: str,
        kind: PayloadKind,
        source: str,
        size: int,
        media_type: str | None,
    ) -> dict[str, Any] | None:
        """Marker for a payload big enough to move, or ``None`` to keep it inline.

        The cache and this walk's own jobs are consulted before the alphabet
        scan, so a payload seen before costs one fingerprint and one comparison.
        """
        fp = fingerprint(source)
        known = self.cache.lookup(kind, source, fp) if self.cache is not None else None
        job: _Job | None = None
        if known is not None:
            if node.get('uri') == known.uri:
                return None  # the dict's own `uri` would be mistaken for our mirror: keep it inline
            urlsafe = known.urlsafe
        else:
            bucket = self.jobs.get((kind, fp))
            if bucket is not None:
                job = next((j for j in bucket if j.source is source or j.source == source), None)
            if job is not None:
                urlsafe = job.urlsafe
            elif kind == 'base64':
                alphabet = is_urlsafe_alphabet(source)
                if alphabet is None:
                    return None
                urlsafe = alphabet
            else:
                urlsafe = False
        pending = self.marker_for(node, moved_key, kind, urlsafe)
        marker = pending.marker
        if known is not None:
            fill(pending, known.uri)
        elif job is not None:
            job.waiting.append(pending)
        else:
            self.jobs.setdefault((kind, fp), []).append(_Job(kind, source, fp, size, urlsafe, media_type, [pending]))
            self.job_count += 1
        return marker

    def marker_for(self, node: dict[str, Any], moved_key: str, kind: PayloadKind, urlsafe: bool) -> _Pending:
        """The marker replacing ``node`` (every field but ``moved_key`` walked), still without its URI."""
        preserved = self.copy_except(node, moved_key)
        marker = dict(preserved)
        if not marker.keys().isdisjoint(MARKER_OWNED_KEYS):
            stash = {key: marker.pop(key) for key in ESCAPE_ORDER if key in marker}
            marker[FORMAT_KEY] = ESCAPE_FORMAT
            marker[ESCAPED_KEYS] = stash
        marker[MARKER_KEY] = True
        if kind == 'text':
            marker[TEXT_KEY] = True
        elif urlsafe:
            marker[URLSAFE_KEY] = URLSAFE_STAMP
        return _Pending(marker, node, moved_key, preserved)


@dataclass(frozen=True, slots=True)
class StoredPayload:
    """A payload the caller already stored, standing for the emptied field of one dict of the tree."""

    moved_key: str
    text: bool
    urlsafe: bool
    uri: str


class AmbiguousReference(Exception):
    """Internal: a dict's own ``uri`` equals its payload's URI, so the payload must stay inline."""


class _PresetExternalizer(_Externalizer):
    """An externalizer told in advance which dicts (by identity) hold payloads already stored."""

    def __init__(self, threshold: int, cache: KnownBlobCache | None, stored: dict[int, StoredPayload]) -> None:
        super().__init__(threshold, cache)
        self.stored = stored

    def walk_dict(self, node: dict[str, Any]) -> dict[str, Any]:
        hit = self.stored.get(id(node))
        if hit is None:
            return super().walk_dict(node)
        if node.get('uri') == hit.uri:
            raise AmbiguousReference
        pending = self.marker_for(node, hit.moved_key, 'text' if hit.text else 'base64', hit.urlsafe)
        fill(pending, hit.uri)
        return pending.marker


async def externalize_with_stored(
    tree: object,
    stored: dict[int, StoredPayload],
    *,
    media_store: MediaStore,
    threshold_bytes: int,
    known_blobs: KnownBlobCache | bool,
    max_concurrency: int,
) -> Any:
    """``externalize_media`` over a tree whose payloads in ``stored`` were emptied and stored by the caller.

    Each dict whose ``id`` is a key of ``stored`` becomes exactly the marker
    ``externalize_media`` would write for it had the payload been in place;
    everything else is walked as usual. Raises ``AmbiguousReference`` when such
    a dict has its own ``uri`` equal to the payload's (the caller then uses the
    plain walk). ``tree`` must stay alive and unmodified during the call.
    """
    threshold = check_threshold(threshold_bytes)
    gate = asyncio.Semaphore(check_concurrency(max_concurrency))
    cache = select_cache(known_blobs, media_store)
    return await _run(_PresetExternalizer(threshold, cache, stored), tree, media_store, cache, gate)


def fill(pending: _Pending, uri: str) -> None:
    """Write the blob reference into a waiting marker (or put the payload back inline)."""
    node = pending.node
    if node.get('uri') == uri:
        revert(pending)
        return
    marker = pending.marker
    marker[URI_KEY] = uri
    if 'uri' not in node:
        marker['uri'] = uri


def revert(pending: _Pending) -> None:
    """Turn a marker back into the inline dict it replaced, in place (it is already in the tree)."""
    node = pending.node
    inline = {key: (node[key] if key == pending.moved_key else pending.preserved[key]) for key in node}
    marker = pending.marker
    marker.clear()
    marker.update(wrap_literal(inline) if needs_literal_wrap(node) else inline)


async def _store_job(job: _Job, store: MediaStore, cache: KnownBlobCache | None, gate: asyncio.Semaphore) -> None:
    async with gate:
        if job.kind == 'base64':
            decoded = await in_thread_if_large(job.size, decode_canonical_base64, job.source)
            if decoded is None:
                for pending in job.waiting:
                    revert(pending)
                return
            raw = decoded[0]
        else:
            raw = await in_thread_if_large(job.size, text_to_bytes, job.source)
        uri = await store.put(raw, context=MediaContext(media_type=job.media_type))
        del raw
    if not isinstance(uri, str):
        raise TypeError(f'{type(store).__name__}.put returned {type(uri).__name__}, expected a URI str')
    if cache is not None:
        cache.remember(job.kind, job.source, job.fp, uri, job.size, job.urlsafe)
    for pending in job.waiting:
        fill(pending, uri)


async def externalize_media(
    tree: object,
    *,
    media_store: MediaStore,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    known_blobs: KnownBlobCache | bool = True,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
) -> Any:
    """Return a copy of ``tree`` whose large payloads live in ``media_store``.

    ``tree`` is the JSON form of a message history
    (``ModelMessagesTypeAdapter.dump_python(messages, mode='json')``). Base64
    ``data`` of a ``kind == 'binary'`` dict decoding to at least
    ``threshold_bytes``, and string ``content`` of a message part or
    ``TextContent`` / ``StructuredContent`` of at least ``threshold_bytes``
    UTF-8 bytes, are stored and replaced by markers. The input is not mutated.

    ``known_blobs``: ``True`` uses the store's process-wide cache of payloads
    already stored (re-saving a history then costs no store call), ``False``
    disables it, or pass a ``KnownBlobCache``. ``max_concurrency`` bounds the
    store calls in flight. Raises ``TypeError`` for values that are not JSON.
    """
    threshold = check_threshold(threshold_bytes)
    gate = asyncio.Semaphore(check_concurrency(max_concurrency))
    cache = select_cache(known_blobs, media_store)
    return await _run(_Externalizer(threshold, cache), tree, media_store, cache, gate)


async def _run(
    walker: _Externalizer, tree: object, store: MediaStore, cache: KnownBlobCache | None, gate: asyncio.Semaphore
) -> Any:
    """The synchronous copy, then the store calls for the distinct payloads it found."""
    try:
        lean = walker.walk_other(tree)
    except NotJSON as error:
        raise not_json_error('externalize_media', tree, error) from None
    if walker.job_count:
        await run_all(_store_job(job, store, cache, gate) for bucket in walker.jobs.values() for job in bucket)
    return lean
