"""``StoreOptions``: the base of each backend's typed options, and the one URL-query-to-options mapper.

A backend declares one frozen dataclass of its settings (``DiskOptions``,
``S3Options``, ...), checked when it is made. The store's ``__init__``
keywords, ``options=`` and ``from_url`` all end in one of them: keywords make
one (or replace fields of a given one), and the store reads only the object.
``from_store_url`` is what a backend's options class writes to read its URL;
``query_options`` maps the URL's query parameters onto fields, converting
each as every size, flag, count and duration is read, and refusing an unknown
parameter by name. No error here repeats a value (a URL may carry a secret).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores._url import shown, unknown_parameter

__all__ = ['Converter', 'StoreOptions', 'check_callable', 'check_path', 'query_options']

Converter = Callable[[str, str], Any]
"""``convert(parameter name, text value)``: a field's value, or ``InvalidStoreConfiguration`` naming the parameter."""


@dataclasses.dataclass(frozen=True, slots=True)
class StoreOptions:
    """The settings of one store, checked when made; subclasses are frozen keyword-only dataclasses.

    ``from_url`` reads a store URL into options (``overrides`` win over the
    URL, as with the store's ``from_url``); ``replace`` returns a copy with
    some fields changed, checked again.
    """

    store_name: ClassVar[str] = 'the store'
    """How errors name the store these options are for (``'S3MediaStore'``)."""

    @classmethod
    def from_store_url(cls, url: str, *, create: bool, overrides: dict[str, Any], owner: str) -> Self:
        """Read ``url`` (``owner`` names the class in errors); with ``create=False`` refuse missing storage."""
        raise InvalidStoreConfiguration(f'{owner} cannot be opened from a URL')

    @classmethod
    def from_url(cls, url: str, *, create: bool = True, **overrides: Any) -> Self:
        """The options ``url`` gives, with ``overrides`` (field values) on top; nothing is opened or created."""
        return cls.from_store_url(url, create=create, overrides=overrides, owner=cls.__name__)

    @classmethod
    def made(cls, values: Mapping[str, Any], owner: str) -> Self:
        """``cls(**values)``, refusing (by name) a value no field takes."""
        fields = {field.name for field in dataclasses.fields(cls)}
        for name in values:
            if name not in fields:
                raise InvalidStoreConfiguration(f'{owner} does not accept the option {shown(name)}')
        return cls(**values)

    @classmethod
    def settled(cls, options: Self | None, given: Mapping[str, Any]) -> Self:
        """What a store's ``__init__`` does with its keywords ``given`` and ``options=``.

        ``given`` may hold more than the fields (a constructor passes its
        ``locals()``): only the fields' names are read. Without ``options``:
        options made of the keywords, checked as ever.
        With it: ``options``, with the keywords that differ from their default
        (and are not ``None``) on top. The store's keyword defaults equal the
        fields' defaults (``tests/test_store_options.py`` checks it).
        """
        given = {field.name: given[field.name] for field in dataclasses.fields(cls) if field.name in given}
        if options is None:
            return cls.made(given, cls.store_name)
        if not isinstance(options, cls):
            raise InvalidStoreConfiguration(f'{cls.store_name}(options=...) takes a {cls.__name__}')
        defaults = {field.name: field.default for field in dataclasses.fields(cls)}
        changes = {
            name: value
            for name, value in given.items()
            if value is not None and value is not defaults.get(name) and value != defaults.get(name)
        }
        return options.replace(**changes) if changes else options

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (checked like new options)."""
        return type(self).made({**self._fields(), **changes}, self.store_name)

    def folders(self) -> tuple[str, ...]:
        """Local folders opening a store with these options may create (``StorePlan.folders``)."""
        return ()

    def _fields(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self) if field.init}


def query_options(
    parameters: Mapping[str, str], form: str, fields: Mapping[str, tuple[str, Converter]]
) -> dict[str, Any]:
    """Field values from a URL's query ``parameters``: ``fields`` maps each parameter to (field, converter).

    A parameter ``fields`` does not name is refused, listing those it does
    (``form`` such as ``'s3://'`` names the URL in errors).
    """
    found: dict[str, Any] = {}
    for name, value in parameters.items():
        if name not in fields:
            raise unknown_parameter(name, form, tuple(fields))
        field, convert = fields[name]
        found[field] = convert(name, value)
    return found


def check_callable(name: str, value: object, accepts: str) -> None:
    """``InvalidStoreConfiguration`` naming ``name`` (and the type given) unless ``value`` is callable."""
    if not callable(value):
        raise InvalidStoreConfiguration(f'{name} must be {accepts}, got {type(value).__name__}')


def check_path(name: str, value: object) -> str:
    """``value`` as a non-empty ``str`` path without NUL (a ``str`` or ``os.PathLike[str]``); the path is not shown."""
    path = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(path, str):
        raise InvalidStoreConfiguration(f'{name} must be a str path, got {type(value).__name__}')
    if not path:
        raise InvalidStoreConfiguration(f'{name} must be a non-empty path')
    if '\x00' in path:
        raise InvalidStoreConfiguration(f'{name} must not hold a NUL character (the path is not shown)')
    return path
