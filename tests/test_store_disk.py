"""``DiskMediaStore``: the conformance suite plus file-layout and key-safety tests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mediastash import (
    DiskMediaStore,
    KeyStrategy,
    MediaContext,
    MediaNotFoundError,
    MediaStore,
    UnsafeKeyError,
    default_key_strategy,
    media_uri_for,
    sharded_key_strategy,
)
from mediastash.errors import (
    CorruptMetadataError,
    InvalidMediaType,
    MetadataTooLargeError,
    NotARegularFileError,
    StoreClosedError,
)
from mediastash.stores.disk import MEDIA_TYPE_SUFFIX, METADATA_LIMIT_BYTES
from mediastash.testing.store import MISSING_URI, StoreTests, blob, chunked, collect
from mediastash.urls import PublicUrlResolver
from tests.storage_snapshots import folder_state

TMP_PREFIX = '.mediastash-tmp-'


def blob_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob('*') if p.is_file() and p.name.endswith('.bin'))


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob('*') if p.name.startswith(TMP_PREFIX)]


def names(root: Path) -> list[str]:
    """Every name under ``root``, recursively, sorted."""
    return sorted(p.name for p in root.rglob('*'))


class TestDiskStore(StoreTests):
    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> DiskMediaStore:
        return DiskMediaStore(folder / 'media', public_url=public_url)

    async def raw_read(self, store: Any, uri: str) -> bytes | None:
        path = store.path_for(uri)
        return path.read_bytes() if path.exists() else None

    async def raw_overwrite(self, store: Any, uri: str, data: bytes) -> None:
        store.path_for(uri).write_bytes(data)

    async def raw_delete(self, store: Any, uri: str) -> None:
        store.path_for(uri).unlink()

    async def raw_count(self, store: Any) -> int | None:
        return len(blob_files(store.directory))

    async def raw_set_written_at(self, store: Any, uri: str, when: float | None) -> None:
        if when is None:
            raise NotImplementedError('a file always has an mtime')
        os.utime(store.path_for(uri), (when, when))

    async def reopen_store(self, store: Any) -> DiskMediaStore:
        return DiskMediaStore(store.directory)

    async def raw_storage_snapshot(self, store: Any) -> object | None:
        return folder_state(store.directory)

    later_metadata_replaces = True  # pydantic-ai-harness's sidecar semantics


class TestShardedDiskStore(TestDiskStore):
    """The same suite with a key strategy that nests blobs two folders deep."""

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> DiskMediaStore:
        return DiskMediaStore(folder / 'media', key_strategy=sharded_key_strategy, public_url=public_url)

    async def reopen_store(self, store: Any) -> DiskMediaStore:
        return DiskMediaStore(store.directory, key_strategy=sharded_key_strategy)


class TestFsyncDiskStore(TestDiskStore):
    """The suite with ``fsync=True`` (durable writes take the same code paths plus flushes)."""

    async def make_store(self, folder: Path, *, public_url: PublicUrlResolver | None = None) -> DiskMediaStore:
        return DiskMediaStore(folder / 'media', public_url=public_url, fsync=True)

    async def test_large_blob(self, store: Any) -> None:
        pytest.skip('covered by TestDiskStore; fsync of 20 MiB only slows the suite')


# -- layout -----------------------------------------------------------------------------


async def test_default_layout_matches_pydantic_ai_harness(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'a' / 'b')
    uri = await store.put(b'layout')
    digest = uri.removeprefix('media+sha256://')
    assert store.path_for(uri) == tmp_path / 'a' / 'b' / f'{digest}.bin'
    assert (tmp_path / 'a' / 'b' / f'{digest}.bin').read_bytes() == b'layout'
    assert repr(store) == f'DiskMediaStore({str(tmp_path / "a" / "b")!r})'
    assert isinstance(store, MediaStore)


async def test_sharded_layout(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path, key_strategy=sharded_key_strategy)
    uri = await store.put(b'sharded')
    digest = uri.removeprefix('media+sha256://')
    assert (tmp_path / digest[:2] / digest[2:4] / f'{digest}.bin').read_bytes() == b'sharded'


async def test_unusual_characters_in_key(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path, key_strategy=lambda uri, context: 'a b/c@d(e)=f+g.bin')
    uri = await store.put(b'odd key', context=MediaContext(metadata={'x': 'y'}))
    assert (tmp_path / 'a b' / 'c@d(e)=f+g.bin').read_bytes() == b'odd key'
    assert await store.get(uri) == b'odd key'
    assert dict(await store.get_metadata(uri)) == {'x': 'y'}
    assert await store.delete(uri)
    assert not await store.exists(uri)


async def test_unusual_characters_with_digest_are_listable(tmp_path: Path) -> None:
    def strategy(uri: str, context: Any) -> str:
        return f'a b/c@d(e)=f+g {uri.removeprefix("media+sha256://")}.dat'

    store = DiskMediaStore(tmp_path, key_strategy=strategy)
    uris = {await store.put(b'one'), await store.put(b'two', context=MediaContext(metadata={'k': 'v'}))}
    (tmp_path / 'a b' / 'notes.txt').write_text('not a blob')
    assert {uri async for uri in store.iter_uris()} == uris


async def test_listing_ignores_foreign_files(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'listed', context=MediaContext(metadata={'k': 'v'}))
    (tmp_path / 'README.txt').write_text('hello')
    (tmp_path / ('0' * 64 + '.txt')).write_text('wrong suffix')
    (tmp_path / f'{TMP_PREFIX}abc').write_bytes(b'half written')
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / ('1' * 64 + '.bin')).write_bytes(b'nested')
    assert [u async for u in store.iter_uris()] == [uri]


async def test_listing_stops_early_cleanly(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    for i in range(5):
        await store.put(f'{i}'.encode())
    stream = store.iter_uris()
    assert (await anext(stream)).startswith('media+sha256://')
    await stream.aclose()


# -- key safety -------------------------------------------------------------------------

UNSAFE_KEYS: list[object] = [
    '/abs/file.bin',
    'a/../../x',
    '..',
    '../escape.bin',
    '',
    'a\\b.bin',
    'a\x00b.bin',
    'C:/windows.bin',
    'dir/',
    'a//b.bin',
    './x.bin',
    b'bytes.bin',
    None,
    42,
    f'{TMP_PREFIX}x',
    'x.bin.meta.json',
]


@pytest.mark.parametrize('key', UNSAFE_KEYS, ids=repr)
async def test_unsafe_keys_are_refused(tmp_path: Path, key: object) -> None:
    root = tmp_path / 'root'
    store = DiskMediaStore(root, key_strategy=lambda uri, context: key)  # type: ignore[arg-type,return-value]
    uri = media_uri_for(b'payload')
    with pytest.raises(UnsafeKeyError) as caught:
        await store.put(b'payload')
    assert isinstance(caught.value, ValueError)
    assert repr(key) in str(caught.value)
    for call in (store.get(uri), store.exists(uri), store.get_metadata(uri), store.delete(uri)):
        with pytest.raises(UnsafeKeyError):
            await call
    with pytest.raises(UnsafeKeyError):
        await collect(store.get_stream(uri))
    with pytest.raises(UnsafeKeyError):
        await store.put_stream(chunked(b'payload', 3))
    assert names(tmp_path) == ['root']


async def test_symlinked_folder_leading_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / 'root'
    outside = tmp_path / 'outside'
    outside.mkdir()
    root.mkdir()
    (root / 'link').symlink_to(outside, target_is_directory=True)
    store = DiskMediaStore(root, key_strategy=lambda uri, context: f'link/{uri[-64:]}.bin')
    uri = media_uri_for(b'escape')
    with pytest.raises(UnsafeKeyError) as caught:
        await store.put(b'escape')
    assert 'outside' in str(caught.value)
    with pytest.raises(UnsafeKeyError):
        await store.get(uri)
    with pytest.raises(UnsafeKeyError):
        await store.put_stream(chunked(b'escape', 2))
    with pytest.raises(UnsafeKeyError):
        store.path_for(uri)
    assert names(outside) == []
    assert temp_files(root) == []


async def test_symlinked_folder_inside_the_root_is_allowed(tmp_path: Path) -> None:
    root = tmp_path / 'root'
    (root / 'real').mkdir(parents=True)
    (root / 'link').symlink_to(root / 'real', target_is_directory=True)
    store = DiskMediaStore(root, key_strategy=lambda uri, context: f'link/{uri[-64:]}.bin')
    uri = await store.put(b'inside')
    assert await store.get(uri) == b'inside'
    assert (root / 'real' / f'{uri[-64:]}.bin').exists()


async def test_root_itself_may_be_a_symlink(tmp_path: Path) -> None:
    (tmp_path / 'real').mkdir()
    (tmp_path / 'alias').symlink_to(tmp_path / 'real', target_is_directory=True)
    store = DiskMediaStore(tmp_path / 'alias')
    uri = await store.put(b'through an alias')
    assert await store.get(uri) == b'through an alias'


# -- atomic writes and temp files -------------------------------------------------------


async def test_no_temp_files_left_behind(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    data = blob(300_000)
    await asyncio.gather(*(store.put(data, context=MediaContext(metadata={'n': str(i)})) for i in range(20)))
    await store.put_stream(chunked(blob(100_000, seed=1), 999))
    await store.put_stream(chunked(data, 4096))

    async def broken() -> AsyncIterator[bytes]:
        yield b'partial'
        raise OSError('disk on fire')

    with pytest.raises(OSError, match='disk on fire'):
        await store.put_stream(broken())
    assert temp_files(tmp_path) == []
    assert len(blob_files(tmp_path)) == 2


async def test_cancelled_put_stream_leaves_no_temp_file(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    started = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield b'some bytes'
        started.set()
        await asyncio.sleep(3600)
        yield b'never'

    task = asyncio.create_task(store.put_stream(slow()))
    await started.wait()
    await asyncio.sleep(0.01)
    assert len(temp_files(tmp_path)) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert names(tmp_path) == []


async def test_wrong_size_file_is_replaced_on_put(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    data = blob(5000)
    uri = await store.put(data)
    store.path_for(uri).write_bytes(data[:100])
    assert await store.put(data) == uri
    assert await store.get(uri) == data
    store.path_for(uri).write_bytes(data[:100])
    assert await store.put_stream(chunked(data, 1000)) == uri
    assert await store.get(uri) == data


# -- sidecar ----------------------------------------------------------------------------


def sidecar_of(store: DiskMediaStore, uri: str) -> Path:
    path = store.path_for(uri)
    return path.with_name(path.name + '.meta.json')


async def test_sidecar_content(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    metadata = {'caption': 'Ünïcode 猫', 'a': ''}
    context = MediaContext(media_type='image/png', filename='cat.png', metadata=metadata)
    uri = await store.put(b'png bytes', context=context)
    raw = sidecar_of(store, uri).read_bytes()
    assert raw == b'{"caption": "\\u00dcn\\u00efcode \\u732b", "a": ""}'
    assert json.loads(raw) == metadata
    assert dict(await store.get_metadata(uri)) == metadata


async def test_later_put_with_metadata_replaces_sidecar(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'blob', context=MediaContext(metadata={'v': '1'}))
    await store.put(b'blob', context=MediaContext(metadata={'v': '2'}))
    assert dict(await store.get_metadata(uri)) == {'v': '2'}
    await store.put(b'blob', context=MediaContext(media_type='text/plain'))
    await store.put_stream(chunked(b'blob', 2), context=MediaContext(metadata={}))
    assert dict(await store.get_metadata(uri)) == {'v': '2'}
    await store.put_stream(chunked(b'blob', 2), context=MediaContext(metadata={'v': '3'}))
    assert dict(await store.get_metadata(uri)) == {'v': '3'}


async def test_no_sidecar_without_metadata(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    await store.put(b'plain')
    await store.put(b'typed', context=MediaContext(media_type='image/png', filename='a.png'))
    await store.put_stream(chunked(b'streamed', 3), context=MediaContext(media_type='text/plain', metadata={}))
    assert not [name for name in names(tmp_path) if name.endswith('.meta.json')]
    assert sorted(name[64:] for name in names(tmp_path)) == ['.bin', '.bin', '.bin', '.bin.mediatype', '.bin.mediatype']


@pytest.mark.parametrize(
    ('document', 'expected'),
    [
        ({'mediastash_sidecar': 1, 'metadata': {'k': 'v'}, 'media_type': 'image/png', 'filename': 'a.png'}, {'k': 'v'}),
        ({'mediastash_sidecar': 1, 'metadata': {}, 'media_type': 'image/png', 'filename': None}, {}),
    ],
)
async def test_earlier_versioned_sidecar_is_read(
    tmp_path: Path, document: dict[str, Any], expected: dict[str, str]
) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'older blob')
    sidecar_of(store, uri).write_text(json.dumps(document))
    assert dict(await store.get_metadata(uri)) == expected
    await store.put(b'older blob')
    assert json.loads(sidecar_of(store, uri).read_text()) == document
    await store.put(b'older blob', context=MediaContext(metadata={'now': 'flat'}))
    assert sidecar_of(store, uri).read_bytes() == b'{"now": "flat"}'
    assert dict(await store.get_metadata(uri)) == {'now': 'flat'}


async def test_flat_metadata_with_the_legacy_marker_key_is_plain_metadata(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    metadata = {'mediastash_sidecar': '1', 'metadata': 'x'}
    uri = await store.put(b'odd keys', context=MediaContext(metadata=metadata))
    assert dict(await store.get_metadata(uri)) == metadata


async def test_flat_sidecar_written_by_pydantic_ai_harness_is_read(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'older blob')
    sidecar_of(store, uri).write_text(json.dumps({'tenant': 'acme'}))
    assert dict(await store.get_metadata(uri)) == {'tenant': 'acme'}


async def test_sidecar_without_its_blob_is_not_found(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'gone soon', context=MediaContext(metadata={'k': 'v'}))
    store.path_for(uri).unlink()
    assert sidecar_of(store, uri).exists()
    with pytest.raises(MediaNotFoundError):
        await store.get_metadata(uri)


@pytest.mark.parametrize(
    'content',
    ['not json', '[1, 2]', '{"a": 1}', '{"mediastash_sidecar": 99, "metadata": {}}', '{"mediastash_sidecar": 1}'],
)
async def test_corrupt_sidecar(tmp_path: Path, content: str) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'blob', context=MediaContext(metadata={'k': 'v'}))
    path = store.path_for(uri)
    path.with_name(path.name + '.meta.json').write_text(content)
    with pytest.raises(CorruptMetadataError) as caught:
        await store.get_metadata(uri)
    assert isinstance(caught.value, ValueError)
    assert uri in str(caught.value)


async def test_delete_removes_sidecar(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'blob', context=MediaContext(metadata={'k': 'v'}))
    assert len(names(tmp_path)) == 2
    assert await store.delete(uri)
    assert names(tmp_path) == []


async def test_directory_is_created(tmp_path: Path) -> None:
    target = tmp_path / 'x' / 'y' / 'z'
    DiskMediaStore(target)
    assert target.is_dir()
    DiskMediaStore(os.fspath(target))


# -- storage identity and lifecycle -----------------------------------------------------


async def test_instances_on_one_folder_share_a_storage_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = DiskMediaStore(tmp_path / 'media')
    (tmp_path / 'alias').symlink_to(tmp_path / 'media', target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    same = [DiskMediaStore('media'), DiskMediaStore(tmp_path / 'alias'), DiskMediaStore(tmp_path / 'media', fsync=True)]
    other = DiskMediaStore(tmp_path / 'elsewhere')
    assert all(store.storage_key == first.storage_key for store in same)
    assert other.storage_key != first.storage_key

    uris = [await first.put(f'{i}'.encode()) for i in range(3)]
    before, other_before = first.deletion_generation, other.deletion_generation
    assert await same[0].delete(uris[0])
    after_one = first.deletion_generation
    assert after_one > before
    assert await same[1].delete_many(uris[1:]) == 2
    assert first.deletion_generation > after_one
    assert other.deletion_generation == other_before
    assert [u async for u in first.iter_uris()] == []


async def test_closed_store(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'before close')
    await store.aclose()
    await store.aclose()
    calls = (
        store.put(b'after'),
        store.get(uri),
        store.exists(uri),
        store.exists_many([uri]),
        store.get_metadata(uri),
        store.public_url(uri),
        store.delete(uri),
        store.delete_many([uri]),
        store.put_stream(chunked(b'after', 2)),
        collect(store.get_stream(uri)),
    )
    for call in calls:
        with pytest.raises(StoreClosedError) as caught:
            await call
        assert 'DiskMediaStore' in str(caught.value)
    with pytest.raises(StoreClosedError):
        [u async for u in store.iter_uris()]
    assert [p.name for p in blob_files(tmp_path)] == [f'{uri[-64:]}.bin']
    assert temp_files(tmp_path) == []


# -- garbage collection -----------------------------------------------------------------

HOUR = 3600.0


def age(path: Path, seconds_ago: float) -> float:
    """Set ``path``'s mtime to ``seconds_ago`` before now; returns that time."""
    when = time.time() - seconds_ago
    os.utime(path, (when, when))
    return when


