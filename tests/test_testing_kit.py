"""The shipped test kit: ``CountingMediaStore``, lazy imports, the docs example, and a suite that catches bad stores."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import mediastash.testing
from mediastash import (
    BaseMediaStore,
    DeletableMediaStore,
    KnownBlobCache,
    ListableMediaStore,
    MediaContext,
    MediaContextLike,
    MediaNotFoundError,
    MediaStore,
    MemoryMediaStore,
    StreamingMediaStore,
    externalize_media,
    media_uri_for,
)
from mediastash.context import EMPTY_CONTEXT
from mediastash.errors import InvalidMediaURI, StoreClosedError
from mediastash.stores.protocols import StatableMediaStore
from mediastash.testing import CountingMediaStore
from mediastash.testing.store import StoreTests, chunked, collect
from mediastash.uri import media_uri
from tests.memory_support import drop_blob, overwrite_blob, raw_bytes, set_written_at

ROOT = Path(__file__).resolve().parent.parent


class PutGetOnly(BaseMediaStore):
    """A backend with only the required primitives: no listing, deleting or streaming."""

    def __init__(self) -> None:
        super().__init__()
        self.blobs: dict[str, bytes] = {}

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        self.blobs.setdefault(digest, data)

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return self.blobs[digest]

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return digest in self.blobs

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return {}


# -- CountingMediaStore --------------------------------------------------------------------


async def test_counting_store_counts_and_forwards_every_call() -> None:
    inner = MemoryMediaStore()
    store = CountingMediaStore(inner)
    context = MediaContext(media_type='image/png', metadata={'k': 'v'})
    uri = await store.put(b'counted', context=context)
    await store.put(bytearray(b'counted'))
    assert uri == media_uri_for(b'counted')
    assert await inner.get(uri) == b'counted'
    assert await store.get(uri) == b'counted'
    assert await store.exists(uri) is True
    assert await store.exists(media_uri_for(b'absent')) is False
    assert await store.exists_many([uri, media_uri_for(b'absent')]) == {uri}
    assert dict(await store.get_metadata(uri)) == {'k': 'v'}
    assert await store.public_url(uri) is None
    streamed = await store.put_stream(chunked(b'streamed bytes', 4))
    assert b''.join(await collect(store.get_stream(streamed, chunk_size=5))) == b'streamed bytes'
    assert sorted([u async for u in store.iter_uris()]) == sorted([uri, streamed])
    assert await store.delete(streamed) is True
    assert await store.delete_many([uri]) == 1
    assert not await inner.exists(uri)
    assert store.calls == {
        'put': 2,
        'get': 1,
        'exists': 2,
        'exists_many': 1,
        'get_metadata': 1,
        'public_url': 1,
        'put_stream': 1,
        'get_stream': 1,
        'iter_uris': 1,
        'delete': 1,
        'delete_many': 1,
    }
    assert store.total_calls == 13
    assert store.put_sizes == {uri: 7, streamed: 14}
    assert store.bytes_put == 7 + 7 + 14
    store.reset()
    assert store.calls == {} and store.put_sizes == {} and store.bytes_put == 0


async def test_counting_store_counts_failed_calls_and_passes_errors_on() -> None:
    store = CountingMediaStore(MemoryMediaStore())
    with pytest.raises(MediaNotFoundError):
        await store.get(media_uri_for(b'never stored'))
    with pytest.raises(TypeError):
        await store.put('not bytes')  # type: ignore[arg-type]
    assert store.calls == {'get': 1, 'put': 1}
    assert store.put_sizes == {}


async def test_counting_store_has_the_capabilities_of_the_store_it_wraps() -> None:
    full = CountingMediaStore(MemoryMediaStore())
    assert isinstance(full, MediaStore)
    assert isinstance(full, DeletableMediaStore)
    assert isinstance(full, ListableMediaStore)
    assert isinstance(full, StreamingMediaStore)
    bare = CountingMediaStore(PutGetOnly())
    assert isinstance(bare, MediaStore)
    assert not isinstance(bare, DeletableMediaStore)
    assert not isinstance(bare, ListableMediaStore)
    assert not isinstance(bare, StreamingMediaStore)
    assert bare.delete is None and bare.iter_uris is None and bare.put_stream is None
    assert isinstance(bare, CountingMediaStore)
    assert repr(bare).startswith('CountingMediaStore(')
    uri = await bare.put(b'only the basics')
    assert await bare.get(uri) == b'only the basics'
    assert bare.calls == {'put': 1, 'get': 1}


async def test_counting_store_is_the_same_storage_for_the_known_blob_cache() -> None:
    inner = MemoryMediaStore()
    store = CountingMediaStore(inner)
    assert store.storage_key == inner.storage_key
    assert store.verifies_reads is True
    data = b'\x89PNG' + bytes(range(256)) * 20
    tree = [{'kind': 'binary', 'data': base64.b64encode(data).decode(), 'media_type': 'image/png'}]
    cache = KnownBlobCache()
    lean = await externalize_media(tree, media_store=inner, threshold_bytes=100, known_blobs=cache)
    again = await externalize_media(tree, media_store=store, threshold_bytes=100, known_blobs=cache)
    assert again == lean
    assert store.calls['put'] == 0
    before = store.deletion_generation
    assert await store.delete(media_uri_for(data))
    assert store.deletion_generation != before
    await externalize_media(tree, media_store=store, threshold_bytes=100, known_blobs=cache)
    assert store.calls['put'] == 1
    assert await inner.exists(media_uri_for(data))


async def test_counting_store_closes_the_store_it_wraps() -> None:
    inner = MemoryMediaStore()
    async with CountingMediaStore(inner) as store:
        await store.put(b'x')
    assert inner.closed


class TestCountingStore(StoreTests):
    """The conformance suite through the counting wrapper, over a memory store reached behind its back."""

    async def make_store(self, folder: Path, *, public_url: Any = None) -> CountingMediaStore:
        return CountingMediaStore(MemoryMediaStore(public_url=public_url))

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        return raw_bytes(store.inner, uri)

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        overwrite_blob(store.inner, uri, data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        drop_blob(store.inner, uri)

    async def raw_count(self, store: Any) -> int | None:
        return len([uri async for uri in store.inner.iter_uris()])

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        set_written_at(store.inner, uri, when)


class ForeignStore:
    """A ``MediaStore`` written without mediastash's base: no closed state and no URI checks of its own."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.asked: list[str] = []
        self.closed = False

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        uri = media_uri_for(data)
        self.blobs[uri] = bytes(data)
        return uri

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        self.asked.append(uri)
        return self.blobs[uri]

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        self.asked.append(uri)
        return uri in self.blobs

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        self.asked.append(uri)
        return None

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        self.asked.append(uri)
        return {}

    async def aclose(self) -> None:
        self.closed = True  # and goes on answering: the wrapper must refuse by itself


