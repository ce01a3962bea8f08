"""``open_store(url)``: a store from one URL string, for the command line and configuration files.

The accepted forms and their parameters are listed in ``docs/cli.md`` ("Store
URLs"). Errors name the part of the URL that is wrong and what it accepts, and
never quote the URL or a value from it, which may hold a password (MongoDB) or
a secret pasted in the wrong place. Opening is planned first (parse, check,
find) and done last, so a refused URL creates nothing.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, unquote, unquote_plus, urlsplit
from urllib.request import url2pathname

from mediastash.errors import InvalidStoreConfiguration, StoreNotFoundError
from mediastash.stores.base import BaseMediaStore
from mediastash.stores.cached import CachedMediaStore, WriteMode
from mediastash.stores.disk import DiskMediaStore
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.protocols import MediaStore
from mediastash.stores.sqlite import SqliteMediaStore

__all__ = ['open_cached_store', 'open_store']

_SCHEME = re.compile(r'([A-Za-z][A-Za-z0-9+.-]*)://')
_KNOWN_FORMS = {
    'memory': 'memory://',
    'file': 'file:///absolute/path (or a plain path)',
    'sqlite': 'sqlite:///relative.db or sqlite:////absolute/path.db',
    's3': 's3://<bucket>[/<key prefix>]',
    'mongodb': 'mongodb://host[:port]/<database>',
    'mongodb+srv': 'mongodb+srv://host/<database>',
}
_SCHEME_TYPO = re.compile(
    r'\s*(mongodb\+srv|mongodb|memory|sqlite|file|s3)(?::(?!//)|//)|\s+(mongodb\+srv|mongodb|memory|sqlite|file|s3)://',
    re.IGNORECASE,
)
"""A known scheme not followed by ``://`` (``s3:/b``, ``memory:``, ``s3//b``), or one after leading blanks."""
_SHOWN_SCHEME = re.compile(r'[a-z][a-z0-9+.-]{0,19}')
"""Unknown schemes quoted in errors: short and lowercase, as a scheme is; anything else is not repeated."""
_SHOWN_NAME = re.compile(r'[a-z_][A-Za-z0-9_]{0,39}')
"""Query parameter names quoted in errors; anything else (a pasted key, say) is not repeated."""
_SECRET_WORDS = ('secret', 'password', 'passwd', 'token', 'credential', 'access_key', 'accesskey', 'signature', 'x-amz')
_S3_BUCKET = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*')
_WRITE_MODES = ('through', 'around')
_TRUE = frozenset({'1', 'true', 'yes', 'on'})
_FALSE = frozenset({'0', 'false', 'no', 'off'})
_FORMS = 'memory://, a path, file:///path, sqlite:///file.db, s3://bucket/prefix, mongodb://host/database'
_AWS_CHAIN = (
    'the AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), '
    'AWS_PROFILE / the shared credentials file, or an instance role'
)
_MONGO_OWN = ('collection', 'chunk_size_bytes')
"""Query parameters of a MongoDB URL that mediastash reads and removes; the rest go to the driver."""


def open_store(url: str | os.PathLike[str], *, create: bool = True, **overrides: Any) -> BaseMediaStore:
    """The store a URL names (``memory://``, a path, ``file://``, ``sqlite://``, ``s3://``, ``mongodb[+srv]://``).

    ``overrides`` are keyword arguments for the store's constructor and win
    over the URL (for example ``client=`` or ``public_url=``). With
    ``create=False`` a disk folder or SQLite file that does not exist raises
    ``StoreNotFoundError`` and nothing is created; remote storage is never
    created either way. A bad URL raises ``InvalidStoreConfiguration``. The
    store is an async context manager (``async with open_store(...) as store``).
    A known scheme without its ``//`` (``s3:/bucket``, ``memory:``) is refused
    rather than taken for a folder name; write ``./s3:/x`` for such a folder.
    """
    plan = _plan(url, create, overrides)
    with _undone_on_failure(plan.folders):
        return plan.build()


