"""A complete backend: a dict-backed store built on ``BaseMediaStore``, and the whole conformance suite run on it.

docs/stores.md ("Writing a backend") shows everything below this docstring, and
tests/test_testing_kit.py checks that the two stay the same.
"""

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from mediastash import BaseMediaStore, BlobStat, MediaContextLike
from mediastash.context import context_metadata
from mediastash.testing import StoreTests
from mediastash.uri import parse_media_uri
from mediastash.urls import PublicUrlResolver


class DictMediaStore(BaseMediaStore):
    """Blobs and their metadata in two dicts keyed by hex digest."""

    def __init__(self, *, public_url: PublicUrlResolver | None = None) -> None:
        super().__init__(public_url=public_url)
        self.blobs: dict[str, bytes] = {}
        self.metadata: dict[str, dict[str, str]] = {}

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        stored = self.blobs.get(digest)
        if stored is not None and self._stored_copy_is_sound(digest, len(data), len(stored), lambda: stored):
            return  # already stored and sound; a copy that is not is replaced below (healing)
        self.blobs[digest] = data
        self.metadata.setdefault(digest, dict(context_metadata(context)))  # the first put's metadata wins

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return self.blobs[digest]

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return digest in self.blobs

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return dict(self.metadata[digest])

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        if digest not in self.blobs:  # size without reading; no media type or write time is kept
            raise self._not_found(digest)
        return BlobStat(size=len(self.blobs[digest]), media_type=None, written_at=None)

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        self.metadata.pop(digest, None)
        return self.blobs.pop(digest, None) is not None

    async def _list_digests(self) -> AsyncIterator[str]:
        for digest in list(self.blobs):
            yield digest


class TestDictMediaStore(StoreTests):
    records_media_types = False  # stat answers media_type=None

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> Any:
        return DictMediaStore(public_url=public_url)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return store.blobs.get(parse_media_uri(uri))

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        store.blobs[parse_media_uri(uri)] = data

    async def raw_delete(self, store: Any, uri: str) -> None:
        del store.blobs[parse_media_uri(uri)]
