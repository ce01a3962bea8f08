"""``restore_media``: put every externalized payload of a lean tree back, byte for byte.

One synchronous pass copies the tree, unwraps literal wrappers, parses the
markers (dicts ``markers.marker_shape`` accepts; any other dict, even one
flagged with the marker key, is caller data and only walked) and groups them
by URI. Each distinct URI is then fetched once,
concurrently under a bound, checked against its sha256 (unless the store
already does that), converted once per form (text, standard or URL-safe
base64), and written into every dict that waits for it. A structured
marker's JSON is parsed once per marker, so no two restored dicts share a
container.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from mediastash._tasks import run_all
from mediastash.codec import bytes_to_text, encode_base64
from mediastash.context import MediaContext
from mediastash.errors import MalformedMarker, UnsupportedMarkerFormat
from mediastash.known_blobs import KnownBlobCache, PayloadKind, fingerprint, fingerprint_bytes
from mediastash.markers import (
    ESCAPED_KEYS,
    FORMAT_KEY,
    JSON_FIELDS,
    JSON_FIELDS_FORMAT,
    JSON_MEDIA_TYPE,
    MARKER_KEY,
    TEXT_KEY,
    TEXT_MEDIA_TYPE,
    URI_KEY,
    URLSAFE_KEY,
    URLSAFE_STAMP,
    literal_payload,
    marker_shape,
    marker_stash,
)
from mediastash.stores._blob import check_digest
from mediastash.stores.capabilities import capabilities_of
from mediastash.stores.protocols import MediaStore
from mediastash.uri import is_media_uri
from mediastash.walker._batch import urlsafe_alphabet_used
from mediastash.walker._common import (
    NotJSON,
    TooDeep,
    TreeCopier,
    depth_error,
    find_path,
    in_thread_if_large,
    not_json_error,
    select_cache,
    with_path,
)
from mediastash.walker._options import DEFAULT_MAX_CONCURRENCY, WalkOptions, resolve_options
from mediastash.walker._recognise import parse_json

__all__ = ['restore_collecting', 'restore_media']

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Wanted:
    """Every dict waiting for one URI, by the form it needs the payload in."""

    uri: str
    media_type: str | None
    text_marker: object = None
    """The first text marker (input dict) waiting for ``uri``: where an undecodable blob is reported."""
    json_marker: object = None
    """The first structured marker (input dict) waiting for ``uri``: where a blob that is not JSON is reported."""
    text: list[dict[str, Any]] = field(default_factory=list)
    standard: list[dict[str, Any]] = field(default_factory=list)
    urlsafe: list[dict[str, Any]] = field(default_factory=list)
    json: list[dict[str, Any]] = field(default_factory=list)
    fields: list[dict[str, Any]] = field(default_factory=list)
    """Structured markers of ``StructuredContent``: the blob is a JSON object of the fields they moved."""

    def count(self) -> int:
        return len(self.text) + len(self.standard) + len(self.urlsafe) + len(self.json) + len(self.fields)


class _NotText(Exception):
    """Internal: a text marker's blob is not UTF-8 (or a structured marker's not JSON). Made ``MalformedMarker``."""

    def __init__(self, wanted: _Wanted, error: UnicodeDecodeError, size: int) -> None:
        self.marker = wanted.text_marker
        self.reason = (
            f'it is a text marker, but the blob it refers to, {wanted.uri}, is not UTF-8 text '
            f'({size} bytes, {error.reason} at byte {error.start})'
        )


class _NotJSONBlob(_NotText):
    def __init__(self, wanted: _Wanted, size: int) -> None:
        self.marker = wanted.json_marker
        self.reason = f'it is a structured marker, but the blob it refers to, {wanted.uri}, is not JSON ({size} bytes)'


class _MarkerError(Exception):
    def __init__(self, error: UnsupportedMarkerFormat | MalformedMarker, node: object) -> None:
        self.error = error
        self.node = node


class _Restorer(TreeCopier):
    def __init__(self, structured: bool) -> None:
        self.wanted: dict[str, _Wanted] = {}
        self.structured = structured

    def walk_dict(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        if len(node) == 2:
            try:
                payload = literal_payload(node)
            except UnsupportedMarkerFormat as error:
                raise _MarkerError(error, node) from None
            if payload is not None:
                return self.copy_fields(payload, depth)
        if node.get(MARKER_KEY) is True:
            shape = marker_shape(node)
            if shape is not None:
                try:
                    return self.marker(node, shape == 'text', depth)
                except (UnsupportedMarkerFormat, MalformedMarker) as error:
                    raise _MarkerError(error, node) from None
        return self.copy_fields(node, depth)

    def marker(self, node: dict[str, Any], is_text: bool, depth: int) -> dict[str, Any]:
        dropped = {MARKER_KEY, TEXT_KEY}
        urlsafe = node.get(URLSAFE_KEY) == URLSAFE_STAMP
        if urlsafe:
            dropped.add(URLSAFE_KEY)
        stash, encoding = marker_stash(node, structured=self.structured)
        is_json = encoding is not None
        if stash is not None or is_json:
            dropped.update((FORMAT_KEY, ESCAPED_KEYS))
        if URI_KEY in node:
            uri = node[URI_KEY]
            dropped.add(URI_KEY)
            if node.get('uri') == uri:
                dropped.add('uri')
        else:
            uri = node.get('uri')
            dropped.add('uri')
        if not isinstance(uri, str):
            raise MalformedMarker(f'the blob reference must be a string, got {type(uri).__name__}')
        kept = {key: value for key, value in node.items() if key not in dropped}
        if stash is not None:
            kept.update(stash)  # the order ``dict.update`` of the walked stash gave
        restored = self.copy_fields(kept, depth)
        wanted = self.wanted.get(uri)
        if wanted is None:
            if is_json:
                media_type: str | None = JSON_MEDIA_TYPE
            elif is_text:
                media_type = TEXT_MEDIA_TYPE
            else:
                value = node.get('media_type')
                media_type = value if isinstance(value, str) else None
            wanted = self.wanted[uri] = _Wanted(uri, media_type)
        if is_json:
            if wanted.json_marker is None:
                wanted.json_marker = node
            (wanted.fields if encoding == JSON_FIELDS_FORMAT else wanted.json).append(restored)
        elif is_text:
            if wanted.text_marker is None:
                wanted.text_marker = node
            wanted.text.append(restored)
        elif urlsafe:
            wanted.urlsafe.append(restored)
        else:
            wanted.standard.append(restored)
        return restored


def _from_cache(wanted: _Wanted, cache: KnownBlobCache, raw_binary: bool = False) -> bool:
    """Fill ``wanted`` from cached sources when every form it needs is cached."""
    forms: list[tuple[list[dict[str, Any]], str, str | bytes]] = []
    if wanted.json or wanted.fields:
        entry = cache.by_uri(wanted.uri, 'bytes')
        if entry is None or not isinstance(entry.source, bytes):
            return False
        try:
            _put_json(wanted, entry.source)
        except _NotJSONBlob:
            return False  # the store's copy decides (and reports)
        return _from_cache_plain(wanted, cache, raw_binary, forms)
    return _from_cache_plain(wanted, cache, raw_binary, forms)


def _from_cache_plain(
    wanted: _Wanted, cache: KnownBlobCache, raw_binary: bool, forms: list[tuple[list[dict[str, Any]], str, str | bytes]]
) -> bool:
    """The text and binary forms of ``_from_cache``."""
    if raw_binary:
        if wanted.text:
            entry = cache.by_uri(wanted.uri, 'text')
            if entry is None:
                return False
            forms.append((wanted.text, 'content', entry.source))
        if wanted.standard or wanted.urlsafe:
            entry = cache.by_uri(wanted.uri, 'bytes')
            if entry is None:
                return False
            forms.append((wanted.standard + wanted.urlsafe, 'data', entry.source))
        for waiting, key, source in forms:
            for restored in waiting:
                restored[key] = source
        return True
    for waiting, kind, urlsafe in ((wanted.text, 'text', False), (wanted.standard, 'base64', False)):
        if waiting:
            entry = cache.by_uri(wanted.uri, 'text' if kind == 'text' else 'base64', urlsafe)
            if entry is None:
                return False
            forms.append((waiting, 'content' if kind == 'text' else 'data', entry.source))
    if wanted.urlsafe:
        entry = cache.by_uri(wanted.uri, 'base64', True)
        if entry is None:
            return False
        forms.append((wanted.urlsafe, 'data', entry.source))
    for waiting, key, source in forms:
        for restored in waiting:
            restored[key] = source
    return True


async def _fetch(
    wanted: _Wanted,
    store: MediaStore,
    verify: bool,
    cache: KnownBlobCache | None,
    gate: asyncio.Semaphore,
    raw_binary: bool = False,
) -> None:
    if cache is not None and _from_cache(wanted, cache, raw_binary):
        return
    async with gate:
        raw = await store.get(wanted.uri, context=MediaContext(media_type=wanted.media_type))
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise TypeError(f'{type(store).__name__}.get returned {type(raw).__name__}, expected bytes')
        raw = bytes(raw)
        size = len(raw)
        if verify and is_media_uri(wanted.uri):
            await in_thread_if_large(size, _check, wanted.uri[-64:], raw, type(store).__name__)
        forms: list[tuple[list[dict[str, Any]], str, str | bytes, PayloadKind, bool]] = []
        if wanted.json or wanted.fields:
            await in_thread_if_large(size * (len(wanted.json) + len(wanted.fields)), _put_json, wanted, raw)
            if not (raw_binary and (wanted.standard or wanted.urlsafe)) and cache is not None:
                # Remembered for the next save, with the flag a save of these bytes computes (shared with media).
                forms.append(([], 'content', raw, 'bytes', urlsafe_alphabet_used(raw)))
        if wanted.text:
            try:
                text = bytes_to_text(raw)
            except UnicodeDecodeError as error:
                raise _NotText(wanted, error, size) from None
            forms.append((wanted.text, 'content', text, 'text', False))
        if raw_binary:
            # Raw bytes for both alphabets: the typed path validates them as they are (no base64 round trip).
            if wanted.standard or wanted.urlsafe:
                # The cache entry's flag must be what a save of these bytes computes (a re-save's marker stamp).
                # The scan stops at the first URL-safe character: ordinary media cost one small slice.
                stamp = cache is not None and urlsafe_alphabet_used(raw)
                forms.append((wanted.standard + wanted.urlsafe, 'data', raw, 'bytes', stamp))
        else:
            if wanted.standard:
                encoded = await in_thread_if_large(size, _encode, raw, False)
                forms.append((wanted.standard, 'data', encoded, 'base64', False))
            if wanted.urlsafe:
                encoded = await in_thread_if_large(size, _encode, raw, True)
                forms.append((wanted.urlsafe, 'data', encoded, 'base64', True))
    for waiting, key, source, kind, urlsafe in forms:
        for restored in waiting:
            restored[key] = source
        if cache is not None:
            fp = fingerprint_bytes(source) if isinstance(source, bytes) else fingerprint(source)
            cache.remember(kind, source, fp, wanted.uri, size, urlsafe, written=False)


def _put_json(wanted: _Wanted, raw: bytes) -> None:
    """Write a structured blob's value into every marker waiting for it, parsed once for each (no shared containers)."""
    try:
        for restored in wanted.json:
            restored['content'] = parse_json(raw)
        for restored in wanted.fields:
            values = parse_json(raw)
            if not isinstance(values, dict) or tuple(values) != JSON_FIELDS:
                raise ValueError('not the JSON object of the moved fields')
            restored.update(values)
    except ValueError:
        raise _NotJSONBlob(wanted, len(raw)) from None


