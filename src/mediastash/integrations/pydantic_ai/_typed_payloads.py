"""Payload recognition on typed pydantic-ai messages: the same payloads the JSON walk finds in their dump.

``typed_payloads`` finds large ``BinaryContent.data``, large string
``content`` and (with ``structured``) a tool return's JSON content on typed
messages, measured with the walker's own threshold rule, at the places
``JsonPayloadFinder`` finds them in the messages' JSON; ``with_replaced_contents``
later swaps them. What happens to a payload once found is the walker's job batch.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from pydantic_ai.messages import BinaryContent, ModelMessage, StructuredContent, TextContent

from mediastash.markers import JSON_MEDIA_TYPE, STRUCTURED_PART_KINDS, TEXT_MEDIA_TYPE
from mediastash.walker.internal import (
    CONTAINER_TYPES,
    EMBEDDED_MARKERS,
    canonical_json,
    holds_payload_near_top,
    text_size,
)

__all__ = ['Path', 'PlainJsonMemo', 'TypedPayload', 'shallow_replace', 'typed_payloads', 'with_replaced_contents']


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

    def keep(self, content: object) -> None:
        """``content`` is still in the history, in a message the save did not walk again: keep its entry."""
        entry = self._previous.get(id(content))
        if entry is not None and entry[0] is content:
            self._current[id(content)] = entry

    def end_save(self) -> None:
        """Forget the outputs the save that just ended did not meet."""
        self._previous, self._current = self._current, {}


def _typed_structured(part: Any, threshold: int, memo: PlainJsonMemo | None) -> bytes | None:
    """A tool return's ``content`` as the JSON walk would store it from the dump, or ``None`` when it would not.

    The cheap refusals come first; the checks over the whole JSON and every value run once per output object
    when a ``memo`` is given.
    """
    content = part.content
    if type(content) not in CONTAINER_TYPES or holds_payload_near_top(content):
        return None
    raw = canonical_json(content)
    if raw is None or len(raw) < threshold:
        return None
    if memo is not None and memo.passed(content, raw):
        return raw
    if any(marker in raw for marker in EMBEDDED_MARKERS) or not _plain_json(content):
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
