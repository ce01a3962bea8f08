"""``DiskOptions``: a ``DiskMediaStore``'s settings, and its URL form.

``from_url`` takes a plain path, ``file:///abs/path``, ``file://localhost/...``
or ``file://~/path``, with the query parameter ``fsync``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar, Self
from urllib.parse import unquote
from urllib.request import url2pathname

from mediastash.errors import InvalidStoreConfiguration, StoreNotFoundError
from mediastash.keys import KeyStrategy, default_key_strategy
from mediastash.stores._options import StoreOptions, check_callable, check_path, query_options
from mediastash.stores._url import SCHEME, boolean, query_parameters, split_url
from mediastash.urls import PublicUrlResolver

__all__ = ['DiskOptions']

_QUERY = {'fsync': ('fsync', boolean)}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DiskOptions(StoreOptions):
    """Where a ``DiskMediaStore`` keeps its files and how it writes them (see the store for each setting)."""

    store_name: ClassVar[str] = 'DiskMediaStore'

    directory: str | os.PathLike[str]
    """The folder (created if missing; a leading ``~`` is expanded)."""
    key_strategy: KeyStrategy = default_key_strategy
    """Maps a URI to a file path relative to ``directory``."""
    public_url: PublicUrlResolver | None = None
    """Resolves a stored blob's public URL (none by default)."""
    fsync: bool = False
    """Flush each file and its folder before a write returns (URL: ``fsync=true``)."""

    def __post_init__(self) -> None:
        check_path('directory', self.directory)
        check_callable('key_strategy', self.key_strategy, 'a key strategy: a callable (uri, context) -> path')
        if self.public_url is not None:
            check_callable('public_url', self.public_url, 'None or a callable (uri, context) -> URL')
        if not isinstance(self.fsync, bool):
            raise InvalidStoreConfiguration(f'fsync must be True or False, got {type(self.fsync).__name__}')

    def folders(self) -> tuple[str, ...]:
        return (os.path.expanduser(os.fspath(self.directory)),)

    @classmethod
    def from_store_url(
        cls, url: str | os.PathLike[str], *, create: bool, overrides: dict[str, Any], owner: str
    ) -> Self:
        """Check ``url`` (and, with ``create=False``, find the folder) without creating anything."""
        if isinstance(url, os.PathLike):
            path = os.fspath(url)
            if not isinstance(path, str):
                raise InvalidStoreConfiguration(f'a store path must be a str path, got {type(path).__name__}')
            return cls._of_folder(path, {}, create, overrides, owner)
        if not isinstance(url, str):
            raise InvalidStoreConfiguration(f'a store URL must be a str or a path, got {type(url).__name__}')
        match = SCHEME.match(url)
        if match is None or (os.name == 'nt' and len(match.group(1)) == 1):  # C://x is a Windows path
            return cls._of_folder(url, {}, create, overrides, owner)
        if match.group(1).lower() != 'file':
            raise InvalidStoreConfiguration(
                f'{owner}.from_url takes a file:// URL or a path (the one given is not shown)'
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
        settings = query_options(query_parameters(parts.query, 'file://'), 'file://', _QUERY)
        return cls._of_folder(path, settings, create, overrides, owner)

    @classmethod
    def _of_folder(
        cls, path: str, settings: dict[str, Any], create: bool, overrides: dict[str, Any], owner: str
    ) -> Self:
        options = cls.made({'directory': os.path.expanduser(path), **settings, **overrides}, owner)
        directory = options.folders()[0]
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise InvalidStoreConfiguration(f'{directory!r} exists and is not a folder')
        if not create and not os.path.isdir(directory):
            raise StoreNotFoundError('folder', directory, hint='nothing was created')
        return options
