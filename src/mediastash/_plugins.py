"""What the registries of store backends and of garbage-collection root kinds share: entry points and imports.

A registry names its built-ins and its plug-ins' targets as ``module:attribute``
strings and imports one only when it is used; it reads an entry-point group
once. A name two distributions declare with different targets is kept with
its rivals, so the registry can refuse it rather than pick one at random.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points

__all__ = ['Declared', 'declared', 'import_target']


@dataclass(slots=True)
class Declared:
    """One name of an entry-point group: its target and where it came from."""

    target: str
    origin: str
    """``name = module:attribute in <distribution>``, for messages."""
    rivals: list[str] = field(default_factory=list)
    """Other entry points declaring the same name with another target (then the name is refused)."""


def declared(group: str, valid: re.Pattern[str]) -> dict[str, Declared]:
    """The names installed distributions declare in ``group`` (lowercased; those ``valid`` does not match left out).

    The same target declared twice (a package on the path twice) is no rival.
    """
    found: dict[str, Declared] = {}
    for point in entry_points(group=group):
        name = point.name.lower()
        if valid.fullmatch(name) is None:
            continue  # nothing can name it
        origin = _describe(point)
        entry = found.get(name)
        if entry is None:
            found[name] = Declared(point.value, origin)
        elif entry.target != point.value and origin not in entry.rivals:
            entry.rivals.append(origin)
    return found


def import_target(target: str) -> object:
    """The object ``module:attribute`` names (``attribute`` may be dotted), its module imported now.

    Raises what the import raises (``ImportError`` for a missing module) and
    ``AttributeError`` for a missing attribute.
    """
    module_name, _, attribute = target.partition(':')
    found: object = importlib.import_module(module_name)
    for name in attribute.split('.') if attribute else ():
        found = getattr(found, name)
    return found


def _describe(point: EntryPoint) -> str:
    dist = point.dist.name if point.dist is not None else 'an unnamed distribution'
    return f'{point.name} = {point.value} in {dist}'
