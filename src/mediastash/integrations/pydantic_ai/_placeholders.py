"""Visible stand-ins for externalized payloads, so a reader without mediastash still sees every part.

A version 2 envelope keeps its message's parts: each marker in the lean JSON is
shown as a short text naming the stored media and how to get it back, at the
same place (``docs/integrations.md`` lists the shapes). The stand-ins depend
only on the lean JSON of the message and the payload sizes known for it, so a
message always gets the same envelope.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import TypeAdapter, ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequestPart, ModelResponsePart

from mediastash.errors import UnsupportedMarkerFormat
from mediastash.integrations.kit.placeholders import (
    PLACEHOLDER_PREFIX,
    SIZE_LABEL,
    how_to_open,
    part_placeholder_text,
)
from mediastash.integrations.kit.placeholders import placeholder_text as _kit_placeholder_text
from mediastash.markers import (
    FORMAT_KEY,
    LITERAL_KEY,
    MARKER_KEY,
    MARKER_OWNED_KEYS,
    URI_KEY,
    is_structured_marker,
    literal_payload,
    marker_shape,
)
from mediastash.walker.internal import TooDeep, TreeCopier

__all__ = [
    'DEFAULT_READER',
    'PLACEHOLDER_KEY',
    'PLACEHOLDER_PREFIX',
    'merged_edit',
    'placeholder_text',
    'same_shown',
    'shown_message',
    'shows_stand_ins',
    'visible_messages',
]

PLACEHOLDER_KEY: Final = 'mediastash_placeholder'
"""``vendor_metadata`` key of an empty ``BinaryContent`` stand-in (where only binary content is valid)."""

DEFAULT_READER: Final = 'OffloadingStepStore'
"""The wrapper a stand-in names as the way to read the payload back (each wrapper passes its own)."""

_READER_NAME: Final = re.compile(r"(?<=read this history through mediastash's )[A-Za-z]+(?= to get it\])")
"""The wrapper a stand-in names: any wrapper's stand-in is the same stand-in (see ``_canonical``)."""
# Where pydantic-ai accepts only binary content, so a text stand-in would not validate.
_BINARY_ONLY: Final = {'speech': 'audio'}

_SIZE_LABEL: Final = re.compile(SIZE_LABEL + r'(?= stored as media\+sha256://)')
"""A stand-in's size (``format_bytes`` after a comma): the one part a reader cannot recompute without the blob."""

Sizes = Mapping[str, int]
"""Payload size in bytes by URI, for the URIs a message's save knew (others are shown without a size)."""


def placeholder_text(what: str, uri: str, size: int | None, reader: str = DEFAULT_READER) -> str:
    """The stand-in for one stored payload (the kit's placeholder, naming ``reader`` as the way to read it)."""
    return _kit_placeholder_text(what, uri, size, how_to_open('history', reader))


def _part_text(part_kind: object, uris: list[str], reader: str) -> str:
    """The stand-in for a whole part that could not keep its shape."""
    kind = part_kind if isinstance(part_kind, str) else 'message'
    return part_placeholder_text(kind, uris, how_to_open('history', reader))


@functools.cache
def _part_adapter(kind: str) -> TypeAdapter[Any]:
    return TypeAdapter(ModelRequestPart if kind == 'request' else ModelResponsePart)


def _reference(marker: dict[str, Any]) -> str:
    reference = marker.get(URI_KEY, marker.get('uri'))
    return reference if isinstance(reference, str) else '(an unreadable reference)'


