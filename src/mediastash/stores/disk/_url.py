"""``DiskMediaStore.from_url``: a plain path, ``file:///abs/path``, ``file://localhost/...`` or ``file://~/path``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote
from urllib.request import url2pathname

from mediastash.errors import InvalidStoreConfiguration, StoreNotFoundError
from mediastash.stores._plan import StorePlan
from mediastash.stores._url import SCHEME, boolean, merged_options, query_parameters, split_url, unknown_parameter

if TYPE_CHECKING:
    from mediastash.stores.disk._store import DiskMediaStore

__all__ = ['plan_disk']

D = TypeVar('D', bound='DiskMediaStore')


def plan_disk(store: type[D], url: str | os.PathLike[str], create: bool, overrides: dict[str, Any]) -> StorePlan[D]:
    """Check ``url`` (and, with ``create=False``, find the folder) without creating anything."""
    if isinstance(url, os.PathLike):
        path = os.fspath(url)
        if not isinstance(path, str):
            raise InvalidStoreConfiguration(f'a store path must be a str path, got {type(path).__name__}')
        return _plan_folder(store, path, {}, create, overrides)
    if not isinstance(url, str):
        raise InvalidStoreConfiguration(f'a store URL must be a str or a path, got {type(url).__name__}')
    match = SCHEME.match(url)
    if match is None or (os.name == 'nt' and len(match.group(1)) == 1):  # C://x is a Windows path
        return _plan_folder(store, url, {}, create, overrides)
    if match.group(1).lower() != 'file':
        raise InvalidStoreConfiguration(
            f'{store.__name__}.from_url takes a file:// URL or a path (the one given is not shown)'
        )
    parts = split_url(url, 'file')
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
    for name, value in query_parameters(parts.query, 'file://').items():
        if name != 'fsync':
            raise unknown_parameter(name, 'file://', ('fsync',))
        options['fsync'] = boolean(name, value)
    return _plan_folder(store, path, options, create, overrides)


def _plan_folder(
    store: type[D], path: str, options: dict[str, Any], create: bool, overrides: dict[str, Any]
) -> StorePlan[D]:
    merged = merged_options(store, {'directory': os.path.expanduser(path), **options}, overrides)
    directory = os.path.expanduser(os.fspath(merged['directory']))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise InvalidStoreConfiguration(f'{directory!r} exists and is not a folder')
    if not create and not os.path.isdir(directory):
        raise StoreNotFoundError('folder', directory, hint='nothing was created')
    return StorePlan(lambda: store(**merged), (directory,))