async def test_iter_blobs_reads_sizes_and_mtimes_from_the_files(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path, key_strategy=sharded_key_strategy)
    uri = await store.put(b'x' * 1234, context=MediaContext(metadata={'k': 'v'}))
    when = age(store.path_for(uri), 5 * HOUR)
    (tmp_path / f'{TMP_PREFIX}gc-{"0" * 32}').write_bytes(b'a tombstone of another sweep')
    (infos,) = [info async for info in store.iter_blobs()]
    assert (infos.uri, infos.size) == (uri, 1234)
    assert infos.written_at == pytest.approx(when, abs=0.01)


async def test_put_and_put_stream_touch_an_old_file_without_rewriting_it(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    data = b'kept in place' * 100
    uri = await store.put(data)
    path = store.path_for(uri)
    inode = path.stat().st_ino
    age(path, 2 * HOUR)
    await store.put(data)
    assert path.stat().st_mtime > time.time() - 60
    assert path.stat().st_ino == inode, 'a touch, not a rewrite'
    age(path, 2 * HOUR)
    await store.put_stream(chunked(data, 100))
    assert path.stat().st_mtime > time.time() - 60
    assert path.stat().st_ino == inode
    young = age(path, 10)
    await store.put(data)
    assert path.stat().st_mtime == pytest.approx(young, abs=0.01), 'a young file keeps its mtime'
    assert temp_files(tmp_path) == []


async def test_delete_unless_touched_removes_the_sidecar_and_leaves_no_tombstone(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    old = await store.put(b'old', context=MediaContext(metadata={'k': 'v'}))
    young = await store.put(b'young', context=MediaContext(metadata={'k': 'w'}))
    age(store.path_for(old), 2 * HOUR)
    assert await store.delete_unless_touched([old, young], written_before=time.time() - HOUR) == {old}
    assert names(tmp_path) == sorted([f'{young[-64:]}.bin', f'{young[-64:]}.bin.meta.json'])


async def test_tombstone_touched_before_the_rename_is_put_back(tmp_path: Path) -> None:
    """A writer's touch that landed just before the rename: the tombstone's mtime says young, so it returns."""
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'in use', context=MediaContext(metadata={'k': 'v'}))
    path = store.path_for(uri)
    age(path, 2 * HOUR)
    cutoff = time.time() - HOUR
    tomb = store._bury(path)
    assert tomb is not None and tomb.name.startswith(TMP_PREFIX) and not path.exists()
    assert [u async for u in store.iter_uris()] == []
    os.utime(tomb)  # the touch
    assert store._settle(path, tomb, cutoff) is False
    assert path.read_bytes() == b'in use'
    assert temp_files(tmp_path) == []
    assert dict(await store.get_metadata(uri)) == {'k': 'v'}


async def test_blob_stored_again_while_buried_survives(tmp_path: Path) -> None:
    """A writer that finds the file gone writes it again; settling the old tombstone must not hurt the new file."""
    store = DiskMediaStore(tmp_path)
    data = b'written twice'
    uri = await store.put(data, context=MediaContext(metadata={'k': 'v'}))
    path = store.path_for(uri)
    age(path, 2 * HOUR)
    tomb = store._bury(path)
    assert tomb is not None
    await store.put(data, context=MediaContext(metadata={'k': 'again'}))
    assert store._settle(path, tomb, time.time() - HOUR) is True
    assert await store.get(uri) == data
    assert dict(await store.get_metadata(uri)) == {'k': 'again'}, 'the new sidecar stays'
    assert temp_files(tmp_path) == []

    tomb = store._bury(path)
    assert tomb is not None
    await store.put(data)
    os.utime(tomb)
    assert store._settle(path, tomb, time.time() - HOUR) is False
    assert await store.get(uri) == data
    assert temp_files(tmp_path) == []


async def test_touch_between_listing_and_delete_keeps_the_blob(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'confirmed by a writer')
    age(store.path_for(uri), 2 * HOUR)
    cutoff = time.time() - HOUR
    (listed,) = [info async for info in store.iter_blobs()]
    assert listed.written_at is not None and listed.written_at < cutoff
    await store.put(b'confirmed by a writer')  # a writer's put of the same bytes touches the file
    assert await store.delete_unless_touched([uri], written_before=cutoff) == frozenset()
    assert await store.get(uri) == b'confirmed by a writer'


async def test_delete_unless_touched_with_a_sharded_layout(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path, key_strategy=sharded_key_strategy, fsync=True)
    old, young = await store.put(b'old'), await store.put(b'young')
    age(store.path_for(old), 2 * HOUR)
    assert await store.delete_unless_touched([old, young], written_before=time.time() - HOUR) == {old}
    assert [u async for u in store.iter_uris()] == [young]
    assert temp_files(tmp_path) == []


async def test_touch_many_on_a_read_only_file_still_reports_it(tmp_path: Path) -> None:
    if hasattr(os, 'geteuid') and os.geteuid() == 0:
        pytest.skip('root may set the mtime of any file')
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'not ours to touch')
    path = store.path_for(uri)
    age(path, 2 * HOUR)
    os.chmod(path, 0o444)
    os.chmod(tmp_path, 0o555)
    try:
        assert await store.touch_many([uri]) == {uri}
        assert await store.put(b'not ours to touch') == uri
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)


