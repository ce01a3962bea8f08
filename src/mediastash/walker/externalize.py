"""``externalize_media``: move large payloads of a JSON tree to a media store, leave markers.

Two phases. A synchronous pass copies the tree, recognises payloads, answers
the ones the known-blob cache already holds, and groups the rest by content
(identical payloads in one tree are stored once). Then the store calls for the
distinct payloads run concurrently under a bound, and each one's URI is
written into the markers that wait for it. No await happens per JSON node.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mediastash.known_blobs import KnownBlobCache, PayloadKind
from mediastash.markers import JSON_MEDIA_TYPE
from mediastash.stores.protocols import MediaStore
from mediastash.walker._batch import Job, PayloadBatch, Pending, new_marker, settle
from mediastash.walker._common import NotJSON, TooDeep, depth_error, not_json_error, select_cache
from mediastash.walker._options import DEFAULT_MAX_CONCURRENCY, DEFAULT_THRESHOLD_BYTES, WalkOptions, resolve_options
from mediastash.walker._recognise import JsonPayloadFinder

__all__ = ['externalize_emptied', 'externalize_media', 'externalize_with']

_log = logging.getLogger(__name__)


class _Externalizer(JsonPayloadFinder):
    """The synchronous copy: payloads go to ``batch``, their markers wait in ``pendings``."""

    def __init__(self, threshold: int, batch: PayloadBatch, structured: bool = False) -> None:
        self.threshold = threshold
        self.batch = batch
        self.structured = structured
        self.pendings: list[Pending] = []

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
        job = self.batch.add(kind, source, size, media_type)
        return None if job is None else self.wait(node, moved_key, job, depth)

    def found_structured(
        self, node: dict[str, Any], raw: bytes, depth: int, fields: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        job = self.batch.add('bytes', raw, len(raw), JSON_MEDIA_TYPE)
        return None if job is None else self.wait(node, 'content', job, depth, structured=True, fields=fields)

    def wait(
        self,
        node: dict[str, Any],
        moved_key: str,
        job: Job,
        depth: int,
        *,
        emptied: bool = False,
        structured: bool = False,
        fields: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """The marker for ``node``, registered to receive ``job``'s URI when the batch is flushed.

        ``fields``: every key a ``StructuredContent`` moves out (``moved_key`` among them).
        """
        moved = fields or (moved_key,)
        preserved = self.copy_fields({key: value for key, value in node.items() if key not in moved}, depth)
        pending = new_marker(node, moved_key, preserved, job)
        pending.emptied = emptied
        pending.structured = structured
        pending.fields = fields
        self.pendings.append(pending)
        return pending.marker


class _EmptiedExternalizer(_Externalizer):
    """For the typed path: ``emptied`` maps ``id()`` of dicts whose payload the caller already
    took out and added to the batch to ``(moved_key, job)``."""

    def __init__(
        self, threshold: int, batch: PayloadBatch, emptied: dict[int, tuple[str, Job]], structured: bool
    ) -> None:
        super().__init__(threshold, batch, structured)
        self.emptied = emptied
        self.json_only = True  # a pydantic JSON-mode dump: only JSON types

    def walk_dict(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        hit = self.emptied.get(id(node))
        if hit is not None:
            moved_key, job = hit
            # A part's ``content`` held as bytes is a tool return's JSON the typed pass took out.
            structured = moved_key == 'content' and job.kind == 'bytes'
            return self.wait(node, moved_key, job, depth, emptied=True, structured=structured)
        return super().walk_dict(node, depth)


async def _run(walker: _Externalizer, tree: object) -> Any:
    """The synchronous copy, one flush of the batch, then every marker settled."""
    started = time.perf_counter()
    lean = _walk(walker, tree, tree)
    await _flush_and_settle(walker, started)
    return lean


def _walk(walker: _Externalizer, tree: object, whole: object) -> Any:
    """``walker.walk(tree)``; errors name their place in ``whole`` (``tree`` or what holds it)."""
    try:
        return walker.walk(tree)
    except NotJSON as error:
        raise not_json_error('externalize_media', whole, error) from None
    except TooDeep as error:
        raise depth_error(whole, error) from None


async def _flush_and_settle(walker: _Externalizer, started: float) -> None:
    walked = time.perf_counter()
    batch = walker.batch
    await batch.flush()
    settle(walker.pendings)
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug(
            'externalize: %d payloads (%d distinct stored, %d re-checked with the store, the rest known); '
            'walk %.1f ms, store calls %.1f ms',
            len(walker.pendings),
            batch.stored,
            batch.rechecked,
            (walked - started) * 1000,
            (time.perf_counter() - walked) * 1000,
        )


async def externalize_emptied(
    trees: list[Any],
    batch: PayloadBatch,
    emptied: dict[int, tuple[str, Job]],
    threshold: int,
    *,
    structured: bool = False,
) -> tuple[list[Any], list[list[Job]]]:
    """The typed walk's seam (``_typed``): walk dumped messages whose payloads the caller already added to ``batch``.

    Each dict whose ``id`` is a key of ``emptied`` becomes exactly the marker
    ``externalize_media`` would write had the payload been in place; any other
    payload (structured ones too, with ``structured``) joins the same batch.
    One flush (with whatever else the caller added), then every marker is
    settled. Returns each tree's lean copy and the distinct jobs its markers
    wait for. ``trees`` must stay alive and unmodified during the call.
    """
    walker = _EmptiedExternalizer(threshold, batch, emptied, structured)
    leans: list[Any] = []
    jobs: list[list[Job]] = []
    started = time.perf_counter()
    for tree in trees:
        start = len(walker.pendings)
        leans.append(_walk(walker, [tree], trees)[0])  # in a list: depths as in ``trees``
        jobs.append(list({id(pending.job): pending.job for pending in walker.pendings[start:]}.values()))
    await _flush_and_settle(walker, started)
    return leans, jobs


async def externalize_media(
    tree: object,
    *,
    media_store: MediaStore,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    known_blobs: KnownBlobCache | bool = True,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    structured: bool | None = None,
    options: WalkOptions | None = None,
) -> Any:
    """Return a copy of ``tree`` whose large payloads live in ``media_store``.

    ``tree`` is the JSON form of a message history
    (``ModelMessagesTypeAdapter.dump_python(messages, mode='json')``). Base64
    ``data`` of a ``kind == 'binary'`` dict decoding to at least
    ``threshold_bytes``, and string ``content`` of a message part or
    ``TextContent`` / ``StructuredContent`` of at least ``threshold_bytes``
    UTF-8 bytes, are stored and replaced by markers. The input is not mutated.
    With ``structured=True`` (default off: the output stays what
    pydantic-ai-harness writes and reads) a tool return's dict or list
    ``content`` whose compact JSON reaches ``threshold_bytes`` is stored as
    one ``application/json`` blob behind a structured marker, which
    ``restore_media(..., structured=True)`` reads (``docs/marker-format.md``).

    ``known_blobs``: ``True`` uses the store's process-wide cache of payloads
    already stored (re-saving a history then costs no store call; entries
    older than the cache's trust age are re-checked in one batch), ``False``
    disables it, or pass a ``KnownBlobCache``. ``max_concurrency`` bounds the
    store calls in flight. ``options``: the settings as one
    ``WalkOptions`` instead (then leave the separate keywords out). Raises
    ``InvalidArgumentError`` for a bad setting, ``TypeError`` for values that
    are not JSON and ``TreeDepthError`` for a tree nested deeper than the
    recursion limit (at least 1,000 levels) or containing itself.
    """
    chosen = resolve_options(options, threshold_bytes, known_blobs, max_concurrency, structured)
    return await externalize_with(tree, media_store, chosen)


async def externalize_with(tree: object, media_store: MediaStore, options: WalkOptions) -> Any:
    """``externalize_media`` with its settings already checked (``structured=None`` counts as off)."""
    cache = select_cache(options.known_blobs, media_store)
    batch = PayloadBatch(media_store, cache, options.max_concurrency)
    return await _run(_Externalizer(options.threshold_bytes, batch, options.structured is True), tree)
