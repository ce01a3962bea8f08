"""``MongoMediaStore.from_url``: a MongoDB connection string whose path is the database.

``mongodb[+srv]://[user:password@]host[:port][,...]/database?collection=media&<driver options>``
is parsed the way the driver does (hosts up to the first ``/``), because a
MongoDB host list is not a URL netloc. ``collection`` and
``chunk_size_bytes`` are mediastash's (``OWN_OPTIONS``) and removed; every
other option is checked with the driver's validator and passed on unchanged.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import unquote_plus

from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores._plan import StorePlan
from mediastash.stores._url import merged_options, shown, size, url_scheme

if TYPE_CHECKING:
    from mediastash.stores.mongo._store import MongoMediaStore

__all__ = ['OWN_OPTIONS', 'plan_mongo']

M = TypeVar('M', bound='MongoMediaStore')

OWN_OPTIONS: Final = ('collection', 'chunk_size_bytes')
"""Query parameters of a MongoDB URL that mediastash reads and removes; the rest go to the driver."""


def plan_mongo(store: type[M], url: str, create: bool, overrides: dict[str, Any]) -> StorePlan[M]:
    """Check ``url``; databases are never created here, so ``create`` changes nothing and nothing is contacted."""
    scheme = url_scheme(url, store.__name__, ('mongodb', 'mongodb+srv'))
    hosts, slash, tail = url.partition('://')[2].partition('/')
    if not slash and '?' in hosts:
        raise InvalidStoreConfiguration(f"a {scheme}:// URL needs a '/' between the hosts and the options")
    if not hosts or hosts.endswith('@'):
        raise InvalidStoreConfiguration(f'the {scheme}:// URL names no host')
    database_part, _, query = tail.partition('?')
    arguments: dict[str, Any] = {}
    kept: list[str] = []
    seen: set[str] = set()
    for piece in re.split('[&;]', query):
        if not piece:
            continue
        raw_name, _, raw_value = piece.partition('=')
        name, value = unquote_plus(raw_name), unquote_plus(raw_value)
        if name in OWN_OPTIONS:
            if name in seen:
                raise InvalidStoreConfiguration(f'the {scheme}:// URL gives the parameter {name!r} twice')
            seen.add(name)
        if name == 'collection':
            arguments['collection'] = value
        elif name == 'chunk_size_bytes':
            arguments['chunk_size_bytes'] = size(name, value)
        else:
            _check_driver_option(name, piece)
            kept.append(piece)
    database = unquote_plus(database_part)
    if database:
        arguments['database'] = database
    elif 'database' not in overrides:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL names no database; use {scheme}://host:port/<database>')
    db_url = f'{scheme}://{hosts}' + (f'/{database_part}' if slash else '') + ('?' + '&'.join(kept) if kept else '')
    if 'client' not in overrides:
        arguments['db_url'] = db_url
    merged = merged_options(store, arguments, overrides)
    return StorePlan(lambda: store(**merged))


def _check_driver_option(name: str, piece: str) -> None:
    """Refuse a driver option the driver does not know or would not accept, without quoting its value."""
    from pymongo.errors import ConfigurationError
    from pymongo.uri_parser import split_options

    try:
        split_options(piece, validate=True, warn=False)
    except ConfigurationError as exc:
        if 'unknown option' in str(exc).lower():
            raise InvalidStoreConfiguration(f'unknown MongoDB URL option {shown(name)}') from None
        raise InvalidStoreConfiguration(f'MongoDB URL option {shown(name)} has an invalid value') from None
    except (ValueError, TypeError, KeyError):
        raise InvalidStoreConfiguration(f'MongoDB URL option {shown(name)} has an invalid value') from None
