"""Fresh namespaces of one store for a sweep: one per threshold, emptied and removed afterwards.

Each threshold replays the histories into storage no other threshold (and no
user data) shares, so what it stores and the calls it makes are its own: a
new ``MemoryMediaStore``, a sub-folder of a disk store, a table of a SQLite
database, a key prefix under an S3 prefix, or a collection of a MongoDB
database. Afterwards every blob written is deleted through the store (so
known-blob caches learn of it) and the sub-folder, table or collections are
removed; a folder or database file the sweep had to create is removed too,
with every parent folder created for it (and nothing that existed before).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from mediastash.errors import MediaStashError, StoreNotFoundError
from mediastash.stores.base import BaseMediaStore
from mediastash.stores.disk import DiskMediaStore
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.protocols import DeletableMediaStore, ListableMediaStore, MediaStore
from mediastash.stores.sqlite import SqliteMediaStore
from mediastash.uri import media_uri_for

if TYPE_CHECKING:
    from mediastash.stores.mongo import MongoMediaStore
    from mediastash.stores.s3 import S3MediaStore

__all__ = ['MemoryNamespaces', 'NamespaceCleanupError', 'Namespaces', 'UrlNamespaces', 'empty_store']

_PREFIX = 'mediastash-tune'
_MONGO_OWN_OPTIONS = frozenset({'collection', 'chunk_size_bytes'})


class NamespaceCleanupError(MediaStashError):
    """A namespace a sweep created could not be emptied or removed (the message says what is left)."""


class Namespaces(Protocol):
    """Hands out fresh, empty stores and cleans each up when its block ends."""

    def namespace(self, label: str) -> AbstractAsyncContextManager[MediaStore]:
        """A fresh store for ``label`` (a short name such as the threshold), removed after the block."""
        ...


async def empty_store(store: MediaStore) -> int:
    """Delete every blob ``store`` lists; returns how many. Raises if any is left."""
    if not (isinstance(store, ListableMediaStore) and isinstance(store, DeletableMediaStore)):
        raise NamespaceCleanupError(f'{store!r} cannot list or delete blobs, so a sweep cannot clean up after itself')
    uris = [uri async for uri in store.iter_uris()]
    if uris:
        await store.delete_many(uris)
    left = [uri async for uri in store.iter_uris()]
    if left:
        raise NamespaceCleanupError(f'{len(left)} blobs are left in {store!r} after deleting them')
    return len(uris)


class MemoryNamespaces:
    """A new ``MemoryMediaStore`` per namespace."""

    description = 'memory://'

    @asynccontextmanager
    async def namespace(self, label: str) -> AsyncIterator[MediaStore]:
        store = MemoryMediaStore()
        try:
            yield store
        finally:
            await empty_store(store)
            await store.aclose()


class UrlNamespaces:
    """Namespaces of the storage a store URL names (``mediastash.open_store`` forms), as an async context manager.

    Entering opens the URL once (a bad URL raises ``InvalidStoreConfiguration``
    there, before any work) and notes whether the folder or database file
    already exists; leaving removes it again if the sweep created it and left
    it empty.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.token = secrets.token_hex(4)
        self.description = '(not opened)'
        self.leftovers: list[str] = []
        """Namespaces that could not be removed after the sweep had already failed (that error wins)."""
        self._kind: _Kind | None = None
        self._created: list[Path] = []
        """Folders opening the store created (deepest first): the store's own folder and every missing parent."""

    async def __aenter__(self) -> Self:
        from mediastash.open_store import open_store

        try:
            base = open_store(self.url, create=False)
            existed = True
        except StoreNotFoundError as missing:
            self._created = _missing_folders(missing)  # noted before anything exists, removed again by __aexit__
            base = open_store(self.url)
            existed = False
        try:
            self.description = repr(base)
            kind = _kind_for(self.url, base, existed)
            if kind.remote:  # reach the server (and find the bucket) once, before any namespace exists
                await base.exists(media_uri_for(b''))
            self._kind = kind
        except BaseException:
            await base.aclose()
            _remove_empty_folders(self._created)
            raise
        await base.aclose()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._kind is not None:
                self._kind.finish()
        finally:
            _remove_empty_folders(self._created)

    @asynccontextmanager
    async def namespace(self, label: str) -> AsyncIterator[MediaStore]:
        if self._kind is None:
            raise RuntimeError('UrlNamespaces must be entered (async with) before use')
        name = f'{_PREFIX}-{self.token}-{label}'
        store = await self._kind.open(self.url, name)
        failed = False
        try:
            yield store
        except BaseException:
            failed = True
            raise
        finally:
            error = await _remove(self._kind, store, name)
            if error is not None:
                if not failed:
                    raise error
                self.leftovers.append(str(error))  # the sweep's own error is the one to raise