def _plan(url: str | os.PathLike[str], create: bool, overrides: dict[str, Any]) -> _Plan:
    """Parse and check ``url`` (and, with ``create=False``, find its storage) without creating anything."""
    if isinstance(url, os.PathLike):
        path = os.fspath(url)
        if not isinstance(path, str):
            raise InvalidStoreConfiguration(f'a store path must be a str path, got {type(path).__name__}')
        return _open_disk(path, {}, create, overrides)
    if not isinstance(url, str):
        raise InvalidStoreConfiguration(f'a store URL must be a str or a path, got {type(url).__name__}')
    if not url.strip():
        raise InvalidStoreConfiguration(f'the store URL is empty; use one of {_FORMS}')
    typo = _SCHEME_TYPO.match(url)
    if typo is not None:
        scheme = (typo.group(1) or typo.group(2)).lower()
        raise InvalidStoreConfiguration(
            f'the store URL begins with the {scheme} scheme but not with "{scheme}://" (the rest is not shown); '
            f'write {_KNOWN_FORMS[scheme]}. Nothing was created; to name a folder that begins like this, '
            'write ./ before it'
        )
    match = _SCHEME.match(url)
    if match is None or (os.name == 'nt' and len(match.group(1)) == 1):  # C://x is a Windows path
        return _open_disk(url, {}, create, overrides)
    scheme = match.group(1).lower()
    if scheme in ('mongodb', 'mongodb+srv'):
        return _open_mongo(scheme, url[match.end() :], overrides)
    opener = _OPENERS.get(scheme)
    if opener is None:
        shown = repr(scheme) if _SHOWN_SCHEME.fullmatch(scheme) else '(not shown)'
        raise InvalidStoreConfiguration(f'unknown store URL scheme {shown}; use one of {_FORMS}')
    parts = _split(url, scheme)
    return opener(parts, create, overrides)


def open_cached_store(
    url: str | os.PathLike[str],
    *,
    cache: str | os.PathLike[str] | MediaStore,
    cache_max_bytes: int | None = None,
    cache_write: WriteMode = 'through',
    create: bool = True,
    **overrides: Any,
) -> CachedMediaStore:
    """``open_store(url)`` with a local ``cache`` in front of it: a ``CachedMediaStore``.

    ``cache`` is a URL or path (opened with ``create=True``: a folder is the
    usual choice) or a store object; ``cache_max_bytes`` bounds it (LRU
    eviction) and ``cache_write`` is the ``write=`` mode. ``create`` and
    ``overrides`` apply to the store ``url`` names. Closing the result closes
    both. See ``docs/stores.md`` ("Caching a remote store").

    Everything is checked before anything is created: a store that is missing
    (``create=False``) or any refused option leaves no cache folder, and a
    failure while the two are put together removes the empty folders this
    call made.
    """
    if cache_write not in _WRITE_MODES:
        raise InvalidStoreConfiguration("cache_write must be 'through' or 'around'")
    if cache_max_bytes is not None and (
        isinstance(cache_max_bytes, bool) or not isinstance(cache_max_bytes, int) or cache_max_bytes < 0
    ):
        raise InvalidStoreConfiguration('cache_max_bytes must be a non-negative int (bytes) or None')
    backing_plan = _plan(url, create, overrides)
    cache_plan = _plan(cache, True, {}) if isinstance(cache, str | os.PathLike) else None
    folders = backing_plan.folders + (cache_plan.folders if cache_plan is not None else ())
    with _undone_on_failure(folders):
        backing = backing_plan.build()
        if isinstance(cache, str | os.PathLike):
            assert cache_plan is not None
            cache_store: MediaStore = cache_plan.build()
        else:
            cache_store = cache
        try:
            return CachedMediaStore(backing, cache=cache_store, max_bytes=cache_max_bytes, write=cache_write)
        except (TypeError, ValueError) as error:  # the options were checked above: these name types, not values
            raise InvalidStoreConfiguration(f'cache: {error}') from None


# -- planning, then building -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """A checked store: ``build()`` makes it; ``folders`` are those building may create."""

    build: Callable[[], BaseMediaStore]
    folders: tuple[str, ...] = ()


