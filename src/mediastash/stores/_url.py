"""What every backend's ``from_url`` shares: splitting a URL, reading its query, and refusing without echoing.

A store URL may carry a secret pasted in the wrong place, so nothing here
ever repeats a value: errors name the parameter (only when it looks like a
name) and what it accepts. The converters (``text``, ``boolean``, ``integer``,
``size``, ``number``, ``duration``) are what ``_options.query_options`` maps
query parameters with; each backend's options class reads its URL with these
helpers; ``open_store`` uses ``SCHEME``.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import SplitResult, unquote_plus, urlsplit

from mediastash._units import SizeSyntaxError, parse_size
from mediastash.errors import InvalidStoreConfiguration

__all__ = [
    'SCHEME',
    'boolean',
    'check_unicode',
    'duration',
    'integer',
    'looks_secret',
    'merged_options',
    'number',
    'query_parameters',
    'shown',
    'size',
    'split_url',
    'text',
    'unknown_parameter',
    'url_scheme',
]

SCHEME = re.compile(r'([A-Za-z][A-Za-z0-9+.-]*)://')
"""The ``scheme://`` a store URL begins with."""
_SHOWN_NAME = re.compile(r'[a-z_][A-Za-z_]{0,39}')
"""Query parameter names quoted in errors: letters and underscores, as every parameter name is. Anything else is
not repeated: a pasted key or token (``ghp_...``, ``sk_live_...``, an AWS secret key) holds digits."""
_INTEGER = re.compile(r'[+-]?[0-9]+')
_SECRET_WORDS = ('secret', 'password', 'passwd', 'token', 'credential', 'access_key', 'accesskey', 'signature', 'x-amz')
N = TypeVar('N', int, float)
_TRUE = frozenset({'1', 'true', 'yes', 'on'})
_FALSE = frozenset({'0', 'false', 'no', 'off'})


def url_scheme(url: str, owner: str, schemes: tuple[str, ...]) -> str:
    """The (lowercased) scheme of ``url``, which must be one of ``schemes``; ``owner`` names the class in errors."""
    match = SCHEME.match(url) if isinstance(url, str) else None
    scheme = match.group(1).lower() if match else ''
    if scheme not in schemes:
        forms = ' or '.join(f'{name}://' for name in schemes)
        raise InvalidStoreConfiguration(f'{owner}.from_url takes a {forms} URL (the one given is not shown)')
    check_unicode(f'the {scheme}:// URL', url)
    return scheme


def check_unicode(what: str, value: str) -> None:
    """Refuse ``value`` when it holds a lone surrogate (it cannot be encoded, so no server could be sent it).

    Checked character by character: the ``UnicodeEncodeError`` that ``encode`` raises would carry the whole
    value in its ``object``, and an error's context outlives ``from None``.
    """
    if any('\ud800' <= char <= '\udfff' for char in value):
        raise InvalidStoreConfiguration(
            f'{what} must be encodable as UTF-8, without lone surrogates (it is not repeated here)'
        )


def split_url(url: str, scheme: str, *, credentials_hint: str = '') -> SplitResult:
    """``urlsplit`` that refuses credentials (``user:password@``) and fragments, quoting neither."""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None  # refused below, outside the handler, so that no error keeps the parser's as its context
    if parts is None:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL cannot be parsed')
    if '@' in parts.netloc:
        where = f'; {credentials_hint}' if credentials_hint else ''
        raise InvalidStoreConfiguration(f'the {scheme}:// URL must not carry credentials (user:password@){where}')
    if parts.fragment or url.endswith('#'):
        raise InvalidStoreConfiguration(f'the {scheme}:// URL takes no #fragment')
    return parts


def query_parameters(query: str, form: str, *, separators: str = '&') -> dict[str, str]:
    """The query's parameters, decoded; a repeated one is refused (``form`` such as ``'s3://'`` names the URL)."""
    found: dict[str, str] = {}
    for piece in re.split(f'[{re.escape(separators)}]', query):
        if not piece:
            continue
        raw_name, _, raw_value = piece.partition('=')
        name = unquote_plus(raw_name)
        if name in found:
            raise InvalidStoreConfiguration(f'the {form} URL gives the parameter {shown(name)} twice')
        found[name] = unquote_plus(raw_value)
    return found


