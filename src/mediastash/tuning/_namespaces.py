"""Where ``tune`` measures: one scratch namespace of the store per run, and the one rule that cleans up after it.

A run measures in ``store.namespace('mediastash-tune-<run id>')`` (a random
run id), erased after each threshold (so the next one starts empty) and at
the end, on error and on Ctrl-C too. While that namespace may hold blobs, a
record in the run journal (``journal_folder()``, on this machine) names it;
the record goes once the erase succeeded. A killed run leaves its record, and
the next run on the same store erases the namespace it names when the run
that wrote it is gone (same host, process no longer running) or the record is
older than ``STALE_AFTER``. A namespace is found only through a record, never
by its name, so no user namespace is ever touched. ``docs/tuning.md`` states
the rule.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Protocol, Self
from urllib.parse import urlsplit

from mediastash.errors import NamespaceCleanupError, NamespaceUnsupportedError, StoreNotFoundError
from mediastash.known_blobs import storage_key_of
from mediastash.stores.capabilities import capabilities_of
from mediastash.stores.protocols import ListableMediaStore, MediaStore
from mediastash.uri import media_uri_for

__all__ = [
    'SCRATCH_PREFIX',
    'STALE_AFTER',
    'MemoryNamespaces',
    'NamespaceCleanupError',
    'Namespaces',
    'StoreNamespaces',
    'UrlNamespaces',
    'journal_folder',
]

SCRATCH_PREFIX: Final = 'mediastash-tune-'
"""Every scratch namespace's name: this and a run id of 12 hex digits."""

STALE_AFTER: Final = 7 * 24 * 3600.0
"""Seconds after which a run's record is stale even when a process with its id runs (ids are reused)."""

_RUN_NAME: Final = re.compile(re.escape(SCRATCH_PREFIX) + r'[0-9a-f]{12}')


def journal_folder() -> Path:
    """Where run records live: ``$XDG_STATE_HOME/mediastash/tune-runs`` (``~/.local/state`` without it)."""
    state = os.environ.get('XDG_STATE_HOME') or os.path.join(os.path.expanduser('~'), '.local', 'state')
    return Path(state, 'mediastash', 'tune-runs')


class Namespaces(Protocol):
    """Hands out a fresh, empty store per measurement and cleans it up when its block ends."""

    def namespace(self, label: str) -> AbstractAsyncContextManager[MediaStore]:
        """A fresh store for ``label`` (a short name such as the threshold), erased after the block."""
        ...


@dataclass(frozen=True, slots=True)
class _Record:
    """A journal entry: this run's namespace holds (or may hold) blobs of the store ``store`` hashes to."""

    namespace: str
    store: str
    host: str
    pid: int
    written: float

    def stale(self, now: float) -> bool:
        """The run that wrote it is gone: same host and no such process, or older than ``STALE_AFTER``."""
        if now - self.written > STALE_AFTER:
            return True
        return self.host == socket.gethostname() and not _running(self.pid)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _store_tag(store: MediaStore) -> str:
    """A short hash of the store's storage identity: which records belong to it (no path or host is written)."""
    return hashlib.sha256(repr(storage_key_of(store)).encode()).hexdigest()[:32]