@contextlib.contextmanager
def _undone_on_failure(folders: tuple[str, ...]) -> Iterator[None]:
    """On an error in the block, remove the empty folders among ``folders`` (and parents) that it created."""
    missing: list[str] = []
    for folder in folders:
        current = os.path.abspath(folder)
        while not os.path.lexists(current) and current not in missing:
            missing.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    try:
        yield
    except BaseException:
        for folder in sorted(missing, key=len, reverse=True):  # children before their parents
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only ever an empty folder: nothing anyone wrote is removed
        raise


# -- one opener per scheme ------------------------------------------------------------------


def _open_memory(parts: SplitResult, create: bool, overrides: dict[str, Any]) -> _Plan:
    if parts.netloc or parts.path or parts.query:
        raise InvalidStoreConfiguration('memory:// takes no host, path or parameters')
    return _planned(MemoryMediaStore, {}, overrides)


def _open_file(parts: SplitResult, create: bool, overrides: dict[str, Any]) -> _Plan:
    """``file:///abs/path``, ``file://localhost/abs/path`` or ``file://~/path`` (home folder)."""
    host = unquote(parts.netloc)
    path = url2pathname(parts.path)
    if host.startswith('~'):
        path = host + path
    elif host not in ('', 'localhost'):
        raise InvalidStoreConfiguration(
            'a file:// URL names no host (other than localhost); use file:///absolute/path, file://~/path '
            'or a plain path'
        )
    if not path:
        raise InvalidStoreConfiguration('the file:// URL names no folder; use file:///absolute/path')
    options: dict[str, Any] = {}
    for name, value in _query(parts.query, 'file://').items():
        if name != 'fsync':
            raise _unknown_parameter(name, 'file://', ('fsync',))
        options['fsync'] = _boolean(name, value)
    return _open_disk(path, options, create, overrides)


def _open_disk(path: str, options: dict[str, Any], create: bool, overrides: dict[str, Any]) -> _Plan:
    arguments = {'directory': os.path.expanduser(path), **options}
    merged = _merge(DiskMediaStore, arguments, overrides)
    directory = os.path.expanduser(os.fspath(merged['directory']))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise InvalidStoreConfiguration(f'{directory!r} exists and is not a folder')
    if not create and not os.path.isdir(directory):
        raise StoreNotFoundError('folder', directory, hint='nothing was created')
    return _Plan(lambda: DiskMediaStore(**merged), (directory,))


def _open_sqlite(parts: SplitResult, create: bool, overrides: dict[str, Any]) -> _Plan:
    """``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///~/x.db``, ``sqlite:///:memory:``."""
    if parts.netloc:
        raise InvalidStoreConfiguration(
            'a sqlite:// URL names no host: use sqlite:///relative.db or sqlite:////absolute/path.db'
        )
    database = os.path.expanduser(unquote(parts.path[1:]))
    arguments: dict[str, Any] = {'database': database} if database else {}
    for name, value in _query(parts.query, 'sqlite://').items():
        if name != 'table':
            raise _unknown_parameter(name, 'sqlite://', ('table',))
        arguments['table'] = value
    merged = _merge(SqliteMediaStore, arguments, overrides)
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

    def build() -> BaseMediaStore:
        store = SqliteMediaStore(**merged)  # checks its options first: a refused one makes no folder
        if parent:
            os.makedirs(parent, exist_ok=True)
        return store

    return _Plan(build, (parent,) if parent else ())


def _check_database_file(file: str, create: bool) -> None:
    """Refuse a folder; with ``create=False``, a missing file."""
    if os.path.isdir(file):
        raise InvalidStoreConfiguration(f'{file!r} is a folder, not a SQLite database file')
    if not create and not os.path.isfile(file):
        raise StoreNotFoundError('SQLite database', file, hint='nothing was created')


_S3_TEXT = {'endpoint_url': 'endpoint_url', 'region': 'region_name', 'put_check': 'put_check'}
_S3_INTEGERS = ('multipart_threshold', 'part_size', 'max_concurrency', 'max_attempts', 'read_attempts')
_S3_NUMBERS = ('known_ttl', 'retry_max_backoff')
_S3_PARAMETERS = (*_S3_TEXT, 'conditional_writes', *_S3_INTEGERS, *_S3_NUMBERS)


