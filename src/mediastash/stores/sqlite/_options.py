"""``SqliteOptions``: a ``SqliteMediaStore``'s settings, and its URL form.

``from_url`` takes ``sqlite:///relative.db``, ``sqlite:////abs.db``, ``~`` and
``:memory:``, with the query parameter ``table``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sqlite3
from typing import Any, ClassVar, Self
from urllib.parse import unquote

from mediastash._checks import exactly_one_of
from mediastash.errors import InvalidStoreConfiguration, StoreNotFoundError
from mediastash.stores._options import StoreOptions, check_callable, check_path, query_options
from mediastash.stores._url import check_unicode, query_parameters, split_url, text, url_scheme
from mediastash.urls import PublicUrlResolver

__all__ = ['SqliteOptions']

_TABLE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,62}')
_QUERY = {'table': ('table', text)}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SqliteOptions(StoreOptions):
    """Which SQLite database and table a ``SqliteMediaStore`` uses (see the store for each setting)."""

    store_name: ClassVar[str] = 'SqliteMediaStore'

    database: str | os.PathLike[str] | None = None
    """A database file the store opens and closes (exactly one of this and ``connection``)."""
    connection: sqlite3.Connection | None = dataclasses.field(default=None, compare=False)
    """Your connection (``check_same_thread=False``), never closed by the store."""
    table: str = 'media'
    """The table holding the blobs: 1-63 letters, digits or underscores (URL: ``table=``)."""
    public_url: PublicUrlResolver | None = None
    """Resolves a stored blob's public URL (none by default)."""

    def __post_init__(self) -> None:
        exactly_one_of('SqliteMediaStore', ('database', self.database, ''), ('connection', self.connection, ''))
        if self.database is not None:
            check_unicode('database', check_path('database', self.database))
        if self.connection is not None and not isinstance(self.connection, sqlite3.Connection):
            raise InvalidStoreConfiguration(
                f'connection must be a sqlite3.Connection, got {type(self.connection).__name__}'
            )
        if self.public_url is not None:
            check_callable('public_url', self.public_url, 'None or a callable (uri, context) -> URL')
        if not isinstance(self.table, str) or _TABLE_NAME.fullmatch(self.table) is None:
            raise InvalidStoreConfiguration(
                'invalid SQLite table name (not repeated here): '
                'use 1-63 letters, digits or underscores, not starting with a digit'
            )
        if self.table.lower().startswith('sqlite_'):
            raise InvalidStoreConfiguration(
                'invalid SQLite table name (not repeated here): names starting with "sqlite_" are reserved by SQLite'
            )

    def folders(self) -> tuple[str, ...]:
        file = '' if self.database is None else os.fspath(self.database)
        parent = os.path.dirname(file) if file not in ('', ':memory:') else ''
        return (parent,) if parent else ()

    @classmethod
    def from_store_url(cls, url: str, *, create: bool, overrides: dict[str, Any], owner: str) -> Self:
        """Check ``url`` (and, with ``create=False``, find the file) without creating anything."""
        parts = split_url(url, url_scheme(url, owner, ('sqlite',)))
        if parts.netloc:
            raise InvalidStoreConfiguration(
                'a sqlite:// URL names no host: use sqlite:///relative.db or sqlite:////absolute/path.db'
            )
        database = os.path.expanduser(unquote(parts.path[1:]))
        settings: dict[str, Any] = {'database': database} if database else {}
        settings.update(query_options(query_parameters(parts.query, 'sqlite://'), 'sqlite://', _QUERY))
        if 'connection' in overrides and 'database' not in overrides:  # the caller's connection replaces the file
            settings.pop('database', None)
        elif 'database' not in settings and overrides.get('database') is None:
            raise InvalidStoreConfiguration(
                'the sqlite:// URL names no database file; use sqlite:///relative.db or sqlite:////absolute/path.db'
            )
        options = cls.made({**settings, **overrides}, owner)
        file = '' if options.database is None else os.fspath(options.database)
        if file not in ('', ':memory:'):
            _check_database_file(file, create)
        return options


def _check_database_file(file: str, create: bool) -> None:
    """Refuse a folder; with ``create=False``, a missing file."""
    if os.path.isdir(file):
        raise InvalidStoreConfiguration(f'{file!r} is a folder, not a SQLite database file')
    if not create and not os.path.isfile(file):
        raise StoreNotFoundError('SQLite database', file, hint='nothing was created')