# -- non-regular files, sidecar containment, bounded sidecars (issue 12, case 2) -------------


async def _within(seconds: float, call: Any, fifo: Path | None = None) -> Any:
    """Await ``call`` with a time limit; on a hang, unblock a reader stuck on ``fifo`` and fail."""
    try:
        return await asyncio.wait_for(call, seconds)
    except TimeoutError:
        if fifo is not None:  # a writer end lets a reader blocked in open() return, so the test ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f'the call hung on {fifo}')


async def test_sidecar_symlinked_outside_the_folder_is_refused(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    uri = await store.put(b'a blob without metadata')
    secret = tmp_path / 'outside.json'
    secret.write_text('{"token": "from outside"}')
    (store.directory / f'{uri[-64:]}.bin.meta.json').symlink_to(secret)
    with pytest.raises(UnsafeKeyError, match='outside'):
        await store.get_metadata(uri)


async def test_sidecar_symlinked_to_dev_zero_is_refused(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    uri = await store.put(b'zero sidecar')
    (store.directory / f'{uri[-64:]}.bin.meta.json').symlink_to('/dev/zero')
    with pytest.raises(UnsafeKeyError):
        await _within(10, store.get_metadata(uri))


async def test_oversized_sidecar_is_refused_naming_the_blob(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    uri = await store.put(b'big sidecar')
    sidecar = store.directory / f'{uri[-64:]}.bin.meta.json'
    sidecar.write_text(json.dumps({'k': 'v' * METADATA_LIMIT_BYTES}))
    with pytest.raises(CorruptMetadataError, match='larger than') as caught:
        await store.get_metadata(uri)
    assert uri in str(caught.value)


async def test_metadata_at_the_bound_round_trips_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    """The write bound is the read bound: whatever ``put`` accepts, ``get_metadata`` gives back."""
    store = DiskMediaStore(tmp_path / 'media')
    room = METADATA_LIMIT_BYTES - len(json.dumps({'k': ''}))
    at_bound = {'k': '\u00e9' * (room // 6) + 'v' * (room % 6)}  # escaped as \u00e9: six bytes each
    assert len(json.dumps(at_bound)) == METADATA_LIMIT_BYTES
    uri = await store.put(b'metadata at the bound', context=MediaContext(metadata=at_bound))
    assert dict(await store.get_metadata(uri)) == at_bound
    over = {'k': at_bound['k'] + 'v'}
    with pytest.raises(MetadataTooLargeError, match=str(METADATA_LIMIT_BYTES + 1)):
        await store.put(b'one byte more', context=MediaContext(metadata=over))
    assert not await store.exists(media_uri_for(b'one byte more'))
    assert names(store.directory) == sorted([f'{uri[-64:]}.bin', f'{uri[-64:]}.bin.meta.json'])


async def test_fifo_at_the_blob_path_is_refused_not_waited_on(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    data = b'the real bytes'
    uri = media_uri_for(data)
    fifo = store.path_for(uri)
    os.mkfifo(fifo)
    assert await store.exists(uri) is False  # documented: only a regular file is a stored blob
    with pytest.raises(NotARegularFileError, match='FIFO') as caught:
        await _within(10, store.get(uri), fifo)
    assert uri in str(caught.value)
    with pytest.raises(NotARegularFileError):
        await _within(10, collect(store.get_stream(uri)), fifo)
    assert await _within(10, store.put(data), fifo) == uri  # a put replaces the FIFO with the blob
    assert await store.get(uri) == data


async def test_fifo_or_directory_at_the_sidecar_path_is_refused(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    uri = await store.put(b'with a fifo sidecar')
    sidecar = store.directory / f'{uri[-64:]}.bin.meta.json'
    os.mkfifo(sidecar)
    with pytest.raises(NotARegularFileError, match='FIFO'):
        await _within(10, store.get_metadata(uri), sidecar)
    sidecar.unlink()
    sidecar.mkdir()
    with pytest.raises(NotARegularFileError, match='directory'):
        await store.get_metadata(uri)


async def test_directory_at_the_blob_path_is_refused(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    uri = media_uri_for(b'shadowed by a folder')
    store.path_for(uri).mkdir()
    assert await store.exists(uri) is False
    with pytest.raises(NotARegularFileError, match='directory'):
        await store.get(uri)


# -- keys the file system cannot hold, deep metadata (issue 12, case 4) ----------------------


async def test_key_segment_longer_than_name_max_is_a_typed_error(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media', key_strategy=lambda uri, context: 'n' * 300 + uri[-64:])
    with pytest.raises(UnsafeKeyError, match='longer than') as caught:
        await store.put(b'long name')
    assert 'nnnn' in str(caught.value)


async def test_key_of_2000_segments_is_refused_before_any_folder_is_made(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media', key_strategy=lambda uri, context: 'd/' * 2000 + uri[-64:] + '.bin')
    with pytest.raises(UnsafeKeyError, match='2001 segments'):
        await store.put(b'deep key')
    assert list(store.directory.iterdir()) == []


async def test_deeply_nested_sidecar_json_is_corrupt_metadata(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    uri = await store.put(b'deep sidecar')
    depth = 100_000
    (store.directory / f'{uri[-64:]}.bin.meta.json').write_text('{"a":' * depth + '1' + '}' * depth)
    with pytest.raises(CorruptMetadataError) as caught:
        await store.get_metadata(uri)
    assert uri in str(caught.value)


# -- crash leftovers (issue 12, case 5) ------------------------------------------------------

_KILLED_WRITER = """
import asyncio, sys
from mediastash import DiskMediaStore

async def endless():
    piece = bytes(range(256)) * 4096  # 1 MiB
    while True:
        yield piece
        print('wrote', flush=True)
        await asyncio.sleep(0.01)

async def main():
    await DiskMediaStore(sys.argv[1]).put_stream(endless())

asyncio.run(main())
"""


async def _killed_writer_leftover(folder: Path) -> Path:
    """Run a writer in a child process, SIGKILL it mid ``put_stream``, return the temp file it left."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, '-c', _KILLED_WRITER, str(folder), stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    try:
        for _ in range(8):  # 8 MiB written
            await asyncio.wait_for(child.stdout.readline(), 30)
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    (leftover,) = temp_files(folder)
    assert leftover.stat().st_size >= 7 << 20
    return leftover


async def test_sweep_removes_a_killed_writers_file_but_not_a_live_one(tmp_path: Path) -> None:
    folder = tmp_path / 'media'
    store = DiskMediaStore(folder)
    leftover = await _killed_writer_leftover(folder)
    assert await store.sweep_temp_files() == 0, 'a fresh leftover could be a live writer: kept'
    old = time.time() - 2 * 3600
    os.utime(leftover, (old, old))

    release = asyncio.Event()
    started = asyncio.Event()

    async def live() -> AsyncIterator[bytes]:
        yield b'first half '
        started.set()
        await release.wait()
        yield b'second half'

    writer = asyncio.create_task(store.put_stream(live()))
    await started.wait()
    await asyncio.sleep(0.1)
    live_temp = [path for path in temp_files(folder) if path != leftover]
    assert len(live_temp) == 1
    assert await store.sweep_temp_files() == 1
    assert not leftover.exists()
    assert live_temp[0].exists(), "a live writer's temp file survives the sweep"
    release.set()
    uri = await writer
    assert await store.get(uri) == b'first half second half'
    assert temp_files(folder) == []


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` (and ``root`` itself) with its mtime in ns, size and mode."""
    state = {}
    for path in [root, *root.rglob('*')]:
        info = path.lstat()
        state[str(path.relative_to(root))] = (info.st_mtime_ns, info.st_size, info.st_mode)
    return state


@pytest.mark.parametrize('strategy', [default_key_strategy, sharded_key_strategy], ids=['default', 'sharded'])
async def test_reads_never_sweep_writers_collectors_and_repair_do(tmp_path: Path, strategy: KeyStrategy) -> None:
    """Listing, reading and a plain verify leave an old crash leftover (and the folder) exactly as it was."""
    folder = tmp_path / 'media'
    store = DiskMediaStore(folder, key_strategy=strategy)
    uri = await store.put(b'stored before the crash', context=MediaContext(metadata={'k': 'v'}))
    old = time.time() - 2 * 3600
    leftover = store.path_for(uri).parent / f'{TMP_PREFIX}{"5" * 32}'
    leftover.write_bytes(b'half a blob')
    os.utime(leftover, (old, old))
    before = tree_state(folder)

    for _round in range(2):  # a fresh instance too: no first-listing sweep
        assert [found async for found in store.iter_uris()] == [uri]
        assert [info.uri async for info in store.iter_blobs()] == [uri]
        assert await store.get(uri) == b'stored before the crash'
        assert await store.exists(uri) and dict(await store.get_metadata(uri)) == {'k': 'v'}
        assert [chunk async for chunk in store.get_stream(uri)] == [b'stored before the crash']
        assert (await store.verify()).ok == 1
        assert await store.exists_many([uri]) == {uri}
        store = DiskMediaStore(folder, key_strategy=strategy)
    assert tree_state(folder) == before

    await store.put(b'a writer in the same folder' if strategy is default_key_strategy else b'stored before the crash')
    assert not leftover.exists(), 'a writer sweeps the folder it writes into'

    leftover.write_bytes(b'half a blob')
    os.utime(leftover, (old, old))
    assert (await DiskMediaStore(folder, key_strategy=strategy).verify(repair=True)).ok >= 1
    assert not leftover.exists(), 'verify(repair=True) sweeps'

    leftover.write_bytes(b'half a blob')
    os.utime(leftover, (old, old))
    collector = DiskMediaStore(folder, key_strategy=strategy)
    assert await collector.delete_unless_touched([MISSING_URI], written_before=time.time()) == set()
    assert not leftover.exists(), 'garbage collection sweeps'


async def test_sweep_removes_old_leftovers_and_restores_old_tombstones(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media', key_strategy=sharded_key_strategy)
    buried_uri = await store.put(b'buried by a collector that died')
    kept_uri = await store.put(b'buried, but stored again since')
    old = time.time() - 2 * 3600
    tomb = store.path_for(buried_uri).with_name(f'{TMP_PREFIX}gc-{"1" * 32}')
    os.rename(store.path_for(buried_uri), tomb)
    stale_tomb = store.path_for(kept_uri).with_name(f'{TMP_PREFIX}gc-{"2" * 32}')
    stale_tomb.write_bytes(b'buried, but stored again since')
    partial = store.path_for(kept_uri).parent / f'{TMP_PREFIX}{"3" * 32}'
    partial.write_bytes(b'half a blob')
    for path in (tomb, stale_tomb, partial):
        os.utime(path, (old, old))
    fresh = store.directory / f'{TMP_PREFIX}{"4" * 32}'
    fresh.write_bytes(b'a writer at work')

    assert await store.sweep_temp_files() == 1  # the old partial file only
    listed = {uri async for uri in store.iter_uris()}
    assert listed == {kept_uri}, 'a tombstone is aged by its burial (ctime), not by the mtime it kept'
    assert sorted(temp_files(store.directory)) == sorted([fresh, tomb, stale_tomb])
    await asyncio.sleep(0.05)
    assert (
        await store.sweep_temp_files(older_than=timedelta(seconds=0.01)) == 2
    )  # stale tombstone and, at this tiny age, the writer's file; the buried blob is put back
    assert {uri async for uri in store.iter_uris()} == {buried_uri, kept_uri}
    assert temp_files(store.directory) == []
    assert await store.get(buried_uri) == b'buried by a collector that died'


async def test_put_writes_again_when_the_blob_vanishes_during_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector can delete the blob between the size check and the hash check of a re-put: write it again."""
    import mediastash.stores.disk._store as disk_module

    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'small and stored')
    real_read_all = disk_module._read_all

    def vanishing(path: Path) -> bytes:
        path.unlink()
        return real_read_all(path)  # raises FileNotFoundError, as a concurrent delete makes it

    monkeypatch.setattr(disk_module, '_read_all', vanishing)
    assert await store.put(b'small and stored') == uri
    monkeypatch.setattr(disk_module, '_read_all', real_read_all)
    assert await store.get(uri) == b'small and stored'


# -- media types (issue 17, item 14) ------------------------------------------------------------------


@pytest.mark.parametrize('strategy', [default_key_strategy, sharded_key_strategy], ids=['default', 'sharded'])
async def test_media_type_is_recorded_beside_the_blob(tmp_path: Path, strategy: KeyStrategy) -> None:
    """The first put that carries a media type records it in ``<blob>.mediatype``; ``media_type_of`` reads it."""
    store = DiskMediaStore(tmp_path / 'media', key_strategy=strategy)
    png = await store.put(b'a picture', context=MediaContext(media_type='image/png'))
    record = store.path_for(png).with_name(store.path_for(png).name + MEDIA_TYPE_SUFFIX)
    assert record.read_bytes() == b'image/png'
    await store.put(b'a picture', context=MediaContext(media_type='image/jpeg', metadata={'k': 'v'}))
    assert await store.media_type_of(png) == 'image/png', 'the first recorded media type stays'
    streamed = await store.put_stream(chunked(b'some text, streamed', 4), context=MediaContext(media_type='text/plain'))
    plain = await store.put(b'no type given')
    assert (await store.media_type_of(streamed), await store.media_type_of(plain)) == ('text/plain', None)
    assert await store.media_type_of(MISSING_URI) is None
    empty_record = store.path_for(plain).with_name(store.path_for(plain).name + MEDIA_TYPE_SUFFIX)
    empty_record.touch()  # a record a crash left before its write: no media type, and a later put fills it
    assert await store.media_type_of(plain) is None
    await store.put(b'no type given', context=MediaContext(media_type='text/markdown'))
    assert await store.media_type_of(plain) == 'text/markdown'
    assert sorted([uri async for uri in store.iter_uris()]) == sorted([png, streamed, plain])
    assert await DiskMediaStore(tmp_path / 'media', key_strategy=strategy).media_type_of(png) == 'image/png'

    assert await store.delete(png)
    assert not record.exists(), 'deleting a blob removes its media type record'
    assert await store.put(b'a picture', context=MediaContext(media_type='image/webp')) == png
    assert await store.media_type_of(png) == 'image/webp'


async def test_a_blob_written_by_pydantic_ai_harness_gets_its_media_type_from_a_later_put(tmp_path: Path) -> None:
    from pydantic_ai_harness import media as harness_media

    theirs = harness_media.DiskMediaStore(tmp_path)
    uri = await theirs.put(b'written by the harness', context=harness_media.MediaContext(media_type='image/gif'))
    store = DiskMediaStore(tmp_path)
    assert await store.media_type_of(uri) is None
    await store.put(b'written by the harness', context=MediaContext(media_type='image/gif'))
    assert await store.media_type_of(uri) == 'image/gif'
    assert await theirs.get(uri) == b'written by the harness'
    assert dict(await theirs.get_metadata(uri)) == {}


@pytest.mark.parametrize('media_type', ['x' * 1025, 'image/png\nX-Other: 1', 'text/\udcff'])
async def test_a_media_type_that_cannot_be_recorded_is_refused_before_anything_is_written(
    tmp_path: Path, media_type: str
) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    for put in (
        lambda: store.put(b'refused', context=MediaContext(media_type=media_type)),
        lambda: store.put_stream(chunked(b'refused', 3), context=MediaContext(media_type=media_type)),
    ):
        with pytest.raises(InvalidMediaType, match=r'context\.media_type') as caught:
            await put()
        assert media_type not in str(caught.value)
        assert names(store.directory) == []


async def test_an_unreadable_media_type_record_is_an_error_naming_the_blob(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path)
    uri = await store.put(b'typed', context=MediaContext(media_type='image/png'))
    record = tmp_path / f'{uri[-64:]}.bin{MEDIA_TYPE_SUFFIX}'
    record.write_bytes(b'\xff\xfe')
    with pytest.raises(CorruptMetadataError, match='UTF-8') as caught:
        await store.media_type_of(uri)
    assert uri in str(caught.value)
    record.unlink()
    os.mkfifo(record)
    with pytest.raises(NotARegularFileError):
        await _within(10, store.media_type_of(uri))


async def test_a_key_cannot_end_like_a_media_type_record(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path, key_strategy=lambda uri, context: uri[-64:] + '.bin' + MEDIA_TYPE_SUFFIX)
    with pytest.raises(UnsafeKeyError, match='collides'):
        await store.put(b'x')