def _check(digest: str, raw: bytes, where: str) -> None:
    check_digest(digest, raw, where=where)


def _encode(raw: bytes, urlsafe: bool) -> str:
    return encode_base64(raw, urlsafe=urlsafe)


async def restore_media(
    tree: object,
    *,
    media_store: MediaStore,
    known_blobs: KnownBlobCache | bool = True,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    structured: bool | None = None,
    options: WalkOptions | None = None,
) -> Any:
    """Return a copy of ``tree`` with every marker replaced by the payload it stands for.

    Reads markers written by mediastash and by pydantic-ai-harness. A dict
    is a marker only with the marker flag, a reference and the shape of the
    node its payload left (see ``docs/marker-format.md``); any other dict is
    data and comes back as it is. Each distinct URI is fetched once; bytes are
    checked against the URI's sha256 (stores with ``verifies_reads`` already
    do it). ``known_blobs=True`` serves payloads this process stored or
    restored recently from memory. ``structured=True`` also reads
    structured markers (a tool return's JSON ``content``, written by
    ``externalize_media(..., structured=True)``, ``OffloadingStepStore`` and
    ``OffloadingKV``); off by default, where such a marker is refused as
    pydantic-ai-harness refuses it. ``options``: the settings as one
    ``WalkOptions`` instead of the separate keywords (its ``threshold_bytes``
    is not used here). Raises ``InvalidArgumentError`` for a bad setting,
    ``UnsupportedMarkerFormat`` for a marker from a newer format (or a structured one, unasked),
    ``MalformedMarker`` for a marker whose reference is not a string, a text marker whose blob is
    not UTF-8 or a structured marker whose blob is not JSON,
    ``MediaNotFoundError`` for a missing blob, ``TreeDepthError`` for a tree
    nested deeper than the recursion limit (at least 1,000 levels) or
    containing itself, and ``TypeError`` for values that are not JSON.
    """
    chosen = resolve_options(options, known_blobs=known_blobs, max_concurrency=max_concurrency, structured=structured)
    restored, _ = await restore_collecting(tree, media_store, chosen)
    return restored


