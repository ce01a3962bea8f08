"""The marker format: every reserved key, version stamp and marker shape in one place.

The format is shared with pydantic-ai-harness (snapshots written by either
library restore with the other); ``docs/marker-format.md`` describes it in
prose. This module only names things and answers small questions about a
single dict; the walks live in ``mediastash.walker``.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

from mediastash.errors import UnsupportedMarkerFormat

__all__ = [
    'ESCAPED_KEYS',
    'ESCAPE_FORMAT',
    'ESCAPE_FORMAT_PREFIX',
    'JSON_ESCAPE_FORMAT',
    'JSON_FIELDS',
    'JSON_FIELDS_FORMAT',
    'JSON_FORMAT',
    'JSON_FORMAT_PREFIX',
    'JSON_MEDIA_TYPE',
    'STRUCTURED_PART_KINDS',
    'FORMAT_KEY',
    'LITERAL_FORMAT',
    'LITERAL_FORMAT_PREFIX',
    'LITERAL_KEY',
    'MARKER_KEY',
    'MARKER_OWNED_KEYS',
    'RESERVED_KEY_PREFIX',
    'TEXT_CONTENT_KINDS',
    'TEXT_KEY',
    'TEXT_MEDIA_TYPE',
    'URI_KEY',
    'URLSAFE_KEY',
    'URLSAFE_STAMP',
    'MarkerShape',
    'MarkerStash',
    'escape_stash_of',
    'is_structured_marker',
    'json_stash',
    'literal_payload',
    'marker_shape',
    'marker_stash',
    'needs_literal_wrap',
    'wrap_literal',
]

MARKER_KEY: Final = '__harness_external_media__'
"""``True`` on every marker: this dict stands for a payload held in a media store."""
RESERVED_KEY_PREFIX: Final = MARKER_KEY[: MARKER_KEY.index('external_') + len('external_')]
"""Every reserved marker key starts with this: text without it holds no marker (a cheap pre-check)."""

TEXT_KEY: Final = '__harness_external_text__'
"""``True`` on a text marker (``content`` moved out); absent on a binary marker (``data`` moved out)."""

URI_KEY: Final = '__harness_external_uri__'
"""Authoritative blob reference. A plain ``uri`` mirror is added when the original dict had no ``uri``."""

URLSAFE_KEY: Final = '__harness_external_urlsafe__'
URLSAFE_STAMP: Final = 'base64-urlsafe-v1'
"""A binary marker whose ``data`` used the URL-safe alphabet carries ``URLSAFE_KEY: URLSAFE_STAMP``."""

FORMAT_KEY: Final = '__harness_external_marker_format__'
ESCAPED_KEYS: Final = '__harness_external_escaped_keys__'
ESCAPE_FORMAT_PREFIX: Final = 'escaped-keys-v'
ESCAPE_FORMAT: Final = 'escaped-keys-v1'
"""A caller's own values for the keys in ``MARKER_OWNED_KEYS`` are kept in ``ESCAPED_KEYS``,
with ``FORMAT_KEY: ESCAPE_FORMAT`` stamped beside them."""

JSON_ESCAPE_FORMAT: Final = 'escaped-keys-v2'
"""Stamp of a structured (JSON) marker: a text-shaped marker whose moved ``content`` was JSON, not a string.

Its stash is ``{FORMAT_KEY: JSON_FORMAT}`` plus, when the caller's dict had
marker-owned keys, ``{ESCAPED_KEYS: <their values>}``. It is never empty, so a
reader of version 1 (pydantic-ai-harness 0.62, mediastash before structured
payloads) sees a stash of a version it does not know and refuses the marker."""
JSON_FORMAT_PREFIX: Final = 'json-v'
JSON_FORMAT: Final = 'json-v1'
"""Encoding of a structured payload's blob: compact JSON, UTF-8, keys in their order (see ``docs/marker-format.md``)."""
JSON_FIELDS_FORMAT: Final = 'json-fields-v1'
"""Encoding of a ``StructuredContent``'s blob: the JSON object of its moved fields, ``JSON_FIELDS``, in that order."""
JSON_FIELDS: Final = ('content', 'value')
"""What a ``StructuredContent`` (``kind == 'structured-content'``) moves: its text and its value, as one blob."""
JSON_MEDIA_TYPE: Final = 'application/json'
"""Media type recorded for a structured payload's blob."""
STRUCTURED_PART_KINDS: Final = ('tool-return', 'builtin-tool-return')
"""``part_kind`` of the parts whose non-string ``content`` is a structured payload."""