def _missing_folders(missing: StoreNotFoundError) -> list[Path]:
    """The folders that do not exist yet for a missing disk folder or SQLite file, deepest first.

    A folder store needs the folder itself and every missing parent; a SQLite
    database file needs its missing parents (the file is the kind's to remove).
    Remote storage is never created, so it has none.
    """
    if missing.what == 'folder':
        folder = Path(os.path.abspath(os.path.expanduser(missing.name)))
    elif missing.what == 'SQLite database':
        folder = Path(os.path.abspath(os.path.expanduser(missing.name))).parent
    else:
        return []
    chain: list[Path] = []
    while not folder.exists() and folder.parent != folder:
        chain.append(folder)
        folder = folder.parent
    return chain


def _remove_empty_folders(folders: list[Path]) -> None:
    """Remove each folder (deepest first) while it is empty; stop at the first that is not (someone else's now)."""
    for folder in folders:
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return


async def _remove(kind: _Kind, store: BaseMediaStore, name: str) -> NamespaceCleanupError | None:
    """Empty, close and remove one namespace, each step tried even when an earlier one failed; the error, if any."""
    errors: list[Exception] = []
    for step in (lambda: empty_store(store), store.aclose, lambda: kind.remove(store)):
        try:
            await step()
        except Exception as exc:
            errors.append(exc)
    if not errors:
        return None
    first = errors[0]
    problem = NamespaceCleanupError(
        f'could not remove the sweep namespace {name} ({kind.where(store)}): {type(first).__name__}: {first}'
    )
    problem.__cause__ = first
    return problem


# -- one kind per store type -----------------------------------------------------------------


class _Kind:
    """How namespaces of one store type are opened and removed."""

    remote = False
    """Whether the storage is behind a server that may be unreachable."""

    async def open(self, url: str, name: str) -> BaseMediaStore:
        raise NotImplementedError

    async def remove(self, store: BaseMediaStore) -> None:
        """Remove what is left of an emptied, closed namespace store."""

    def where(self, store: BaseMediaStore) -> str:
        return repr(store)

    def finish(self) -> None:
        """After the last namespace: remove storage the sweep had to create."""


def _kind_for(url: str, base: BaseMediaStore, existed: bool) -> _Kind:
    if isinstance(base, MemoryMediaStore):
        return _MemoryKind()
    if isinstance(base, DiskMediaStore):
        return _DiskKind(Path(base.directory))
    if isinstance(base, SqliteMediaStore):
        return _SqliteKind(base.database, existed)
    kind = type(base).__name__
    if kind == 'S3MediaStore':
        return _S3Kind(_s3(base).key_prefix)
    if kind == 'MongoMediaStore':
        return _MongoKind(_mongo(base).database, _mongo(base).collection)
    raise MediaStashError(f'tune cannot make namespaces in a {kind}')


def _open(url: str, **overrides: Any) -> BaseMediaStore:
    from mediastash.open_store import open_store

    return open_store(url, **overrides)


class _MemoryKind(_Kind):
    async def open(self, url: str, name: str) -> BaseMediaStore:
        return MemoryMediaStore()


