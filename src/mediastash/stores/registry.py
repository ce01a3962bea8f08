"""Which store class a URL scheme names: the built-in backends, ``register_store`` calls, and plug-ins.

A plug-in is any installed distribution that declares an entry point in the
group ``mediastash.stores``: its name is the URL scheme, its value the store
class as ``module:Class``. Entry points are read once, on the first lookup of
a scheme no built-in or registered backend claims (or on the first
``available_schemes()``), and a class is imported only when its scheme is
used, so ``import mediastash`` needs neither aiobotocore nor pymongo nor any
plug-in. Built-ins and ``register_store`` calls win over entry points of the
same name. The contract a store class keeps (an ``options_class``, or its
own ``from_url`` / ``plan_from_url``) is in ``docs/stores.md`` ("Opening a
backend from a URL").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mediastash._plugins import declared, import_target
from mediastash.errors import InvalidArgumentError, InvalidStoreConfiguration
from mediastash.stores.base import BaseMediaStore

__all__ = ['ENTRY_POINT_GROUP', 'available_schemes', 'register_store', 'store_class']

ENTRY_POINT_GROUP = 'mediastash.stores'
"""The entry-point group plug-in backends declare themselves in (name: URL scheme, value: ``module:Class``)."""

_SCHEME_NAME = re.compile(r'[a-z][a-z0-9+.-]+')
"""A registrable scheme: lowercase, at least two characters (one letter followed by ``:`` is a Windows drive)."""
_SHOWN_SCHEME = re.compile(r'[a-z][a-z0-9+.-]{0,19}')
"""Unknown schemes quoted in errors: short and lowercase, as a scheme is; anything else is not repeated."""

_URL_OPENERS = ('from_url', 'plan_from_url')
"""What a backend class may write to be opened from a URL (else it declares ``options_class`` or, the older
hook, a ``url_planner``)."""


@dataclass(slots=True)
class _Backend:
    """One scheme's store class (or ``module:Class`` until first use) and where it came from."""

    target: type[BaseMediaStore] | str
    extra: str | None = None
    origin: str = ''
    """How errors name it: empty for a built-in or a ``register_store`` call, else the entry point."""
    rivals: list[str] = field(default_factory=list)
    """Other entry points claiming the same scheme with another class (then the scheme is refused)."""


_BUILT_IN: dict[str, tuple[str, str | None]] = {
    'memory': ('mediastash.stores.memory:MemoryMediaStore', None),
    'file': ('mediastash.stores.disk:DiskMediaStore', None),
    'sqlite': ('mediastash.stores.sqlite:SqliteMediaStore', None),
    's3': ('mediastash.stores.s3:S3MediaStore', 's3'),
    'mongodb': ('mediastash.stores.mongo:MongoMediaStore', 'mongo'),
    'mongodb+srv': ('mediastash.stores.mongo:MongoMediaStore', 'mongo'),
    'postgresql': ('mediastash.stores.postgres:PostgresMediaStore', 'postgres'),
    'postgres': ('mediastash.stores.postgres:PostgresMediaStore', 'postgres'),
}
_FORMS = {
    'memory': 'memory://',
    'file': 'file:///absolute/path (or a plain path)',
    'sqlite': 'sqlite:///relative.db or sqlite:////absolute/path.db',
    's3': 's3://<bucket>[/<key prefix>]',
    'mongodb': 'mongodb://host[:port]/<database>',
    'mongodb+srv': 'mongodb+srv://host/<database>',
    'postgresql': 'postgresql://[user@]host[:port]/<database>[?table=media]',
    'postgres': 'postgres://[user@]host[:port]/<database>[?table=media]',
}
"""How the built-in schemes are written, for errors; a plug-in's is ``<scheme>://...``."""

_registered: dict[str, _Backend] = {scheme: _Backend(target, extra) for scheme, (target, extra) in _BUILT_IN.items()}
_plugins: dict[str, _Backend] | None = None
"""Entry-point backends by scheme, once read (``None`` before)."""


def register_store(scheme: str, target: type[BaseMediaStore] | str, *, extra: str | None = None) -> None:
    """Make ``scheme://`` URLs open ``target``, a store class or ``'module:Class'`` (imported on first use).

    ``extra`` names the ``mediastash`` extra the class needs, for the install
    hint shown when importing it fails. A registration replaces an earlier
    one (a built-in included) and wins over entry points of the same name.
    """
    if not isinstance(scheme, str) or _SCHEME_NAME.fullmatch(scheme) is None:
        raise InvalidArgumentError('scheme', 'a lowercase URL scheme of two or more letters, digits, +, - or .', scheme)
    if not (isinstance(target, str) and ':' in target) and not (
        isinstance(target, type) and issubclass(target, BaseMediaStore)
    ):
        raise InvalidArgumentError(
            'target',
            'a BaseMediaStore subclass that declares options_class (or defines the from_url classmethod), '
            "or a 'module:Class' string naming one",
            target,
        )
    if extra is not None and not isinstance(extra, str):
        raise InvalidArgumentError('extra', 'a str or None', extra)
    if isinstance(target, type) and not _opens_from_url(target):
        raise _no_url_hook(f'the store class {target.__name__} registered for {scheme}://')
    _registered[scheme] = _Backend(target, extra)


def available_schemes() -> list[str]:
    """Every scheme ``open_store`` knows, sorted: built-in, registered and declared by installed plug-ins.

    Nothing is imported: a scheme whose class needs a missing extra is listed
    (opening it says what to install).
    """
    return sorted({*_registered, *_entry_point_backends()})


