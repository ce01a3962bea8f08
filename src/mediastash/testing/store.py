"""``StoreTests``: the conformance suite every mediastash store passes.

Needs pytest and pytest-asyncio (``pip install 'mediastash[testing]'``), in
either of pytest-asyncio's modes. Subclass it once per backend::

    class TestMyStore(StoreTests):
        async def make_store(self, folder, *, public_url=None):
            return MyStore(..., public_url=public_url)   # a fresh, empty store

        async def raw_read(self, store, uri): ...         # bytes as stored, or None
        async def raw_overwrite(self, store, uri, data): ...
        async def raw_delete(self, store, uri): ...

The three ``raw_*`` helpers reach the backend directly, bypassing the store
(files, a second database connection, the SDK client), so the suite can check
what really landed and can corrupt or remove blobs behind the store's back.
Optional hooks: ``raw_count`` (how many blobs the backend holds, to check
that identical bytes are stored once), ``reopen_store`` (a second instance on
the same storage, to check that a deletion through one instance is seen by
the other's known-blob cache), ``raw_set_written_at`` (age a blob behind the
store's back, for the garbage-collection tests) and ``close_store``.

``folder`` is an empty temporary directory the store may use. Stores are
released by ``close_store`` after each test (default: ``aclose`` when the
store has one; override it to also close clients the test module created).
Tests of optional capabilities (listing, deleting, streaming, garbage
collection) skip when the store does not implement the matching protocol.
The namespace tests follow ``has_namespaces`` (default: what the store
declares with ``supports_namespaces``); a store without namespaces must
refuse ``namespace()`` with ``NamespaceUnsupportedError``. The class name has no
``Test`` prefix, so pytest only collects it through subclasses.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from mediastash import (
    EMPTY_CONTEXT,
    IntegrityError,
    InvalidMediaURI,
    InvalidNamespaceError,
    KnownBlobCache,
    MediaContext,
    MediaNotFoundError,
    MediaStore,
    MetadataTooLargeError,
    NamespaceUnsupportedError,
    StoreClosedError,
    externalize_media,
    make_static_public_url,
    media_uri_for,
    restore_media,
)
from mediastash._counting import CountingMediaStore
from mediastash.context import METADATA_LIMIT_BYTES
from mediastash.known_blobs import deletion_generation
from mediastash.markers import URI_KEY
from mediastash.stores import DeletableMediaStore, ListableMediaStore, StreamingMediaStore
from mediastash.stores._range import DigestRange, blobs_in_range
from mediastash.stores.base import TOUCH_AFTER_SECONDS, VERIFY_ON_PUT_BYTES, BlobInfo
from mediastash.stores.capabilities import (
    CAPABILITY_METHODS,
    capabilities_of,
    close_store,
    media_type_of,
    namespace_name_of,
    storage_key_or_none,
)
from mediastash.stores.protocols import (
    BlobStat,
    CollectableMediaStore,
    StatableMediaStore,
)
from mediastash.stores.verify import verify_store
from mediastash.urls import PublicUrlResolver

__all__ = [
    'BAD_NAMESPACES',
    'BAD_URIS',
    'MISSING_URI',
    'TAMPERINGS',
    'ForeignContext',
    'StoreTests',
    'blob',
    'chunked',
    'collect',
]

TAMPERINGS = ['flipped', 'truncated', 'extended', 'same_size', 'other_blob']
"""How the heal matrix corrupts a stored blob: one byte flipped, cut in half, one byte added, replaced by other
bytes of the same size, replaced by the bytes of another stored blob."""

StoreFactory = Callable[..., Awaitable[Any]]

BAD_URIS: list[object] = [
    'https://example.com/cat.png',
    'media+sha1://' + 'a' * 64,
    'media+sha256://' + 'A' * 64,
    'media+sha256://' + 'a' * 63,
    'media+sha256://' + 'a' * 65,
    'media+sha256://' + 'g' * 64,
    'media+sha256://',
    '',
    12345,
    None,
    b'media+sha256://' + b'a' * 64,
]
MISSING_URI = media_uri_for(b'never stored in any conformance test')

BAD_NAMESPACES: list[object] = [
    '',
    '.',
    '..',
    '...',
    'zq/x',
    'zq/../x',
    'zq\\x',
    'zq x',
    'zq\x00',
    'zq\u00e9',
    'zq:x',
    'zq' * 33,
    b'zq',
    None,
    42,
]
"""Namespace names every store refuses (``zq`` marks them: an error message must never contain it)."""


@dataclass(frozen=True)
class ForeignContext:
    """A context type mediastash has never heard of: only the three attributes."""

    media_type: str | None = None
    filename: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


def blob(size: int, seed: int = 0) -> bytes:
    """Deterministic, incompressible-looking bytes of ``size`` (fast: sha256 in counter mode)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f'{seed}:{counter}'.encode()).digest() * 64
        counter += 1
    return bytes(out[:size])


async def collect(stream: AsyncIterator[bytes]) -> list[bytes]:
    """Every chunk of ``stream``."""
    return [chunk async for chunk in stream]


