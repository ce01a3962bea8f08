"""The job batch: the one route from a found payload to the store, and the markers waiting for it.

Both input forms (JSON trees, see ``_recognise``; typed messages, found by their integration) feed one
``PayloadBatch``, which decides once per distinct payload whether it is
already stored (known-blob cache, re-checked with the store when older than
the cache's trust age), must be stored, or must stay inline, and runs the
store calls concurrently under one bound. Markers wait for their job and are
settled after the flush (``settle``): that is the only place a payload is put
back inline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import pybase64

from mediastash._tasks import run_all
from mediastash.codec import decode_canonical_base64, encode_base64, is_urlsafe_alphabet, text_to_bytes
from mediastash.context import MediaContext
from mediastash.known_blobs import KnownBlob, KnownBlobCache, PayloadKind, fingerprint, fingerprint_bytes
from mediastash.markers import (
    ESCAPE_FORMAT,
    ESCAPE_ORDER,
    ESCAPED_KEYS,
    FORMAT_KEY,
    JSON_ESCAPE_FORMAT,
    JSON_FIELDS_FORMAT,
    JSON_FORMAT,
    MARKER_KEY,
    MARKER_OWNED_KEYS,
    TEXT_KEY,
    URI_KEY,
    URLSAFE_KEY,
    URLSAFE_STAMP,
    needs_literal_wrap,
    wrap_literal,
)
from mediastash.stores.protocols import MediaStore, confirm_in
from mediastash.walker._common import in_thread_if_large
from mediastash.walker._recognise import parse_json

__all__ = ['Job', 'PayloadBatch', 'Pending', 'new_marker', 'settle', 'urlsafe_alphabet_used']

_URLSAFE_PROBE: Final = 3 << 16
"""Bytes encoded per step when checking whether URL-safe base64 of a payload uses ``-`` or ``_``."""

_URLSAFE_IN_THREAD: Final = 1 << 22


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
    ``structured``: the moved ``content`` is JSON (the job holds its
    ``canonical_json``), so the marker is a structured one; ``fields``: for a
    ``StructuredContent``, the keys moved out together (the job holds their
    JSON object).
    """

    marker: dict[str, Any]
    node: dict[str, Any]
    moved_key: str
    preserved: dict[str, Any]
    job: Job
    emptied: bool = False
    structured: bool = False
    fields: tuple[str, ...] = ()


def new_marker(node: dict[str, Any], moved_key: str, preserved: dict[str, Any], job: Job) -> Pending:
    """The marker standing for ``node`` (every field but ``moved_key``), still empty and without its reference.

    ``preserved`` may still be filling (a deep walk fills it from its explicit
    stack), so the marker's fields are written by ``settle``.
    """
    return Pending({}, node, moved_key, preserved, job)


def _fill_marker(pending: Pending) -> dict[str, Any]:
    marker = pending.marker
    marker.update(pending.preserved)
    escaped: dict[str, Any] | None = None
    if not marker.keys().isdisjoint(MARKER_OWNED_KEYS):
        escaped = {key: marker.pop(key) for key in ESCAPE_ORDER if key in marker}
    if pending.structured:
        # Never an empty stash: readers of version 1 must meet a stash they cannot read and refuse.
        stash: dict[str, Any] = {FORMAT_KEY: JSON_FIELDS_FORMAT if pending.fields else JSON_FORMAT}
        if escaped:
            stash[ESCAPED_KEYS] = escaped
        marker[FORMAT_KEY] = JSON_ESCAPE_FORMAT
        marker[ESCAPED_KEYS] = stash
    elif escaped:
        marker[FORMAT_KEY] = ESCAPE_FORMAT
        marker[ESCAPED_KEYS] = escaped
    marker[MARKER_KEY] = True
    if pending.job.kind == 'text' or pending.structured:
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
        if job.urlsafe and job.kind != 'text' and not pending.structured:
            marker[URLSAFE_KEY] = URLSAFE_STAMP
        marker[URI_KEY] = uri
        if 'uri' not in node:
            marker['uri'] = uri


def _revert(pending: Pending) -> None:
    """Turn a marker back into the inline dict it replaced, in place (it is already in the tree)."""
    node = pending.node
    moved = pending.moved_key
    if pending.structured:
        source = pending.job.source
        assert isinstance(source, bytes)
        payload: object = parse_json(source)  # a copy: the output never shares containers with the input
    elif pending.emptied:
        source = pending.job.source
        # pydantic serialises bytes as URL-safe base64 in JSON mode.
        payload = encode_base64(source, urlsafe=True) if isinstance(source, bytes) else source
    else:
        payload = node[moved]
    if pending.fields:
        assert isinstance(payload, dict)
        inline = {key: (payload[key] if key in pending.fields else pending.preserved[key]) for key in node}
    else:
        inline = {key: (payload if key == moved else pending.preserved[key]) for key in node}
    marker = pending.marker
    marker.clear()
    marker.update(wrap_literal(inline) if needs_literal_wrap(node) else inline)
