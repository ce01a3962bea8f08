"""The host envelope: what a dict that gave up payloads carries so a wrapper can put them back.

A host (content block, message, session item) gets one extra key,
``ENVELOPE_KEY``, whose value names the format and lists one slot per payload:
the keys from the host to the payload, the ``data:`` URL head kept in place,
and the payload's marker in the shared marker format (so the walker restores
it and ``mediastash.gc`` finds its reference). In the payload's place the host
holds a visible placeholder naming the blob. A slot whose place no longer
holds its placeholder was edited by a plain reader: restoring leaves the edit.

Integration-neutral (format ``mediastash-envelope-v1``): the OpenAI Agents
session wrapper writes it; ``docs/openai-agents.md`` shows one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from mediastash._units import format_bytes
from mediastash.errors import MalformedMarker, UnsupportedMarkerFormat
from mediastash.integrations._envelope_seal import SEAL_KEY
from mediastash.markers import MARKER_KEY, URI_KEY, marker_shape

__all__ = [
    'ENVELOPE_FORMAT',
    'ENVELOPE_KEY',
    'PLACEHOLDER_PREFIX',
    'Slot',
    'is_envelope',
    'is_placeholder',
    'make_envelope',
    'parse_envelope',
    'placeholder_text',
]

ENVELOPE_KEY: Final = '__mediastash_offloaded__'
"""The key a host carries its envelope under (the same key as the LangGraph envelope's)."""

ENVELOPE_FORMAT: Final = 'mediastash-envelope-v1'
"""The ``format`` of the envelopes written (a reader refuses any other ``mediastash-envelope-v`` version)."""
_FORMAT_PREFIX: Final = 'mediastash-envelope-v'

PLACEHOLDER_PREFIX: Final = '[mediastash placeholder: '
"""How every stand-in text starts (the same words in every integration)."""

_MAX_WHAT: Final = 80
_SIZE_LABEL: Final = re.compile(r', (?:[0-9]+ B|[0-9]+\.[0-9] (?:KiB|MiB|GiB))')
"""The size part of a placeholder (``format_bytes``' output after a comma), when the writer knew the size."""


@dataclass(slots=True)
class Slot:
    """One payload of an envelope: where it goes back, the kept ``data:`` URL head, and its marker."""

    path: tuple[str, ...]
    prefix: str
    marker: dict[str, Any]

    @property
    def text(self) -> bool:
        return marker_shape(self.marker) == 'text'

    @property
    def uri(self) -> str:
        reference = self.marker.get(URI_KEY, self.marker.get('uri'))
        return reference if isinstance(reference, str) else ''

    @property
    def what(self) -> str:
        """What the placeholder says the payload was: ``text``, its media type, or ``binary data``."""
        if self.text:
            return 'text'
        media_type = self.marker.get('media_type')
        return media_type if isinstance(media_type, str) and media_type else 'binary data'

    def holds_placeholder(self, value: object, how_to_open: str) -> bool:
        """Whether ``value`` (the string now at ``path``) is still this slot's placeholder, not an edit."""
        return is_placeholder(value, self.what, self.uri, how_to_open)


def is_placeholder(value: object, what: str, uri: str, how_to_open: str) -> bool:
    """Whether ``value`` is exactly the placeholder ``placeholder_text`` writes for ``what`` and ``uri``,
    with any well-formed size label or none (the one part a reader cannot recompute without the blob).

    The one rule every host envelope (LangGraph, OpenAI Agents) uses to tell a
    place still holding its placeholder from an edit.
    """
    if not isinstance(value, str) or not value.startswith(PLACEHOLDER_PREFIX):
        return False
    head = f'{PLACEHOLDER_PREFIX}{what[:_MAX_WHAT]}'
    tail = f' stored as {uri}; {how_to_open}]'
    if len(value) < len(head) + len(tail) or not value.startswith(head) or not value.endswith(tail):
        return False
    size = value[len(head) : len(value) - len(tail)]
    return not size or _SIZE_LABEL.fullmatch(size) is not None


def placeholder_text(what: str, uri: str, size: int | None, how_to_open: str) -> str:
    """The visible stand-in for one stored payload: what it was, its size when known, its URI, how to open it."""
    amount = '' if size is None else f', {format_bytes(size)}'
    return f'{PLACEHOLDER_PREFIX}{what[:_MAX_WHAT]}{amount} stored as {uri}; {how_to_open}]'


def make_envelope(slots: list[Slot], seal: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """The envelope value for ``slots`` (plain dicts, lists and strings: every serializer takes it).

    ``seal`` gives the seal of the envelope without it (``_envelope_seal``).
    """
    envelope: dict[str, Any] = {
        'format': ENVELOPE_FORMAT,
        'slots': [{'path': list(slot.path), 'prefix': slot.prefix, 'marker': slot.marker} for slot in slots],
    }
    envelope[SEAL_KEY] = seal(envelope)
    return envelope


def is_envelope(value: object) -> bool:
    """Whether ``value`` claims to be an envelope (a dict stamped with this format's namespace)."""
    if type(value) is not dict:
        return False
    stamp = value.get('format')
    return isinstance(stamp, str) and stamp.startswith(_FORMAT_PREFIX)


def parse_envelope(value: object, where: str) -> list[Slot]:
    """The slots of an envelope, checked strictly: anything this reader does not understand raises.

    ``UnsupportedMarkerFormat`` for an envelope of another version,
    ``MalformedMarker`` for anything else that is not one (``where`` locates it).
    """
    if not is_envelope(value):
        raise MalformedMarker(f'{ENVELOPE_KEY} holds something that is not a mediastash envelope', path=where)
    assert isinstance(value, dict)
    if value['format'] != ENVELOPE_FORMAT:
        raise UnsupportedMarkerFormat('mediastash envelope', value['format'], path=where)
    raw_slots = value.get('slots')
    if type(raw_slots) is not list or not raw_slots or set(value) - {SEAL_KEY} != {'format', 'slots'}:
        raise MalformedMarker('an envelope holds a non-empty slots list (and a seal), nothing else', path=where)
    slots: list[Slot] = []
    for raw in raw_slots:
        if type(raw) is not dict or set(raw) != {'path', 'prefix', 'marker'}:
            raise MalformedMarker('an envelope slot holds path, prefix and marker', path=where)
        path, prefix, marker = raw['path'], raw['prefix'], raw['marker']
        if type(path) is not list or not path or not all(isinstance(step, str) for step in path):
            raise MalformedMarker('an envelope slot path is a non-empty list of keys', path=where)
        if not isinstance(prefix, str):
            raise MalformedMarker('an envelope slot prefix is a string', path=where)
        if type(marker) is not dict or marker.get(MARKER_KEY) is not True or marker_shape(marker) is None:
            raise MalformedMarker('an envelope slot holds a media marker', path=where)
        slots.append(Slot(tuple(path), prefix, marker))
    return slots