class StoreNamespaces:
    """The scratch namespace of one open store that has namespaces (``store.namespace(name)``), for one run.

    ``namespace(label)`` yields the run's namespace, empty, and erases it after
    the block. ``journal`` is the run-journal folder (default
    ``journal_folder()``); ``record_runs=False`` keeps no records (storage that
    ends with the process). ``NamespaceUnsupportedError`` for a store without
    namespaces. A cleanup failure after the block already failed does not
    hide that error: its message goes to ``leftovers``.
    """

    def __init__(self, store: MediaStore, *, journal: Path | None = None, record_runs: bool = True) -> None:
        self.name = f'{SCRATCH_PREFIX}{secrets.token_hex(6)}'
        """The run's scratch namespace."""
        if not capabilities_of(store).namespaces:  # a plug-in may not derive from the base
            raise NamespaceUnsupportedError(
                f'tune measures in a namespace of the store (store.namespace(name), which replaced '
                f'scratch_namespace()); {type(store).__name__} has no namespaces: a backend gets them by '
                f'implementing _open_namespace (docs/architecture.md)'
            )
        self.store = store
        self.description = repr(store)
        self.journal: Path | None = (journal or journal_folder()) if record_runs else None
        self.leftovers: list[str] = []
        """Namespaces that could not be erased after the sweep had already failed (that error wins)."""
        self.warnings: list[str] = []
        """What went wrong with the journal or the clean-up of earlier runs (the sweep went on)."""
        self.cleaned: list[str] = []
        """Namespaces of earlier, killed runs that this run erased."""
        self._checked = False

    async def clean_stale(self) -> list[str]:
        """Erase the namespaces of this store's stale records (see the module docstring); their names.

        Done once per instance; ``namespace()`` does it before its first block.
        A record that cannot be read is left alone; an erase that fails is a
        warning (the record stays, so a later run tries again).
        """
        if self._checked or self.journal is None:
            self._checked = True
            return []
        self._checked = True
        tag, now = _store_tag(self.store), time.time()
        erased: list[str] = []
        for path, record in _records(self.journal):
            if record.store != tag or record.namespace == self.name or not record.stale(now):
                continue
            try:
                await self._erase(record.namespace)
            except Exception as exc:
                self.warnings.append(
                    f'could not erase the scratch namespace {record.namespace} of an interrupted tune run '
                    f'({type(exc).__name__}: {exc}); the next run tries again'
                )
                continue
            _forget(path)
            erased.append(record.namespace)
        self.cleaned.extend(erased)
        return erased

    @asynccontextmanager
    async def namespace(self, label: str) -> AsyncIterator[MediaStore]:
        await self.clean_stale()
        record = self._note()
        view: Any = self.store.namespace(self.name)  # type: ignore[attr-defined]
        try:
            yield view
        except BaseException:
            try:
                await self._erase(self.name, view)
            except Exception as leftover:
                self.leftovers.append(self._cleanup_message(label, leftover))
            else:
                _forget(record)
            raise
        try:
            await self._erase(self.name, view)
        except Exception as leftover:
            raise NamespaceCleanupError(self._cleanup_message(label, leftover)) from leftover
        _forget(record)

    async def _erase(self, name: str, view: Any = None) -> None:
        """Erase namespace ``name`` (storage a backend keeps for other users included: nobody else has it)."""
        if view is None:
            view = self.store.namespace(name)  # type: ignore[attr-defined]
        try:
            await view.erase(exclusive=True)
        finally:
            await view.aclose()

    def _cleanup_message(self, label: str, error: Exception) -> str:
        return (
            f'could not erase the scratch namespace {self.name} of {self.description} after threshold {label} '
            f'({type(error).__name__}: {error}); the next tune run on this store erases it'
        )

    def _note(self) -> Path | None:
        """Write this run's record (a warning, not a failure, when the journal cannot be written)."""
        if self.journal is None:
            return None
        record = _Record(self.name, _store_tag(self.store), socket.gethostname(), os.getpid(), time.time())
        path = self.journal / f'{self.name}.json'
        try:
            self.journal.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix('.tmp')
            temporary.write_text(json.dumps(asdict(record)))
            temporary.replace(path)
        except OSError as exc:
            self.warnings.append(
                f'could not write the tune run journal ({type(exc).__name__}); if this run is killed, erase its '
                f'namespace by hand: mediastash erase --namespace {self.name} --store URL --yes'
            )
            return None
        return path


