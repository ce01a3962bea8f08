"""What every backend's ``scratch_namespace`` shares: the namespace's name, and emptying and removing it.

A backend opens a store on storage of its own (a sub-folder, a table, a key
prefix, collections) and hands it to ``scratch_lifecycle`` with a description
of where it lives and how to remove what is left once it is empty. Afterwards
every blob is deleted through the store (so known-blob caches in the process
learn of it), the store is listed again to check none is left, closed, and the
storage removed; each step is tried even when an earlier one failed, and a
failure raises ``NamespaceCleanupError`` naming what is left.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from mediastash.errors import InvalidArgumentError, NamespaceCleanupError
from mediastash.stores.base import BaseMediaStore
from mediastash.stores.protocols import DeletableMediaStore, ListableMediaStore, MediaStore

__all__ = ['ScratchInPackage', 'ScratchSpace', 'empty_store', 'scratch_lifecycle', 'scratch_name']

SCRATCH_PREFIX = 'mediastash-tune'
_LABEL = re.compile(r'[A-Za-z0-9_.-]{1,32}')

S = TypeVar('S', bound=BaseMediaStore)


@dataclass(frozen=True, slots=True)
class ScratchSpace(Generic[S]):
    """What a backend's ``open_scratch`` made: the namespace's store, its name, where it lives, how to remove it.

    ``scratch_lifecycle`` takes it from there (see its docstring).
    """

    store: S
    name: str
    where: str
    remove: Callable[[], Awaitable[None]] | None = None


class ScratchInPackage(Generic[S]):
    """Gives a backend class ``scratch_namespace`` from its package's ``_scratch`` module, imported on first use.

    The first class in a hierarchy to derive from this is the backend (say
    ``mediastash.stores.disk._store.DiskMediaStore``): its package's
    ``_scratch.open_scratch(store, label, cls)`` makes the namespace's storage
    and store (a ``ScratchSpace``), ``cls`` being that class (a subclass's
    namespaces are of the backend's class). The store module never imports
    the scratch module at import time, so the two never import each other
    (``tests/test_import_graph.py``).
    """

    _scratch_owner: ClassVar[type]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not hasattr(cls, '_scratch_owner'):
            cls._scratch_owner = cls

    def scratch_namespace(self, label: str) -> contextlib.AbstractAsyncContextManager[S]:
        """A fresh, empty store of this backend for ``label``, emptied and its storage removed after the block.

        The ``ScratchableMediaStore`` capability (what ``mediastash tune``
        measures in); the scratch module's docstring says where it lives.
        """
        return _namespace(self, label)


@asynccontextmanager
async def _namespace(store: ScratchInPackage[S], label: str) -> AsyncIterator[S]:
    owner = store._scratch_owner
    module = importlib.import_module(owner.__module__.rpartition('.')[0] + '._scratch')
    space: ScratchSpace[S] = await module.open_scratch(store, label, owner)
    async with scratch_lifecycle(space.store, name=space.name, where=space.where, remove=space.remove) as opened:
        yield opened


def scratch_name(label: str, *, separator: str = '-') -> str:
    """``mediastash-tune-<random id>-<label>`` (``separator`` in place of ``-`` for table or collection names).

    ``label`` is the caller's short name (a threshold); it must be 1-32 letters,
    digits, ``_``, ``.`` or ``-`` so every backend can use it in a folder, key,
    table or collection name.
    """
    if not isinstance(label, str) or _LABEL.fullmatch(label) is None:
        raise InvalidArgumentError('label', '1-32 letters, digits, "_", "." or "-"', label)
    name = f'{SCRATCH_PREFIX}-{secrets.token_hex(4)}-{label}'
    return re.sub(r'\W', separator, name) if separator != '-' else name


async def empty_store(store: MediaStore) -> int:
    """Delete every blob ``store`` lists; returns how many. Raises ``NamespaceCleanupError`` if any is left."""
    if not (isinstance(store, ListableMediaStore) and isinstance(store, DeletableMediaStore)):
        raise NamespaceCleanupError(f'{store!r} cannot list or delete blobs, so its blobs cannot be removed')
    uris = [uri async for uri in store.iter_uris()]
    if uris:
        await store.delete_many(uris)
    left = [uri async for uri in store.iter_uris()]
    if left:
        raise NamespaceCleanupError(f'{len(left)} blobs are left in {store!r} after deleting them')
    return len(uris)


@asynccontextmanager
async def scratch_lifecycle(
    store: S, *, name: str, where: str, remove: Callable[[], Awaitable[None]] | None = None
) -> AsyncIterator[S]:
    """Yield ``store``; afterwards empty it, close it and ``remove()`` its storage.

    ``name`` is the namespace's name and ``where`` says where it lives (``folder
    /x/y``, ``table t of /x.db``): both go into the error when something is left.
    A cleanup failure after the block raised is raised from the block's error (it
    names what is left; the block's error is its ``__context__``).
    """
    try:
        yield store
    finally:
        errors: list[Exception] = []
        steps: list[Callable[[], Awaitable[object]]] = [lambda: empty_store(store), store.aclose]
        if remove is not None:
            steps.append(remove)
        for step in steps:
            try:
                await step()
            except Exception as exc:
                errors.append(exc)
        if errors:
            first = errors[0]
            problem = NamespaceCleanupError(
                f'could not remove the scratch namespace {name} ({where}): {type(first).__name__}: {first}'
            )
            raise problem from first
