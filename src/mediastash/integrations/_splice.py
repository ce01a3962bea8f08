"""Serialize a restored tree without re-escaping its payloads: dump a small tree, splice the payloads in.

``json.dumps`` of a restored value walks every character of every payload
(about 0.2-0.5 GB/s) although the payloads are the same few strings on every
read. Here the payload fields of the restored tree hold short placeholders
while the (small) tree is dumped; each placeholder's JSON text is then replaced
by the payload's JSON string literal, computed once per payload string and kept
in a bounded cache, and the result is assembled with one ``''.join``.

The placeholders carry a random token drawn for each call. The output is
used only when the dump contains exactly the placeholders inserted, each once;
otherwise (caller data containing the token, which cannot happen by chance)
the plain ``json.dumps`` is used. Either way ``json.loads`` of the result
equals the restored tree.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
from typing import Any, Final

from mediastash._lru import BoundedLRU

__all__ = ['DEFAULT_LITERAL_BYTES', 'LiteralCache', 'dumps_spliced']

DEFAULT_LITERAL_BYTES: Final = 128 << 20
"""Default budget of a ``LiteralCache``: the payload strings and escaped literals it keeps alive."""

_PREFIX: Final = 'mediastash-splice-'
_SEPARATORS: Final = (',', ':')


class LiteralCache:
    """Bounded LRU from a payload string (by identity) to its JSON literal.

    Restores served by the known-blob cache hand out the same payload string
    object every time, so identity is the key: an entry keeps its string
    alive and is used only for that very object, so a literal can never be
    served for other content. A payload whose literal is just the string in
    quotes (all base64, most ASCII text) stores no copy.
    """

    def __init__(self, max_bytes: int = DEFAULT_LITERAL_BYTES, *, ensure_ascii: bool = False) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f'max_bytes must be a non-negative int, got {max_bytes!r}')
        self.max_bytes = max_bytes
        self.ensure_ascii = ensure_ascii
        self._entries: BoundedLRU[int, tuple[str, str | None]] = BoundedLRU(max_cost=max_bytes)
        self._lock = threading.Lock()

    @property
    def bytes_held(self) -> int:
        """Memory the cached strings account for (payloads kept alive and escaped literals)."""
        return self._entries.total_cost

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def literal(self, source: str) -> str | None:
        """``json.dumps(source)``, or ``None`` when that is exactly ``'"' + source + '"'``."""
        key = id(source)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is source:
                return entry[1]
        dumped = json.dumps(source, ensure_ascii=self.ensure_ascii)
        # Escaping only ever lengthens a string, so equal length means nothing was escaped.
        literal = None if len(dumped) == len(source) + 2 else dumped
        cost = sys.getsizeof(source) + (sys.getsizeof(literal) if literal is not None else 0)
        with self._lock:
            self._entries.put(key, (source, literal), cost)
        return literal


def dumps_spliced(
    tree: Any,
    slots: list[tuple[dict[str, Any], str]],
    literals: LiteralCache,
) -> str:
    """Compact JSON of ``tree`` whose string payloads sit at ``slots`` (``(dict, key)`` pairs).

    ``tree`` is borrowed: the slots hold placeholders during the call and
    their payloads again afterwards. The text is exactly that of
    ``json.dumps(tree, ensure_ascii=literals.ensure_ascii, separators=(',', ':'))``.
    """
    ensure_ascii = literals.ensure_ascii
    sources: list[str] = []
    for node, key in slots:
        value = node[key]
        if type(value) is not str:
            return json.dumps(tree, ensure_ascii=ensure_ascii, separators=_SEPARATORS)
        sources.append(value)
    token = f'{_PREFIX}{secrets.token_hex(16)}:'
    try:
        for index, (node, key) in enumerate(slots):
            node[key] = f'{token}{index}'
        text = json.dumps(tree, ensure_ascii=ensure_ascii, separators=_SEPARATORS)
    finally:
        for (node, key), source in zip(slots, sources, strict=True):
            node[key] = source
    parts = text.split(f'"{token}')
    if len(parts) != len(sources) + 1:
        return json.dumps(tree, ensure_ascii=ensure_ascii, separators=_SEPARATORS)
    pieces = [parts[0]]
    seen = bytearray(len(sources))
    for part in parts[1:]:
        end = part.find('"')
        digits = part[:end]
        if end < 1 or not digits.isascii() or not digits.isdigit():
            return json.dumps(tree, ensure_ascii=ensure_ascii, separators=_SEPARATORS)
        index = int(digits)
        if index >= len(sources) or seen[index]:
            return json.dumps(tree, ensure_ascii=ensure_ascii, separators=_SEPARATORS)
        seen[index] = 1
        source = sources[index]
        literal = literals.literal(source)
        if literal is None:
            pieces += ('"', source, '"')
        else:
            pieces.append(literal)
        pieces.append(part[end + 1 :])
    return ''.join(pieces)
