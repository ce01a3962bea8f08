"""Fresh namespaces of one store for a sweep: one per threshold, emptied and removed afterwards.

The store makes them itself (``ScratchableMediaStore.scratch_namespace``: each
backend knows its own kind of scratch storage and how to remove it, see
``docs/tuning.md``). This module opens the store a URL names, checks that it
has the capability, hands out its namespaces, keeps cleanup failures that
happen after the sweep already failed, and removes again the folders that
opening the store had to create (every missing parent included, and nothing
that existed before).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from mediastash.errors import MediaStashError, NamespaceCleanupError, StoreNotFoundError
from mediastash.stores.base import BaseMediaStore
from mediastash.stores.protocols import MediaStore, ScratchableMediaStore
from mediastash.uri import media_uri_for

__all__ = [
    'MemoryNamespaces',
    'NamespaceCleanupError',
    'Namespaces',
    'NamespacesUnsupportedError',
    'StoreNamespaces',
    'UrlNamespaces',
]


class NamespacesUnsupportedError(MediaStashError, TypeError):
    """The store cannot make scratch namespaces (it is not a ``ScratchableMediaStore``), so it cannot be tuned."""


class Namespaces(Protocol):
    """Hands out fresh, empty stores and cleans each up when its block ends."""

    def namespace(self, label: str) -> AbstractAsyncContextManager[MediaStore]:
        """A fresh store for ``label`` (a short name such as the threshold), removed after the block."""
        ...


class StoreNamespaces:
    """The scratch namespaces of one open store, which must be a ``ScratchableMediaStore``.

    A namespace whose cleanup fails after its block already failed does not
    hide that error: the cleanup's message goes to ``leftovers`` instead.
    """

    def __init__(self, store: MediaStore) -> None:
        if not isinstance(store, ScratchableMediaStore):
            raise NamespacesUnsupportedError(
                f'tune needs a store that can make scratch namespaces (the ScratchableMediaStore capability, '
                f'a scratch_namespace(label) method); {type(store).__name__} has none'
            )
        self.store: ScratchableMediaStore = store
        self.description = repr(store)
        self.leftovers: list[str] = []
        """Namespaces that could not be removed after the sweep had already failed (that error wins)."""

    @asynccontextmanager
    async def namespace(self, label: str) -> AsyncIterator[MediaStore]:
        scratch = self.store.scratch_namespace(label)
        store = await scratch.__aenter__()
        try:
            yield store
        except BaseException as failure:
            try:
                await scratch.__aexit__(type(failure), failure, failure.__traceback__)
            except NamespaceCleanupError as leftover:
                self.leftovers.append(str(leftover))
            raise
        await scratch.__aexit__(None, None, None)


class MemoryNamespaces(StoreNamespaces):
    """A new in-memory store per namespace (``memory://``)."""

    def __init__(self) -> None:
        from mediastash.open_store import open_store

        super().__init__(open_store('memory://'))
        self.description = 'memory://'


class UrlNamespaces:
    """Namespaces of the storage a store URL names (``mediastash.open_store`` forms), as an async context manager.

    Entering opens the URL once (a bad URL raises ``InvalidStoreConfiguration``
    there, before any work), checks the store can make scratch namespaces and
    reaches its storage once (a stopped server or a missing bucket fails here,
    with nothing to clean up). Leaving closes it and removes the folders opening
    it created, deepest first, while they are empty.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.description = '(not opened)'
        self.leftovers: list[str] = []
        """Namespaces that could not be removed after the sweep had already failed (that error wins)."""
        self._base: BaseMediaStore | None = None
        self._namespaces: StoreNamespaces | None = None
        self._created: list[Path] = []
        """What opening the store found missing (deepest first): the folder or file it names and missing parents."""

    async def __aenter__(self) -> Self:
        from mediastash.open_store import open_store

        try:
            base = open_store(self.url, create=False)
        except StoreNotFoundError as missing:
            self._created = _missing_paths(missing)  # noted before anything exists, removed again by __aexit__
            base = open_store(self.url)
        try:
            namespaces = StoreNamespaces(base)
            namespaces.leftovers = self.leftovers
            self.description = namespaces.description
            await base.exists(media_uri_for(b''))  # reach the storage once, before any namespace exists
        except BaseException:
            try:
                await base.aclose()
            finally:
                _remove_empty_folders(self._created)
            raise
        self._base, self._namespaces = base, namespaces
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        base, self._base, self._namespaces = self._base, None, None
        try:
            if base is not None:
                await base.aclose()
        finally:
            _remove_empty_folders(self._created)

    def namespace(self, label: str) -> AbstractAsyncContextManager[MediaStore]:
        if self._namespaces is None:
            raise RuntimeError('UrlNamespaces must be entered (async with) before use')
        return self._namespaces.namespace(label)


def _missing_paths(missing: StoreNotFoundError) -> list[Path]:
    """The local path a store found missing (a folder, a database file) and its missing parents, deepest first.

    ``StoreNotFoundError.name`` is the path a local store was opened on; storage
    behind a server is never created, so what is noted here is never made.
    """
    path = Path(os.path.abspath(os.path.expanduser(missing.name)))
    chain: list[Path] = []
    while not path.exists() and path.parent != path:
        chain.append(path)
        path = path.parent
    return chain


def _remove_empty_folders(paths: list[Path]) -> None:
    """Remove each folder (deepest first) while it is empty; stop at the first that is not (someone else's now).

    A path that is gone (a database file its store removed) is passed over; one
    that is not a folder, or not empty, stops the walk: it holds something.
    """
    for path in paths:
        try:
            path.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return
