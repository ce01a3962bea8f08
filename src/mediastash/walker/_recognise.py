"""Payload recognition in JSON trees: what counts as a payload, and the one threshold rule.

``JsonPayloadFinder`` finds payload dicts while copying a JSON tree; sizes are
measured by the one threshold rule (``text_size``, ``binary_size``,
``canonical_json``). Typed messages of a framework are recognised by that
framework's integration with these same rules (``mediastash.walker.internal``
exports them), so the two input forms cannot drift. What happens to a payload
once found is ``_batch``'s job.

Structured payloads (a tool return's non-string JSON ``content``) are found in
the JSON form only; a typed walk dumps its messages and meets them there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import pydantic_core

from mediastash.codec import max_decoded_size, text_to_bytes
from mediastash.known_blobs import PayloadKind
from mediastash.markers import (
    JSON_FIELDS,
    LITERAL_KEY,
    MARKER_KEY,
    RESERVED_KEY_PREFIX,
    STRUCTURED_PART_KINDS,
    TEXT_CONTENT_KINDS,
    TEXT_MEDIA_TYPE,
    wrap_literal,
)
from mediastash.walker._common import TreeCopier

__all__ = [
    'CONTAINER_TYPES',
    'EMBEDDED_MARKERS',
    'Found',
    'JsonPayloadFinder',
    'binary_size',
    'canonical_json',
    'holds_payload_near_top',
    'parse_json',
    'payload_sizes',
    'text_size',
]


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


CONTAINER_TYPES: Final = (dict, list)
STRUCTURED_CONTENT_KIND: Final = 'structured-content'

EMBEDDED_MARKERS: Final = tuple(
    marker.encode()
    for marker in (
        '"kind":"binary"',
        '"kind":"text-content"',
        '"kind":"structured-content"',
        '"part_kind":',
        RESERVED_KEY_PREFIX,
    )
)
"""Text in a structured payload's JSON that may mean a payload or marker of its own: such a value is walked."""


_PAYLOAD_KINDS: Final = ('binary', 'text-content', 'structured-content')


def _is_payload_dict(node: Any) -> bool:
    return type(node) is dict and (
        node.get('kind') in _PAYLOAD_KINDS or 'part_kind' in node or MARKER_KEY in node or LITERAL_KEY in node
    )


def holds_payload_near_top(content: Any) -> bool:
    """Whether ``content``, or a value of it when it is a dict, is a payload or marker of its own.

    A cheap pre-check for the common case of a tool returning media (a
    ``BinaryContent``, or a dict of them) without serializing it; ``EMBEDDED_MARKERS``
    on the serialized JSON is the complete check.
    """
    if type(content) is not dict:
        return False
    return _is_payload_dict(content) or any(_is_payload_dict(value) for value in content.values())


def canonical_json(value: object) -> bytes | None:
    """The one encoding of a structured payload: compact JSON, UTF-8, keys in order; ``None`` when it has none.

    pydantic-core's serializer writes it (the one pydantic-ai's own JSON round
    trip uses); a string holding an unpaired surrogate, which it refuses, is
    written with ``\\u`` escapes instead (still a function of the value alone,
    so equal values always give equal bytes). A value neither can write
    exactly (an int past Python's digit limit) has none and stays inline.
    """
    try:
        return pydantic_core.to_json(value)
    except (ValueError, TypeError, RecursionError):
        pass
    try:
        return json.dumps(value, ensure_ascii=True, separators=(',', ':')).encode('ascii')
    except (ValueError, TypeError, RecursionError):
        return None


def parse_json(raw: bytes) -> Any:
    """A structured payload's value from its blob (``canonical_json`` reversed: same types, order, float bits)."""
    try:
        return pydantic_core.from_json(raw, cache_strings=False)
    except ValueError:
        return json.loads(raw)  # what pydantic-core does not read: escaped unpaired surrogates


# -- recognition: JSON trees -------------------------------------------------------------


Found = Callable[[dict[str, Any], str, PayloadKind, str, int, str | None, int], dict[str, Any] | None]
"""``found(node, moved_key, kind, source, size, media_type, depth)``: what replaces a payload dict
(``depth``: the containers above it), or ``None`` to copy it as data."""