async def test_a_wrapper_keeps_the_store_rules_over_a_store_without_them() -> None:
    """Closed state and URI checks come from the rules BaseMediaStore uses, not from the wrapped store."""
    inner = ForeignStore()
    store = CountingMediaStore(inner)
    uri = await store.put(b'kept')
    for bad in (lambda: store.get('media+sha256://nothex'), lambda: store.exists_many([uri, 'not a uri'])):
        with pytest.raises(InvalidMediaURI):
            await bad()
    assert inner.asked == []  # refused before anything was handed on
    await store.aclose()
    assert store.closed and inner.closed
    calls = {
        'put': lambda: store.put(b'after closing'),
        'get': lambda: store.get(uri),
        'exists': lambda: store.exists(uri),
        'exists_many': lambda: store.exists_many([uri]),
        'touch_many': lambda: store.touch_many([uri]),
        'get_metadata': lambda: store.get_metadata(uri),
        'public_url': lambda: store.public_url(uri),
    }
    for call in calls.values():
        with pytest.raises(StoreClosedError, match='CountingMediaStore'):
            await call()
    assert inner.asked == []
    with pytest.raises(InvalidMediaURI):  # a bad URI is still named first, as BaseMediaStore does
        await store.get('not a uri')
    await store.aclose()  # twice is fine
    with pytest.raises(StoreClosedError):
        async with store:
            pass  # pragma: no cover


async def test_wrappers_forward_stat_exactly_when_the_wrapped_store_has_it() -> None:
    inner = MemoryMediaStore()
    store = CountingMediaStore(inner)
    assert isinstance(store, StatableMediaStore)
    uri = await store.put(b'\x89PNG stat me', context=MediaContext(media_type='image/png'))
    found = await store.stat(uri)
    assert found == await inner.stat(uri)
    assert (found.size, found.media_type) == (len(b'\x89PNG stat me'), 'image/png')
    assert store.calls['stat'] == 1
    bare = CountingMediaStore(ForeignStore())
    assert not isinstance(bare, StatableMediaStore)
    assert bare.stat is None