LITERAL_KEY: Final = '__harness_external_literal__'
LITERAL_FORMAT_PREFIX: Final = 'literal-v'
LITERAL_FORMAT: Final = 'literal-v1'
"""A caller dict carrying ``MARKER_KEY`` or ``LITERAL_KEY`` is written as
``{LITERAL_KEY: <dict>, FORMAT_KEY: LITERAL_FORMAT}`` so it is never read as a marker."""

MARKER_OWNED_KEYS: Final = frozenset({MARKER_KEY, TEXT_KEY, URI_KEY, ESCAPED_KEYS, FORMAT_KEY, URLSAFE_KEY})
"""Keys a marker writes itself; a caller's values for them must be escaped first."""

ESCAPE_ORDER: Final = (MARKER_KEY, TEXT_KEY, URI_KEY, ESCAPED_KEYS, FORMAT_KEY, URLSAFE_KEY)
"""Order in which escaped keys are stashed (kept stable so output is deterministic)."""

TEXT_CONTENT_KINDS: Final = ('text-content', 'structured-content')
"""``kind`` values of ``TextContent`` / ``StructuredContent``, which carry ``content`` but no ``part_kind``."""

TEXT_MEDIA_TYPE: Final = 'text/plain'
"""Media type recorded for externalized text."""

_LITERAL_SHAPE: Final = frozenset({LITERAL_KEY, FORMAT_KEY})

MarkerShape = Literal['binary', 'text']
"""Which payload a marker stands for: base64 ``data`` or string ``content``."""


def marker_shape(node: dict[str, object]) -> MarkerShape | None:
    """Which marker ``node`` is, or ``None`` when it is caller data.

    Every marker keeps the shape of the node its payload left, so the flag
    alone is not enough: ``MARKER_KEY`` must be ``True``, a reference
    (``URI_KEY``, or a plain ``uri`` in older markers) must be present, and
    the moved key must be gone from a node that still looks like its source.
    A text marker (``TEXT_KEY: True``) has no ``content`` and a string
    ``part_kind`` or a ``kind`` in ``TEXT_CONTENT_KINDS``; a binary marker has
    no ``data`` and ``kind == 'binary'``. The caller's ``kind`` / ``part_kind``
    are never escaped, so the shape is always on the marker itself.
    """
    if node.get(MARKER_KEY) is not True or (URI_KEY not in node and 'uri' not in node):
        return None
    if node.get(TEXT_KEY) is True:
        if 'content' in node:
            return None
        # A tuple, compared by equality: an unhashable caller ``kind`` is a miss, not a TypeError.
        if isinstance(node.get('part_kind'), str) or node.get('kind') in TEXT_CONTENT_KINDS:
            return 'text'
        return None
    if 'data' in node or node.get('kind') != 'binary':
        return None
    return 'binary'


def is_structured_marker(node: dict[str, object]) -> bool:
    """Whether a text-shaped marker says its payload is JSON (the stamp only; never raises)."""
    return node.get(FORMAT_KEY) == JSON_ESCAPE_FORMAT and node.get(TEXT_KEY) is True


def needs_literal_wrap(node: dict[str, object]) -> bool:
    """A caller dict that is left inline must be wrapped when it carries a trigger key."""
    return MARKER_KEY in node or LITERAL_KEY in node


def wrap_literal(node: dict[str, object]) -> dict[str, object]:
    """The literal wrapper around an (already walked) caller dict."""
    return {LITERAL_KEY: node, FORMAT_KEY: LITERAL_FORMAT}


