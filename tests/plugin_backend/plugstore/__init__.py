"""A third-party mediastash backend, as a package outside mediastash would write it.

``plug://<folder>`` (``plug:///absolute/folder`` or ``plug://relative``) keeps
each blob as ``<folder>/<hex>.blob`` with a ``<hex>.json`` record of its
metadata and media type; a file's mtime is the blob's last write. It uses
only mediastash's public API and is found through the ``mediastash.stores``
entry point of ``plugstore-0.1.dist-info`` next to it: mediastash never
imports it by name. tests/test_plugin_backend.py puts this folder on the path.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from mediastash import BaseMediaStore, BlobInfo, InvalidStoreConfiguration, MediaContextLike, StoreNotFoundError
from mediastash.context import EMPTY_CONTEXT, context_media_type, context_metadata
from mediastash.stores.base import TOUCH_AFTER_SECONDS
from mediastash.stores.protocols import BlobStat
from mediastash.uri import media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['PlugMediaStore']


class PlugMediaStore(BaseMediaStore):
    """Blobs as files in one folder; listing, deleting, garbage collection and namespaces (sub-folders)."""

    # What it can do, declared (each follows from the primitive below anyway; a declaration without its
    # primitive fails when the class is created, naming the primitive to write).
    supports_listing = True  # _list_digests
    supports_deletes = True  # _delete
    supports_blob_listing = True  # _list_blobs
    supports_guarded_deletes = True  # _delete_unless_touched
    supports_namespaces = True  # _open_namespace

    def __init__(self, folder: str | os.PathLike[str], *, public_url: PublicUrlResolver | None = None) -> None:
        super().__init__(public_url=public_url)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_url(cls, url: str, *, create: bool = True, **overrides: Any) -> Self:
        """``plug://<folder>``; with ``create=False`` the folder must exist."""
        parts = urlsplit(url)
        if parts.scheme != 'plug' or parts.query or parts.fragment:
            raise InvalidStoreConfiguration('PlugMediaStore takes plug://<folder> without parameters')
        folder = unquote(parts.netloc + parts.path)
        if not folder:
            raise InvalidStoreConfiguration('the plug:// URL names no folder')
        if not create and not os.path.isdir(folder):
            raise StoreNotFoundError('folder', folder, hint='nothing was created')
        return cls(overrides.pop('folder', folder), **overrides)

    def _describe(self) -> str:
        return f'PlugMediaStore({str(self.folder)!r})'

    def _storage_identity(self) -> tuple[str, str]:
        return ('plug', os.path.realpath(self.folder))

    def _blob(self, digest: str) -> Path:
        return self.folder / f'{digest}.blob'

    def _record(self, digest: str) -> Path:
        return self.folder / f'{digest}.json'

    def _replace(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)  # an erased namespace's folder is made again
        temporary = path.with_name(f'.{path.name}.{secrets.token_hex(4)}.tmp')
        temporary.write_bytes(data)
        os.replace(temporary, path)

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        blob = self._blob(digest)
        with contextlib.suppress(FileNotFoundError):
            stored_size = blob.stat().st_size
            if self._stored_copy_is_sound(digest, len(data), stored_size, blob.read_bytes):
                if blob.stat().st_mtime < time.time() - TOUCH_AFTER_SECONDS:
                    os.utime(blob)
                return
        if not self._record(digest).exists():  # the first put's metadata wins
            record = {'metadata': dict(context_metadata(context)), 'media_type': context_media_type(context)}
            self._replace(self._record(digest), json.dumps(record).encode())
        self._replace(blob, data)

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        try:
            return self._blob(digest).read_bytes()
        except FileNotFoundError:
            raise self._not_found(digest) from None

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return self._blob(digest).is_file()

    def _load_record(self, digest: str) -> dict[str, Any]:
        if not self._blob(digest).is_file():
            raise self._not_found(digest)
        try:
            loaded: dict[str, Any] = json.loads(self._record(digest).read_bytes())
        except FileNotFoundError:
            return {'metadata': {}, 'media_type': None}
        return loaded

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        return dict(self._load_record(digest)['metadata'])

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        record = self._load_record(digest)
        info = self._blob(digest).stat()
        return BlobStat(info.st_size, record['media_type'], info.st_mtime)

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        with contextlib.suppress(FileNotFoundError):
            self._record(digest).unlink()
        try:
            self._blob(digest).unlink()
        except FileNotFoundError:
            return False
        return True

    async def _list_digests(self) -> AsyncIterator[str]:
        for path in sorted(self.folder.glob('*.blob')):
            yield path.stem

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        for path in sorted(self.folder.glob('*.blob')):
            with contextlib.suppress(FileNotFoundError):
                info = path.stat()
                yield BlobInfo(media_uri(path.stem), info.st_size, info.st_mtime)

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        present: set[str] = set()
        for digest in digests:
            with contextlib.suppress(FileNotFoundError):
                if self._blob(digest).stat().st_mtime < touch_before:
                    os.utime(self._blob(digest))
                present.add(digest)
        return present

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        deleted: list[str] = []
        for digest in digests:
            with contextlib.suppress(FileNotFoundError):
                if self._blob(digest).stat().st_mtime < written_before and await self._delete(digest, EMPTY_CONTEXT):
                    deleted.append(digest)
        return deleted

    def _open_namespace(self, name: str) -> PlugMediaStore:
        """Namespace ``name`` in the sub-folder ``ns.<name>`` (the store's own listing reads ``*.blob`` only)."""
        return type(self)(self.folder / f'ns.{name}')

    async def _remove_namespace_storage(self) -> None:
        with contextlib.suppress(OSError):
            self.folder.rmdir()
