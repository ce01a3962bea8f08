"""``BoundedLRU``: the one least-recently-used map every cache in mediastash is built on.

Bounded by an item count, by a summed cost (bytes, say), or both. Not
thread-safe by itself: callers that share one across threads hold a lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ['BoundedLRU']

K = TypeVar('K')
V = TypeVar('V')


class BoundedLRU(Generic[K, V]):
    """A map that forgets its least recently used entries once over ``max_items`` or ``max_cost``.

    ``on_evict(key, value)`` is called for every entry pushed out by a bound
    (not for ``pop`` or ``clear``).
    """

    def __init__(
        self,
        *,
        max_items: int | None = None,
        max_cost: int | None = None,
        on_evict: Callable[[K, V], None] | None = None,
    ) -> None:
        for name, bound in (('max_items', max_items), ('max_cost', max_cost)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
                raise ValueError(f'{name} must be a non-negative int or None, got {bound!r}')
        self.max_items = max_items
        self.max_cost = max_cost
        self._on_evict = on_evict
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._cost = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._entries))

    @property
    def total_cost(self) -> int:
        """Summed cost of the entries held."""
        return self._cost

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or ``None``."""
        item = self._entries.get(key)
        if item is None:
            return None
        self._entries.move_to_end(key)
        return item[0]

    def peek(self, key: K) -> V | None:
        """The value of ``key`` without touching its recency, or ``None``."""
        item = self._entries.get(key)
        return None if item is None else item[0]

    def put(self, key: K, value: V, cost: int = 1) -> None:
        """Set ``key`` (most recently used) and evict what the bounds require.

        An entry whose cost alone exceeds ``max_cost`` is not kept.
        """
        if self.max_cost is not None and cost > self.max_cost:
            self.pop(key)
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._cost -= old[1]
        self._entries[key] = (value, cost)
        self._cost += cost
        self._shrink()

    def add_cost(self, key: K, extra: int) -> None:
        """Grow the recorded cost of ``key`` (a value that holds more now) and evict as needed."""
        item = self._entries.get(key)
        if item is None:
            return
        self._entries[key] = (item[0], item[1] + extra)
        self._cost += extra
        self._entries.move_to_end(key)
        self._shrink()

    def pop(self, key: K) -> V | None:
        """Remove ``key``; its value or ``None``."""
        item = self._entries.pop(key, None)
        if item is None:
            return None
        self._cost -= item[1]
        return item[0]

    def clear(self) -> None:
        self._entries.clear()
        self._cost = 0

    def _shrink(self) -> None:
        while self._entries and (
            (self.max_items is not None and len(self._entries) > self.max_items)
            or (self.max_cost is not None and self._cost > self.max_cost)
        ):
            key, (value, cost) = self._entries.popitem(last=False)
            self._cost -= cost
            if self._on_evict is not None:
                self._on_evict(key, value)