async def chunked(data: bytes, size: int) -> AsyncIterator[bytes]:
    """``data`` as an async stream of ``size``-byte chunks."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def image_tree(size: int = 100 << 10, seed: int = 0) -> tuple[dict[str, Any], bytes]:
    """A binary part as pydantic-ai persists it (base64 ``data``), and its raw bytes."""
    data = blob(size, seed=seed)
    return {'kind': 'binary', 'data': base64.b64encode(data).decode('ascii'), 'media_type': 'image/png'}, data


class StoreTests:
    """Behaviour shared by every ``MediaStore``; subclass it once per backend (see the module docstring)."""

    pytestmark = pytest.mark.asyncio  # runs in pytest-asyncio's strict mode (its default) as well as in auto mode

    later_metadata_replaces: ClassVar[bool] = False
    """Declare ``True`` when a later put carrying metadata replaces the stored metadata (see its test)."""

    heals_on_put: ClassVar[bool] = True
    """Declare ``False`` for a store that cannot replace a stored blob (no ``_rewrite`` or ``_delete``): a ``put``
    of a blob that failed verification must then raise ``IntegrityError`` instead of healing."""

    written_at_resolution: ClassVar[float] = 0.0
    """Seconds by which the backend may round a blob's last-write time (S3 answers whole seconds: 1.0)."""

    records_media_types: ClassVar[bool] = True
    """Declare ``False`` for a backend that keeps no media type: ``stat`` must then answer ``None`` for it."""

    has_namespaces: ClassVar[bool | None] = None
    """``True``: the store must have tenant namespaces (``namespace(name)``) and passes the namespace tests;
    ``False``: it must refuse ``namespace()`` with ``NamespaceUnsupportedError``; ``None`` (the default): whichever
    the store declares with ``supports_namespaces``."""

    stat_reads_blob: ClassVar[bool] = False
    """Declare ``True`` when ``stat`` reads the blob (a backend relying on ``BaseMediaStore``'s default
    ``_stat``): a corrupt blob then fails ``stat`` instead of being measured from what the backend records."""

    # -- what a backend's test module provides -----------------------------------------

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> Any:
        """A fresh, empty store that may keep its data in ``folder``."""
        raise NotImplementedError

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        """The bytes the backend holds for ``uri``, bypassing the store; ``None`` when absent."""
        raise NotImplementedError

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        """Replace the stored bytes of ``uri`` behind the store's back."""
        raise NotImplementedError

    async def raw_delete(self, store: Any, uri: str) -> None:
        """Remove the stored bytes of ``uri`` behind the store's back."""
        raise NotImplementedError

    async def raw_count(self, store: Any) -> int | None:
        """How many blobs the backend holds, or ``None`` when that cannot be checked."""
        return None

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        """Set the blob's last-write time (Unix time) behind the store's back; ``None``: make its age unknown.

        Raise ``NotImplementedError`` (the default) where the backend cannot
        (S3's ``LastModified``; an unknown age on disk): the tests that need
        it skip, the real-time garbage-collection tests still run.
        """
        raise NotImplementedError

    async def reopen_store(self, store: Any) -> Any | None:
        """A second, independent instance on the same storage as ``store``, or ``None``.

        Same folder, database file, bucket and prefix, or collection; a new
        client or connection of its own. ``None`` (the default) when the
        storage is private to the instance, as an in-memory store's is: the
        tests that need it then skip. The suite releases it with ``close_store``.
        """
        return None

    async def close_store(self, store: Any) -> None:
        """Release a store made by ``make_store`` or ``reopen_store`` (default: ``aclose`` when it has one)."""
        await close_store(store)

    # -- fixtures ----------------------------------------------------------------------

    @pytest_asyncio.fixture
    async def store_factory(self, tmp_path: Path) -> AsyncIterator[StoreFactory]:
        created: list[Any] = []

        async def factory(**options: Any) -> Any:
            folder = tmp_path / f'store-{len(created)}'
            folder.mkdir()
            store = await self.make_store(folder, **options)
            created.append(store)
            return store

        yield factory
        for store in reversed(created):
            await self.close_store(store)

    @pytest_asyncio.fixture
    async def store(self, store_factory: StoreFactory) -> Any:
        return await store_factory()

    # -- the protocol ------------------------------------------------------------------

    async def test_is_a_media_store(self, store: Any) -> None:
        assert isinstance(store, MediaStore)

    async def test_put_get_round_trip(self, store: Any) -> None:
        data = blob(10_000)
        uri = await store.put(data)
        assert uri == media_uri_for(data)
        assert await store.get(uri) == data
        assert await self.raw_read(store, uri) == data

    async def test_put_get_with_explicit_context(self, store: Any) -> None:
        data = blob(300, seed=1)
        context = MediaContext(media_type='image/png', filename='cat.png')
        uri = await store.put(data, context=context)
        assert await store.get(uri, context=context) == data
        assert await store.get(uri) == data

    async def test_exists(self, store: Any) -> None:
        uri = await store.put(b'present')
        assert await store.exists(uri) is True
        assert await store.exists(MISSING_URI) is False

    async def test_metadata_round_trip(self, store: Any) -> None:
        metadata = {'tenant': 'acme', 'caption': 'Çà et là — 猫 🐈', 'empty': ''}
        uri = await store.put(b'with metadata', context=MediaContext(media_type='text/plain', metadata=metadata))
        assert dict(await store.get_metadata(uri)) == metadata

    async def test_metadata_defaults_to_empty(self, store: Any) -> None:
        uri = await store.put(b'without metadata', context=MediaContext(media_type='text/plain'))
        assert dict(await store.get_metadata(uri)) == {}

    async def test_metadata_does_not_include_media_type(self, store: Any) -> None:
        context = MediaContext(media_type='image/png', filename='a.png', metadata={'k': 'v'})
        uri = await store.put(b'typed', context=context)
        assert dict(await store.get_metadata(uri)) == {'k': 'v'}

    async def test_metadata_of_missing_blob(self, store: Any) -> None:
        with pytest.raises(MediaNotFoundError) as caught:
            await store.get_metadata(MISSING_URI)
        assert isinstance(caught.value, FileNotFoundError)
        assert MISSING_URI in str(caught.value)

    async def test_bad_metadata_is_refused(self, store: Any) -> None:
        with pytest.raises(TypeError):
            await store.put(b'x', context=ForeignContext(metadata={'n': 1}))  # type: ignore[dict-item]

    @pytest.mark.parametrize('streamed', [False, True], ids=['put', 'put_stream'])
    async def test_metadata_past_the_bound_is_refused_before_anything_is_stored(
        self, store: Any, streamed: bool
    ) -> None:
        """One bound for every store (``METADATA_LIMIT_BYTES`` of JSON), checked at write time: a typed
        error that gives sizes, not the metadata; no blob stored, and a stored blob's metadata unchanged."""
        if streamed and not isinstance(store, StreamingMediaStore):
            pytest.skip('the store does not stream')
        secret = 'secret-metadata-value-'
        huge = {'note': secret + 'x' * METADATA_LIMIT_BYTES}
        data = blob(300, seed=91)
        uri = media_uri_for(data)

        async def put(metadata: Mapping[str, str]) -> str:
            context = MediaContext(media_type='text/plain', metadata=metadata)
            if streamed:
                return str(await store.put_stream(chunked(data, 100), context=context))
            return str(await store.put(data, context=context))

        with pytest.raises(MetadataTooLargeError) as caught:
            await put(huge)
        assert isinstance(caught.value, ValueError)
        assert str(METADATA_LIMIT_BYTES) in str(caught.value) and secret not in str(caught.value)
        assert not await store.exists(uri)
        assert await self.raw_read(store, uri) is None
        assert await self.raw_count(store) in (None, 0)

        assert await put({'k': 'v'}) == uri
        with pytest.raises(MetadataTooLargeError):
            await put(huge)
        assert dict(await store.get_metadata(uri)) == {'k': 'v'}
        assert await store.get(uri) == data

    async def test_get_missing_blob(self, store: Any) -> None:
        with pytest.raises(MediaNotFoundError) as caught:
            await store.get(MISSING_URI)
        assert isinstance(caught.value, FileNotFoundError)
        assert MISSING_URI in str(caught.value)

    @pytest.mark.parametrize('bad_uri', BAD_URIS, ids=repr)
    @pytest.mark.parametrize('method', ['get', 'exists', 'get_metadata', 'public_url'])
    async def test_invalid_uri(self, store: Any, method: str, bad_uri: object) -> None:
        with pytest.raises(InvalidMediaURI) as caught:
            await getattr(store, method)(bad_uri)
        assert isinstance(caught.value, ValueError)
        assert str(caught.value).startswith('invalid media URI')
        if isinstance(bad_uri, str) and len(bad_uri) > 20:  # never echoed: it may be a pasted secret
            assert bad_uri not in str(caught.value)

    async def test_dedup(self, store: Any) -> None:
        data = blob(5000, seed=2)
        first = await store.put(data)
        second = await store.put(bytearray(data))
        assert first == second
        assert await store.get(first) == data
        count = await self.raw_count(store)
        if count is not None:
            assert count == 1

    async def test_metadata_of_a_later_put(self, store: Any) -> None:
        """What a later ``put`` of stored bytes does to their metadata, as the backend declares it.

        By default the metadata of the ``put`` (or ``put_stream``) that stored
        the blob wins: later puts leave it alone, whatever they carry. A
        backend that declares ``later_metadata_replaces = True`` (the disk
        store, as pydantic-ai-harness's disk layout does) replaces it with
        the metadata of a later put that carries any, and keeps it otherwise.
        """
        replaces = self.later_metadata_replaces
        data = blob(2000, seed=3)
        uri = await store.put(data, context=MediaContext(metadata={'a': '1'}))
        await store.put(data, context=MediaContext(metadata={'a': '2'}))
        await store.put(data)
        expected = {'a': '2'} if replaces else {'a': '1'}
        assert dict(await store.get_metadata(uri)) == expected
        if _has(store, StreamingMediaStore):
            await store.put_stream(chunked(data, 500), context=MediaContext(metadata={'a': '3'}))
            expected = {'a': '3'} if replaces else {'a': '1'}
            assert dict(await store.get_metadata(uri)) == expected
        assert await store.get(uri) == data
        bare = blob(300, seed=13)
        bare_uri = await store.put(bare)
        await store.put(bare, context=MediaContext(metadata={'late': 'yes'}))
        assert dict(await store.get_metadata(bare_uri)) == ({'late': 'yes'} if replaces else {})

    async def test_empty_blob(self, store: Any) -> None:
        uri = await store.put(b'')
        assert uri == media_uri_for(b'')
        assert await store.get(uri) == b''
        assert await store.exists(uri)

    async def test_large_blob(self, store: Any) -> None:
        data = os.urandom(20 << 20)
        uri = await store.put(data)
        assert uri == media_uri_for(data)
        assert await store.get(uri) == data

    async def test_concurrent_puts(self, store: Any) -> None:
        shared = blob(200_000, seed=4)
        distinct = [blob(3000 + i, seed=100 + i) for i in range(50)]
        uris = await asyncio.gather(*(store.put(shared) for _ in range(50)), *(store.put(d) for d in distinct))
        assert set(uris[:50]) == {media_uri_for(shared)}
        assert uris[50:] == [media_uri_for(d) for d in distinct]
        reads = await asyncio.gather(*(store.get(uri) for uri in uris[49:]))
        assert reads == [shared, *distinct]
        count = await self.raw_count(store)
        if count is not None:
            assert count == 51

    async def test_bytearray_and_memoryview_payloads(self, store: Any) -> None:
        data = blob(1234, seed=5)
        assert await store.put(bytearray(data)) == media_uri_for(data)
        assert await store.put(memoryview(data)) == media_uri_for(data)
        assert await store.get(media_uri_for(data)) == data

    @pytest.mark.parametrize('payload', ['text', 12, [1, 2], None], ids=repr)
    async def test_non_bytes_payload(self, store: Any, payload: object) -> None:
        with pytest.raises(TypeError):
            await store.put(payload)

    # -- lifecycle and identity --------------------------------------------------------

    async def test_aclose_twice_is_fine(self, store: Any) -> None:
        await store.put(b'before closing')
        await store.aclose()
        await store.aclose()

    async def test_closed_store_refuses_every_call(self, store: Any) -> None:
        uri = await store.put(b'before closing')
        await store.aclose()
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            'put': lambda: store.put(b'after closing'),
            'get': lambda: store.get(uri),
            'exists': lambda: store.exists(uri),
            'get_metadata': lambda: store.get_metadata(uri),
            'public_url': lambda: store.public_url(uri),
        }
        if capabilities_of(store).exists_many:
            calls['exists_many'] = lambda: store.exists_many([uri])
        if _has(store, DeletableMediaStore):
            calls['delete'] = lambda: store.delete(uri)
            calls['delete_many'] = lambda: store.delete_many([uri])
        if _has(store, ListableMediaStore):
            calls['iter_uris'] = lambda: collect(store.iter_uris())
        if _has(store, StreamingMediaStore):
            calls['put_stream'] = lambda: store.put_stream(chunked(b'after closing', 4))
            calls['get_stream'] = lambda: collect(store.get_stream(uri))
        if _has(store, StatableMediaStore):
            calls['stat'] = lambda: store.stat(uri)
        if _has(store, CollectableMediaStore):
            calls['iter_blobs'] = lambda: _blobs(store)
            calls['touch_many'] = lambda: store.touch_many([uri])
            calls['delete_unless_touched'] = lambda: store.delete_unless_touched([uri], written_before=time.time())
        not_refused: list[str] = []
        for name, call in calls.items():
            try:
                await call()
            except StoreClosedError:
                continue
            except Exception as error:
                not_refused.append(f'{name} raised {type(error).__name__}: {error}')
            else:
                not_refused.append(f'{name} succeeded')
        assert not_refused == [], 'after aclose every call must raise StoreClosedError'

    async def test_async_with_closes_the_store(self, store: Any) -> None:
        async with store as entered:
            assert entered is store
            uri = await store.put(b'inside the block')
            assert await store.get(uri) == b'inside the block'
        with pytest.raises(StoreClosedError):
            await store.get(uri)
        with pytest.raises(StoreClosedError):
            await store.put(b'after the block')
        with pytest.raises(StoreClosedError):
            async with store:
                pass  # pragma: no cover

    async def test_storage_key_is_hashable_and_stable(self, store_factory: StoreFactory) -> None:
        store = await store_factory()
        if storage_key_or_none(store) is None:
            pytest.skip(f'{type(store).__name__} has no storage_key (the walks give it a private known-blob cache)')
        key = store.storage_key
        assert {key: 'usable as a dict key'}[key]
        uri = await store.put(b'keyed')
        await store.get(uri)
        assert store.storage_key == key
        assert hash(store.storage_key) == hash(key)
        other = await store_factory()
        assert other.storage_key != key, 'two stores on different storage must have different keys'
        again = await self.reopen_store(store)
        if again is not None:
            try:
                assert again.storage_key == key, 'two instances on the same storage must have equal keys'
            finally:
                await self.close_store(again)

    # -- the known-blob cache ----------------------------------------------------------

    async def test_known_blobs_see_a_deletion_through_another_instance(self, store: Any) -> None:
        store = _capable(store, DeletableMediaStore, 'delete')
        other = await self.reopen_store(store)
        if other is None:
            pytest.skip(f'{type(store).__name__}: no second instance on the same storage (reopen_store gave None)')
        try:
            tree, data = image_tree(seed=14)
            uri = media_uri_for(data)
            lean = await externalize_media(tree, media_store=store, threshold_bytes=1024)
            assert lean[URI_KEY] == uri
            assert await other.delete(uri) is True
            again = await externalize_media(tree, media_store=store, threshold_bytes=1024)
            assert again == lean
            assert await store.exists(uri), 'a deletion through another instance must make the cache forget'
            assert await restore_media(again, media_store=other, known_blobs=False) == tree
        finally:
            await self.close_store(other)

    async def test_known_blobs_forget_a_blob_that_failed_verification(self, store: Any) -> None:
        """A failed read makes the known-blob cache forget, so re-saving the history heals the blob."""
        if not self.heals_on_put:
            pytest.skip(f'{type(store).__name__} cannot replace a stored blob')
        cache = KnownBlobCache(trust_seconds=3600)
        tree, data = image_tree(size=3 * VERIFY_ON_PUT_BYTES // 2, seed=45)
        lean = await externalize_media(tree, media_store=store, threshold_bytes=1024, known_blobs=cache)
        uri = lean[URI_KEY]
        await self.raw_overwrite(store, uri, _tampered(data, 'flipped'))
        with pytest.raises(IntegrityError):
            await store.get(uri)
        again = await externalize_media(tree, media_store=store, threshold_bytes=1024, known_blobs=cache)
        assert again == lean
        assert await store.get(uri) == data

    async def test_known_blobs_recheck_after_the_trust_age(self, store: Any) -> None:
        clock = [0.0]
        cache = KnownBlobCache(trust_seconds=60, clock=lambda: clock[0])
        tree, data = image_tree(seed=15)
        uri = media_uri_for(data)
        lean = await externalize_media(tree, media_store=store, threshold_bytes=1024, known_blobs=cache)
        await self.raw_delete(store, uri)
        counting = CountingMediaStore(store)  # same storage_key, so the same cache accepts it
        clock[0] = 30.0
        trusted = await externalize_media(tree, media_store=counting, threshold_bytes=1024, known_blobs=cache)
        assert trusted == lean
        assert counting.calls['put'] == 0, 'within trust_seconds the cache is believed without asking the store'
        clock[0] = 61.0
        rechecked = await externalize_media(tree, media_store=counting, threshold_bytes=1024, known_blobs=cache)
        assert rechecked == lean
        assert await store.exists(uri), 'past trust_seconds the cache must ask the store again and re-store the blob'
        assert await restore_media(rechecked, media_store=store, known_blobs=False) == tree

    # -- verification ------------------------------------------------------------------

    @pytest.mark.parametrize('tamper', ['flipped', 'truncated', 'extended'])
    async def test_tampered_blob_raises_integrity_error(self, store: Any, tamper: str) -> None:
        data = blob(10_000, seed=6)
        uri = await store.put(data)
        await self.raw_overwrite(store, uri, _tampered(data, tamper))
        with pytest.raises(IntegrityError) as caught:
            await store.get(uri)
        assert uri in str(caught.value)

    async def test_reads_change_nothing_stored(self, store: Any) -> None:
        """A read never writes: reading sound, corrupt and missing blobs (``get``, ``get_stream``, ``stat``,
        metadata, existence, listing and ``verify`` without repair) leaves ``raw_storage_snapshot`` as it was."""
        sound = await store.put(blob(70_000, seed=73), context=MediaContext(media_type='image/png'))
        small = await store.put(b'small and sound', context=MediaContext(metadata={'k': 'v'}))
        data = blob(5_000, seed=74)
        corrupt = await store.put(data)
        try:
            await self.raw_overwrite(store, corrupt, _tampered(data, 'flipped'))
        except NotImplementedError:
            corrupt = MISSING_URI
        before = await self.raw_storage_snapshot(store)
        if before is None:
            pytest.skip(f'{type(self).__name__} cannot snapshot the storage (raw_storage_snapshot)')
        for uri in (sound, small, corrupt, MISSING_URI):
            reads: list[Awaitable[object]] = [store.get(uri), store.exists(uri), store.get_metadata(uri)]
            if _has(store, StreamingMediaStore):
                reads.append(collect(store.get_stream(uri, chunk_size=4096)))
            if _has(store, StatableMediaStore):
                reads.append(store.stat(uri))
            for read in reads:
                with contextlib.suppress(IntegrityError, MediaNotFoundError):
                    await read
        await store.exists_many([sound, small, corrupt, MISSING_URI])
        if _has(store, ListableMediaStore):
            assert sound in [uri async for uri in store.iter_uris()]
            report = await verify_store(store)
            assert report.ok >= 2 and (corrupt == MISSING_URI or report.corrupt == [corrupt])
        assert await self.raw_storage_snapshot(store) == before, 'a read changed the storage'

    # -- healing: a put of the right bytes repairs a corrupt blob ------------------------

    async def _corrupt(self, store: Any, data: bytes, how: str) -> str:
        """Store ``data``, then tamper with it behind the store's back (see ``TAMPERINGS``); its URI."""
        uri: str = await store.put(data)
        if how == 'other_blob':
            other = blob(len(data) // 3 + 1, seed=len(data) % 251)
            await store.put(other)
            stored = other
        elif how == 'same_size':
            stored = blob(len(data), seed=len(data) % 251 + 1)
        else:
            stored = _tampered(data, how)
        assert stored != data
        await self.raw_overwrite(store, uri, stored)
        return uri

    @pytest.mark.parametrize('how', TAMPERINGS)
    async def test_put_heals_a_blob_that_failed_verification(self, store: Any, how: str) -> None:
        """(a) Same instance: a failed ``get`` makes the next ``put`` of the right bytes replace the stored copy."""
        data = blob(3 * VERIFY_ON_PUT_BYTES // 2, seed=40)  # above the put-time check: the failed get does it
        uri = await self._corrupt(store, data, how)
        with pytest.raises(IntegrityError):
            await store.get(uri)
        if not self.heals_on_put:
            with pytest.raises(IntegrityError):
                await store.put(data)
            return
        assert await store.put(data) == uri
        assert await store.get(uri) == data

    @pytest.mark.parametrize('how', TAMPERINGS)
    async def test_put_stream_heals_a_blob_whose_stream_failed(self, store: Any, how: str) -> None:
        """(a) Same instance, streaming: a failed ``get_stream`` makes the next ``put_stream`` replace the copy."""
        store = _capable(store, StreamingMediaStore, 'stream')
        data = blob(3 * VERIFY_ON_PUT_BYTES // 2, seed=41)
        uri = await self._corrupt(store, data, how)
        with pytest.raises(IntegrityError):
            await collect(store.get_stream(uri, chunk_size=65536))
        assert await store.put_stream(chunked(data, 100_000)) == uri
        assert b''.join(await collect(store.get_stream(uri))) == data

    @pytest.mark.parametrize('streamed', [False, True], ids=['put', 'put_stream'])
    @pytest.mark.parametrize('how', TAMPERINGS)
    async def test_fresh_instance_heals_a_small_blob_on_put(self, store: Any, how: str, streamed: bool) -> None:
        """(b) Another instance, which never saw the blob fail, re-hashes a small stored copy before skipping."""
        other = await self._reopened(store)
        data = blob(20_000, seed=42)
        uri = await self._corrupt(store, data, how)
        if streamed:
            other = _capable(other, StreamingMediaStore, 'stream')
            assert await other.put_stream(chunked(data, 7000)) == uri
        else:
            assert await other.put(data) == uri
        assert await other.get(uri) == data
        assert await store.get(uri) == data

    @pytest.mark.parametrize('how', ['truncated', 'extended', 'other_blob'])
    async def test_fresh_instance_heals_a_resized_large_blob_on_put(self, store: Any, how: str) -> None:
        """(b) A stored copy of another size is replaced whatever its size."""
        other = await self._reopened(store)
        data = blob(VERIFY_ON_PUT_BYTES + 10_000, seed=43)
        uri = await self._corrupt(store, data, how)
        assert await other.put(data) == uri
        assert await other.get(uri) == data

    @pytest.mark.parametrize('how', TAMPERINGS)
    async def test_verify_repair_then_put_heals(self, store: Any, how: str) -> None:
        """(c) ``verify(repair=True)`` deletes a corrupt blob of any size; the next ``put`` stores it fresh."""
        store = _capable(store, DeletableMediaStore, 'delete')
        data = blob(VERIFY_ON_PUT_BYTES + 10_000, seed=44)
        sound = await store.put(b'an intact neighbour')
        uri = await self._corrupt(store, data, how)
        report = await verify_store(store, [uri, sound, MISSING_URI], repair=True)
        assert (report.corrupt, report.repaired, report.missing, report.ok) == ([uri], [uri], [MISSING_URI], 1)
        assert await store.exists(uri) is False
        assert await store.get(sound) == b'an intact neighbour'
        writer = await self.reopen_store(store) or store
        try:
            assert await writer.put(data) == uri
        finally:
            if writer is not store:
                await self.close_store(writer)
        assert await store.get(uri) == data
        assert (await verify_store(store, [uri, sound])).clean

    async def _reopened(self, store: Any) -> Any:
        """A second instance on ``store``'s storage (closed with the test), or skip."""
        other = await self.reopen_store(store)
        if other is None:
            pytest.skip(f'{type(store).__name__}: no second instance on the same storage (reopen_store gave None)')
        self._reopened_stores.append(other)
        return other

    @pytest_asyncio.fixture(autouse=True)
    async def _close_reopened(self) -> AsyncIterator[None]:
        self._reopened_stores: list[Any] = []
        yield
        for other in self._reopened_stores:
            await self.close_store(other)

    async def test_blob_deleted_behind_the_back(self, store: Any) -> None:
        uri = await store.put(b'soon gone', context=MediaContext(metadata={'k': 'v'}))
        await self.raw_delete(store, uri)
        assert await store.exists(uri) is False
        with pytest.raises(MediaNotFoundError):
            await store.get(uri)
        with pytest.raises(MediaNotFoundError):
            await store.get_metadata(uri)

    async def test_rewrite_after_loss(self, store: Any) -> None:
        data = blob(4000, seed=7)
        uri = await store.put(data)
        await self.raw_delete(store, uri)
        assert await store.put(data) == uri
        assert await store.get(uri) == data

    # -- public URLs -------------------------------------------------------------------

    async def test_public_url_without_resolver(self, store: Any) -> None:
        uri = await store.put(b'no url')
        assert await store.public_url(uri) is None

    async def test_public_url_with_static_resolver(self, store_factory: StoreFactory) -> None:
        store = await store_factory(public_url=make_static_public_url('https://cdn.example.com/media/'))
        data = b'served from a CDN'
        uri = await store.put(data)
        digest = hashlib.sha256(data).hexdigest()
        assert await store.public_url(uri) == f'https://cdn.example.com/media/{digest}.bin'

    async def test_public_url_with_async_resolver(self, store_factory: StoreFactory) -> None:
        seen: list[object] = []

        async def resolver(uri: str, context: Any) -> str | None:
            seen.append(context)
            return None if context.media_type is None else f'https://files.example.com/{uri[-8:]}'

        store = await store_factory(public_url=resolver)
        uri = await store.put(b'async url')
        context = MediaContext(media_type='image/png')
        assert await store.public_url(uri, context=context) == f'https://files.example.com/{uri[-8:]}'
        assert await store.public_url(uri) is None
        assert seen == [context, EMPTY_CONTEXT]

    # -- foreign contexts --------------------------------------------------------------

    async def test_foreign_context_object(self, store: Any) -> None:
        context = ForeignContext(media_type='audio/wav', filename='a.wav', metadata={'who': 'them'})
        data = blob(777, seed=8)
        uri = await store.put(data, context=context)
        assert await store.get(uri, context=context) == data
        assert await store.exists(uri, context=context)
        assert dict(await store.get_metadata(uri, context=context)) == {'who': 'them'}
        assert await store.public_url(uri, context=context) is None

    async def test_pydantic_ai_harness_context(self, store: Any) -> None:
        media = pytest.importorskip('pydantic_ai_harness.media')
        context = media.MediaContext(media_type='image/jpeg', filename='x.jpg', metadata={'run': 'r1'})
        uri = await store.put(b'harness context', context=context)
        assert await store.get(uri, context=context) == b'harness context'
        assert dict(await store.get_metadata(uri, context=context)) == {'run': 'r1'}

    # -- optional: listing -------------------------------------------------------------

    async def test_listing(self, store: Any) -> None:
        store = _capable(store, ListableMediaStore, 'list')
        assert [uri async for uri in store.iter_uris()] == []
        uris = {
            await store.put(b'one'),
            await store.put(b'two', context=MediaContext(metadata={'k': 'v'})),
            await store.put(b'', context=MediaContext(media_type='text/plain')),
        }
        await store.put(b'one')
        listed = [uri async for uri in store.iter_uris()]
        assert sorted(listed) == sorted(uris)

    async def test_listing_many(self, store: Any) -> None:
        store = _capable(store, ListableMediaStore, 'list')
        uris = await asyncio.gather(*(store.put(f'blob {i}'.encode()) for i in range(1500)))
        listed = [uri async for uri in store.iter_uris()]
        assert sorted(listed) == sorted(uris)
        if _has(store, CollectableMediaStore):
            assert sorted(info.uri for info in await _blobs(store)) == sorted(uris)

    # -- optional: deleting ------------------------------------------------------------

    async def test_delete(self, store: Any) -> None:
        store = _capable(store, DeletableMediaStore, 'delete')
        data = b'to be collected'
        uri = await store.put(data, context=MediaContext(metadata={'k': 'v'}))
        keep = await store.put(b'kept')
        assert await store.delete(uri) is True
        assert await store.exists(uri) is False
        with pytest.raises(MediaNotFoundError):
            await store.get(uri)
        with pytest.raises(MediaNotFoundError):
            await store.get_metadata(uri)
        assert await store.delete(uri) is False
        assert await store.get(keep) == b'kept'
        assert await store.put(data, context=MediaContext(metadata={'k': 'new'})) == uri
        assert dict(await store.get_metadata(uri)) == {'k': 'new'}
        if _has(store, ListableMediaStore):
            await store.delete(uri)
            assert [u async for u in store.iter_uris()] == [keep]

    @pytest.mark.parametrize('bad_uri', BAD_URIS[:4], ids=repr)
    async def test_delete_invalid_uri(self, store: Any, bad_uri: object) -> None:
        store = _capable(store, DeletableMediaStore, 'delete')
        with pytest.raises(InvalidMediaURI):
            await store.delete(bad_uri)

    async def test_delete_many(self, store: Any) -> None:
        store = _capable(store, DeletableMediaStore, 'delete')
        first, second, third = [await store.put(f'many {i}'.encode()) for i in range(3)]
        assert await store.delete_many([first, second, MISSING_URI]) == 2
        assert await store.delete_many([]) == 0
        assert not await store.exists(first)
        assert not await store.exists(second)
        assert await store.get(third) == b'many 2'

    # -- optional: stat -----------------------------------------------------------------

    async def test_stat_answers_size_media_type_and_time(self, store: Any) -> None:
        store = _capable(store, StatableMediaStore, 'stat')
        slack = self.written_at_resolution + 2.0
        before = time.time()
        typed = await store.put(b'typed bytes', context=MediaContext(media_type='image/png', metadata={'k': 'v'}))
        untyped = await store.put(blob(70_000, seed=40))
        empty = await store.put(b'')
        after = time.time()
        found = {uri: await store.stat(uri) for uri in (typed, untyped, empty)}
        assert all(isinstance(answer, BlobStat) for answer in found.values())
        assert [found[uri].size for uri in (typed, untyped, empty)] == [11, 70_000, 0]
        assert found[typed].media_type == ('image/png' if self.records_media_types else None)
        assert found[untyped].media_type is None and found[empty].media_type is None
        for answer in found.values():
            when = answer.written_at
            assert when is None or before - slack <= when <= after + slack, (answer, before, after)
        if _has(store, CollectableMediaStore):  # a store that keeps ages for the collector tells them here too
            for uri, answer in found.items():
                listed = await _written_at(store, uri)
                assert answer.written_at is not None and listed is not None
                assert abs(answer.written_at - listed) <= self.written_at_resolution, (uri, answer, listed)

    async def test_stat_agrees_with_a_streamed_put(self, store: Any) -> None:
        store = _capable(store, StatableMediaStore, 'stat')
        if not _has(store, StreamingMediaStore):
            pytest.skip(f'{type(store).__name__} cannot stream')
        data = blob(90_000, seed=41)
        uri = await store.put_stream(chunked(data, 7000), context=MediaContext(media_type='audio/wav'))
        answer = await store.stat(uri)
        assert answer.size == len(data)
        assert answer.media_type == ('audio/wav' if self.records_media_types else None)

    async def test_stat_of_a_missing_blob(self, store: Any) -> None:
        store = _capable(store, StatableMediaStore, 'stat')
        with pytest.raises(MediaNotFoundError) as caught:
            await store.stat(MISSING_URI)
        assert isinstance(caught.value, FileNotFoundError)
        uri = await store.put(b'about to vanish behind the back')
        await self.raw_delete(store, uri)
        with pytest.raises(MediaNotFoundError):
            await store.stat(uri)

    @pytest.mark.parametrize('bad_uri', BAD_URIS, ids=repr)
    async def test_stat_invalid_uri(self, store: Any, bad_uri: object) -> None:
        store = _capable(store, StatableMediaStore, 'stat')
        with pytest.raises(InvalidMediaURI) as caught:
            await store.stat(bad_uri)
        assert isinstance(caught.value, ValueError)

    async def test_stat_does_not_read_the_blob(self, store: Any) -> None:
        """A blob corrupted behind the store's back (same size) still stats from what the backend records;
        a store that declares ``stat_reads_blob`` must refuse it instead of measuring wrong bytes."""
        store = _capable(store, StatableMediaStore, 'stat')
        data = blob(5000, seed=42)
        uri = await store.put(data)
        await self.raw_overwrite(store, uri, bytes(byte ^ 0xFF for byte in data))
        if self.stat_reads_blob:
            with pytest.raises(IntegrityError):
                await store.stat(uri)
            return
        assert (await store.stat(uri)).size == len(data)
        with pytest.raises(IntegrityError):  # the corruption is real: only stat left the bytes alone
            await store.get(uri)

    # -- optional: garbage collection --------------------------------------------------

    async def _age(self, store: Any, uri: str, when: float | None) -> None:
        """``raw_set_written_at``, or skip the test when the backend cannot set that."""
        try:
            await self.raw_set_written_at(store, uri, when)
        except NotImplementedError:
            what = 'an unknown age' if when is None else 'a last-write time'
            pytest.skip(f'{type(self).__name__}.raw_set_written_at cannot give a blob {what}')

    async def test_iter_blobs_lists_sizes_and_times(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        assert await _blobs(store) == []
        slack = self.written_at_resolution + 2.0
        before = time.time()
        sizes = {await store.put(blob(size, seed=20 + size)): size for size in (0, 1, 5000, 70_000)}
        sizes[await store.put(b'with metadata', context=MediaContext(media_type='text/plain', metadata={'k': 'v'}))] = (
            13
        )
        if _has(store, StreamingMediaStore):
            sizes[await store.put_stream(chunked(blob(90_000, seed=21), 7000))] = 90_000
        await store.put(blob(5000, seed=5020))
        after = time.time()
        infos = await _blobs(store)
        assert sorted((info.uri, info.size) for info in infos) == sorted(sizes.items())
        for info in infos:
            assert isinstance(info, BlobInfo)
            assert info.written_at is not None
            assert before - slack <= info.written_at <= after + slack, (info, before, after)

    async def test_iter_blobs_in_range_lists_exactly_the_range(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        uris = {await store.put(blob(40, seed=400 + n)) for n in range(24)}
        whole = {info.uri: info.size for info in await _blobs(store)}
        digests = sorted(uri[-64:] for uri in uris)
        pivot = digests[len(digests) // 2]
        ranges = [
            *(DigestRange.shard(index, 4) for index in range(4)),
            DigestRange(pivot),  # a stored digest as the start: listed
            DigestRange('', pivot),  # ... and as the end: not listed
            DigestRange(pivot[:3], pivot[:3]),  # empty
            DigestRange(digests[2][:1], digests[-3]),
        ]
        seen: list[str] = []
        for number, digest_range in enumerate(ranges):
            listed = [(info.uri, info.size) async for info in blobs_in_range(store, digest_range)]
            expected = sorted((uri, size) for uri, size in whole.items() if uri[-64:] in digest_range)
            assert sorted(listed) == expected, digest_range
            if number < 4:
                seen.extend(uri for uri, _ in listed)
        assert sorted(seen) == sorted(whole), 'the four shards list every blob exactly once'

    async def test_put_of_stored_bytes_refreshes_an_old_blob(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        old_data, young_data = blob(3000, seed=30), blob(3000, seed=31)
        old, young = await store.put(old_data), await store.put(young_data)
        now = time.time()
        await self._age(store, old, now - 2 * TOUCH_AFTER_SECONDS)
        await self._age(store, young, now - 60)
        young_before = await _written_at(store, young)
        assert young_before is not None and young_before < now - 30
        assert await store.put(old_data, context=MediaContext(metadata={'k': 'v'})) == old
        assert await store.put(young_data) == young
        refreshed = await _written_at(store, old)
        assert refreshed is not None and refreshed >= now - self.written_at_resolution - 1
        assert await _written_at(store, young) == young_before, 'a young blob is not rewritten by a put'
        assert await store.get(old) == old_data
        if _has(store, StreamingMediaStore):
            await self._age(store, old, now - 2 * TOUCH_AFTER_SECONDS)
            assert await store.put_stream(chunked(old_data, 700)) == old
            refreshed = await _written_at(store, old)
            assert refreshed is not None and refreshed >= now - self.written_at_resolution - 1

    async def test_put_of_a_blob_of_unknown_age_makes_it_young(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        data = blob(2500, seed=32)
        uri = await store.put(data)
        await self._age(store, uri, None)
        assert await _written_at(store, uri) is None
        now = time.time()
        await store.put(data)
        written_at = await _written_at(store, uri)
        assert written_at is not None and written_at >= now - self.written_at_resolution - 1

    async def test_touch_many_reports_what_is_stored(self, store: Any) -> None:
        if not capabilities_of(store).touch:
            pytest.skip(f'{type(store).__name__} has no touch_many')
        touch_many = store.touch_many
        first, second = await store.put(b'touched 1'), await store.put(b'touched 2')
        assert await touch_many([first, second, MISSING_URI, first]) == {first, second}
        assert await touch_many([]) == frozenset()
        assert await touch_many([MISSING_URI]) == frozenset()
        assert await touch_many([first], touch_after=0) == {first}
        with pytest.raises(InvalidMediaURI):
            await touch_many([first, 'media+sha256://nope'])
        assert await store.get(first) == b'touched 1'

    async def test_touch_many_refreshes_only_old_blobs(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        old, young = await store.put(blob(1500, seed=33)), await store.put(blob(1500, seed=34))
        now = time.time()
        await self._age(store, old, now - 2 * TOUCH_AFTER_SECONDS)
        await self._age(store, young, now - 60)
        young_before = await _written_at(store, young)
        assert await store.touch_many([old, young, MISSING_URI]) == {old, young}
        refreshed = await _written_at(store, old)
        assert refreshed is not None and refreshed >= now - self.written_at_resolution - 1
        assert await _written_at(store, young) == young_before
        assert await store.touch_many([young], touch_after=30) == {young}
        refreshed = await _written_at(store, young)
        assert refreshed is not None and refreshed >= now - self.written_at_resolution - 1

    async def test_delete_unless_touched(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        old_data = blob(10_000, seed=35)
        old, young = await store.put(old_data, context=MediaContext(metadata={'k': 'v'})), await store.put(b'young')
        now = time.time()
        await self._age(store, old, now - 1000)
        cutoff = now - 500
        assert await store.delete_unless_touched([], written_before=cutoff) == frozenset()
        with pytest.raises(InvalidMediaURI):
            await store.delete_unless_touched([old, 'media+sha256://nope'], written_before=cutoff)
        assert await store.exists(old), 'an invalid URI must stop the call before anything is deleted'
        deleted = await store.delete_unless_touched([old, young, MISSING_URI, old], written_before=cutoff)
        assert deleted == {old}
        assert not await store.exists(old)
        with pytest.raises(MediaNotFoundError):
            await store.get(old)
        assert await store.get(young) == b'young'
        assert [info.uri for info in await _blobs(store)] == [young]
        assert await store.delete_unless_touched([old], written_before=cutoff) == frozenset()
        assert await store.put(old_data) == old
        assert await store.get(old) == old_data
        assert await store.delete_unless_touched([old], written_before=cutoff) == frozenset()

    async def test_delete_unless_touched_never_deletes_a_blob_of_unknown_age(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        uri = await store.put(blob(6000, seed=36))
        await self._age(store, uri, None)
        assert await store.delete_unless_touched([uri], written_before=time.time() + 3600) == frozenset()
        assert await store.get(uri) == blob(6000, seed=36)

    async def _cutoff_between_writes(self) -> float:
        """A time after every write so far and before the next one, as the store's clock can tell them apart."""
        await asyncio.sleep(self.written_at_resolution + 0.05)
        cutoff = time.time()
        await asyncio.sleep(0.05)  # file systems stamp with a coarse clock (a few ms behind time.time())
        return cutoff

    async def test_delete_unless_touched_in_real_time(self, store: Any) -> None:
        """No aging behind the store's back: a blob written before the cutoff goes, one written after stays."""
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        old_data = blob(10_000, seed=37)
        old = await store.put(old_data)
        cutoff = await self._cutoff_between_writes()
        young = await store.put(blob(10_000, seed=38))
        assert await store.delete_unless_touched([old, young, MISSING_URI], written_before=cutoff) == {old}
        assert not await store.exists(old)
        assert await store.get(young) == blob(10_000, seed=38)
        assert await store.put(old_data) == old
        assert await store.get(old) == old_data

    async def test_blob_touched_between_listing_and_delete_survives(self, store: Any) -> None:
        store = _capable(store, CollectableMediaStore, 'be garbage collected')
        data = blob(10_000, seed=39)
        uri = await store.put(data)
        cutoff = await self._cutoff_between_writes()
        (listed,) = await _blobs(store)
        assert listed.uri == uri and listed.written_at is not None and listed.written_at < cutoff
        assert await store.touch_many([uri], touch_after=0) == {uri}
        assert await store.delete_unless_touched([uri], written_before=cutoff) == frozenset()
        assert await store.get(uri) == data
        assert [info.uri for info in await _blobs(store)] == [uri]

    # -- optional: streaming -----------------------------------------------------------

    async def test_stream_round_trip_many_small_chunks(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')
        data = blob(50_000, seed=9)
        uri = await store.put_stream(chunked(data, 97), context=MediaContext(metadata={'via': 'stream'}))
        assert uri == media_uri_for(data)
        assert await store.get(uri) == data
        assert await self.raw_read(store, uri) == data
        assert dict(await store.get_metadata(uri)) == {'via': 'stream'}
        chunks = await collect(store.get_stream(uri, chunk_size=4096))
        assert b''.join(chunks) == data
        assert all(0 < len(chunk) <= 4096 for chunk in chunks)

    async def test_stream_mixed_chunk_types(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')

        async def parts() -> AsyncIterator[Any]:
            yield b'abc'
            yield bytearray(b'def')
            yield b''
            yield memoryview(b'ghi')

        assert await store.put_stream(parts()) == media_uri_for(b'abcdefghi')
        assert await store.get(media_uri_for(b'abcdefghi')) == b'abcdefghi'

    async def test_stream_of_zero_chunks(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')

        async def nothing() -> AsyncIterator[bytes]:
            return
            yield b''  # pragma: no cover

        uri = await store.put_stream(nothing())
        assert uri == media_uri_for(b'')
        assert await store.get(uri) == b''
        assert b''.join(await collect(store.get_stream(uri))) == b''

    async def test_stream_dedup_with_put(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')
        data = blob(100_000, seed=10)
        uri = await store.put(data)
        assert await store.put_stream(chunked(data, 10_000)) == uri
        assert b''.join(await collect(store.get_stream(uri, chunk_size=7000))) == data
        count = await self.raw_count(store)
        if count is not None:
            assert count == 1

    async def test_stream_larger_blob(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')
        data = os.urandom(3 << 20)
        uri = await store.put_stream(chunked(data, 1 << 20))
        assert uri == media_uri_for(data)
        assert b''.join(await collect(store.get_stream(uri, chunk_size=256 << 10))) == data

    async def test_stream_failure_midway_stores_nothing(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')

        async def broken() -> AsyncIterator[bytes]:
            yield b'first half'
            raise RuntimeError('producer died')

        with pytest.raises(RuntimeError, match='producer died'):
            await store.put_stream(broken())
        assert not await store.exists(media_uri_for(b'first half'))
        if _has(store, ListableMediaStore):
            assert [uri async for uri in store.iter_uris()] == []

    async def test_stream_refuses_non_bytes_chunks(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')

        async def bad() -> AsyncIterator[Any]:
            yield b'ok'
            yield 'not bytes'

        with pytest.raises(TypeError):
            await store.put_stream(bad())

    async def test_get_stream_missing_and_invalid(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')
        with pytest.raises(MediaNotFoundError) as caught:
            await collect(store.get_stream(MISSING_URI))
        assert MISSING_URI in str(caught.value)
        with pytest.raises(InvalidMediaURI):
            await collect(store.get_stream('media+sha256://' + 'A' * 64))
        uri = await store.put(b'x')
        with pytest.raises(ValueError, match='chunk_size'):
            await collect(store.get_stream(uri, chunk_size=0))

    @pytest.mark.parametrize('tamper', ['flipped', 'truncated', 'extended'])
    async def test_get_stream_withholds_final_chunk_of_tampered_blob(self, store: Any, tamper: str) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')
        data = blob(10_000, seed=11)
        uri = await store.put(data)
        stored = _tampered(data, tamper)
        await self.raw_overwrite(store, uri, stored)
        received: list[bytes] = []

        async def consume() -> None:
            async for chunk in store.get_stream(uri, chunk_size=1000):
                received.append(chunk)

        with pytest.raises(IntegrityError) as caught:
            await consume()
        assert uri in str(caught.value)
        assert len(b''.join(received)) < len(stored)

    async def test_get_stream_early_exit(self, store: Any) -> None:
        store = _capable(store, StreamingMediaStore, 'stream')
        data = blob(20_000, seed=12)
        uri = await store.put(data)
        stream = store.get_stream(uri, chunk_size=1000)
        first = await anext(stream)
        await stream.aclose()
        assert first == data[:1000]
        assert await store.get(uri) == data

    # -- storage snapshots ---------------------------------------------------------------

    async def raw_storage_snapshot(self, store: Any) -> object | None:
        """Everything the backend holds around ``store`` (files under its folder, tables of its database, keys of
        its bucket, collections of its database), compared before and after an exclusive erase of a namespace
        and around reads (which must write nothing); ``None`` (the default) when it cannot be read: those checks
        are skipped."""
        return None

    # -- declared capabilities ------------------------------------------------------------

    async def test_declared_capabilities_have_their_methods(self, store: Any) -> None:
        """Each declared capability's methods are there; an undeclared one's are absent (``None`` on the base)."""
        declared = capabilities_of(store)
        name = type(store).__name__
        for flag, methods in CAPABILITY_METHODS.items():
            for method in methods:
                found = _method(store, method)
                if getattr(declared, flag):
                    assert found is not None, f'{name} declares {flag} but has no {method}'
                elif flag == 'namespaces' and found is not None:
                    with pytest.raises(NamespaceUnsupportedError):
                        found('undeclared')
                elif flag != 'erase':  # every base store has erase(); it refuses unless on a view
                    assert found is None, f'{name} has {method} but does not declare {flag}'
        assert declared.deletes == _has(store, DeletableMediaStore)
        assert declared.listing == _has(store, ListableMediaStore)
        assert declared.streaming == _has(store, StreamingMediaStore)
        assert declared.stat == _has(store, StatableMediaStore)
        assert declared.collection == _has(store, CollectableMediaStore)

    async def test_declared_capabilities_work(self, store: Any) -> None:
        """What each declared capability promises holds for a blob just put (deletion last)."""
        declared = capabilities_of(store)
        data = blob(3000, seed=73)
        uri = await store.put(data, context=MediaContext(media_type='text/plain'))
        if declared.listing:
            assert uri in await collect(store.iter_uris()), 'iter_uris must list what was put'
        if declared.blob_listing:
            assert uri in {info.uri async for info in store.iter_blobs()}, 'iter_blobs must list it'
        if declared.ranged_listing:
            whole = {info.uri async for info in store.iter_blobs_in_range(DigestRange.shard(0, 1))}
            assert uri in whole, 'iter_blobs_in_range must list it'
        if declared.exists_many:
            assert await store.exists_many([uri, MISSING_URI]) == {uri}
        if declared.touch:
            assert await store.touch_many([uri, MISSING_URI]) == {uri}
        if declared.stat:
            assert (await store.stat(uri)).size == len(data)
        if declared.check:
            assert (await store.check_blob(uri)).size == len(data)
        if declared.stream_reads:
            assert b''.join(await collect(store.get_stream(uri, chunk_size=1000))) == data
        if declared.stream_writes:
            streamed = blob(2500, seed=74)
            assert await store.put_stream(chunked(streamed, 700)) == media_uri_for(streamed)
            assert await store.get(media_uri_for(streamed)) == streamed
        if declared.media_types:
            assert await media_type_of(store, uri) in {'text/plain', None}
        if declared.require_storage:
            await store.require_storage()
        if declared.temp_sweep:
            await store.sweep_temp_files()
        if declared.guarded_deletes:
            assert await store.delete_unless_touched([uri], written_before=0.0) == frozenset()
            assert await store.exists(uri), 'a blob written after written_before must stay'
        if declared.namespaces:
            view = store.namespace('capabilities-check')
            inside = await view.put(b'only in the view')
            assert not await store.exists(inside)
            if declared.erase:
                await view.erase()
                assert not await view.exists(inside)
        if declared.deletes:
            assert await store.delete(uri) is True
            assert not await store.exists(uri)

    # -- tenant namespaces ----------------------------------------------------------------

    def _namespaced(self, store: Any) -> Any:
        """``store`` when it is expected to have namespaces (``has_namespaces``); otherwise skip the test."""
        declared = capabilities_of(store).namespaces
        expected = declared if self.has_namespaces is None else self.has_namespaces
        if not expected:
            pytest.skip(f'{type(store).__name__} has no namespaces')
        assert declared, f'{type(store).__name__}.supports_namespaces must be True when it has namespaces'
        return store

    async def test_namespace_support_is_declared(self, store: Any) -> None:
        declared = capabilities_of(store).namespaces
        expected = declared if self.has_namespaces is None else self.has_namespaces
        assert declared == expected, f'{type(store).__name__}.supports_namespaces must be {expected}'
        if not expected:
            if _method(store, 'namespace') is not None:
                with pytest.raises(NamespaceUnsupportedError):
                    store.namespace('tenant-a')
            return
        assert namespace_name_of(store) is None
        view = store.namespace('tenant-a')
        assert type(view) is type(store), 'a view is a store of the same type'
        assert view.namespace_name == 'tenant-a'
        assert store.namespace('a.b_C-9').namespace_name == 'a.b_C-9'
        assert store.namespace('x' * 64).namespace_name == 'x' * 64

    @pytest.mark.parametrize('name', BAD_NAMESPACES)
    async def test_bad_namespace_names_are_refused_without_echo(self, store: Any, name: object) -> None:
        store = self._namespaced(store)
        with pytest.raises(InvalidNamespaceError) as raised:
            store.namespace(name)
        assert isinstance(raised.value, ValueError) and raised.value.name == 'namespace'
        assert 'zq' not in str(raised.value), 'the refused name must never be shown'

    async def test_namespaces_see_only_their_own_blobs(self, store: Any) -> None:
        store = self._namespaced(store)
        first, second = store.namespace('tenant-a'), store.namespace('tenant-b')
        mine = await first.put(b'only in tenant-a', context=MediaContext(media_type='text/plain'))
        root_only = await store.put(b'only in the store itself')
        for view, missing in ((second, mine), (store, mine), (first, root_only), (second, root_only)):
            assert not await view.exists(missing)
            with pytest.raises(MediaNotFoundError):
                await view.get(missing)
            with pytest.raises(MediaNotFoundError):
                await view.get_metadata(missing)
            if capabilities_of(view).exists_many:
                assert await view.exists_many([missing]) == frozenset()
            if _has(view, StatableMediaStore):
                with pytest.raises(MediaNotFoundError):
                    await view.stat(missing)
            if _has(view, StreamingMediaStore):
                with pytest.raises(MediaNotFoundError):
                    await collect(view.get_stream(missing))
            if _has(view, CollectableMediaStore):
                assert await view.touch_many([missing]) == frozenset()
        assert await store.namespace('tenant-a').get(mine) == b'only in tenant-a', 'views of one name share blobs'
        assert await first.get_metadata(mine) == {}
        if _has(first, ListableMediaStore):
            assert [uri async for uri in first.iter_uris()] == [mine]
            assert [uri async for uri in second.iter_uris()] == []
            assert [uri async for uri in store.iter_uris()] == [root_only]
        if _has(first, CollectableMediaStore):
            assert [info.uri for info in await _blobs(first)] == [mine]
            assert [info.uri for info in await _blobs(store)] == [root_only]
        if _has(first, StatableMediaStore):
            assert (await first.stat(mine)).size == len(b'only in tenant-a')
        if _has(first, StreamingMediaStore):
            streamed = await first.put_stream(chunked(blob(5000, seed=81), 1000))
            assert not await store.exists(streamed) and not await second.exists(streamed)
            assert b''.join(await collect(first.get_stream(streamed))) == blob(5000, seed=81)
        if _has(first, ListableMediaStore):
            report = await verify_store(store)
            assert report.checked == 1 and report.clean, 'verify of the store checks its own blobs only'
            assert (await verify_store(first)).checked == (2 if _has(first, StreamingMediaStore) else 1)

    async def test_same_bytes_in_two_namespaces_are_two_blobs(self, store: Any) -> None:
        store = self._namespaced(store)
        first, second = store.namespace('tenant-a'), store.namespace('tenant-b')
        data = blob(3000, seed=82)
        uri = await first.put(data, context=MediaContext(metadata={'owner': 'a'}))
        assert await second.put(data, context=MediaContext(metadata={'owner': 'b'})) == uri
        assert await store.put(data) == uri
        assert await first.get_metadata(uri) == {'owner': 'a'}
        assert await second.get_metadata(uri) == {'owner': 'b'}
        if not _has(first, DeletableMediaStore):
            return
        assert await first.delete(uri) is True
        assert not await first.exists(uri)
        assert await second.get(uri) == data and await store.get(uri) == data
        assert await second.delete_many([uri]) == 1
        assert await store.get(uri) == data
        assert await first.delete(uri) is False, 'a deletion in a namespace never reaches another'

    async def test_namespace_deletions_stay_in_the_namespace(self, store: Any) -> None:
        store = self._namespaced(store)
        store = _capable(store, DeletableMediaStore, 'delete')
        first, second = store.namespace('tenant-a'), store.namespace('tenant-b')
        mine = await first.put(b'deleted from elsewhere? never')
        assert await second.delete(mine) is False
        assert await store.delete(mine) is False
        assert await second.delete_many([mine]) == 0
        if _has(second, CollectableMediaStore):
            assert await second.delete_unless_touched([mine], written_before=time.time() + 3600) == frozenset()
            assert await store.delete_unless_touched([mine], written_before=time.time() + 3600) == frozenset()
        assert await first.get(mine) == b'deleted from elsewhere? never'

    async def test_namespace_storage_keys_differ(self, store: Any) -> None:
        store = self._namespaced(store)
        if storage_key_or_none(store) is None:
            pytest.skip(f'{type(store).__name__} has no storage_key')
        first, second = store.namespace('tenant-a'), store.namespace('tenant-b')
        keys = {store.storage_key, first.storage_key, second.storage_key}
        assert len(keys) == 3, 'each namespace is storage of its own for the known-blob cache'
        assert store.namespace('tenant-a').storage_key == first.storage_key
        assert hash(first.storage_key) == hash(store.namespace('tenant-a').storage_key)
        again = await self.reopen_store(store)
        if again is not None:
            try:
                assert again.namespace('tenant-a').storage_key == first.storage_key
            finally:
                await self.close_store(again)
        if _has(first, DeletableMediaStore):
            uri = await first.put(b'noted per namespace')
            seen = {key: deletion_generation(key) for key in keys}
            assert await first.delete(uri)
            assert deletion_generation(first.storage_key) > seen[first.storage_key]
            assert deletion_generation(second.storage_key) == seen[second.storage_key]

    async def test_known_blobs_of_one_namespace_never_serve_another(self, store: Any) -> None:
        store = self._namespaced(store)
        cache = KnownBlobCache(trust_seconds=3600)
        first, second = store.namespace('tenant-a'), store.namespace('tenant-b')
        tree, data = image_tree(seed=83)
        lean = await externalize_media(tree, media_store=first, threshold_bytes=1024, known_blobs=cache)
        with pytest.raises(ValueError, match='another media store'):
            await externalize_media(tree, media_store=second, threshold_bytes=1024, known_blobs=cache)
        await externalize_media(tree, media_store=first, threshold_bytes=1024)  # the process-wide caches know it
        again = await externalize_media(tree, media_store=second, threshold_bytes=1024)
        assert again == lean
        assert await second.get(lean[URI_KEY]) == data, "tenant-a's known blob must not stand for tenant-b's"
        assert await restore_media(again, media_store=second, known_blobs=False) == tree
        assert not await store.exists(lean[URI_KEY])

    async def test_namespaces_do_not_nest(self, store: Any) -> None:
        store = self._namespaced(store)
        view = store.namespace('tenant-a')
        with pytest.raises(NamespaceUnsupportedError):
            view.namespace('tenant-b')
        with pytest.raises(InvalidNamespaceError):
            view.namespace('zq/..')

    async def test_closing_a_view_leaves_its_store_open(self, store: Any) -> None:
        store = self._namespaced(store)
        view = store.namespace('tenant-a')
        uri = await view.put(b'in a view that is closed next')
        await view.aclose()
        with pytest.raises(StoreClosedError):
            await view.get(uri)
        assert await store.namespace('tenant-a').get(uri) == b'in a view that is closed next'
        kept = await store.put(b'the store is still open')
        assert await store.get(kept) == b'the store is still open'
        other = store.namespace('tenant-b')
        await store.aclose()
        with pytest.raises(StoreClosedError):
            await other.put(b'after the store was closed')
        with pytest.raises(StoreClosedError):
            store.namespace('tenant-c')

    async def test_public_url_of_a_view_never_names_another_namespace(self, store_factory: StoreFactory) -> None:
        store = self._namespaced(await store_factory(public_url=make_static_public_url('https://cdn.example')))
        view = store.namespace('tenant-a')
        uri = await view.put(b'served per namespace')
        root_url = await store.public_url(uri)
        view_url = await view.public_url(uri)
        assert view_url is None or view_url != root_url, "a view's URL must not be the store's own layout"

    async def test_erase_empties_one_namespace_and_can_run_again(self, store: Any) -> None:
        store = self._namespaced(store)
        store = _capable(store, CollectableMediaStore, 'list and delete blobs')
        first, second = store.namespace('tenant-a'), store.namespace('tenant-b')
        sizes = [1000, 2000, 70_000]
        erased = [await first.put(blob(size, seed=90 + index)) for index, size in enumerate(sizes)]
        kept_b = await second.put(blob(1000, seed=90))
        kept_root = await store.put(blob(2000, seed=91))
        generation = deletion_generation(first.storage_key)
        seen: list[tuple[int, int]] = []
        report = await first.erase(progress=lambda count, size: seen.append((count, size)))
        assert (report.namespace, report.count, report.bytes) == ('tenant-a', 3, sum(sizes))
        assert seen and seen[-1] == (3, sum(sizes))
        assert deletion_generation(first.storage_key) > generation, 'erase notes its deletions'
        assert await first.exists_many(erased) == frozenset()
        assert [info.uri for info in await _blobs(first)] == []
        assert await second.get(kept_b) == blob(1000, seed=90)
        assert await store.get(kept_root) == blob(2000, seed=91)
        again = await store.namespace('tenant-a').erase()
        assert (again.count, again.bytes) == (0, 0)
        with pytest.raises(NamespaceUnsupportedError):
            await store.erase()
        assert await store.get(kept_root) == blob(2000, seed=91)

    async def test_exclusive_erase_leaves_the_storage_as_it_was(self, store: Any) -> None:
        """What ``mediastash tune`` relies on: a namespace used and then ``erase(exclusive=True)``-ed leaves no
        trace (no folder, table, key or collection), and the store's own blobs stay; its next write works."""
        store = self._namespaced(store)
        store = _capable(store, CollectableMediaStore, 'list and delete blobs')
        kept = await store.put(b'user data, there before', context=MediaContext(media_type='text/plain'))
        before = await self.raw_storage_snapshot(store)
        view = store.namespace('mediastash-tune-0123456789ab')
        written = [await view.put(b'small', context=MediaContext(media_type='text/plain'))]
        written.append(await view.put(blob(300_000, seed=60)))
        if _has(view, StreamingMediaStore):
            written.append(await view.put_stream(chunked(blob(200_000, seed=61), 7000)))
        report = await view.erase(exclusive=True)
        assert report.count == len(written)
        assert await view.exists_many(written) == frozenset()
        assert await store.get(kept) == b'user data, there before'
        if before is not None:
            assert await self.raw_storage_snapshot(store) == before, 'an erased namespace left something behind'
        again = await view.put(b'the namespace works again')
        assert await view.get(again) == b'the namespace works again'
        await view.erase(exclusive=True)
        if before is not None:
            assert await self.raw_storage_snapshot(store) == before, 'an erased namespace left something behind'

    async def test_garbage_collection_of_the_store_never_reaches_a_namespace(self, store: Any) -> None:
        from mediastash.gc import collect_garbage

        store = self._namespaced(store)
        store = _capable(store, CollectableMediaStore, 'be garbage-collected')
        view = store.namespace('tenant-a')
        tenant = await view.put(b'a tenant blob nothing references')
        await store.put(b'a blob of the store itself nothing references')
        await asyncio.sleep(self.written_at_resolution + 0.05)
        await collect_garbage(store, [frozenset()], grace=0, dry_run=False)
        assert await view.get(tenant) == b'a tenant blob nothing references'
        await collect_garbage(view, [frozenset()], grace=0, dry_run=False)
        assert not await view.exists(tenant), 'a collection of the namespace collects it'


async def _blobs(store: Any) -> list[Any]:
    """Every ``BlobInfo`` ``iter_blobs`` yields."""
    return [info async for info in store.iter_blobs()]


async def _written_at(store: Any, uri: str) -> float | None:
    """The ``written_at`` ``iter_blobs`` reports for ``uri`` (the blob must be listed)."""
    found: list[float | None] = [info.written_at for info in await _blobs(store) if info.uri == uri]
    assert len(found) == 1, f'{uri} listed {len(found)} times'
    return found[0]


def _method(store: Any, name: str) -> Any:
    """``store``'s method ``name``, or ``None`` when it has none (what the declaration check compares against)."""
    found = getattr(store, name, None)
    return found if callable(found) else None


def _has(store: Any, capability: type) -> bool:
    """``isinstance`` against a capability protocol, without narrowing ``store`` for the type checker."""
    return isinstance(store, capability)


def _capable(store: Any, capability: type, what: str) -> Any:
    """``store`` when it implements ``capability``; otherwise skip the test."""
    if not isinstance(store, capability):
        pytest.skip(f'{type(store).__name__} cannot {what}')
    return store


def _tampered(data: bytes, how: str) -> bytes:
    if how == 'flipped':
        return data[:-1] + bytes([data[-1] ^ 0xFF])
    if how == 'truncated':
        return data[: len(data) // 2]
    return data + b'!'