def _open_s3(parts: SplitResult, create: bool, overrides: dict[str, Any]) -> _Plan:
    """``s3://bucket/prefix?endpoint_url=...&region=...``; credentials come from the AWS chain only."""
    from mediastash.stores.s3 import S3MediaStore

    bucket = parts.netloc
    if not bucket:
        raise InvalidStoreConfiguration('the s3:// URL names no bucket; use s3://<bucket>[/<key prefix>]')
    if ':' in bucket:
        raise InvalidStoreConfiguration(
            "the bucket part of the s3:// URL holds a ':' (not repeated here): a bucket takes no port and no "
            f'credentials; write s3://<bucket>[/<key prefix>], give a port in endpoint_url=, and credentials come '
            f'from {_AWS_CHAIN}'
        )
    if _S3_BUCKET.fullmatch(bucket) is None:
        raise InvalidStoreConfiguration(
            'invalid S3 bucket name in the s3:// URL (not repeated here): use letters, digits, dots and hyphens'
        )
    prefix = unquote(parts.path[1:])
    if prefix and not prefix.endswith('/'):
        prefix += '/'
    arguments: dict[str, Any] = {'bucket': bucket}
    if prefix:
        arguments['key_prefix'] = prefix
    for name, value in _query(parts.query, 's3://').items():
        if _looks_secret(name):
            raise InvalidStoreConfiguration(
                f'S3 credentials are never taken from the URL (query parameter {_shown(name)}); '
                f'they come from {_AWS_CHAIN}'
            )
        if name in _S3_TEXT and not value:
            raise InvalidStoreConfiguration(f'URL parameter {name}= is empty')
        if name == 'endpoint_url':
            arguments['endpoint_url'] = _endpoint(value)
        elif name in _S3_TEXT:
            arguments[_S3_TEXT[name]] = value
        elif name == 'conditional_writes':
            arguments[name] = _boolean(name, value)
        elif name in _S3_INTEGERS:
            arguments[name] = _integer(name, value)
        elif name in _S3_NUMBERS:
            arguments[name] = _number(name, value)
        else:
            raise _unknown_parameter(name, 's3://', _S3_PARAMETERS)
    merged = _merge(S3MediaStore, arguments, overrides)
    if 'client' in overrides:  # the caller's client knows where the bucket is
        for name in ('endpoint_url', 'region_name'):
            if name not in overrides:
                merged.pop(name, None)
    return _Plan(lambda: S3MediaStore(**merged))


def _open_mongo(scheme: str, rest: str, overrides: dict[str, Any]) -> _Plan:
    """``mongodb[+srv]://[user:password@]host[:port][,...]/database?collection=media&<driver options>``.

    Parsed the way the driver does (hosts up to the first ``/``), because a
    MongoDB host list is not a URL netloc. ``collection`` and
    ``chunk_size_bytes`` are ours and removed; every other option is checked
    with the driver's validator and passed on unchanged in ``db_url``.
    """
    from mediastash.stores.mongo import MongoMediaStore

    hosts, slash, tail = rest.partition('/')
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
        if name in _MONGO_OWN:
            if name in seen:
                raise InvalidStoreConfiguration(f'the {scheme}:// URL gives the parameter {name!r} twice')
            seen.add(name)
        if name == 'collection':
            arguments['collection'] = value
        elif name == 'chunk_size_bytes':
            arguments['chunk_size_bytes'] = _integer(name, value)
        else:
            _check_mongo_option(name, piece)
            kept.append(piece)
    database = unquote_plus(database_part)
    if database:
        arguments['database'] = database
    elif 'database' not in overrides:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL names no database; use {scheme}://host:port/<database>')
    db_url = f'{scheme}://{hosts}' + (f'/{database_part}' if slash else '') + ('?' + '&'.join(kept) if kept else '')
    if 'client' not in overrides:
        arguments['db_url'] = db_url
    return _planned(MongoMediaStore, arguments, overrides)


def _check_mongo_option(name: str, piece: str) -> None:
    """Refuse a driver option the driver does not know or would not accept, without quoting its value."""
    from pymongo.errors import ConfigurationError
    from pymongo.uri_parser import split_options

    try:
        split_options(piece, validate=True, warn=False)
    except ConfigurationError as exc:
        if 'unknown option' in str(exc).lower():
            raise InvalidStoreConfiguration(f'unknown MongoDB URL option {_shown(name)}') from None
        raise InvalidStoreConfiguration(f'MongoDB URL option {_shown(name)} has an invalid value') from None
    except (ValueError, TypeError, KeyError):
        raise InvalidStoreConfiguration(f'MongoDB URL option {_shown(name)} has an invalid value') from None


