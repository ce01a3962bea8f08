"""``PostgresOptions``: a ``PostgresMediaStore``'s settings, and its URL form.

``postgresql://[user@]host[:port]/database?table=media`` (``postgres://`` is the
same). The password never comes from the URL (a URL ends up in shell history
and logs): asyncpg reads it from ``PGPASSWORD`` or a ``.pgpass`` file, or pass
a pool of your own. ``table``, ``schema``, ``chunk_size_bytes`` and
``max_connections`` are the store's (``OWN_OPTIONS``, removed from the DSN);
the connection options in ``DRIVER_OPTIONS`` go to asyncpg unchanged; anything
else is refused without being repeated.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, ClassVar, Final, Protocol, Self
from urllib.parse import quote, unquote

from mediastash._checks import exactly_one_of, positive_int
from mediastash.errors import InvalidStoreConfiguration
from mediastash.stores import _url
from mediastash.stores._options import Converter, StoreOptions, check_callable, query_options
from mediastash.stores.postgres._address import DSN_SCHEMES, parse_dsn_address
from mediastash.stores.postgres._layout import IDENTIFIER
from mediastash.urls import PublicUrlResolver

__all__ = ['DEFAULT_CHUNK_SIZE_BYTES', 'DRIVER_OPTIONS', 'MAX_CHUNK_SIZE_BYTES', 'OWN_OPTIONS', 'PostgresOptions']
__all__ += ['PostgresPool']

DEFAULT_CHUNK_SIZE_BYTES: Final = 4 << 20
"""Blobs up to this size are one row of the harness's table; larger ones are chunk rows of this size."""
MAX_CHUNK_SIZE_BYTES: Final = 256 << 20

_QUERY: dict[str, tuple[str, Converter]] = {
    'table': ('table', _url.text),
    'schema': ('schema', _url.text),
    'chunk_size_bytes': ('chunk_size_bytes', _url.size),
    'max_connections': ('max_connections', _url.integer),
}
OWN_OPTIONS: Final = tuple(_QUERY)
DRIVER_OPTIONS: Final = (
    *('sslmode', 'sslrootcert', 'sslcert', 'sslkey'),
    *('connect_timeout', 'application_name', 'target_session_attrs'),
)
"""Connection options of a ``postgresql://`` URL passed to asyncpg unchanged."""
_CREDENTIALS_HINT = 'give the password in PGPASSWORD or a .pgpass file, or pass pool= (the URL is not shown)'