# -- imports -------------------------------------------------------------------------------


def _python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return result.stdout.strip()


def test_import_mediastash_does_not_import_the_test_kit() -> None:
    assert (
        _python("""
        import sys
        import mediastash, mediastash.stores, mediastash.walker
        print(sorted(name for name in sys.modules if name.startswith('mediastash.testing') or name == 'pytest'))
    """)
        == '[]'
    )


def test_counting_histories_and_the_demo_do_not_need_pytest() -> None:
    assert (
        _python("""
        import sys
        import mediastash.demo, mediastash.testing
        print('pytest' in sys.modules, 'mediastash.testing.store' in sys.modules)
    """)
        == 'False False'
    )


def test_the_kit_exports_the_private_modules_names_without_shim_modules() -> None:
    """``mediastash.testing`` holds the public names; the objects live in private modules production code uses,
    and no ``testing.counting`` / ``testing.histories`` module re-exports them."""
    import importlib.util

    import mediastash._counting
    import mediastash._histories

    assert mediastash.testing.CountingMediaStore is mediastash._counting.CountingMediaStore
    for name in mediastash._histories.__all__:
        assert name in mediastash.testing.__all__, name
        assert getattr(mediastash.testing, name) is getattr(mediastash._histories, name), name
    for shim in ('mediastash.testing.counting', 'mediastash.testing.histories'):
        assert importlib.util.find_spec(shim) is None, shim


def test_store_tests_is_loaded_on_first_use() -> None:
    assert mediastash.testing.StoreTests is StoreTests
    with pytest.raises(AttributeError, match='no attribute'):
        mediastash.testing.NoSuchThing  # noqa: B018


# -- the docs example ----------------------------------------------------------------------


def test_docs_show_the_example_backend_exactly() -> None:
    docs = (ROOT / 'docs' / 'stores.md').read_text()
    section = docs[docs.index('## Writing a backend') :]
    section = section[: section.index('\n## ', 1)] if '\n## ' in section[1:] else section
    (shown,) = re.findall(r'```python\n(.*?)```', section, flags=re.DOTALL)
    module = (ROOT / 'tests' / 'test_store_example.py').read_text()
    assert shown == module[module.index('from collections.abc') :]


# -- the suite fails bad stores ------------------------------------------------------------


class LastMetadataWins(BaseMediaStore):
    """Keeps the metadata of the latest put and forgets nothing on close: two rules broken."""

    def __init__(self) -> None:
        super().__init__()
        self.blobs: dict[str, bytes] = {}
        self.metadata: dict[str, dict[str, str]] = {}

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        self.blobs[digest] = data
        self.metadata[digest] = dict(getattr(context, 'metadata', {}))

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return self.blobs[digest]

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return digest in self.blobs

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return self.metadata[digest]

    async def _list_digests(self) -> AsyncIterator[str]:
        for digest in list(self.blobs):
            yield digest

    async def iter_uris(self) -> AsyncIterator[str]:  # type: ignore[override]
        """Overrides the public method, so the closed check is lost."""
        for digest in list(self.blobs):
            yield media_uri(digest)


def test_the_suite_fails_a_store_that_breaks_the_rules(tmp_path: Path) -> None:
    module = tmp_path / 'test_bad_store.py'
    module.write_text(
        textwrap.dedent("""
            from typing import Any

            from mediastash.testing import StoreTests
            from mediastash.uri import parse_media_uri
            from tests.test_testing_kit import LastMetadataWins


            class TestBad(StoreTests):
                records_media_types = False  # stat comes from the base's reading default: declared, so it passes
                stat_reads_blob = True

                async def make_store(self, folder: Any, *, public_url: Any = None) -> Any:
                    store = LastMetadataWins()
                    store._public_url = public_url
                    return store

                async def raw_read(self, store: Any, uri: str) -> bytes | None:
                    return store.blobs.get(parse_media_uri(uri))

                async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
                    store.blobs[parse_media_uri(uri)] = data

                async def raw_delete(self, store: Any, uri: str) -> None:
                    del store.blobs[parse_media_uri(uri)]
        """)
    )
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', str(module), '-q', '-p', 'no:cacheprovider', '--rootdir', str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, 'PYTHONPATH': str(ROOT)},
    )
    failed = sorted(set(re.findall(r'^FAILED \S+::TestBad::(\w+)', result.stdout, flags=re.MULTILINE)))
    assert failed == ['test_closed_store_refuses_every_call', 'test_metadata_of_a_later_put'], result.stdout