def _records(folder: Path) -> list[tuple[Path, _Record]]:
    """Every well-formed record in ``folder``; anything else there is passed over."""
    found: list[tuple[Path, _Record]] = []
    try:
        paths = sorted(folder.glob(f'{SCRATCH_PREFIX}*.json'))
    except OSError:
        return found
    for path in paths:
        try:
            raw = json.loads(path.read_text())
            record = _Record(
                str(raw['namespace']), str(raw['store']), str(raw['host']), int(raw['pid']), float(raw['written'])
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _RUN_NAME.fullmatch(record.namespace) is not None and path.stem == record.namespace:
            found.append((path, record))
    return found


def _forget(path: Path | None) -> None:
    """Remove a record, then the journal folder and its ``mediastash`` parent when they hold nothing else."""
    if path is None:
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    for folder in (path.parent, path.parent.parent):
        try:
            folder.rmdir()
        except OSError:
            return


class MemoryNamespaces(StoreNamespaces):
    """A namespace of a new in-memory store (``memory://``); no journal: nothing outlives the process."""

    def __init__(self) -> None:
        from mediastash.open_store import open_store

        super().__init__(open_store('memory://'), record_runs=False)
        self.description = 'memory://'


class UrlNamespaces:
    """The scratch namespace of the store a URL names (``mediastash.open_store`` forms), as an async context manager.

    Entering opens the URL once (a bad URL raises ``InvalidStoreConfiguration``
    there, before any work), checks the store has namespaces, reaches its
    storage once (a stopped server or a missing bucket fails here, with nothing
    to clean up) and erases what killed runs left (``StoreNamespaces.clean_stale``).
    Leaving closes the store and removes what opening it created (a folder, a
    database file, missing parents) when the store holds no blob.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.description = '(not opened)'
        self.leftovers: list[str] = []
        """Namespaces that could not be erased after the sweep had already failed (that error wins)."""
        self.warnings: list[str] = []
        """Journal and earlier-run clean-up problems (the sweep went on)."""
        self.cleaned: list[str] = []
        """Namespaces of earlier, killed runs that were erased on entering."""
        self._base: Any = None
        self._namespaces: StoreNamespaces | None = None
        self._created: list[Path] = []
        """What opening the store found missing (deepest first): the folder or file it names and missing parents."""

    @property
    def name(self) -> str | None:
        """The run's scratch namespace once entered."""
        return None if self._namespaces is None else self._namespaces.name

    async def __aenter__(self) -> Self:
        from mediastash.open_store import open_store

        try:
            base = open_store(self.url, create=False)
        except StoreNotFoundError as missing:
            self._created = _missing_paths(missing)  # noted before anything exists, removed again by __aexit__
            base = open_store(self.url)
        try:
            namespaces = StoreNamespaces(base, record_runs=urlsplit(self.url).scheme != 'memory')
            namespaces.leftovers, namespaces.warnings, namespaces.cleaned = self.leftovers, self.warnings, self.cleaned
            self.description = namespaces.description
            await base.exists(media_uri_for(b''))  # reach the storage once, before any namespace exists
            await namespaces.clean_stale()
        except BaseException:
            try:
                await base.aclose()
            finally:
                _remove_created(self._created)
            raise
        self._base, self._namespaces = base, namespaces
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        base, self._base, self._namespaces = self._base, None, None
        created = self._created
        try:
            if base is not None and created and not await _holds_nothing(base):
                created = [path for path in created if path.is_dir()]  # a file holding blobs stays
        finally:
            try:
                if base is not None:
                    await base.aclose()
            finally:
                _remove_created(created)

    def namespace(self, label: str) -> AbstractAsyncContextManager[MediaStore]:
        if self._namespaces is None:
            raise RuntimeError('UrlNamespaces must be entered (async with) before use')
        return self._namespaces.namespace(label)


async def _holds_nothing(store: MediaStore) -> bool:
    """True when ``store`` lists no blob (a store that cannot list is taken to hold something)."""
    if not isinstance(store, ListableMediaStore):
        return False
    async for _ in store.iter_uris():
        return False
    return True


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


def _remove_created(paths: list[Path]) -> None:
    """Remove what opening the store created, deepest first: a database file, then each folder while it is empty.

    A path that is gone is passed over; a folder that is not empty stops the
    walk (it holds something of someone's now).
    """
    for path in paths:
        try:
            if path.is_file():
                path.unlink()
            else:
                path.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return