def store_class(scheme: str) -> type[BaseMediaStore]:
    """The store class for ``scheme`` (case-insensitive), imported now if it was given as ``module:Class``.

    Raises ``InvalidStoreConfiguration`` for an unknown scheme (listing the
    known ones), a class that cannot be imported (naming its entry point or
    the extra to install) or a target that is not a ``BaseMediaStore`` class.
    """
    key = scheme.lower() if isinstance(scheme, str) else ''
    backend = _registered.get(key) or _entry_point_backends().get(key)
    if backend is None:
        raise unknown_scheme(scheme)
    if backend.rivals:
        claims = ', '.join([backend.origin, *backend.rivals])
        raise InvalidStoreConfiguration(
            f'more than one installed plug-in declares the {key}:// store scheme ({claims}); uninstall all but one'
        )
    if isinstance(backend.target, str):
        backend.target = _load(key, backend)
    return backend.target


def unknown_scheme(scheme: object) -> InvalidStoreConfiguration:
    """The error for a scheme no backend claims: the known forms and the install hints of the optional ones."""
    text = scheme.lower() if isinstance(scheme, str) else ''
    shown = repr(text) if _SHOWN_SCHEME.fullmatch(text) else '(not shown)'
    return InvalidStoreConfiguration(f'unknown store URL scheme {shown}; use one of {known_forms()}')


def known_forms() -> str:
    """The known URL forms, each optional built-in with its ``pip install`` line."""
    forms: list[str] = []
    for scheme in available_schemes():
        backend = _registered.get(scheme)
        form = _FORMS.get(scheme, f'{scheme}://...') if backend is not None else f'{scheme}://... (plug-in)'
        if backend is not None and backend.extra:
            form += f' (needs pip install "mediastash[{backend.extra}]")'
        forms.append(form)
    return ', '.join(forms)


_SHORT_FORMS = {
    'file': 'file:///path',
    'sqlite': 'sqlite:///path.db',
    's3': 's3://bucket/prefix',
    'mongodb': 'mongodb://host/db',
    'postgresql': 'postgresql://host/db',
}
"""The forms ``--help`` shows for the built-ins (aliases such as ``postgres://`` and ``memory://`` are left out)."""


def help_forms() -> str:
    """Store URL forms for a command's ``--help``: a folder, the built-ins, then every installed plug-in's scheme."""
    plugins = [f'{scheme}://...' for scheme in available_schemes() if scheme not in _registered]
    return ', '.join(['a folder', *_SHORT_FORMS.values(), *plugins])


def scheme_form(scheme: str) -> str:
    """How ``scheme`` URLs are written, for errors."""
    return _FORMS.get(scheme, f'{scheme}://...')


def _load(scheme: str, backend: _Backend) -> type[BaseMediaStore]:
    """Import ``module:Class``; errors name the entry point or the extra, never a value from a URL."""
    assert isinstance(backend.target, str)
    source = f'entry point {backend.origin}' if backend.origin else f'{backend.target!r}'
    try:
        found = import_target(backend.target)
    except ImportError as error:
        if backend.extra and not (error.name or '').startswith('mediastash'):
            raise InvalidStoreConfiguration(
                f'{scheme}:// URLs need the {backend.extra!r} extra: pip install "mediastash[{backend.extra}]"'
            ) from error
        raise InvalidStoreConfiguration(
            f'the store backend for {scheme}:// ({source}) cannot be imported: {type(error).__name__}: {error}'
        ) from error
    except Exception as error:
        raise InvalidStoreConfiguration(
            f'the store backend for {scheme}:// ({source}) cannot be loaded: {type(error).__name__}'
        ) from error
    if not (isinstance(found, type) and issubclass(found, BaseMediaStore)):
        what = 'a function' if callable(found) and not isinstance(found, type) else 'not a BaseMediaStore class'
        raise InvalidStoreConfiguration(
            f'the store backend for {scheme}:// ({source}) is {what}: an entry point names a BaseMediaStore '
            'subclass that declares options_class (or defines the from_url classmethod); see "Writing a backend" '
            'in docs/stores.md'
        )
    if not _opens_from_url(found):
        raise _no_url_hook(f'the store backend for {scheme}:// ({source})')
    return found


def _opens_from_url(cls: type[BaseMediaStore]) -> bool:
    """Whether ``cls`` has a URL hook: ``options_class``, ``url_planner``, or a ``from_url``/``plan_from_url``."""
    return cls.options_class is not None or cls._url_planner is not None or _writes_url_opener(cls)


def _no_url_hook(what: str) -> InvalidStoreConfiguration:
    return InvalidStoreConfiguration(
        f'{what} cannot be opened from a URL: it declares no options_class and defines no from_url classmethod'
    )


def _writes_url_opener(cls: type[BaseMediaStore]) -> bool:
    """Whether a class between ``cls`` and ``BaseMediaStore`` writes ``from_url`` or ``plan_from_url`` itself."""
    below_base = cls.__mro__[: cls.__mro__.index(BaseMediaStore)]
    return any(name in vars(klass) for klass in below_base for name in _URL_OPENERS)


def _entry_point_backends() -> dict[str, _Backend]:
    """The backends installed distributions declare in ``mediastash.stores``, read once."""
    global _plugins
    if _plugins is None:
        _plugins = {
            scheme: _Backend(entry.target, origin=entry.origin, rivals=entry.rivals)
            for scheme, entry in declared(ENTRY_POINT_GROUP, _SCHEME_NAME).items()
        }
    return _plugins
