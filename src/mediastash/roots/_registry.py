"""Which root a ``KIND:`` argument names, and which root an integration's object is: filled by the integrations.

Kinds (``mediastash gc --roots KIND:ARGUMENT``): the built-in integrations'
kinds are listed here as ``module:attribute`` strings, imported only when
their kind is used, so neither this module nor ``mediastash.gc`` nor the CLI
imports a framework or an integration. A plug-in adds a kind with no edit to
mediastash by declaring an entry point in the group ``mediastash.roots``
(name: the kind, value: ``module:callable`` taking the text after ``KIND:``
and returning a ``Root``), or at run time with ``register_root_kind``. Built-ins
and registrations win over entry points of the same name.

Objects (``collect_garbage(store, [saver, session, step_store])``): each
integration offers a ``root_for(value)`` that returns the root for an object
of its own framework, or ``None``. One is asked only once its framework is
imported (no object of it can exist before). ``register_root_adapter`` adds
one at run time; an object may also simply be a ``Root`` itself.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mediastash._plugins import declared, import_target
from mediastash.errors import InvalidArgumentError, RootReadError
from mediastash.roots._protocol import Root

__all__ = [
    'ENTRY_POINT_GROUP',
    'RootAdapter',
    'RootFactory',
    'available_root_kinds',
    'register_root_adapter',
    'register_root_kind',
    'root_adapters',
    'root_kind',
    'root_kinds_help',
]

ENTRY_POINT_GROUP: Final = 'mediastash.roots'
"""The entry-point group plug-ins declare root kinds in (name: the kind, value: ``module:callable``)."""

RootFactory = Callable[[str], Root]
"""Makes the root a ``KIND:ARGUMENT`` names from its ``ARGUMENT`` (a path, a connection string...)."""

RootAdapter = Callable[[object], Root | None]
"""Returns the root for an object it knows (a framework's store, saver or session), else ``None``."""

_KIND_NAME: Final = re.compile(r'[a-z][a-z0-9-]{1,39}')


@dataclass(slots=True)
class _Kind:
    target: Callable[..., Root] | str
    """The factory, or ``module:attribute`` until first use."""
    about: str = ''
    """What the kind names, for ``--help``."""
    argument: str = '...'
    """How its argument is written, for ``--help`` (``DB``, ``postgresql://...``)."""
    extra: str | None = None
    """The mediastash extra its import needs, for the install hint."""
    path: bool = False
    """The argument is a path (``~`` is expanded and a ``Path`` is passed)."""
    origin: str = ''
    """The entry point that declared it (empty for a built-in or a registration)."""
    rivals: list[str] = field(default_factory=list)
    """Other entry points declaring the same kind with another callable (then the kind is refused)."""


_LANGGRAPH: Final = 'mediastash.integrations.langgraph._roots'
_AGENTS: Final = 'mediastash.integrations.openai_agents._roots'
_PYDANTIC_AI: Final = 'mediastash.integrations.pydantic_ai._roots'

_BUILT_IN: Final = {
    'langgraph-sqlite': _Kind(
        f'{_LANGGRAPH}:LangGraphSQLiteRoot', 'a LangGraph SqliteSaver checkpoint database', 'DB', 'langgraph', True
    ),
    'langgraph-postgres': _Kind(
        f'{_LANGGRAPH}:LangGraphPostgresRoot', 'a LangGraph PostgresSaver database', 'postgresql://...', 'langgraph'
    ),
    'agents-sqlite': _Kind(
        f'{_AGENTS}:SQLiteSessionRoot',
        'every session of an OpenAI Agents SQLiteSession or SQLAlchemySession database on SQLite',
        'DB',
        'openai-agents',
        True,
    ),
    'agents-postgres': _Kind(
        f'{_AGENTS}:PostgresSessionRoot',
        'every session of an OpenAI Agents SQLAlchemySession database on PostgreSQL',
        'postgresql://...',
        'openai-agents',
    ),
    'kv-sqlite': _Kind(
        f'{_PYDANTIC_AI}:SQLiteKVRoot', 'an AsyncKV in a SQLite kv table with a data column', 'DB', None, True
    ),
    'pg-steps': _Kind(
        f'{_PYDANTIC_AI}:PostgresStepStoreRoot', 'a pydantic-ai-harness PostgresStepStore', 'postgresql://...'
    ),
    'mongo-steps': _Kind(
        f'{_PYDANTIC_AI}:MongoStepStoreRoot', 'a pydantic-ai-harness MongoStepStore', 'mongodb://HOST/DATABASE'
    ),
}

_BUILT_IN_ADAPTERS: Final = (
    (f'{_PYDANTIC_AI}:root_for', None),  # also reads plain objects by their methods (list_runs, scan)
    (f'{_LANGGRAPH}:root_for', 'langgraph'),
    (f'{_AGENTS}:root_for', 'agents'),
)
"""Each integration's ``root_for``, with the framework package that must be imported before it is asked."""

_MOVED: Final = {
    _LANGGRAPH: 'CheckpointerRoot LangGraphPostgresRoot LangGraphSQLiteRoot',
    _AGENTS: 'SQLiteSessionRoot',
    _PYDANTIC_AI: 'ConversationStoreRoot KVRoot MongoStepStoreRoot PostgresStepStoreRoot SQLiteKVRoot ScannableKV '
    'StepStoreRoot',
}
"""Roots that ``mediastash.gc`` exported before they moved to their integration (served lazily from there)."""

_registered: dict[str, _Kind] = dict(_BUILT_IN)
_adapters: list[list[Any]] = [[target, framework] for target, framework in _BUILT_IN_ADAPTERS]
"""``[adapter or 'module:attribute', framework package or None]``, in the order they are asked."""


def register_root_kind(
    kind: str, factory: RootFactory | str, *, about: str = '', argument: str = '...', path: bool = False
) -> None:
    """Make ``KIND:ARGUMENT`` (``mediastash gc --roots``, ``root_from_spec``) call ``factory(ARGUMENT)``.

    ``factory``: a callable, or ``'module:attribute'`` imported on first use.
    ``path``: the argument is a path (the factory gets a ``Path``, ``~``
    expanded). A registration replaces an earlier one of the same kind.
    """
    if not isinstance(kind, str) or _KIND_NAME.fullmatch(kind) is None:
        raise InvalidArgumentError('kind', 'a lowercase name of 2 to 40 letters, digits or -', kind)
    if not (callable(factory) or (isinstance(factory, str) and ':' in factory)):
        raise InvalidArgumentError('factory', "a callable or a 'module:attribute' string", factory)
    _registered[kind] = _Kind(factory, about, argument, path=path)


def register_root_adapter(adapter: RootAdapter) -> None:
    """Ask ``adapter(value)`` for the root of an object no earlier adapter claimed (``None``: not its own)."""
    if not callable(adapter):
        raise InvalidArgumentError('adapter', 'a callable taking an object and returning a Root or None', adapter)
    _adapters.append([adapter, None])


def available_root_kinds() -> list[str]:
    """Every kind a registry entry or an installed plug-in declares, sorted (nothing is imported)."""
    return sorted({*_registered, *_entry_point_kinds()})


def built_in_root_kinds() -> tuple[str, ...]:
    """The kinds of the integrations shipped with mediastash, sorted."""
    return tuple(sorted(_BUILT_IN))


def root_kind(kind: str) -> RootFactory | None:
    """The factory of ``kind`` (``None`` if no one declares it), ready to take the text after ``KIND:``.

    Importing a kind's module that fails, or a plug-in kind claimed twice, is
    a ``RootReadError`` naming the kind and what to install, never the argument.
    """
    entry = _registered.get(kind) or _entry_point_kinds().get(kind)
    if entry is None:
        return None
    if entry.rivals:
        claims = ', '.join([entry.origin, *entry.rivals])
        raise RootReadError(f'more than one installed plug-in declares the root kind {kind}: ({claims})')
    factory: Callable[[Any], Root]
    if isinstance(entry.target, str):
        entry.target = factory = _load(entry.target, f'the {kind}: root kind', entry.extra, entry.origin)
    else:
        factory = entry.target
    if entry.path:
        return lambda argument: factory(Path(argument).expanduser())
    return factory


def root_kinds_help() -> str:
    """``about (KIND:ARGUMENT)`` for every kind, the framework-free ones first, for ``mediastash gc --help``."""
    from mediastash.roots._files import FILE_KINDS

    parts = [f'{about} ({kind}:{argument})' for kind, (about, argument) in FILE_KINDS.items()]
    for kind in available_root_kinds():
        entry = _registered.get(kind) or _entry_point_kinds()[kind]
        about = entry.about or 'a plug-in root'
        parts.append(f'{about} ({kind}:{entry.argument})')
    return ', '.join(parts)


def root_adapters() -> Iterator[RootAdapter]:
    """The adapters to ask, in order: the built-in integrations' (each once its framework is imported), then
    the registered ones. An adapter whose module cannot be imported is passed over: its objects cannot exist."""
    for index, (adapter, framework) in enumerate(_adapters):
        if framework is not None and framework not in sys.modules:
            continue
        if isinstance(adapter, str):
            try:
                adapter = _adapters[index][0] = import_target(adapter)
            except ImportError as error:
                if (error.name or '').startswith('mediastash'):
                    raise  # our own module is broken: say so
                continue  # its framework is not installed
        yield adapter


def moved_root(name: str) -> object:
    """A root class ``mediastash.gc`` used to define, from its integration (``AttributeError`` if none)."""
    module = next((module for module, names in _MOVED.items() if name in names.split()), None)
    if module is None:
        raise AttributeError(f"module 'mediastash.gc' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def moved_roots() -> list[str]:
    """The names ``moved_root`` serves."""
    return sorted(name for names in _MOVED.values() for name in names.split())


def _load(target: str, what: str, extra: str | None, origin: str) -> Any:
    """Import ``module:attribute``; errors name the kind and the extra to install, never an argument."""
    source = f'entry point {origin}' if origin else target
    try:
        found = import_target(target)
    except ImportError as error:
        if extra and not (error.name or '').startswith('mediastash'):
            raise RootReadError(f'{what} needs the {extra!r} extra: pip install "mediastash[{extra}]"') from error
        raise RootReadError(f'{what} ({source}) cannot be imported: {type(error).__name__}: {error}') from error
    except Exception as error:
        raise RootReadError(f'{what} ({source}) cannot be loaded: {type(error).__name__}') from error
    if not callable(found):
        raise RootReadError(f'{what} ({source}) is not callable')
    return found


@functools.cache
def _entry_point_kinds() -> dict[str, _Kind]:
    """The kinds installed distributions declare in ``mediastash.roots``, read once."""
    plugins = declared(ENTRY_POINT_GROUP, _KIND_NAME)
    return {kind: _Kind(entry.target, origin=entry.origin, rivals=entry.rivals) for kind, entry in plugins.items()}