_Opener = Callable[[SplitResult, bool, dict[str, Any]], _Plan]
_OPENERS: dict[str, _Opener] = {
    'memory': _open_memory,
    'file': _open_file,
    'sqlite': _open_sqlite,
    's3': _open_s3,
}


# -- parsing helpers ----------------------------------------------------------------------


def _split(url: str, scheme: str) -> SplitResult:
    """``urlsplit`` that refuses what no form here uses: credentials and fragments (neither is quoted)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise InvalidStoreConfiguration(f'the {scheme}:// URL cannot be parsed') from None
    if '@' in parts.netloc:
        where = f'; they come from {_AWS_CHAIN}' if scheme == 's3' else ''
        raise InvalidStoreConfiguration(f'the {scheme}:// URL must not carry credentials (user:password@){where}')
    if parts.fragment or url.endswith('#'):
        raise InvalidStoreConfiguration(f'the {scheme}:// URL takes no #fragment')
    return parts


def _query(query: str, form: str) -> dict[str, str]:
    """The query's parameters (decoded); a repeated one is refused."""
    found: dict[str, str] = {}
    for piece in query.split('&'):
        if not piece:
            continue
        raw_name, _, raw_value = piece.partition('=')
        name = unquote_plus(raw_name)
        if name in found:
            raise InvalidStoreConfiguration(f'the {form} URL gives the parameter {_shown(name)} twice')
        found[name] = unquote_plus(raw_value)
    return found


def _shown(name: str) -> str:
    """How an error names a query parameter: quoted when it looks like a name, else not repeated."""
    return repr(name) if _SHOWN_NAME.fullmatch(name) else '(name not shown)'


def _looks_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _unknown_parameter(name: str, form: str, known: tuple[str, ...]) -> InvalidStoreConfiguration:
    accepted = ', '.join(known)
    return InvalidStoreConfiguration(f'unknown {form} URL parameter {_shown(name)}; accepted: {accepted}')


def _boolean(name: str, value: str) -> bool:
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise InvalidStoreConfiguration(
        f'URL parameter {name}= must be true or false (or 1/0, yes/no, on/off); the value given is not shown'
    )


def _integer(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidStoreConfiguration(
            f'URL parameter {name}= must be an integer (digits only); the value given is not shown'
        ) from None


def _number(name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InvalidStoreConfiguration(
            f'URL parameter {name}= must be a number (such as 30 or 0.5); the value given is not shown'
        ) from None


def _endpoint(value: str) -> str:
    """An ``http(s)://host[:port][/path]`` endpoint without credentials (the value is not quoted in errors)."""
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError:
        raise InvalidStoreConfiguration('URL parameter endpoint_url= is not a valid http(s) URL') from None
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise InvalidStoreConfiguration('URL parameter endpoint_url= must be an http:// or https:// URL with a host')
    if '@' in parts.netloc:
        raise InvalidStoreConfiguration(
            f'URL parameter endpoint_url= must not carry credentials (user:password@); they come from {_AWS_CHAIN}'
        )
    if parts.query or parts.fragment:
        raise InvalidStoreConfiguration('URL parameter endpoint_url= takes no query or fragment')
    return value


def _merge(store: type[BaseMediaStore], arguments: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The URL's constructor arguments with ``overrides`` on top; an argument the store lacks is refused."""
    parameters = inspect.signature(store.__init__).parameters
    if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        accepted = set(parameters) - {'self'}
        for name in overrides:
            if name not in accepted:
                raise InvalidStoreConfiguration(f'{store.__name__} does not accept the option {name!r}')
    return {**arguments, **overrides}


def _planned(store: type[BaseMediaStore], arguments: dict[str, Any], overrides: dict[str, Any]) -> _Plan:
    merged = _merge(store, arguments, overrides)
    return _Plan(lambda: store(**merged))
