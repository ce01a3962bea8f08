"""``WalkOptions``: the settings every walk takes, checked once where they are given."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict

from mediastash._checks import non_negative_int, positive_int
from mediastash.errors import InvalidArgumentError
from mediastash.known_blobs import KnownBlobCache

__all__ = [
    'DEFAULT_MAX_CONCURRENCY',
    'DEFAULT_OPTIONS',
    'DEFAULT_THRESHOLD_BYTES',
    'WalkKeywords',
    'WalkOptions',
    'WalkSetting',
    'WalkSettings',
    'options_from_keywords',
    'resolve_options',
]

DEFAULT_THRESHOLD_BYTES: Final = 64 * 1024
"""Payloads at least this many bytes are externalized (the pydantic-ai-harness default too)."""

DEFAULT_MAX_CONCURRENCY: Final = 8
"""How many store calls one walk keeps in flight."""


class _KnownBlobsTypeError(InvalidArgumentError, TypeError):
    """A ``known_blobs`` of the wrong type: an ``InvalidArgumentError`` that stays the ``TypeError`` it always was."""


@dataclass(frozen=True, slots=True)
class WalkOptions:
    """How a walk treats payloads; one value shared by the walks, the wrappers and ``MediaUrls``.

    Every field is checked when the value is made, so a bad setting fails
    where it is given, not at the first save.

    Attributes:
        threshold_bytes: payloads of at least this many bytes (decoded
            binary, UTF-8 text) are externalized; a non-negative int.
        known_blobs: ``True`` uses the store's process-wide cache of payloads
            already stored (``docs/known-blobs.md``), ``False`` none, or pass
            a ``KnownBlobCache``.
        max_concurrency: store calls one walk keeps in flight; a positive int.
        structured: ``True`` also moves structured payloads (a tool return's
            non-string JSON ``content`` whose compact JSON reaches the
            threshold) and reads their markers; ``False`` keeps to the format
            pydantic-ai-harness reads; ``None`` (the default) takes the
            default of whoever walks: off in ``externalize_media`` /
            ``restore_media``, on in ``OffloadingStepStore``,
            ``OffloadingKV`` and the CLI.
    """

    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    known_blobs: KnownBlobCache | bool = True
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    structured: bool | None = None

    def __post_init__(self) -> None:
        non_negative_int('threshold_bytes', self.threshold_bytes)
        positive_int('max_concurrency', self.max_concurrency)
        known = self.known_blobs
        if not (known is True or known is False or known is None or isinstance(known, KnownBlobCache)):
            raise _KnownBlobsTypeError('known_blobs', 'a KnownBlobCache, True or False', known)
        if self.structured is not None and type(self.structured) is not bool:
            raise InvalidArgumentError('structured', 'True, False or None', self.structured)

    def structured_by_default(self, default: bool) -> WalkOptions:
        """These options with ``structured`` set to ``default`` when it was left at ``None``."""
        if self.structured is not None:
            return self
        return dataclasses.replace(self, structured=default)


DEFAULT_OPTIONS: Final = WalkOptions()


def resolve_options(
    options: WalkOptions | None,
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
    known_blobs: KnownBlobCache | bool = True,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    structured: bool | None = None,
) -> WalkOptions:
    """The options of a call that accepts both ``options=`` and the separate keywords.

    Without ``options`` the keywords make the value (checked). With it, a
    keyword left at its default is ignored and any other one is refused: the
    call would otherwise have two answers for the same setting.
    """
    at_defaults = (
        type(threshold_bytes) is int
        and threshold_bytes == DEFAULT_THRESHOLD_BYTES
        and known_blobs is True
        and type(max_concurrency) is int
        and max_concurrency == DEFAULT_MAX_CONCURRENCY
        and structured is None
    )
    if options is None:
        if at_defaults:
            return DEFAULT_OPTIONS
        return WalkOptions(threshold_bytes, known_blobs, max_concurrency, structured)
    if not isinstance(options, WalkOptions):
        raise InvalidArgumentError('options', 'a WalkOptions or None', options)
    if not at_defaults:
        for name, value, default in (
            ('threshold_bytes', threshold_bytes, DEFAULT_THRESHOLD_BYTES),
            ('known_blobs', known_blobs, True),
            ('max_concurrency', max_concurrency, DEFAULT_MAX_CONCURRENCY),
            ('structured', structured, None),
        ):
            if not (value is default or (type(value) is int and value == default)):
                raise InvalidArgumentError(name, 'left out when options= is given (set it in WalkOptions)', value)
    return options


class WalkKeywords(TypedDict, total=False):
    """The walk settings an integration's constructor took one by one before ``options=WalkOptions(...)``.

    Still accepted for one release (``options_from_keywords`` warns); typed so
    a checker still sees a wrong type.
    """

    threshold_bytes: int
    known_blobs: KnownBlobCache | bool
    max_concurrency: int


_WALK_KEYWORDS: Final = tuple(WalkKeywords.__annotations__)

DEPRECATED_KEYWORDS: Final = 'walk settings given as separate keywords are deprecated'
"""How every such ``DeprecationWarning`` begins (a warnings filter can match it)."""


def options_from_keywords(
    owner: str,
    options: WalkOptions | None,
    keywords: Mapping[str, Any],
    *,
    structured: bool | None = None,
    stacklevel: int = 3,
) -> WalkOptions:
    """The one ``WalkOptions`` of an integration's constructor: ``options``, or the deprecated separate keywords.

    ``owner`` names the class in messages; ``keywords`` is what the
    constructor collected as ``**walk_keywords`` (an unknown name is the
    ``TypeError`` Python gives for one). Keywords alone still work, with a
    ``DeprecationWarning`` that names the ``options=WalkOptions(...)`` form
    (``stacklevel`` points it at the caller's line); keywords together with
    ``options`` are an ``InvalidArgumentError`` naming the first keyword.
    ``structured`` is the default the owner gives ``structured=None``.
    """
    unknown = [name for name in keywords if name not in _WALK_KEYWORDS]
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument '{unknown[0]}'")
    if options is not None and not isinstance(options, WalkOptions):
        raise InvalidArgumentError('options', 'a WalkOptions or None', options)
    if keywords:
        name = next(iter(keywords))
        if options is not None:
            raise InvalidArgumentError(name, 'left out when options= is given (set it in WalkOptions)', keywords[name])
        given = ', '.join(f'{key}=...' for key in keywords)
        warnings.warn(
            f'{DEPRECATED_KEYWORDS}: {owner}({given}) -> {owner}(options=WalkOptions({given})); '
            'the separate keywords go in the next release',
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        options = WalkOptions(**keywords)
    chosen = DEFAULT_OPTIONS if options is None else options
    return chosen if structured is None else chosen.structured_by_default(structured)


class WalkSetting:
    """A class attribute mirroring one field of the instance's ``_walk_options``.

    Keeps the wrappers' ``threshold_bytes`` / ``known_blobs`` /
    ``max_concurrency`` attributes readable and assignable as before, while
    the walk reads the one ``WalkOptions``; an assignment is checked like the
    constructor argument.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return getattr(instance._walk_options, self.name)  # type: ignore[attr-defined]

    def __set__(self, instance: object, value: Any) -> None:
        current: WalkOptions = instance._walk_options  # type: ignore[attr-defined]
        changes: dict[str, Any] = {self.name: value}
        instance._walk_options = dataclasses.replace(current, **changes)  # type: ignore[attr-defined]


class WalkSettings:
    """A mixin: ``threshold_bytes``, ``known_blobs`` and ``max_concurrency`` attributes over ``_walk_options``.

    What every integration that walks offers (readable, and assignable with
    the constructor's checks); the class sets ``_walk_options`` in its
    constructor (``options_from_keywords``).
    """

    _walk_options: WalkOptions
    threshold_bytes = WalkSetting()
    known_blobs = WalkSetting()
    max_concurrency = WalkSetting()