class _DiskKind(_Kind):
    """A sub-folder ``mediastash-tune-<token>-<label>`` of the store's folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def open(self, url: str, name: str) -> BaseMediaStore:
        return _open(url, directory=self.root / name)

    async def remove(self, store: BaseMediaStore) -> None:
        assert isinstance(store, DiskMediaStore)
        shutil.rmtree(store.directory)

    def where(self, store: BaseMediaStore) -> str:
        assert isinstance(store, DiskMediaStore)
        return f'folder {store.directory}'


class _SqliteKind(_Kind):
    """A table ``mediastash_tune_<token>_<label>`` in the store's database file (or a private in-memory one)."""

    def __init__(self, database: str | None, existed: bool) -> None:
        self.database = None if database in (None, '', ':memory:') else database
        self.existed = existed

    async def open(self, url: str, name: str) -> BaseMediaStore:
        return _open(url, table=re.sub(r'\W', '_', name))

    async def remove(self, store: BaseMediaStore) -> None:
        if self.database is None:
            return
        assert isinstance(store, SqliteMediaStore)
        connection = sqlite3.connect(self.database, isolation_level=None)
        try:
            connection.execute(f'DROP TABLE IF EXISTS "{store.table}"')
        finally:
            connection.close()

    def where(self, store: BaseMediaStore) -> str:
        assert isinstance(store, SqliteMediaStore)
        return f'table {store.table} of {self.database}'

    def finish(self) -> None:
        if self.database is None or self.existed:
            return
        try:
            connection = sqlite3.connect(self.database)
            try:
                empty = connection.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] == 0
            finally:
                connection.close()
        except sqlite3.Error:
            return
        if empty:
            for suffix in ('', '-wal', '-shm', '-journal'):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.database + suffix)


class _S3Kind(_Kind):
    """The key prefix ``<prefix>mediastash-tune-<token>-<label>/`` of the store's bucket (emptied: no folders)."""

    remote = True

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def open(self, url: str, name: str) -> BaseMediaStore:
        return _open(url, key_prefix=f'{self.prefix}{name}/')

    def where(self, store: BaseMediaStore) -> str:
        return f'key prefix {_s3(store).key_prefix} of bucket {_s3(store).bucket}'


class _MongoKind(_Kind):
    """Collections ``<collection>_tune_<token>_<label>`` (and their ``_chunks``), dropped afterwards.

    The namespace store gets a client this class owns (from the same URL), so
    it can drop the collections with the driver's public API.
    """

    remote = True

    def __init__(self, database: str, collection: str) -> None:
        self.database = database
        self.collection = collection
        self.clients: dict[int, Any] = {}

    async def open(self, url: str, name: str) -> BaseMediaStore:
        from pymongo import AsyncMongoClient

        label = re.sub(r'\W', '_', name.removeprefix(_PREFIX + '-'))
        collection = f'{self.collection}_tune_{label}'
        if len(collection) > 90:
            collection = f'tune_{label}'
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(_driver_url(url))
        try:
            store = _open(url, client=client, collection=collection)
        except BaseException:
            await client.close()
            raise
        self.clients[id(store)] = client
        return store

    async def remove(self, store: BaseMediaStore) -> None:
        client = self.clients.pop(id(store))
        mongo = _mongo(store)
        try:
            database = client[mongo.database]
            await database.drop_collection(mongo.collection)
            await database.drop_collection(mongo.chunks_collection)
        finally:
            await client.close()

    def where(self, store: BaseMediaStore) -> str:
        return f'collection {_mongo(store).collection} of database {self.database}'


def _s3(store: BaseMediaStore) -> S3MediaStore:
    from mediastash.stores.s3 import S3MediaStore

    assert isinstance(store, S3MediaStore)
    return store


def _mongo(store: BaseMediaStore) -> MongoMediaStore:
    from mediastash.stores.mongo import MongoMediaStore

    assert isinstance(store, MongoMediaStore)
    return store


def _driver_url(url: str) -> str:
    """The MongoDB URL without the options only mediastash reads (``collection``, ``chunk_size_bytes``)."""
    base, mark, query = url.partition('?')
    if not mark:
        return url
    kept = [piece for piece in re.split('[&;]', query) if piece and piece.partition('=')[0] not in _MONGO_OWN_OPTIONS]
    return base + ('?' + '&'.join(kept) if kept else '')
