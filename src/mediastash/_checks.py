"""Argument checks shared by every layer: one wording, never the value given (it may be a secret)."""

from __future__ import annotations

from mediastash.errors import InvalidArgumentError, InvalidStoreConfiguration

__all__ = ['exactly_one_of', 'non_negative_int', 'positive_int']


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


def exactly_one_of(owner: str, first: tuple[str, object, str], second: tuple[str, object, str]) -> None:
    """``InvalidStoreConfiguration`` unless exactly one of two arguments, each ``(name, value, what it is)``, is set.

    The message names both arguments (each with what it is, when given) and
    which were set, never their values: a connection string can hold a password.
    """
    if (first[1] is None) == (second[1] is None):
        options = ' or '.join(f'{name}= ({what})' if what else f'{name}=' for name, _, what in (first, second))
        given = ' and '.join(f'{name}={"set" if value is not None else None}' for name, value, _ in (first, second))
        raise InvalidStoreConfiguration(f'{owner} needs exactly one of {options}, got {given}')
