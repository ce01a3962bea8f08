"""``PostgresMediaStore.from_url``: ``postgresql://[user@]host[:port]/database?table=media``.

``postgres://`` is the same. The password never comes from the URL (a URL
ends up in shell history and logs): asyncpg reads it from ``PGPASSWORD`` or
a ``.pgpass`` file, or pass a pool of your own. ``table``, ``schema``,
``chunk_size_bytes`` and ``max_connections`` are the store's (removed from
the DSN); the connection options in ``DRIVER_OPTIONS`` go to asyncpg
unchanged; anything else is refused without being repeated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import quote

from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores._plan import StorePlan
from mediastash.stores._url import (
    integer,
    looks_secret,
    merged_options,
    query_parameters,
    shown,
    size,
    split_url,
    unknown_parameter,
    url_scheme,
)
from mediastash.stores.postgres._address import DSN_SCHEMES

if TYPE_CHECKING:
    from mediastash.stores.postgres._store import PostgresMediaStore

__all__ = ['DRIVER_OPTIONS', 'OWN_OPTIONS', 'plan_postgres']

P = TypeVar('P', bound='PostgresMediaStore')

OWN_OPTIONS: Final = ('table', 'schema', 'chunk_size_bytes', 'max_connections')
DRIVER_OPTIONS: Final = (
    'sslmode',
    'sslrootcert',
    'sslcert',
    'sslkey',
    'connect_timeout',
    'application_name',
    'target_session_attrs',
)
_CREDENTIALS_HINT = 'give the password in PGPASSWORD or a .pgpass file, or pass pool= (the URL is not shown)'


def plan_postgres(store: type[P], url: str, create: bool, overrides: dict[str, Any]) -> StorePlan[P]:
    """Check ``url``; nothing is contacted and nothing is created (tables appear at the first write)."""
    scheme = url_scheme(url, store.__name__, DSN_SCHEMES)
    user, at, rest = url.partition('://')[2].rpartition('@')
    if at and ':' in user:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL must not carry a password; {_CREDENTIALS_HINT}')
    parts = split_url(f'{scheme}://{rest}' if at else url, scheme)
    if not parts.hostname:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL names no host; use {scheme}://host[:port]/<database>')
    database = parts.path.lstrip('/')
    if not database or '/' in database:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL names no database; use {scheme}://host[:port]/<database>')
    try:
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL has a port that is not a number') from None
    arguments: dict[str, Any] = {}
    kept: list[str] = []
    for name, value in query_parameters(parts.query, f'{scheme}://').items():
        if name in ('table', 'schema'):
            arguments[name] = value
        elif name == 'chunk_size_bytes':
            arguments[name] = size(name, value)
        elif name == 'max_connections':
            arguments[name] = integer(name, value)
        elif name in DRIVER_OPTIONS:
            kept.append(f'{name}={quote(value, safe="")}')
        elif looks_secret(name):
            raise InvalidStoreConfiguration(
                f'the {scheme}:// URL must not carry the credential parameter {shown(name)}; {_CREDENTIALS_HINT}'
            )
        else:
            raise unknown_parameter(name, f'{scheme}://', (*OWN_OPTIONS, *DRIVER_OPTIONS))
    if 'pool' not in overrides:
        login = f'{user}@' if at else ''
        arguments['dsn'] = f'postgresql://{login}{parts.netloc}/{database}' + ('?' + '&'.join(kept) if kept else '')
    merged = merged_options(store, arguments, overrides)
    return StorePlan(lambda: store(**merged))
