"""Payload recognition: what counts as a payload, in a JSON tree and in typed pydantic-ai messages.

The rules for the two input forms sit side by side so they cannot drift:
``JsonPayloadFinder`` finds payload dicts while copying a JSON tree, and
``typed_payloads`` finds the same payloads on typed messages (where
``with_replaced_contents`` later swaps them). Both measure size with the one
threshold rule (``text_size``, ``binary_size``, ``canonical_json``). What
happens to a payload once found is ``_batch``'s job.

Structured payloads (a tool return's non-string JSON ``content``) are found in
the JSON form only; the typed walk dumps its messages and meets them there.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pydantic_core

from mediastash.codec import max_decoded_size, text_to_bytes
from mediastash.known_blobs import PayloadKind
from mediastash.markers import (
    JSON_FIELDS,
    JSON_MEDIA_TYPE,
    LITERAL_KEY,
    MARKER_KEY,
    RESERVED_KEY_PREFIX,
    STRUCTURED_PART_KINDS,
    TEXT_CONTENT_KINDS,
    TEXT_MEDIA_TYPE,
    wrap_literal,
)
from mediastash.walker._common import TreeCopier

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = [
    'Found',
    'JsonPayloadFinder',
    'Path',
    'PlainJsonMemo',
    'TypedPayload',
    'binary_size',
    'canonical_json',
    'parse_json',
    'payload_sizes',
    'shallow_replace',
    'text_size',
    'typed_payloads',
    'with_replaced_contents',
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


_CONTAINER_TYPES: Final = (dict, list)
STRUCTURED_CONTENT_KIND: Final = 'structured-content'

_EMBEDDED: Final = tuple(
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


def _holds_payload_near_top(content: Any) -> bool:
    """Whether ``content``, or a value of it when it is a dict, is a payload or marker of its own.

    A cheap pre-check for the common case of a tool returning media (a
    ``BinaryContent``, or a dict of them) without serializing it; ``_EMBEDDED``
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
        if _holds_payload_near_top(content):
            return None  # the common case of a content that is media (a BinaryContent), found without serializing it
        raw = canonical_json(content)
        if raw is None or len(raw) < self.threshold or any(marker in raw for marker in _EMBEDDED):
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
            and type(content) in _CONTAINER_TYPES
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
    structured: bool = False
    """A tool return's JSON ``content`` (``source`` is its ``canonical_json``); ``text`` is then ``False``."""


_JSON_SCALARS: Final = (str, int, bool, type(None))


def _plain_json(value: Any) -> bool:
    """Whether ``value`` holds only the exact JSON types, str keys and finite floats: what its JSON-mode
    dump would hold unchanged, so ``canonical_json`` of it equals that of the dump."""
    stack = [value]
    seen: set[int] = set()  # a container met twice (shared, or a cycle) is left to the dump
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict or kind is list:
            if id(node) in seen:
                return False
            seen.add(id(node))
        if kind is dict:
            for key, item in node.items():
                if type(key) is not str:
                    return False
                stack.append(item)
        elif kind is list:
            stack.extend(node)
        elif kind is float:
            if node != node or node in (_INF, -_INF):
                return False
        elif kind not in _JSON_SCALARS:
            return False
    return True


_INF: Final = float('inf')


class PlainJsonMemo:
    """Tool outputs a typed save took as structured payloads, so a save of an unchanged history checks each once.

    The checks (no payload or marker text in its JSON, only plain JSON types:
    ``_plain_json``, a Python pass over every value) were most of a typed
    save's own time when every save repeats the history. An entry holds the
    content object (so its ``id`` is not reused while remembered) and the
    ``canonical_json`` it had when it passed; a later save takes the verdict
    only for that very object with byte-for-byte the same JSON, so an output
    whose JSON changed in place is checked again. A content refused is never
    remembered. Entries a save does not meet are dropped after it, so the memo
    holds the outputs of the latest history only (and their JSON, once more).
    """

    def __init__(self) -> None:
        self._previous: dict[int, tuple[object, bytes]] = {}
        self._current: dict[int, tuple[object, bytes]] = {}

    def passed(self, content: object, raw: bytes) -> bool:
        """Whether this very ``content``, with this very JSON, passed the checks before (kept for the next save)."""
        key = id(content)
        entry = self._current.get(key) or self._previous.get(key)
        if entry is None or entry[0] is not content or entry[1] != raw:
            return False
        self._current[key] = entry
        return True

    def remember(self, content: object, raw: bytes) -> None:
        """``content``, whose JSON is ``raw``, passed the checks."""
        self._current[id(content)] = (content, raw)

    def end_save(self) -> None:
        """Forget the outputs the save that just ended did not meet."""
        self._previous, self._current = self._current, {}


def _typed_structured(part: Any, threshold: int, memo: PlainJsonMemo | None) -> bytes | None:
    """A tool return's ``content`` as the JSON walk would store it from the dump, or ``None`` when it would not.

    The cheap refusals come first; the checks over the whole JSON and every value run once per output object
    when a ``memo`` is given.
    """
    content = part.content
    if type(content) not in _CONTAINER_TYPES or _holds_payload_near_top(content):
        return None
    raw = canonical_json(content)
    if raw is None or len(raw) < threshold:
        return None
    if memo is not None and memo.passed(content, raw):
        return raw
    if any(marker in raw for marker in _EMBEDDED) or not _plain_json(content):
        return None
    if memo is not None:
        memo.remember(content, raw)
    return raw


def typed_payloads(
    messages: list[ModelMessage], threshold: int, *, structured: bool = False, memo: PlainJsonMemo | None = None
) -> list[TypedPayload]:
    """Every ``BinaryContent.data`` and string ``content`` at or above ``threshold``, the same places
    ``JsonPayloadFinder`` finds them in the messages' JSON dump. With ``structured``, also a
    tool return's JSON content, found here without the dump (``TypedPayload.structured``),
    and a ``StructuredContent`` is left to the JSON walk (its text and value move as one).
    ``memo``: remembers which tool outputs passed the plain-JSON check, across the saves of one walker."""
    from pydantic_ai.messages import BinaryContent, StructuredContent, TextContent

    found: list[TypedPayload] = []
    for index, message in enumerate(messages):
        for j, part in enumerate(message.parts):
            if not _content_is_field(type(part)):
                continue
            content = getattr(part, 'content', None)
            if structured and getattr(part, 'part_kind', None) in STRUCTURED_PART_KINDS:
                raw = _typed_structured(part, threshold, memo)
                if raw is not None:
                    found.append(TypedPayload(index, ('parts', j), False, raw, len(raw), JSON_MEDIA_TYPE, part, True))
                    continue
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
                    elif (
                        isinstance(item, TextContent | StructuredContent)
                        and isinstance(item.content, str)
                        and not (structured and isinstance(item, StructuredContent))
                    ):
                        text = text_size(item.content, threshold)
                        if text is not None:
                            found.append(TypedPayload(index, path, True, item.content, text, TEXT_MEDIA_TYPE, item))
    if memo is not None:
        memo.end_save()
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