def literal_payload(node: dict[str, object]) -> dict[str, object] | None:
    """The caller dict inside a literal wrapper, or ``None`` when ``node`` is not one.

    A wrapper is exactly the two keys with a stamp from the literal namespace
    and a dict payload; a stamp in that namespace we do not know raises
    ``UnsupportedMarkerFormat`` instead of handing the wrapper back as data.
    """
    if len(node) != 2 or node.keys() != _LITERAL_SHAPE:
        return None
    stamp = node[FORMAT_KEY]
    payload = node[LITERAL_KEY]
    if not isinstance(stamp, str) or not stamp.startswith(LITERAL_FORMAT_PREFIX) or not isinstance(payload, dict):
        return None
    if stamp != LITERAL_FORMAT:
        raise UnsupportedMarkerFormat('literal wrapper', stamp)
    return payload


class MarkerStash(NamedTuple):
    """What a marker's stash holds: the caller's escaped values, and its payload's encoding."""

    escaped: dict[str, object] | None
    encoding: str | None
    """``None`` for a version 1 marker; ``JSON_FORMAT`` or ``JSON_FIELDS_FORMAT`` for a structured one."""


def marker_stash(marker: dict[str, object], *, structured: bool = True) -> MarkerStash:
    """Read the stash of a marker: its escaped caller values and whether it is a structured marker.

    Both halves must look like ours: a non-empty stash holding only
    marker-owned key names, and a stamp from the escape namespace. Otherwise
    the two keys are the caller's own data (as in markers written before
    escaping existed). A well-formed stash with a version this reader does not
    know raises ``UnsupportedMarkerFormat``; so does a structured marker when
    ``structured`` is ``False`` (the reader was asked to read version 1 only),
    or one on a binary-shaped marker.
    """
    stash = marker.get(ESCAPED_KEYS)
    stamp = marker.get(FORMAT_KEY)
    if not isinstance(stash, dict) or not stash or not isinstance(stamp, str):
        return _NO_STASH
    if not stamp.startswith(ESCAPE_FORMAT_PREFIX) or not stash.keys() <= MARKER_OWNED_KEYS:
        return _NO_STASH
    if stamp == ESCAPE_FORMAT:
        return MarkerStash(stash, None)
    if stamp != JSON_ESCAPE_FORMAT or marker.get(TEXT_KEY) is not True:
        raise UnsupportedMarkerFormat('media marker escaped-keys stash', stamp)
    if not structured:
        raise UnsupportedMarkerFormat('structured (JSON) media marker (restore with structured=True to read it)', stamp)
    return json_stash(stash)


_NO_STASH: Final = MarkerStash(None, None)


def json_stash(stash: dict[str, object]) -> MarkerStash:
    """The caller's escaped values held by a structured marker's stash (``None`` when it holds none), and its encoding.

    Raises ``UnsupportedMarkerFormat`` for an encoding stamp this reader does
    not know, or a stash of another shape (nothing is guessed).
    """
    encoding = stash.get(FORMAT_KEY)
    escaped = stash.get(ESCAPED_KEYS)
    if encoding != JSON_FORMAT and encoding != JSON_FIELDS_FORMAT:
        raise UnsupportedMarkerFormat('structured media marker encoding', encoding)
    if not stash.keys() <= {FORMAT_KEY, ESCAPED_KEYS} or (
        escaped is not None
        and (not isinstance(escaped, dict) or not escaped or not escaped.keys() <= MARKER_OWNED_KEYS)
    ):
        raise UnsupportedMarkerFormat('structured media marker stash', sorted(stash))
    return MarkerStash(escaped, encoding)


def escape_stash_of(marker: dict[str, object]) -> dict[str, object] | None:
    """The escaped caller values of a version 1 marker, or ``None`` when it carries none (see ``marker_stash``).

    A structured marker raises ``UnsupportedMarkerFormat``: this is the reading of format version 1.
    """
    return marker_stash(marker, structured=False).escaped