def shown(name: str) -> str:
    """How an error names a query parameter: quoted when it looks like a name, else not repeated."""
    return repr(name) if _SHOWN_NAME.fullmatch(name) else '(name not shown)'


def looks_secret(name: str) -> bool:
    """Whether a parameter name says it carries a credential (``aws_secret_access_key``, ``password``, ...)."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def unknown_parameter(name: str, form: str, known: tuple[str, ...]) -> InvalidStoreConfiguration:
    """The error for a parameter ``form`` URLs do not take, listing those they do."""
    return InvalidStoreConfiguration(f'unknown {form} URL parameter {shown(name)}; accepted: {", ".join(known)}')


def boolean(name: str, value: str) -> bool:
    """``true``/``false`` (or ``1``/``0``, ``yes``/``no``, ``on``/``off``) of parameter ``name``."""
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise InvalidStoreConfiguration(
        f'URL parameter {name}= must be true or false (or 1/0, yes/no, on/off); the value given is not shown'
    )


def integer(name: str, value: str) -> int:
    """The integer value of parameter ``name``, ASCII digits only (its range is the store constructor's to check)."""
    if _INTEGER.fullmatch(value.strip()) is None:
        raise InvalidStoreConfiguration(
            f'URL parameter {name}= must be an integer (digits only); the value given is not shown'
        )
    return _converted(name, value, int, 'an integer (digits only)')


def size(name: str, value: str) -> int:
    """The byte count of parameter ``name``: ``8388608``, ``8MiB`` or ``8MB`` (read as every size is read)."""
    try:
        return parse_size(value)
    except SizeSyntaxError:
        raise InvalidStoreConfiguration(
            f'URL parameter {name}= must be a byte count: an integer such as 8388608, or with a unit such as 8MiB '
            '(8,388,608 bytes) or 8MB (8,000,000 bytes); the value given is not shown'
        ) from None


def number(name: str, value: str) -> float:
    """The finite number value of parameter ``name`` (its range is the store constructor's to check)."""
    found = _converted(name, value, float, 'a number (such as 30 or 0.5)')
    if not math.isfinite(found):
        raise InvalidStoreConfiguration(f'URL parameter {name}= must be a finite number; the value given is not shown')
    return found


def text(name: str, value: str) -> str:
    """The non-empty text of parameter ``name``."""
    if not value:
        raise InvalidStoreConfiguration(f'URL parameter {name}= is empty')
    return value


_DURATION = re.compile(r'(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h)?')
_SECONDS_PER = {'ms': 0.001, 's': 1.0, 'm': 60.0, 'h': 3600.0, None: 1.0}


def duration(name: str, value: str) -> float:
    """Seconds of parameter ``name``: ``30`` or ``30s``, ``500ms``, ``5m``, ``1h`` (the options check the range)."""
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        raise InvalidStoreConfiguration(
            f'URL parameter {name}= must be a duration: seconds such as 30 or 0.5, or with a unit such as 500ms, '
            '30s, 5m or 1h; the value given is not shown'
        )
    return float(match.group(1)) * _SECONDS_PER[match.group(2)]


def _converted(name: str, value: str, convert: Callable[[str], N], accepts: str) -> N:
    try:
        return convert(value)
    except ValueError:
        pass  # raised below, outside the handler: the ValueError quotes the value and would be kept as __context__
    raise InvalidStoreConfiguration(f'URL parameter {name}= must be {accepts}; the value given is not shown')


def merged_options(store: type[Any], arguments: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The URL's constructor arguments with ``overrides`` on top; an override the constructor lacks is refused."""
    parameters = inspect.signature(store.__init__).parameters
    if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        accepted = set(parameters) - {'self'}
        for name in overrides:
            if name not in accepted:
                raise InvalidStoreConfiguration(f'{store.__name__} does not accept the option {name!r}')
    return {**arguments, **overrides}