class _StandIns(TreeCopier):
    """Copies lean JSON with every marker replaced by its stand-in text; literal wrappers stay as they are.

    A caller's dict inside a literal wrapper is kept wrapped (unwrapped, a
    marker look-alike would read as a reference), but markers nested in it
    are replaced too. ``uris`` collects every reference replaced.
    """

    def __init__(self, sizes: Sizes, reader: str = DEFAULT_READER) -> None:
        self.sizes = sizes
        self.reader = reader
        self.uris: list[str] = []

    def walk_dict(self, node: dict[str, Any], depth: int) -> Any:
        if len(node) == 2 and LITERAL_KEY in node:
            try:
                payload = literal_payload(node)
            except UnsupportedMarkerFormat:
                payload = None
            if payload is not None:
                return {LITERAL_KEY: self.copy_fields(payload, depth + 1), FORMAT_KEY: node[FORMAT_KEY]}
        if node.get(MARKER_KEY) is True:
            shape = marker_shape(node)
            if shape is not None:
                return self.text_for(node, shape)
        return self.copy_fields(node, depth)

    def text_for(self, marker: dict[str, Any], shape: Literal['binary', 'text']) -> str:
        uri = _reference(marker)
        self.uris.append(uri)
        media_type = marker.get('media_type')
        if shape == 'text':
            what = 'JSON' if is_structured_marker(marker) else 'text'
        else:
            what = media_type if isinstance(media_type, str) else 'binary data'
        return placeholder_text(what, uri, self.sizes.get(uri), self.reader)

    def empty_binary(self, marker: dict[str, Any]) -> dict[str, Any]:
        """An empty ``BinaryContent`` whose ``vendor_metadata`` carries the stand-in text."""
        stand_in: dict[str, Any] = {'kind': 'binary', 'data': '', 'media_type': marker.get('media_type')}
        identifier = marker.get('identifier')
        if isinstance(identifier, str):
            stand_in['identifier'] = identifier
        stand_in['vendor_metadata'] = {PLACEHOLDER_KEY: self.text_for(marker, 'binary')}
        return stand_in

    def part(self, part: Any) -> Any:
        """A lean part with stand-ins; the part keeps its kind where pydantic-ai allows it."""
        if type(part) is not dict:
            return self.walk(part)
        part_kind = part.get('part_kind')
        shape = marker_shape(part) if part.get(MARKER_KEY) is True else None
        if shape == 'text' and isinstance(part_kind, str):  # the part's own string content was moved out
            uri = _reference(part)
            kept = {k: v for k, v in part.items() if k not in MARKER_OWNED_KEYS and not (k == 'uri' and v == uri)}
            out = self.walk(kept)
            out['content'] = self.text_for(part, 'text')
            return out
        content = part.get('content')
        if part_kind == 'file' and type(content) is dict and _is_binary_marker(content):
            return {'part_kind': 'text', 'content': self.text_for(content, 'binary')}
        field = _BINARY_ONLY.get(part_kind) if isinstance(part_kind, str) else None
        if field is not None and type(part.get(field)) is dict and _is_binary_marker(part[field]):
            out = self.walk({k: v for k, v in part.items() if k != field})
            out[field] = self.empty_binary(part[field])
            return out
        return self.walk(part)


def _is_binary_marker(node: dict[str, Any]) -> bool:
    return node.get(MARKER_KEY) is True and marker_shape(node) == 'binary'


def _fallback_part(kind: str, part: Any, uris: list[str], reader: str) -> dict[str, Any]:
    """A text part standing for a whole part (only for shapes pydantic-ai would not accept with stand-ins)."""
    part_kind = part.get('part_kind') if type(part) is dict else None
    text = _part_text(part_kind, uris, reader)
    return {'part_kind': 'user-prompt' if kind == 'request' else 'text', 'content': text}


def _visible_json(lean: dict[str, Any], sizes: Sizes, reader: str) -> dict[str, Any]:
    """The lean message with stand-ins (``metadata`` left empty: the envelope goes there)."""
    stand_ins = _StandIns(sizes, reader)
    out: dict[str, Any] = {}
    for key, value in lean.items():
        if key == 'parts' and type(value) is list:
            out[key] = [stand_ins.part(part) for part in value]
        elif key == 'metadata':
            out[key] = None
        else:
            out[key] = stand_ins.walk(value)
    return out


def _checked_parts(lean: dict[str, Any], visible: dict[str, Any], sizes: Sizes, reader: str) -> dict[str, Any]:
    """``visible`` with each part pydantic-ai refuses replaced by a text part (same position)."""
    kind = lean.get('kind')
    if kind not in ('request', 'response') or type(lean.get('parts')) is not list:
        return visible
    adapter = _part_adapter(kind)
    parts: list[Any] = []
    for original, shown in zip(lean['parts'], visible['parts'], strict=True):
        try:
            adapter.validate_python(shown)
        except ValidationError:
            stand_ins = _StandIns(sizes, reader)
            stand_ins.walk(original)
            parts.append(_fallback_part(kind, original, stand_ins.uris, reader))
        else:
            parts.append(shown)
    return {**visible, 'parts': parts}


def _bare(lean: dict[str, Any], sizes: Sizes, reader: str) -> dict[str, Any]:
    """The last resort: only ``kind`` and one text part per lean part (the count stays, so pairing by index does)."""
    kind = lean.get('kind')
    parts = lean.get('parts')
    out: list[Any] = []
    for part in parts if type(parts) is list else []:
        stand_ins = _StandIns(sizes, reader)
        with contextlib.suppress(TooDeep):
            stand_ins.walk(part)
        out.append(_fallback_part(kind if isinstance(kind, str) else 'request', part, stand_ins.uris, reader))
    return {'kind': kind, 'parts': out}


def _validate_one(lean: dict[str, Any], sizes: Sizes, reader: str) -> ModelMessage:
    """The visible message for ``lean``: stand-ins in place, else whole-part stand-ins, else text parts only."""
    error: Exception | None = None
    for attempt in range(3):
        try:
            if attempt == 0:
                shown = _visible_json(lean, sizes, reader)
            elif attempt == 1:
                shown = _checked_parts(lean, _visible_json(lean, sizes, reader), sizes, reader)
            else:
                shown = _bare(lean, sizes, reader)
            message: ModelMessage = ModelMessagesTypeAdapter.validate_python([shown])[0]
        except (ValidationError, TooDeep) as caught:
            error = caught
            continue
        return message
    raise AssertionError('a message of text parts always validates') from error


