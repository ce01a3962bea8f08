"""The one envelope format: what a host that gave up payloads carries so a wrapper can put them back.

An envelope is a plain mapping (every serializer takes it)::

    {'format': 'mediastash-envelope-v2',
     'slots': [{'path': [...], 'lean': ..., 'prefix': 'data:image/png;base64,'}],
     'seal': '...'}

``format`` names the format and its version; a reader refuses a version it
does not know rather than lose data. Each *slot* is one place of the host
(``path``: dict keys and list indices from the host) and ``lean``, the lean
JSON of what stood there, holding the markers of the stored payloads (so the
walker restores it and ``mediastash.gc`` finds its references); ``prefix``
(only when not empty) is a ``data:`` URL head kept in place before the
restored payload. ``seal`` vouches for the digests the envelope names
(``_envelope_seal``). The place itself holds the placeholder
(``kit.placeholders``); a slot whose place no longer shows what was written for
it was edited by a plain reader, and restoring leaves the edit.

Every integration writes this format; the carrier differs (a reserved key of
a host dict, ``ENVELOPE_KEY``, or a message's ``metadata``). Envelopes of the
older formats ``mediastash-envelope-v1`` and ``mediastash-langgraph-v1`` (a
``marker`` per slot) are still read. ``docs/integrations.md`` has the format.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mediastash.errors import MalformedMarker, UnsupportedMarkerFormat
from mediastash.integrations._envelope_seal import SEAL_KEY
from mediastash.markers import MARKER_KEY, URI_KEY, marker_shape

__all__ = [
    'ENVELOPE_FORMAT',
    'ENVELOPE_KEY',
    'READ_FORMATS',
    'Slot',
    'Step',
    'is_envelope',
    'make_envelope',
    'parse_envelope',
]

ENVELOPE_KEY: Final = '__mediastash_offloaded__'
"""The key a host dict carries its envelope under (LangGraph blocks and messages, OpenAI Agents items)."""

ENVELOPE_FORMAT: Final = 'mediastash-envelope-v2'
"""The ``format`` of every envelope written."""

READ_FORMATS: Final = (ENVELOPE_FORMAT, 'mediastash-envelope-v1', 'mediastash-langgraph-v1')
"""The formats a reader restores: today's, and the two older host formats (slots holding a ``marker``)."""

_FAMILIES: Final = ('mediastash-envelope-v', 'mediastash-langgraph-v')
"""A ``format`` starting with one of these claims to be an envelope (another version is refused, not ignored)."""

Step = str | int
"""One step of a slot's path: a dict key, or a list index."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One place of a host: its path, the lean JSON of what stood there, and a kept ``data:`` URL head."""

    path: tuple[Step, ...]
    lean: Any
    prefix: str = ''

    @property
    def marker(self) -> dict[str, Any]:
        """``lean`` as the marker of one payload (``parse_envelope(..., markers=True)`` checked it is one)."""
        assert type(self.lean) is dict
        return self.lean

    @property
    def text(self) -> bool:
        """Whether the payload is text (restored as a string), not base64."""
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


def make_envelope(slots: Sequence[Slot], seal: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """The envelope for ``slots``; ``seal`` gives the seal of the envelope without it (``_envelope_seal``)."""
    envelope: dict[str, Any] = {'format': ENVELOPE_FORMAT, 'slots': [_slot_json(slot) for slot in slots]}
    envelope[SEAL_KEY] = seal(envelope)
    return envelope


def _slot_json(slot: Slot) -> dict[str, Any]:
    out: dict[str, Any] = {'path': list(slot.path), 'lean': slot.lean}
    if slot.prefix:
        out['prefix'] = slot.prefix
    return out


def is_envelope(value: object) -> bool:
    """Whether ``value`` claims to be an envelope: a dict whose ``format`` names one of the formats' families."""
    if type(value) is not dict:
        return False
    stamp = value.get('format')
    return isinstance(stamp, str) and stamp.startswith(_FAMILIES)


def parse_envelope(value: object, where: str, *, markers: bool) -> list[Slot]:
    """The slots of an envelope of any format read, checked strictly: anything not understood raises.

    ``UnsupportedMarkerFormat`` for an envelope of another version,
    ``MalformedMarker`` for anything else that is not one (``where`` locates
    it). ``markers``: every slot must hold one payload's marker at a path of
    dict keys (the host envelopes of LangGraph and OpenAI Agents).
    """
    if not is_envelope(value):
        raise MalformedMarker(f'{ENVELOPE_KEY} holds something that is not a mediastash envelope', path=where)
    assert isinstance(value, dict)
    stamp = value['format']
    if stamp not in READ_FORMATS:
        raise UnsupportedMarkerFormat('mediastash envelope', stamp, path=where)
    raw_slots = value.get('slots')
    if type(raw_slots) is not list or not raw_slots or set(value) - {SEAL_KEY} != {'format', 'slots'}:
        raise MalformedMarker('an envelope holds a non-empty slots list (and a seal), nothing else', path=where)
    old = stamp != ENVELOPE_FORMAT
    slots = [_parsed_slot(raw, where, old) for raw in raw_slots]
    if markers or old:
        for slot in slots:
            if not slot.path or not all(type(step) is str for step in slot.path):
                raise MalformedMarker('an envelope slot path is a non-empty list of keys', path=where)
            if type(slot.lean) is not dict or slot.lean.get(MARKER_KEY) is not True or marker_shape(slot.lean) is None:
                raise MalformedMarker('an envelope slot holds a media marker', path=where)
    return slots


def _parsed_slot(raw: object, where: str, old: bool) -> Slot:
    """One slot: ``path``, ``lean`` and an optional ``prefix`` (older formats: ``path``, ``prefix``, ``marker``)."""
    if old:
        if type(raw) is not dict or set(raw) != {'path', 'prefix', 'marker'}:
            raise MalformedMarker('an envelope slot holds path, prefix and marker', path=where)
        lean = raw['marker']
    else:
        if type(raw) is not dict or not {'path', 'lean'} <= set(raw) <= {'path', 'lean', 'prefix'}:
            raise MalformedMarker('an envelope slot holds path, lean and an optional prefix', path=where)
        lean = raw['lean']
    path, prefix = raw['path'], raw.get('prefix', '')
    if type(path) is not list or not all(type(step) in (str, int) for step in path):
        raise MalformedMarker('an envelope slot path is a list of keys and indexes', path=where)
    if not isinstance(prefix, str):
        raise MalformedMarker('an envelope slot prefix is a string', path=where)
    return Slot(tuple(path), lean, prefix)