class JsonPayloadFinder(TreeCopier):
    """A tree copy that recognises payload dicts and hands each to ``found``; the rule for JSON trees.

    A payload is a ``kind == 'binary'`` dict's base64 ``data``, or the string
    ``content`` of a message part (it has a ``part_kind``) or of
    ``TextContent`` / ``StructuredContent``, at or above ``threshold``. With
    ``structured``, so is a tool return's dict or list ``content`` whose
    ``canonical_json`` reaches ``threshold`` and holds no payload or marker of
    its own, and a ``StructuredContent``'s text and value together
    (``JSON_FIELDS``, as one JSON object; ``found_structured``). The check runs inline in ``walk_dict``
    because it runs for every dict of every history.
    """

    threshold: int
    found: Found
    """What replaces a payload dict; subclasses define it (see ``Found``)."""
    structured: bool = False
    json_only: bool = False
    """The tree is known to hold JSON types only (a pydantic JSON-mode dump): a structured payload is not re-checked."""

    def found_structured(
        self, node: dict[str, Any], raw: bytes, depth: int, fields: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        """What replaces ``node`` whose structured payload is ``raw``; ``None`` keeps it.

        ``fields`` empty: ``raw`` is a tool return's ``content``; else ``raw`` is
        the JSON object of those fields (a ``StructuredContent``).
        """
        return None

    def _structured(
        self, node: dict[str, Any], content: Any, depth: int, fields: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        """The replacement for a tool return with a structured payload, or ``None`` when its content is not one.

        Only a content large enough is walked here (the copy is dropped): that
        checks every value is JSON before it is stored (skipped for ``json_only`` trees). A content holding
        something the walk treats itself (a payload, a marker) is left to it.
        """
        if holds_payload_near_top(content):
            return None  # the common case of a content that is media (a BinaryContent), found without serializing it
        raw = canonical_json(content)
        if raw is None or len(raw) < self.threshold or any(marker in raw for marker in EMBEDDED_MARKERS):
            return None
        if not self.json_only:
            deferred = len(self._deferred)
            self.walk_other(content, depth + 1)
            if len(self._deferred) != deferred:
                del self._deferred[deferred:]  # nested too deep to check here: walked the ordinary way
                return None
        return self.found_structured(node, raw, depth, fields)

    def walk_dict(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        kind = node.get('kind')
        if (
            kind == STRUCTURED_CONTENT_KIND
            and self.structured
            and 'value' in node
            and isinstance(node.get('content'), str)
            and (replaced := self._structured(node, {f: node[f] for f in JSON_FIELDS}, depth, JSON_FIELDS)) is not None
        ):
            return replaced
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
        elif (
            self.structured
            and type(content) in CONTAINER_TYPES
            and node.get('part_kind') in STRUCTURED_PART_KINDS
            and (replaced := self._structured(node, content, depth)) is not None
        ):
            return replaced
        out = self.copy_fields(node, depth)
        if MARKER_KEY in node or LITERAL_KEY in node:  # needs_literal_wrap, inline
            return wrap_literal(out)
        return out


class _Sizes(JsonPayloadFinder):
    """Records the size of every payload it finds (each occurrence) and copies on."""

    def __init__(self, structured: bool) -> None:
        self.threshold = 1
        self.structured = structured
        self.sizes: list[int] = []
        self.found = lambda node, key, kind, source, size, media_type, depth: self._add(size)

    def _add(self, size: int) -> None:
        self.sizes.append(size)

    def found_structured(
        self, node: dict[str, Any], raw: bytes, depth: int, fields: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        self.sizes.append(len(raw))
        return self.copy_fields(node, depth)  # one payload: its text is not counted again


def payload_sizes(tree: object, *, structured: bool = True) -> list[int]:
    """The size of every payload of a JSON tree, each occurrence, as the walk measures it for its threshold.

    Decoded bytes for binary data, UTF-8 bytes for text, ``canonical_json``
    bytes for a structured payload (with ``structured``); empty payloads are
    left out. Raises what ``externalize_media`` raises for a tree that is not JSON.
    """
    finder = _Sizes(structured)
    finder.walk(tree)
    return finder.sizes