def visible_messages(
    leans: list[dict[str, Any]], sizes: list[Sizes], *, reader: str = DEFAULT_READER
) -> list[ModelMessage]:
    """The typed messages a plain reader sees for ``leans``: every part kept, payloads shown as stand-ins.

    ``metadata`` is ``None`` on each (the caller puts the envelope there). Tries
    the whole list in one validation; a message pydantic-ai refuses is rebuilt
    with whole-part stand-ins where needed.
    """
    try:
        shown = [_visible_json(lean, size, reader) for lean, size in zip(leans, sizes, strict=True)]
        return list(ModelMessagesTypeAdapter.validate_python(shown))
    except (ValidationError, TooDeep):
        return [_validate_one(lean, size, reader) for lean, size in zip(leans, sizes, strict=True)]


def _sizeless(value: Any) -> str:
    """``value`` as canonical JSON text with every stand-in's size label taken out (and the wrapper it names)."""
    return _canonical(json.dumps(value, sort_keys=True, ensure_ascii=False))


def _canonical(text: str) -> str:
    """``text`` with stand-ins' size labels taken out and the wrapper they name made the default one."""
    return _READER_NAME.sub(DEFAULT_READER, _SIZE_LABEL.sub('', text))


def shows_stand_ins(own: Any, lean: Any, *, part: bool) -> bool:
    """Whether ``own`` (a part, or another top-level value, of an envelope's JSON) is exactly what an
    envelope shows for ``lean``: the same JSON, each payload as its stand-in, any size label or none.

    ``False`` means the envelope was edited at that place after it was written.
    Only the direct stand-in is tried here; ``visible_messages`` decides the
    parts pydantic-ai refused (see ``_envelope``).
    """
    stand_ins = _StandIns({})
    try:
        shown = stand_ins.part(lean) if part else stand_ins.walk(lean)
        return _same(own, shown)
    except (TooDeep, RecursionError):
        return False


def _same(own: Any, shown: Any) -> bool:
    """``own == shown``, a stand-in in ``own`` taken without its size label (``shown`` was built without sizes)."""
    if type(own) is str:
        return own == shown or (own.startswith(PLACEHOLDER_PREFIX) and _canonical(own) == shown)
    if type(own) is dict:
        return type(shown) is dict and own.keys() == shown.keys() and all(_same(own[k], shown[k]) for k in own)
    if type(own) is list:
        return type(shown) is list and len(own) == len(shown) and all(map(_same, own, shown))
    return bool(own == shown) and type(own) is type(shown)


def shown_message(lean: dict[str, Any]) -> dict[str, Any]:
    """The JSON of the message an envelope shows for the lean message ``lean`` (stand-ins without sizes)."""
    (visible,) = visible_messages([lean], [{}])
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([visible], mode='json')[0]
    return dumped


def same_shown(own: Any, shown: Any) -> bool:
    """``own`` and ``shown`` (both an envelope's JSON at one place) equal apart from size labels and timestamps.

    A part or message rebuilt from stand-ins gets its ``timestamp`` from
    pydantic-ai at validation, so it cannot be compared.
    """
    return _sizeless(_untimed(own)) == _sizeless(_untimed(shown))


def _untimed(value: Any) -> Any:
    return {k: v for k, v in value.items() if k != 'timestamp'} if type(value) is dict else value


def merged_edit(own: Any, lean: Any, edit: Any) -> tuple[Any, bool]:
    """The lean JSON of an edited part: ``lean`` wherever ``own`` (the envelope's part) still shows its
    stand-ins, ``edit`` (the lean JSON of the edited part, laid out like ``own``) everywhere else.

    So editing one item of a prompt's content list keeps the other items'
    stored media. Dicts with the same keys and lists of the same length are
    compared item by item; any other difference takes ``edit`` whole. Also
    says whether anything of ``lean`` was kept.
    """
    if type(lean) is dict and lean.get(MARKER_KEY) is True:  # the part itself was moved out: its edit is whole
        return edit, False
    try:
        return _merged(own, lean, edit, _StandIns({}))
    except (TooDeep, RecursionError):
        return edit, False


def _merged(own: Any, lean: Any, edit: Any, stand_ins: _StandIns) -> tuple[Any, bool]:
    if _same(own, stand_ins.walk(lean)):
        return lean, own != lean
    if type(own) is dict and type(lean) is dict and type(edit) is dict and own.keys() == lean.keys() == edit.keys():
        out: dict[str, Any] = {}
        kept = False
        for key in own:
            out[key], here = _merged(own[key], lean[key], edit[key], stand_ins)
            kept = kept or here
        return out, kept
    if type(own) is list and type(lean) is list and type(edit) is list and len(own) == len(lean) == len(edit):
        items: list[Any] = []
        kept = False
        for mine, theirs, edited in zip(own, lean, edit, strict=True):
            value, here = _merged(mine, theirs, edited, stand_ins)
            items.append(value)
            kept = kept or here
        return items, kept
    return edit, False
