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
from itertools import chain, compress, repeat
from math import isfinite
from operator import is_
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


_PLAIN_KINDS: Final = frozenset({dict, list, str, int, float, bool, type(None)})
_SCALAR_KINDS: Final = frozenset({str, int, bool, type(None)})
_STR_ONLY: Final = frozenset({str})


def _plain_json(value: Any) -> bool:
    """Whether ``value`` holds only the exact JSON types, str keys and finite floats, and no container twice
    (shared, or a cycle: left to the dump): what its JSON-mode dump would hold unchanged, so ``canonical_json``
    of it equals that of the dump.

    Goes one depth at a time, each test run over the whole depth in C (``map``, ``compress``, ``chain``) instead
    of a Python step per value: a tool output of thousands of rows has a handful of depths.
    """
    level: list[Any] = [value]
    met: set[int] = set()
    containers = 0
    while level:
        kinds = list(map(type, level))
        present = set(kinds)
        if present <= _SCALAR_KINDS:
            return True
        if not present <= _PLAIN_KINDS:
            return False
        if float in present and not all(map(isfinite, compress(level, map(is_, kinds, repeat(float))))):
            return False
        dicts = list(compress(level, map(is_, kinds, repeat(dict)))) if dict in present else []
        lists = list(compress(level, map(is_, kinds, repeat(list)))) if list in present else []
        containers += len(dicts) + len(lists)
        met.update(map(id, dicts), map(id, lists))
        if len(met) != containers:  # ids of live objects are distinct: a container met twice
            return False
        if dicts and not set(map(type, chain.from_iterable(dicts))) <= _STR_ONLY:
            return False
        level = [*chain.from_iterable(map(dict.values, dicts)), *chain.from_iterable(lists)]
    return True


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
