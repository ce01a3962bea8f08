"""``StoreTests`` fails a store whose declared capabilities lie (issue 33: declarations checked against behaviour).

Each store below declares listing or deletes and has the primitive, so it is
created without complaint, but the primitive does not do what the flag
promises. The suite runs on each (and on the honest store they derive from)
in a pytest subprocess, as tests/test_testing_kit.py runs it on other bad stores.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from mediastash import BaseMediaStore, MediaContextLike
from mediastash.context import context_metadata

ROOT = Path(__file__).resolve().parent.parent


class HonestStore(BaseMediaStore):
    """A dict of bytes that lists and deletes as it declares."""

    supports_listing = True
    supports_deletes = True

    def __init__(self) -> None:
        super().__init__()
        self.blobs: dict[str, bytes] = {}
        self.metadata: dict[str, dict[str, str]] = {}

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        if digest not in self.blobs:
            self.blobs[digest] = data
            self.metadata[digest] = dict(context_metadata(context))

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

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        self.metadata.pop(digest, None)
        return self.blobs.pop(digest, None) is not None

    async def _list_digests(self) -> AsyncIterator[str]:
        for digest in list(self.blobs):
            yield digest


class ListingNotImplemented(HonestStore):
    """Declares listing; its ``_list_digests`` raises ``NotImplementedError`` (a stub left in)."""

    async def _list_digests(self) -> AsyncIterator[str]:
        raise NotImplementedError
        yield ''  # an async generator, as the primitive is


class ListingEmpty(HonestStore):
    """Declares listing; lists nothing, whatever was put."""

    async def _list_digests(self) -> AsyncIterator[str]:
        for _ in ():
            yield ''


class DeleteDoesNothing(HonestStore):
    """Declares deletes; ``_delete`` says it removed the blob and leaves it."""

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        return digest in self.blobs


class DeleteManyDoesNothing(HonestStore):
    """Declares deletes; ``delete`` works but the batched ``_delete_many`` only counts."""

    async def _delete_many(self, digests: list[str]) -> int:
        return sum(digest in self.blobs for digest in digests)


class PublicListingNotImplemented(HonestStore):
    """Declares listing and writes the public ``iter_uris`` itself, as a stub raising ``NotImplementedError``."""

    def iter_uris(self) -> AsyncIterator[str]:
        raise NotImplementedError


class PublicDeleteDoesNothing(HonestStore):
    """Writes the public ``delete`` itself: it answers ``True`` and deletes nothing."""

    async def delete(self, uri: str, *, context: MediaContextLike | None = None) -> bool:
        return True


LIARS = [
    'ListingNotImplemented',
    'ListingEmpty',
    'PublicListingNotImplemented',
    'DeleteDoesNothing',
    'DeleteManyDoesNothing',
    'PublicDeleteDoesNothing',
]

SUITE = """
from typing import Any

from mediastash.testing import StoreTests
from mediastash.uri import parse_media_uri
from tests import test_store_tests_lies as lies


class Kit(StoreTests):
    records_media_types = False
    stat_reads_blob = True  # the base's reading _stat: declared, so it passes
    store_class: Any = None

    async def make_store(self, folder: Any, *, public_url: Any = None) -> Any:
        store = self.store_class()
        store._public_url = public_url
        return store

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return store.blobs.get(parse_media_uri(uri))

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        store.blobs[parse_media_uri(uri)] = data

    async def raw_delete(self, store: Any, uri: str) -> None:
        del store.blobs[parse_media_uri(uri)]
"""


def failures(tmp_path: Path, *names: str) -> dict[str, set[str]]:
    """Run ``StoreTests`` on each store class named; the failed tests of each (a class whose run passes: empty)."""
    module = tmp_path / 'test_liars.py'
    classes = ''.join(f'\n\nclass Test{name}(Kit):\n    store_class = lies.{name}\n' for name in names)
    module.write_text(textwrap.dedent(SUITE) + classes)
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', str(module), '-q', '-p', 'no:cacheprovider', '--rootdir', str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, 'PYTHONPATH': os.pathsep.join([str(ROOT / 'src'), str(ROOT)])},
        timeout=600,
    )
    assert 'error' not in result.stdout.splitlines()[-1], result.stdout[-3000:]
    found: dict[str, set[str]] = {name: set() for name in names}
    for name, test in re.findall(r'^FAILED \S+::Test(\w+)::(\w+)', result.stdout, flags=re.MULTILINE):
        found[name].add(test)
    return found


def test_the_suite_fails_every_store_whose_declarations_lie_and_passes_the_honest_one(tmp_path: Path) -> None:
    failed = failures(tmp_path, 'HonestStore', *LIARS)
    assert failed['HonestStore'] == set()
    for name in ('ListingNotImplemented', 'ListingEmpty'):
        assert {'test_listing', 'test_listing_many', 'test_declared_capabilities_work'} <= failed[name], name
    assert {'test_delete', 'test_declared_capabilities_work'} <= failed['DeleteDoesNothing']
    assert 'test_delete_many' in failed['DeleteManyDoesNothing']
