"""``MongoOptions``: a ``MongoMediaStore``'s settings, and its URL form: a MongoDB connection string.

``mongodb[+srv]://[user:password@]host[:port][,...]/database?collection=media&<driver options>``
is parsed the way the driver does (hosts up to the first ``/``), because a
MongoDB host list is not a URL netloc. ``collection`` and
``chunk_size_bytes`` are mediastash's (``OWN_OPTIONS``) and removed; every
other option is checked with the driver's validator and passed on unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, ClassVar, Final, Self
from urllib.parse import unquote_plus

from mediastash._checks import exactly_one_of
from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores._options import Converter, StoreOptions, check_callable, query_options
from mediastash.stores._url import check_unicode, shown, size, text, url_scheme
from mediastash.stores.mongo._layout import (
    DEFAULT_CHUNK_SIZE_BYTES,
    Document,
    check_chunk_size,
    check_collection,
    check_database,
)
from mediastash.urls import PublicUrlResolver

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient

__all__ = ['OWN_OPTIONS', 'MongoOptions']

_QUERY: dict[str, tuple[str, Converter]] = {
    'collection': ('collection', text),
    'chunk_size_bytes': ('chunk_size_bytes', size),
}
OWN_OPTIONS: Final = tuple(_QUERY)
_URL_START = re.compile(r'mongodb(\+srv)?://.', re.IGNORECASE)
"""Query parameters of a MongoDB URL that mediastash reads and removes; the rest go to the driver."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MongoOptions(StoreOptions):
    """Where a ``MongoMediaStore`` keeps its blobs (see the store for each setting).

    Exactly one of ``client`` and ``db_url``; ``db_url`` is never shown in
    the ``repr`` (a connection string can hold a password).
    """

    store_name: ClassVar[str] = 'MongoMediaStore'

    client: AsyncMongoClient[Document] | None = dataclasses.field(default=None, compare=False)
    """Your ``AsyncMongoClient``, never closed by the store."""
    db_url: str | None = dataclasses.field(default=None, repr=False)
    """A connection string: the store makes the client and closes it."""
    database: str | None = None
    """The database (default: the one the connection string names)."""
    collection: str = 'media'
    """The manifest collection; chunks go to ``<collection>_chunks`` (URL: ``collection=``)."""
    chunk_size_bytes: int = DEFAULT_CHUNK_SIZE_BYTES
    """The largest piece one chunk document holds (URL: ``chunk_size_bytes=4MiB``)."""
    public_url: PublicUrlResolver | None = None
    """Resolves a stored blob's public URL (none by default)."""

    def __post_init__(self) -> None:
        exactly_one_of('MongoMediaStore', ('client', self.client, 'an AsyncMongoClient'), ('db_url', self.db_url, ''))
        if self.database is not None:
            check_database(self.database)
        check_collection(self.collection)
        check_chunk_size(self.chunk_size_bytes)
        if self.client is None and (
            not isinstance(self.db_url, str) or _URL_START.match(self.db_url) is None or '\x00' in self.db_url
        ):
            raise InvalidStoreConfiguration(
                'db_url= must be a mongodb:// or mongodb+srv:// connection string without NUL '
                '(the value given is not shown)'
            )
        if self.db_url is not None:
            check_unicode('db_url=', self.db_url)
        if self.public_url is not None:
            check_callable('public_url', self.public_url, 'None or a callable (uri, context) -> URL')

    @classmethod
    def from_store_url(cls, url: str, *, create: bool, overrides: dict[str, Any], owner: str) -> Self:
        """Check ``url``; databases are never created here, so ``create`` changes nothing and nothing is contacted."""
        scheme = url_scheme(url, owner, ('mongodb', 'mongodb+srv'))
        hosts, slash, tail = url.partition('://')[2].partition('/')
        if not slash and '?' in hosts:
            raise InvalidStoreConfiguration(f"a {scheme}:// URL needs a '/' between the hosts and the options")
        if not hosts or hosts.endswith('@'):
            raise InvalidStoreConfiguration(f'the {scheme}:// URL names no host')
        if '#' in tail:
            raise InvalidStoreConfiguration(f'the {scheme}:// URL takes no #fragment')
        database_part, _, query = tail.partition('?')
        own: dict[str, str] = {}
        kept: list[str] = []
        for piece in re.split('[&;]', query):
            if not piece:
                continue
            raw_name, _, raw_value = piece.partition('=')
            name = unquote_plus(raw_name)
            if name in OWN_OPTIONS:
                if name in own:
                    raise InvalidStoreConfiguration(f'the {scheme}:// URL gives the parameter {name!r} twice')
                own[name] = unquote_plus(raw_value)
            else:
                _check_driver_option(name, piece)
                kept.append(piece)
        settings = query_options(own, f'{scheme}://', _QUERY)
        database = unquote_plus(database_part)
        if database:
            settings['database'] = database
        elif 'database' not in overrides:
            raise InvalidStoreConfiguration(
                f'the {scheme}:// URL names no database; use {scheme}://host:port/<database>'
            )
        if 'client' not in overrides:
            settings['db_url'] = (
                f'{scheme}://{hosts}' + (f'/{database_part}' if slash else '') + ('?' + '&'.join(kept) if kept else '')
            )
        return cls.made({**settings, **overrides}, owner)


def _check_driver_option(name: str, piece: str) -> None:
    """Refuse a driver option the driver does not know or would not accept, without quoting its value."""
    from pymongo.errors import ConfigurationError
    from pymongo.uri_parser import split_options

    if '\x00' in unquote_plus(piece):
        raise InvalidStoreConfiguration(f'MongoDB URL option {shown(name)} holds a NUL character')
    # The driver's errors quote the value: each is read inside its handler and refused outside it, so that the
    # error raised keeps none of them as its __context__.
    try:
        split_options(piece, validate=True, warn=False)
    except ConfigurationError as exc:
        problem = 'unknown' if 'unknown option' in str(exc).lower() else 'invalid'
    except (ValueError, TypeError, KeyError):
        problem = 'invalid'
    else:
        return
    if problem == 'unknown':
        raise InvalidStoreConfiguration(f'unknown MongoDB URL option {shown(name)}')
    raise InvalidStoreConfiguration(f'MongoDB URL option {shown(name)} has an invalid value')
