"""``ObjectState``: tell that an object graph is the one seen before, unchanged, without checking its values again.

A typed save remembers each message's lean JSON by message object (every step
snapshot repeats the history). Messages are mutable, so a remembered result
is used only when the message's state now is exactly its state then:

* an immutable scalar (``str``, ``bytes``, ``int``, ``float``, ``bool``,
  ``None``, and the ``datetime`` types, exact types only) must be the very
  same object (the state holds it, so its ``id`` is not reused);
* a ``list`` or ``dict`` of plain values is compared by its ``marshal`` form:
  marshal writes exact built-in types only (a subclass is refused), floats
  bit for bit, dicts in order, and it can be read back, so equal forms mean
  equal values of equal types (which is all a JSON dump looks at);
* a container marshal refuses (it holds a dataclass, say) is followed item by
  item, with its type and length; a dataclass instance field by field;
* anything else (a pydantic model, a set subclass, an object of unknown
  kind) has no state: the caller walks it again every time.

So a value changed in place anywhere in the graph gives a different state.
The marshal form of a large tool output costs about a third of its compact
JSON; a message of small parts costs a few microseconds.
"""

from __future__ import annotations

import dataclasses
import datetime
import marshal
import operator
from collections.abc import Callable
from typing import Any, Final

__all__ = ['ObjectState', 'state_of']

_IMMUTABLE: Final = frozenset(
    {
        str,
        bytes,
        int,
        float,
        bool,
        type(None),
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        datetime.timezone,
    }
)

_MARSHAL_VERSION: Final = 4


@dataclasses.dataclass(slots=True, eq=False)
class ObjectState:
    """What ``state_of`` saw: the scalars (compared by identity) and the shape and plain containers (by value)."""

    scalars: list[object]
    shape: list[object]

    def same_as(self, other: ObjectState) -> bool:
        """Whether both states were taken of one unchanged graph (see the module docstring)."""
        return (
            len(self.scalars) == len(other.scalars)
            and all(map(operator.is_, self.scalars, other.scalars))
            and self.shape == other.shape
        )


_FIELDS: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}


def _fields_getter(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """A getter of every dataclass field of ``cls`` at once (a tuple), or ``None`` for a class that is not one."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    getter: Callable[[Any], tuple[Any, ...]] | None = None
    if dataclasses.is_dataclass(cls):
        names = [field.name for field in dataclasses.fields(cls)]
        if len(names) > 1:
            getter = operator.attrgetter(*names)
        elif names:
            single = operator.attrgetter(names[0])
            getter = lambda obj: (single(obj),)  # noqa: E731
        else:
            getter = lambda obj: ()  # noqa: E731
    _FIELDS[cls] = getter
    return getter


def state_of(root: object) -> ObjectState | None:
    """The state of ``root``'s graph (see the module docstring), or ``None`` when it holds something without one.

    A container met twice while followed item by item (shared, or a cycle) also gives ``None``.
    """
    scalars: list[object] = []
    shape: list[object] = []
    followed: set[int] = set()
    stack: list[object] = [root]
    pop = stack.pop
    push = stack.extend
    immutable = _IMMUTABLE
    while stack:
        node = pop()
        kind = type(node)
        if kind in immutable:
            scalars.append(node)
            continue
        if kind is list or kind is dict:
            try:
                shape.append(marshal.dumps(node, _MARSHAL_VERSION))  # type: ignore[arg-type]
                continue
            except ValueError:
                pass  # holds something marshal does not write: follow it item by item
            if id(node) in followed:
                return None
            followed.add(id(node))
            shape.append(kind)
            shape.append(len(node))  # type: ignore[arg-type]
            if kind is dict:
                for key, value in node.items():  # type: ignore[attr-defined]
                    push((value, key))
            else:
                push(reversed(node))  # type: ignore[call-overload]
            continue
        getter = _fields_getter(kind)
        if getter is None or isinstance(node, type):
            return None
        if id(node) in followed:
            return None
        followed.add(id(node))
        shape.append(kind)
        try:
            push(getter(node))
        except AttributeError:  # a field that is not set (deleted, or set later): unknown
            return None
    return ObjectState(scalars, shape)
