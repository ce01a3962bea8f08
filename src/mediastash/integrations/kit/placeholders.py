"""The one placeholder builder: the visible text that stands where a stored payload was.

Every integration writes the same words: what the payload was, its size when
the writer knew it, its ``media+sha256://`` URI and how to get it back (the
wrapper to read through, which each integration names). A place is restored
only while it holds exactly the placeholder written for it (``is_placeholder``):
the size is the one part a reader cannot recompute without the blob, so any
well-formed size label, or none, is accepted. ``docs/integrations.md`` shows them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from mediastash._units import format_bytes

__all__ = [
    'MAX_WHAT',
    'PLACEHOLDER_PREFIX',
    'SIZE_LABEL',
    'how_to_open',
    'is_placeholder',
    'part_placeholder_text',
    'placeholder_text',
]

PLACEHOLDER_PREFIX: Final = '[mediastash placeholder: '
"""How every placeholder starts, in every integration."""

MAX_WHAT: Final = 80
"""At most this many characters of what the payload was (a media type from the input may be long)."""

SIZE_LABEL: Final = r', (?:[0-9]+ B|[0-9]+\.[0-9] (?:KiB|MiB|GiB))'
"""The size part of a placeholder (``format_bytes``' output after a comma), as a regular expression."""
_SIZE_LABEL: Final = re.compile(SIZE_LABEL)


def how_to_open(what: str, reader: str, *, to_get_it: bool = True) -> str:
    """The closing words: read ``what`` (history, checkpoint, session) through the wrapper ``reader``."""
    ending = ' to get it' if to_get_it else ''
    return f"not included here: read this {what} through mediastash's {reader}{ending}"


def placeholder_text(what: str, uri: str, size: int | None, closing: str) -> str:
    """The placeholder for one stored payload: what it was, its size when known, its URI, ``closing``
    (``how_to_open``)."""
    amount = '' if size is None else f', {format_bytes(size)}'
    return f'{PLACEHOLDER_PREFIX}{what[:MAX_WHAT]}{amount} stored as {uri}; {closing}]'


def part_placeholder_text(kind: str, uris: Iterable[str], closing: str) -> str:
    """The placeholder for a whole part of a message that could not keep its shape (naming every URI it held)."""
    listed = ', '.join(dict.fromkeys(uris)) or 'no media reference'
    return f'{PLACEHOLDER_PREFIX}a {kind[:MAX_WHAT]} part holding stored media ({listed}); {closing}]'


def is_placeholder(value: object, what: str, uri: str, closing: str) -> bool:
    """Whether ``value`` is exactly what ``placeholder_text`` writes for ``what``, ``uri`` and ``closing``,
    with any well-formed size label or none (anything else is an edit made after a plain read)."""
    if not isinstance(value, str) or not value.startswith(PLACEHOLDER_PREFIX):
        return False
    head = f'{PLACEHOLDER_PREFIX}{what[:MAX_WHAT]}'
    tail = f' stored as {uri}; {closing}]'
    if len(value) < len(head) + len(tail) or not value.startswith(head) or not value.endswith(tail):
        return False
    size = value[len(head) : len(value) - len(tail)]
    return not size or _SIZE_LABEL.fullmatch(size) is not None
