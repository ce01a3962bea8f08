"""docs/architecture.md's "Adding a backend" checklist, followed literally: a tiny backend and the suite run on it.

``ShelfMediaStore`` keeps blobs in a named, process-wide dict of bytes
(``shelf://<name>``), with listing and deletes. It declares its settings as an
options class named in ``options_class``, is made openable with
``register_store``, and ``StoreTests`` runs on it. Only names the checklist and
docs/stores.md give are used, so a name either of them gets wrong fails here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import pytest

from mediastash import (
    BaseMediaStore,
    InvalidStoreConfiguration,
    MediaContextLike,
    StoreNotFoundError,
    capabilities_of,
    open_store,
)
from mediastash.context import context_metadata
from mediastash.stores import StoreOptions, register_store
from mediastash.stores.protocols import BlobStat
from mediastash.testing import StoreTests
from mediastash.uri import parse_media_uri
from mediastash.urls import PublicUrlResolver


@dataclasses.dataclass
class Shelf:
    """One named storage: the bytes and the metadata of each blob, by hex digest."""

    blobs: dict[str, bytes] = dataclasses.field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


SHELVES: dict[str, Shelf] = {}
"""Every shelf of this process by name (what ``shelf://<name>`` opens)."""

_NAME = re.compile(r'[a-z0-9-]{1,40}')


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShelfOptions(StoreOptions):
    """Step 2: a frozen keyword-only dataclass subclassing ``StoreOptions``, each field checked in ``__post_init__``."""

    store_name = 'ShelfMediaStore'
    name: str = 'default'
    max_blob_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            raise InvalidStoreConfiguration('invalid shelf name (not repeated here): use 1-40 of a-z, 0-9 and -')
        if not isinstance(self.max_blob_bytes, int) or self.max_blob_bytes < 1:
            raise InvalidStoreConfiguration('max_blob_bytes must be a positive int')

    @classmethod
    def from_store_url(cls, url: str, *, create: bool, overrides: dict[str, Any], owner: str) -> Self:
        """``shelf://<name>``; with ``create=False`` the shelf must exist already (nothing is created)."""
        parts = urlsplit(url)
        if parts.scheme != 'shelf' or parts.path or parts.query or parts.fragment:
            raise InvalidStoreConfiguration(f'{owner} takes shelf://<name> without a path or parameters')
        options = cls.made({'name': parts.netloc or 'default', **overrides}, owner)
        if not create and options.name not in SHELVES:
            raise StoreNotFoundError('shelf', options.name, hint='nothing was created')
        return options


class ShelfMediaStore(BaseMediaStore):
    """Step 1: only primitives, and what the store has declared (each flag follows from its primitive)."""

    supports_listing = True  # _list_digests
    supports_deletes = True  # _delete
    options_class = ShelfOptions

    def __init__(self, *, options: ShelfOptions | None = None, public_url: PublicUrlResolver | None = None) -> None:
        super().__init__(public_url=public_url)
        self.options = options if options is not None else ShelfOptions()
        self.shelf = SHELVES.setdefault(self.options.name, Shelf())

    def _storage_identity(self) -> tuple[str, str]:
        return ('shelf', self.options.name)

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        if len(data) > self.options.max_blob_bytes:
            raise InvalidStoreConfiguration('the blob is larger than max_blob_bytes')
        stored = self.shelf.blobs.get(digest)
        if stored is not None and self._stored_copy_is_sound(digest, len(data), len(stored), lambda: stored):
            return
        self.shelf.blobs[digest] = data
        self.shelf.metadata.setdefault(digest, dict(context_metadata(context)))  # the first put's metadata wins

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        if digest not in self.shelf.blobs:
            raise self._not_found(digest)
        return self.shelf.blobs[digest]

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return digest in self.shelf.blobs

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        if digest not in self.shelf.blobs:
            raise self._not_found(digest)
        return dict(self.shelf.metadata[digest])

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        if digest not in self.shelf.blobs:
            raise self._not_found(digest)
        return BlobStat(size=len(self.shelf.blobs[digest]), media_type=None, written_at=None)

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        self.shelf.metadata.pop(digest, None)
        return self.shelf.blobs.pop(digest, None) is not None

    async def _list_digests(self) -> AsyncIterator[str]:
        for digest in list(self.shelf.blobs):
            yield digest


@pytest.fixture
def shelf_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 3, as a program that installs no package does it (undone after the test)."""
    from mediastash.stores import registry

    monkeypatch.setattr(registry, '_registered', dict(registry._registered))
    register_store('shelf', ShelfMediaStore)


class TestShelfMediaStore(StoreTests):
    """Step 5: ``make_store``, the backend-bypass helpers, and what the backend records."""

    records_media_types = False  # _stat answers media_type=None

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> ShelfMediaStore:
        name = f'test-{len(SHELVES)}'
        return ShelfMediaStore(options=ShelfOptions(name=name), public_url=public_url)

    async def reopen_store(self, store: Any) -> ShelfMediaStore:
        return ShelfMediaStore(options=store.options)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return SHELVES[store.options.name].blobs.get(parse_media_uri(uri))

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        SHELVES[store.options.name].blobs[parse_media_uri(uri)] = data

    async def raw_delete(self, store: Any, uri: str) -> None:
        del SHELVES[store.options.name].blobs[parse_media_uri(uri)]

    async def raw_count(self, store: Any) -> int | None:
        return len(SHELVES[store.options.name].blobs)


# -- what the checklist promises beyond the suite --------------------------------------------


def test_the_declarations_follow_the_primitives() -> None:
    declared = ShelfMediaStore.capabilities
    assert declared.listing and declared.deletes and not declared.stream_writes and not declared.collection
    assert ShelfMediaStore.put_stream is None and ShelfMediaStore.iter_blobs is None


async def test_open_store_builds_the_store_from_its_options_class(shelf_scheme: None) -> None:
    async with open_store('shelf://from-url') as store:
        assert isinstance(store, ShelfMediaStore)
        assert store.options == ShelfOptions(name='from-url')
        uri = await store.put(b'opened by URL')
    async with open_store('shelf://from-url', create=False) as again:
        assert await again.get(uri) == b'opened by URL'
        assert capabilities_of(again).listing


def test_overrides_win_over_the_url_and_are_checked() -> None:
    store = ShelfMediaStore.from_url('shelf://overridden', max_blob_bytes=10)
    assert store.options.max_blob_bytes == 10
    with pytest.raises(InvalidStoreConfiguration, match='max_blob_bytes') as raised:
        ShelfMediaStore.from_url('shelf://overridden', max_blob_bytes=-7)
    assert '-7' not in str(raised.value)
    with pytest.raises(InvalidStoreConfiguration, match='colour'):
        ShelfMediaStore.from_url('shelf://overridden', colour='red')


def test_a_missing_shelf_opened_without_create_is_refused_and_not_made(shelf_scheme: None) -> None:
    with pytest.raises(StoreNotFoundError):
        open_store('shelf://never-made', create=False)
    assert 'never-made' not in SHELVES


@pytest.mark.parametrize('url', ['shelf://UPPER', 'shelf://name/path', 'shelf://name?secret=hunter2'])
def test_a_bad_url_is_refused_without_repeating_it(shelf_scheme: None, url: str) -> None:
    with pytest.raises(InvalidStoreConfiguration) as raised:
        open_store(url)
    assert 'UPPER' not in str(raised.value) and 'hunter2' not in str(raised.value)


async def test_the_docs_example_heals_a_corrupt_blob_another_instance_finds() -> None:
    """The "Writing a backend" example's ``_write`` keeps the healing rule it states, so a copy of it on storage
    shared by two instances (as a real backend's is) replaces a corrupt blob on a ``put`` of its bytes."""
    from tests.test_store_example import DictMediaStore

    first = DictMediaStore()
    data = b'the right bytes' * 10
    uri = await first.put(data)
    digest = parse_media_uri(uri)
    first.blobs[digest] = b'the wrong bytes' * 10  # same size, behind the store's back
    second = DictMediaStore()  # a fresh instance on the same storage: it never saw the blob fail
    second.blobs, second.metadata = first.blobs, first.metadata
    assert await second.put(data) == uri
    assert first.blobs[digest] == data