class PostgresPool(Protocol):
    """What the store uses of a pool: asyncpg's ``Pool`` or anything with the same ``acquire()``."""

    def acquire(self) -> contextlib.AbstractAsyncContextManager[Any]: ...


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PostgresOptions(StoreOptions):
    """Which database and tables a ``PostgresMediaStore`` uses (see the store for each setting).

    Exactly one of ``pool`` and ``dsn``; ``dsn`` is never shown in the
    ``repr`` (a connection string can hold a password).
    """

    store_name: ClassVar[str] = 'PostgresMediaStore'

    pool: PostgresPool | None = dataclasses.field(default=None, compare=False)
    """An asyncpg pool you own (never closed by the store)."""
    dsn: str | None = dataclasses.field(default=None, repr=False)
    """A ``postgresql://`` connection string: the store opens a pool on first use and closes it."""
    table: str = 'media'
    """The table holding the blobs (URL: ``table=``)."""
    schema: str = 'public'
    """The schema of the tables (URL: ``schema=``)."""
    chunk_size_bytes: int = DEFAULT_CHUNK_SIZE_BYTES
    """Blobs larger than this are stored as chunk rows of this size (URL: ``chunk_size_bytes=4MiB``)."""
    max_connections: int = 10
    """The most connections of a pool the store opens (URL: ``max_connections=``)."""
    public_url: PublicUrlResolver | None = None
    """Resolves a stored blob's public URL (none by default)."""

    def __post_init__(self) -> None:
        exactly_one_of(
            'PostgresMediaStore',
            ('pool', self.pool, 'an asyncpg pool you own'),
            ('dsn', self.dsn, 'a postgresql:// connection string'),
        )
        for name, value in (('table', self.table), ('schema', self.schema)):
            if not isinstance(value, str) or IDENTIFIER.fullmatch(value) is None:
                raise InvalidStoreConfiguration(
                    f'invalid PostgreSQL {name} name (not repeated here): use 1-63 lowercase letters, digits '
                    'or underscores, not starting with a digit'
                )
        positive_int('chunk_size_bytes', self.chunk_size_bytes)
        if self.chunk_size_bytes > MAX_CHUNK_SIZE_BYTES:
            raise InvalidStoreConfiguration(f'chunk_size_bytes must be at most {MAX_CHUNK_SIZE_BYTES} (256 MiB)')
        positive_int('max_connections', self.max_connections)
        if isinstance(self.dsn, str):
            _url.check_unicode('dsn=', self.dsn)
        if self.dsn is not None and (
            not isinstance(self.dsn, str) or '\x00' in self.dsn or parse_dsn_address(self.dsn) is None
        ):
            raise InvalidStoreConfiguration(
                'PostgresMediaStore(dsn=...) needs a postgresql:// or postgres:// connection string '
                '(the value is not repeated here)'
            )
        if self.public_url is not None:
            check_callable('public_url', self.public_url, 'None or a callable (uri, context) -> URL')

    @classmethod
    def from_store_url(cls, url: str, *, create: bool, overrides: dict[str, Any], owner: str) -> Self:
        """Check ``url``; nothing is contacted and nothing is created (tables appear at the first write)."""
        scheme = _url.url_scheme(url, owner, DSN_SCHEMES)
        body = url.partition('://')[2]
        # user@ is looked for before the query: an '@' in a parameter's value (application_name=a@b) is no login
        cut = min((index for index in (body.find('?'), body.find('#')) if index >= 0), default=len(body))
        head, tail = body[:cut], body[cut:]
        user, at, rest = head.rpartition('@')
        if at and ':' in user:
            raise InvalidStoreConfiguration(f'the {scheme}:// URL must not carry a password; {_CREDENTIALS_HINT}')
        parts = _url.split_url(f'{scheme}://{rest}{tail}' if at else url, scheme)
        if not parts.hostname:
            raise InvalidStoreConfiguration(f'the {scheme}:// URL names no host; use {scheme}://host[:port]/<database>')
        database = parts.path.lstrip('/')
        if not database or '/' in database:
            raise InvalidStoreConfiguration(
                f'the {scheme}:// URL names no database; use {scheme}://host[:port]/<database>'
            )
        if '\x00' in unquote(database) or '\x00' in unquote(user):
            raise InvalidStoreConfiguration(f'the {scheme}:// URL names a database or user holding a NUL character')
        try:
            port_ok = parts.port is None or parts.port > 0
        except ValueError:  # refused below, outside the handler: the ValueError quotes the port
            port_ok = False
        if not port_ok:
            raise InvalidStoreConfiguration(f'the {scheme}:// URL has a port that is not a number from 1 to 65535')
        own: dict[str, str] = {}
        kept: list[str] = []
        for name, value in _url.query_parameters(parts.query, f'{scheme}://').items():
            if name in DRIVER_OPTIONS:
                kept.append(f'{name}={quote(value, safe="")}')
            elif name in OWN_OPTIONS:
                own[name] = value
            elif _url.looks_secret(name):
                raise InvalidStoreConfiguration(
                    f'the {scheme}:// URL must not carry the credential parameter {_url.shown(name)}; '
                    f'{_CREDENTIALS_HINT}'
                )
            else:
                raise _url.unknown_parameter(name, f'{scheme}://', (*OWN_OPTIONS, *DRIVER_OPTIONS))
        settings = query_options(own, f'{scheme}://', _QUERY)
        if 'pool' not in overrides:
            login = f'{user}@' if at else ''
            settings['dsn'] = f'postgresql://{login}{parts.netloc}/{database}' + ('?' + '&'.join(kept) if kept else '')
        return cls.made({**settings, **overrides}, owner)
