"""Where a PostgreSQL DSN points (host, port, database), read without connecting and without its secrets.

Used for the store's ``storage_key`` and its description in errors: the user
name and password of a DSN never leave this module. Missing parts default the
way libpq does (``PGHOST``, ``PGPORT``, ``PGDATABASE``, ``PGUSER``, then
``localhost``, 5432 and the user name).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs, unquote, urlsplit

from mediastash.errors import InvalidStoreConfiguration

__all__ = ['DSN_SCHEMES', 'Address', 'address_of', 'parse_dsn_address']

DSN_SCHEMES: Final = ('postgresql', 'postgres')
_DEFAULT_PORT: Final = 5432
_MAX_PORT: Final = 65535


@dataclass(frozen=True, slots=True)
class Address:
    """A server and database: ``host`` (first host of a list, or a socket folder), ``port``, ``database``."""

    host: str
    port: int
    database: str

    def __str__(self) -> str:
        return f'{self.host}:{self.port}/{self.database}'


def parse_dsn_address(dsn: str, overrides: dict[str, object] | None = None) -> Address | None:
    """The address of a ``postgresql://`` (or ``postgres://``) DSN with asyncpg-style keyword ``overrides``
    (``host``, ``port``, ``database``, ``user``); ``None`` when ``dsn`` is not such a URL.

    ``InvalidStoreConfiguration`` (the value not repeated: the DSN can hold a password) when the port is not a
    number from 1 to 65535: asyncpg would refuse it only at the first connection, with a bare ``ValueError``."""
    try:
        parts = urlsplit(dsn)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items() if values}
        netloc = parts.netloc.rpartition('@')[2]
    except ValueError:
        return None
    if parts.scheme not in DSN_SCHEMES:
        return None
    given = dict(overrides or {})
    first = netloc.split(',')[0]
    host: str = unquote(first.rpartition(':')[0] if _has_port(first) else first)
    port_text = first.rpartition(':')[2] if _has_port(first) else ''
    host = str(given.get('host') or query.get('host') or host or os.environ.get('PGHOST') or 'localhost')
    host = host.split(',')[0].strip('[]')
    port_value = given.get('port') or query.get('port') or port_text or os.environ.get('PGPORT') or _DEFAULT_PORT
    port = _port_number(str(port_value).split(',')[0])
    user = str(given.get('user') or query.get('user') or _user_of(parts.netloc) or os.environ.get('PGUSER') or '')
    database = str(
        given.get('database')
        or query.get('dbname')
        or query.get('database')
        or unquote(parts.path.lstrip('/'))
        or os.environ.get('PGDATABASE')
        or user
        or _login()
    )
    return Address(host, port, database)


def address_of(pool: object) -> Address | None:
    """The address an asyncpg pool connects to, from the DSN and keywords it was created with; ``None`` when
    the pool does not say (another pool class, a pool made from keywords only without a host)."""
    args = getattr(pool, '_connect_args', None)  # asyncpg.Pool keeps create_pool's arguments here
    kwargs = getattr(pool, '_connect_kwargs', None)
    if not isinstance(args, tuple) or not isinstance(kwargs, dict):
        return None
    dsn = args[0] if args and isinstance(args[0], str) else kwargs.get('dsn')
    try:
        if isinstance(dsn, str):
            return parse_dsn_address(dsn, kwargs)
        if isinstance(kwargs.get('host'), str):
            return parse_dsn_address('postgresql://', kwargs)
    except InvalidStoreConfiguration:  # the pool's own connections fail on it: no address to name
        return None
    return None


def _port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= _MAX_PORT:
        raise InvalidStoreConfiguration(
            'the PostgreSQL port (from the connection string, its port= parameter or PGPORT) is not a number '
            'from 1 to 65535 (the value is not repeated here)'
        )
    return port


def _has_port(netloc: str) -> bool:
    """True when ``netloc``'s last ``:`` separates a port (not a colon inside an IPv6 ``[...]``)."""
    return ':' in netloc and not netloc.endswith(']')


def _user_of(netloc: str) -> str:
    userinfo = netloc.rpartition('@')[0]
    return unquote(userinfo.partition(':')[0])


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in this environment
        return 'postgres'
