"""``SqliteMediaStore.from_url``: ``sqlite:///relative.db``, ``sqlite:////abs.db``, ``~`` and ``:memory:``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from mediastash.errors import InvalidStoreConfiguration, StoreNotFoundError
from mediastash.stores._plan import StorePlan
from mediastash.stores._url import merged_options, query_parameters, split_url, unknown_parameter, url_scheme

if TYPE_CHECKING:
    from mediastash.stores.sqlite._store import SqliteMediaStore

__all__ = ['plan_sqlite']

Q = TypeVar('Q', bound='SqliteMediaStore')


def plan_sqlite(store: type[Q], url: str, create: bool, overrides: dict[str, Any]) -> StorePlan[Q]:
    """Check ``url`` (and, with ``create=False``, find the file) without creating anything."""
    parts = split_url(url, url_scheme(url, store.__name__, ('sqlite',)))
    if parts.netloc:
        raise InvalidStoreConfiguration(
            'a sqlite:// URL names no host: use sqlite:///relative.db or sqlite:////absolute/path.db'
        )
    database = os.path.expanduser(unquote(parts.path[1:]))
    arguments: dict[str, Any] = {'database': database} if database else {}
    for name, value in query_parameters(parts.query, 'sqlite://').items():
        if name != 'table':
            raise unknown_parameter(name, 'sqlite://', ('table',))
        arguments['table'] = value
    merged = merged_options(store, arguments, overrides)
    if 'connection' in overrides and 'database' not in overrides:  # the caller's connection replaces the file
        merged.pop('database', None)
    if merged.get('database') is None and merged.get('connection') is None:
        raise InvalidStoreConfiguration(
            'the sqlite:// URL names no database file; use sqlite:///relative.db or sqlite:////absolute/path.db'
        )
    file = merged.get('database')
    parent = ''
    if file is not None and os.fspath(file) not in ('', ':memory:'):
        _check_database_file(os.fspath(file), create)
        parent = os.path.dirname(os.fspath(file)) if create else ''

    def build() -> Q:
        opened = store(**merged)  # checks its options first: a refused one makes no folder
        if parent:
            os.makedirs(parent, exist_ok=True)
        return opened

    return StorePlan(build, (parent,) if parent else ())


def _check_database_file(file: str, create: bool) -> None:
    """Refuse a folder; with ``create=False``, a missing file."""
    if os.path.isdir(file):
        raise InvalidStoreConfiguration(f'{file!r} is a folder, not a SQLite database file')
    if not create and not os.path.isfile(file):
        raise StoreNotFoundError('SQLite database', file, hint='nothing was created')