async def restore_collecting(
    tree: object, media_store: MediaStore, options: WalkOptions, *, raw_binary: bool = False
) -> tuple[Any, list[tuple[dict[str, Any], str]]]:
    """``restore_media`` that also returns every ``(dict, key)`` it wrote a text or binary payload into.

    Structured markers are read when ``options.structured`` is ``True``. With
    ``raw_binary=True`` binary payloads are written as the verified raw
    ``bytes`` instead of base64 text (for validating straight into typed
    ``BinaryContent``). Same errors as ``restore_media``.
    """
    gate = asyncio.Semaphore(options.max_concurrency)
    cache = select_cache(options.known_blobs, media_store)
    walker = _Restorer(options.structured is True)
    started = time.perf_counter()
    try:
        restored = walker.walk(tree)
    except NotJSON as error:
        raise not_json_error('restore_media', tree, error) from None
    except TooDeep as error:
        raise depth_error(tree, error) from None
    except _MarkerError as error:
        raise with_path(error.error, tree, error.node) from None
    slots: list[tuple[dict[str, Any], str]] = []
    if walker.wanted:
        verify = not capabilities_of(media_store).verifies_reads
        try:
            await run_all(
                _fetch(wanted, media_store, verify, cache, gate, raw_binary) for wanted in walker.wanted.values()
            )
        except _NotText as error:
            raise MalformedMarker(error.reason, path=find_path(tree, error.marker)) from None
        if _log.isEnabledFor(logging.DEBUG):
            markers = sum(w.count() for w in walker.wanted.values())
            _log.debug(
                'restore: %d markers, %d distinct blobs, %.1f ms',
                markers,
                len(walker.wanted),
                (time.perf_counter() - started) * 1000,
            )
        for wanted in walker.wanted.values():
            slots.extend((restored_dict, 'content') for restored_dict in wanted.text)
            slots.extend((restored_dict, 'data') for restored_dict in wanted.standard)
            slots.extend((restored_dict, 'data') for restored_dict in wanted.urlsafe)
    return restored, slots
