"""Argument checks shared by every layer: one wording, never the value given (it may be a secret)."""

from __future__ import annotations

from mediastash.errors import InvalidArgumentError

__all__ = ['non_negative_int', 'positive_int']


def positive_int(name: str, value: object) -> int:
    """``value`` when it is an ``int`` of at least 1 (``bool`` is refused); else ``InvalidArgumentError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(name, 'a positive int', value)
    return value


def non_negative_int(name: str, value: object) -> int:
    """``value`` when it is an ``int`` of at least 0 (``bool`` is refused); else ``InvalidArgumentError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(name, 'a non-negative int', value)
    return value
