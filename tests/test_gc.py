"""Garbage collection: references, roots, the collector's rule, a property test over real stores, the CLI."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.media import SqliteMediaStore as HarnessSqliteMediaStore
from pydantic_ai_harness.media import externalize_media as harness_externalize
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    FileStepStore,
    InMemoryStepStore,
    RunRecord,
    SqliteStepStore,
)
from pydantic_ai_persistence import InMemoryAsyncKV, KVStepStore

from mediastash import DiskMediaStore, MemoryMediaStore, SqliteMediaStore, externalize_media
from mediastash.gc import (
    FileStepStoreRoot,
    GcReport,
    GcUriOutcome,
    JsonFileRoot,
    JsonTreeRoot,
    KVRoot,
    Root,
    RootReadError,
    SqliteStepStoreRoot,
    StepStoreRoot,
    StoreNotCollectable,
    UriFileRoot,
    UriRoot,
    as_root,
    collect_garbage,
    referenced_uris,
    root_from_spec,
)
from mediastash.integrations import OffloadingKV, OffloadingStepStore
from mediastash.markers import FORMAT_KEY, LITERAL_KEY, MARKER_KEY, TEXT_KEY, URI_KEY
from mediastash.uri import media_uri_for
from mediastash.walker import WalkOptions
from tests.memory_support import set_written_at

THRESHOLD = 64
HOUR = 3600.0
DAY = 24 * HOUR
REPO = Path(__file__).resolve().parents[1]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def binary(data: bytes) -> dict[str, Any]:
    return {'kind': 'binary', 'data': b64(data), 'media_type': 'image/png'}


def text_part(text: str) -> dict[str, Any]:
    return {'part_kind': 'text', 'content': text}


def payload(seed: int, size: int = 200) -> bytes:
    return random.Random(seed).randbytes(size)


async def stored(store: Any) -> set[str]:
    return {info.uri async for info in store.iter_blobs()}


async def age(store: Any, uri: str, when: float | None) -> None:
    """Set a blob's last-write time behind the store's back (None: unknown age)."""
    if isinstance(store, MemoryMediaStore):
        set_written_at(store, uri, when)
    elif isinstance(store, DiskMediaStore):
        assert when is not None
        os.utime(store.path_for(uri), (when, when))
    elif isinstance(store, SqliteMediaStore):
        assert store.database is not None
        with sqlite3.connect(store.database, timeout=30) as connection:
            connection.execute(f'UPDATE {store.table} SET created_at = ? WHERE sha256 = ?', (when, uri[-64:]))
    else:
        raise AssertionError(f'cannot age blobs of {store!r}')


async def age_all(store: Any, when: float) -> None:
    for uri in await stored(store):
        await age(store, uri, when)


def listed(report: GcReport, outcome: GcUriOutcome = 'deleted') -> set[str]:
    """The URIs of the report's ``uris_file`` with that outcome."""
    return set(report.iter_uris(outcome))


# -- referenced_uris ----------------------------------------------------------------------------


async def test_referenced_uris_finds_every_marker_the_walker_wrote() -> None:
    store = MemoryMediaStore()
    tree = {
        'messages': [
            {'parts': [binary(payload(1)), text_part('x' * 300)]},
            {'nested': [[{'kind': 'binary', 'data': base64.urlsafe_b64encode(payload(2)).decode()}]]},
            {'kind': 'text-content', 'content': 'y' * 300},
            binary(payload(1)),  # the same payload again: one blob
            {'small': binary(b'tiny')},
        ]
    }
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD)
    found = referenced_uris(lean)
    assert found == await stored(store)
    assert len(found) == 4
    assert referenced_uris(tree) == set()  # the full tree has no markers


async def test_markers_written_by_pydantic_ai_harness_count() -> None:
    store = MemoryMediaStore()
    tree = [binary(payload(3)), {'part_kind': 'user-prompt', 'content': 'z' * 500}]
    lean = await harness_externalize(tree, media_store=store, threshold_bytes=THRESHOLD)
    assert referenced_uris(lean) == await stored(store) != set()


async def test_literal_wrapped_lookalikes_are_not_references() -> None:
    store = MemoryMediaStore()
    real = await store.put(b'a blob some caller names in its own data')
    lookalike = {MARKER_KEY: True, URI_KEY: real, 'uri': real, 'kind': 'binary', 'inner': binary(payload(4))}
    lean = await externalize_media({'caller': lookalike}, media_store=store, threshold_bytes=THRESHOLD)
    wrapper = lean['caller']
    assert set(wrapper) == {LITERAL_KEY, FORMAT_KEY}  # the walker wrapped the caller's dict
    inner_uri = media_uri_for(payload(4))
    assert referenced_uris(lean) == {inner_uri}  # the real marker inside the wrapper counts, the look-alike not
    assert referenced_uris(lean, inside_literals=True) == {inner_uri, real}


def test_only_marker_shaped_dicts_count() -> None:
    uri_a, uri_b, uri_c = (media_uri_for(bytes([n])) for n in range(3))
    tree = [
        {MARKER_KEY: True, URI_KEY: uri_a, 'kind': 'binary', 'data': 'still here'},  # payload not moved: data
        {MARKER_KEY: 'true', URI_KEY: uri_a, 'kind': 'binary'},  # the flag must be True
        {MARKER_KEY: True, URI_KEY: uri_a, 'kind': 'image'},  # not a binary part's shape
        {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: uri_a, 'content': 'x', 'part_kind': 'text'},
        {MARKER_KEY: True, URI_KEY: 'https://example.com/a.png', 'kind': 'binary'},  # not a media URI
        {MARKER_KEY: True, 'uri': uri_b, 'kind': 'binary'},  # an older marker: plain uri only
        {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: uri_c, 'uri': uri_a.upper(), 'part_kind': 'text'},
    ]
    assert referenced_uris(tree) == {uri_b, uri_c}
    with_mirror = {MARKER_KEY: True, URI_KEY: uri_b, 'uri': uri_c, 'kind': 'binary'}  # a caller's own uri kept
    assert referenced_uris(with_mirror) == {uri_b, uri_c}


def test_deep_trees_are_walked_without_recursion() -> None:
    uri = media_uri_for(b'deep')
    tree: Any = {MARKER_KEY: True, URI_KEY: uri, 'kind': 'binary'}
    for depth in range(100_000):
        tree = [tree] if depth % 2 else {'child': tree}
    assert referenced_uris(tree) == {uri}


NAMED = media_uri_for(b'named')
"""A URI a caller's own look-alike dict names (not a blob any writer stored)."""


def messages_with_payloads(seed: int = 0) -> list[ModelMessage]:
    """An image and a long tool output (two blobs), and a caller's marker look-alike beside them."""
    rng = random.Random(seed)
    lookalike = {MARKER_KEY: True, URI_KEY: NAMED, 'kind': 'binary'}
    return [
        ModelRequest(
            parts=[UserPromptPart(content=['look', BinaryContent(data=rng.randbytes(500), media_type='image/png')])]
        ),
        ModelResponse(parts=[TextPart('ok')]),
        ModelRequest(
            parts=[
                ToolReturnPart(tool_name='t', tool_call_id='c1', content=f'{seed} ' + 'r' * 400),
                ToolReturnPart(tool_name='t', tool_call_id='c2', content={'echo': lookalike}),
            ]
        ),
    ]


async def test_envelopes_of_the_step_store_wrapper_are_read_as_stored() -> None:
    media = MemoryMediaStore()
    inner = InMemoryStepStore()
    steps = OffloadingStepStore(inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD))
    await steps.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages_with_payloads()))
    (lean,) = await inner.list_snapshots(run_id='r')
    dumped = ModelMessagesTypeAdapter.dump_python(list(lean.messages), mode='json')
    assert referenced_uris(dumped) == await stored(media)
    assert NAMED not in referenced_uris(dumped)  # the caller's look-alike, wrapped
    assert NAMED in referenced_uris(dumped, inside_literals=True)
    assert len(await stored(media)) == 2


# -- the collector --------------------------------------------------------------------------------


async def aged_store() -> tuple[MemoryMediaStore, dict[str, str]]:
    """Blobs of every kind the collector tells apart."""
    store = MemoryMediaStore()
    uris = {name: await store.put(name.encode()) for name in ('kept', 'old', 'young', 'unknown')}
    now = time.time()
    await age(store, uris['kept'], now - 2 * HOUR)
    await age(store, uris['old'], now - 2 * HOUR)
    await age(store, uris['young'], now - 10)
    await age(store, uris['unknown'], None)
    return store, uris


async def test_only_old_unreferenced_blobs_of_known_age_go(tmp_path: Path) -> None:
    store, uris = await aged_store()
    roots = [frozenset({uris['kept']})]
    dry = await collect_garbage(store, roots, grace=timedelta(hours=1), uris_file=tmp_path / 'dry')
    assert dry.dry_run and listed(dry, 'deletable') == {uris['old']} and dry.deleted == 0
    assert await stored(store) == set(uris.values())
    assert (dry.scanned, dry.referenced, dry.skipped_young, dry.skipped_unknown_age, dry.deletable) == (4, 1, 1, 1, 1)
    assert dry.deletable_bytes == len(b'old') and dry.scanned_bytes == sum(len(name) for name in uris)

    real = await collect_garbage(store, roots, grace=timedelta(hours=1), dry_run=False, uris_file=tmp_path / 'real')
    assert listed(real) == listed(dry, 'deletable') == listed(real, 'deletable')
    assert listed(real, 'kept') == set()
    assert (real.deleted, real.bytes_freed) == (1, 3)
    assert await stored(store) == {uris['kept'], uris['young'], uris['unknown']}
    assert real.written_before == pytest.approx(real.mark_started - 3600)


async def test_unknown_age_goes_only_when_asked(tmp_path: Path) -> None:
    store, uris = await aged_store()
    dry = await collect_garbage(
        store, [frozenset({uris['kept']})], grace=3600, include_unknown_age=True, uris_file=tmp_path / 'dry'
    )
    assert listed(dry, 'deletable') == {uris['old'], uris['unknown']} and dry.skipped_unknown_age == 0
    real = await collect_garbage(
        store, [{uris['kept']}], grace=3600, include_unknown_age=True, dry_run=False, uris_file=tmp_path / 'real'
    )
    assert listed(real) == {uris['old'], uris['unknown']}
    assert real.bytes_freed == len(b'old') + len(b'unknown')
    assert await stored(store) == {uris['kept'], uris['young']}


async def test_grace_zero_still_spares_blobs_written_after_the_mark_started(tmp_path: Path) -> None:
    store = MemoryMediaStore()
    old = await store.put(b'old')
    await age(store, old, time.time() - 5)

    class WritesWhileRead(Root):
        """A root during whose reading a writer stores a new blob (it has no snapshot yet)."""

        def __init__(self) -> None:
            self.read_at = 0.0
            self.written = ''

        async def reference_batches(self) -> AsyncIterator[set[str]]:
            self.read_at = time.time()
            self.written = await store.put(b'written during the mark')
            yield set()

        def describe(self) -> str:
            return 'writer'

    root = WritesWhileRead()
    report = await collect_garbage(store, [root], grace=0, dry_run=False, uris_file=tmp_path / 'uris')
    assert report.mark_started <= root.read_at
    assert listed(report) == {old}
    assert await stored(store) == {root.written}


async def test_a_blob_touched_between_listing_and_delete_is_kept(tmp_path: Path) -> None:
    store = MemoryMediaStore()
    uris = [await store.put(bytes([n]) * 10) for n in range(3)]
    await age_all(store, time.time() - 2 * HOUR)

    def progress(phase: str, done: int, total: int | None) -> None:
        if phase == 'list' and total is not None:  # listing finished: a writer confirms one blob now
            set_written_at(store, uris[1], time.time())

    report = await collect_garbage(
        store, [frozenset()], grace=HOUR, dry_run=False, progress=progress, uris_file=tmp_path / 'uris'
    )
    assert report.deletable == 3 and listed(report) == {uris[0], uris[2]} and listed(report, 'kept') == {uris[1]}
    assert await stored(store) == {uris[1]}


async def test_deletes_in_batches() -> None:
    calls: list[int] = []

    class Counting(MemoryMediaStore):
        async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
            calls.append(len(digests))
            return await super()._delete_unless_touched(digests, written_before)

    store = Counting()
    for n in range(7):
        await store.put(bytes([n]))
    await age_all(store, time.time() - 10)
    phases: list[tuple[str, int, int | None]] = []
    report = await collect_garbage(
        store, [set()], grace=1, dry_run=False, batch_size=3, progress=lambda *a: phases.append(a)
    )
    assert calls == [3, 3, 1] and report.deleted == 7
    assert ('delete', 7, 7) in phases and ('list', 7, 7) in phases and ('mark', 1, 1) in phases


LEFTOVER = '.mediastash-tmp-0123456789abcdef0123456789abcdef'
"""The name a disk writer killed mid-``put`` leaves behind."""


def old_leftovers(folder: Path) -> tuple[Path, Path]:
    """A crash leftover two hours old (sweepable) and a fresh one (could be a live writer's)."""
    old, fresh = folder / LEFTOVER, folder / '.mediastash-tmp-fedcba9876543210fedcba9876543210'
    for path in (old, fresh):
        path.write_bytes(b'half a blob')
    two_hours_ago = time.time() - 2 * HOUR
    os.utime(old, (two_hours_ago, two_hours_ago))
    return old, fresh


async def test_a_deleting_run_sweeps_leftovers_even_with_nothing_to_delete(tmp_path: Path) -> None:
    """gc swept a disk store's crash leftovers only when it had blobs to delete (issue 17, item 7)."""
    writer = DiskMediaStore(tmp_path / 'media')
    kept = await writer.put(payload(1))
    await age_all(writer, time.time() - 2 * HOUR)
    await writer.aclose()
    old, fresh = await asyncio.to_thread(old_leftovers, tmp_path / 'media')

    store = DiskMediaStore(tmp_path / 'media')
    dry = await collect_garbage(store, [{kept}], grace=timedelta(hours=1))
    assert dry.deletable == 0
    assert old.exists() and fresh.exists(), 'a dry run changes nothing'
    real = await collect_garbage(store, [{kept}], grace=timedelta(hours=1), dry_run=False)
    assert (real.deletable, real.deleted) == (0, 0)
    assert not old.exists()
    assert fresh.exists(), 'a fresh temporary file may be a live writer: kept'
    assert await stored(store) == {kept}


async def test_the_sweep_is_a_capability_not_a_store_class() -> None:
    """Any store with ``sweep_temp_files`` is swept by a deleting run, once, before listing; never in a dry run."""
    events: list[str] = []

    class Sweeping(MemoryMediaStore):
        async def sweep_temp_files(self) -> int:
            events.append('sweep')
            return 0

        async def _list_blobs(self) -> AsyncIterator[Any]:
            events.append('list')
            async for info in super()._list_blobs():
                yield info

    store = Sweeping()
    await store.put(b'referenced')
    await collect_garbage(store, [{media_uri_for(b'referenced')}], dry_run=True)
    assert events == ['list']
    events.clear()
    await collect_garbage(store, [{media_uri_for(b'referenced')}], dry_run=False)
    assert events == ['sweep', 'list']
    # A store without the capability is collected as before.
    plain = MemoryMediaStore()
    assert (await collect_garbage(plain, [set()], dry_run=False)).scanned == 0


async def test_stores_that_cannot_be_collected_are_refused() -> None:
    from mediastash.stores.wrapper import WrapperMediaStore

    class Plain:
        """A MediaStore with no listing and no ages."""

        async def put(self, data: bytes, *, context: Any = None) -> str:
            return media_uri_for(data)

    with pytest.raises(StoreNotCollectable, match='iter_blobs, delete_unless_touched') as caught:
        await collect_garbage(WrapperMediaStore(Plain()), [set()])  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError)


async def test_bad_arguments_are_refused_before_anything_is_read() -> None:
    store, _ = await aged_store()
    with pytest.raises(TypeError, match='wrap it in a list'):
        await collect_garbage(store, frozenset())
    with pytest.raises(TypeError, match='wrap it in a list'):
        await collect_garbage(store, JsonTreeRoot({}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='no roots'):
        await collect_garbage(store, [])
    with pytest.raises(ValueError, match='negative'):
        await collect_garbage(store, [set()], grace=timedelta(seconds=-1))
    with pytest.raises(TypeError, match='grace'):
        await collect_garbage(store, [set()], grace='1h')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='batch_size'):
        await collect_garbage(store, [set()], batch_size=0)
    with pytest.raises(TypeError, match='not a root'):
        await collect_garbage(store, [42])
    with pytest.raises(ValueError, match='must start with'):
        await collect_garbage(store, [{'not a uri'}])


async def test_an_unreadable_root_deletes_nothing(tmp_path: Path) -> None:
    store, uris = await aged_store()
    (tmp_path / 'good.json').write_text('{}')
    (tmp_path / 'bad.json').write_text('{"cut off')
    with pytest.raises(RootReadError, match=r'bad\.json: not JSON'):
        await collect_garbage(store, [frozenset(), tmp_path], grace=0, dry_run=False, include_unknown_age=True)
    assert await stored(store) == set(uris.values())


# -- roots ---------------------------------------------------------------------------------------


async def references_of(root: Root) -> set[str]:
    found: set[str] = set()
    async for batch in root.reference_batches():
        found |= batch
    return found


async def test_json_file_and_folder_roots(tmp_path: Path) -> None:
    store = MemoryMediaStore()
    lean = await externalize_media([binary(payload(5))], media_store=store, threshold_bytes=THRESHOLD)
    folder = tmp_path / 'snapshots'
    (folder / 'deeper').mkdir(parents=True)
    (folder / 'deeper' / 'one.json').write_text(json.dumps(lean))
    (folder / 'notes.txt').write_text('a file of no known kind')
    with pytest.raises(RootReadError, match=r'notes\.txt: cannot tell what kind of root'):
        await references_of(JsonFileRoot(folder))  # never passed over: it may hold references
    (folder / 'notes.txt').unlink()
    assert await references_of(JsonFileRoot(folder)) == await stored(store)
    assert await references_of(as_root(folder / 'deeper' / 'one.json')) == await stored(store)
    (tmp_path / 'empty').mkdir()
    with pytest.raises(RootReadError, match='holds no root file'):
        await references_of(JsonFileRoot(tmp_path / 'empty'))
    with pytest.raises(RootReadError, match='no such file'):
        await references_of(JsonFileRoot(tmp_path / 'missing.json'))


async def test_uri_roots(tmp_path: Path) -> None:
    uri = media_uri_for(b'x')
    listing = tmp_path / 'keep.txt'
    listing.write_text(f'# blobs to keep\n\n  {uri}  \n')
    assert await references_of(UriFileRoot(listing)) == {uri}
    assert isinstance(root_from_spec(str(listing)), UriFileRoot)
    listing.write_text(f'{uri}\nmedia+sha256://nothex\n')
    with pytest.raises(RootReadError, match=r'keep\.txt, line 2: not a media'):
        await references_of(UriFileRoot(listing))
    assert await references_of(UriRoot([uri, uri])) == {uri}
    with pytest.raises(TypeError):
        UriRoot(uri)


async def test_root_kinds_from_specs(tmp_path: Path) -> None:
    steps = FileStepStore(tmp_path / 'steps', media_store=None)
    await steps.register_run(RunRecord(run_id='r'))
    database = tmp_path / 'steps.db'
    await SqliteStepStore(database=database, media_store=None).register_run(RunRecord(run_id='r'))
    (tmp_path / 'lean.json').write_text('[1]')
    (tmp_path / 'odd.txt').write_text('hello')
    assert isinstance(root_from_spec(str(tmp_path / 'steps')), FileStepStoreRoot)
    assert isinstance(root_from_spec(str(database)), SqliteStepStoreRoot)
    assert isinstance(root_from_spec(str(tmp_path / 'lean.json')), JsonFileRoot)
    assert isinstance(root_from_spec(f'json:{tmp_path / "steps"}'), JsonFileRoot)
    assert isinstance(root_from_spec(f'uris:{tmp_path / "lean.json"}'), UriFileRoot)
    assert isinstance(root_from_spec(f'file-steps:{tmp_path}'), FileStepStoreRoot)
    assert isinstance(root_from_spec(f'sqlite-steps:{tmp_path / "x.db"}'), SqliteStepStoreRoot)
    with pytest.raises(RootReadError, match='cannot tell what kind of root'):
        root_from_spec(str(tmp_path / 'odd.txt'))
    with pytest.raises(RootReadError, match='no such file or folder'):
        root_from_spec(str(tmp_path / 'absent'))
    with pytest.raises(RootReadError, match='no snapshots table'):
        await references_of(SqliteStepStoreRoot(_empty_database(tmp_path)))
    with pytest.raises(RootReadError, match='no such database file'):
        await references_of(SqliteStepStoreRoot(tmp_path / 'x.db'))
    assert not (tmp_path / 'x.db').exists()  # read-only: nothing created


def _empty_database(tmp_path: Path) -> Path:
    path = tmp_path / 'other.db'
    with sqlite3.connect(path) as connection:
        connection.execute('CREATE TABLE media (sha256 TEXT)')
    return path


async def test_harness_step_stores_that_externalize_into_the_collected_store(tmp_path: Path) -> None:
    """The harness's own markers, and our envelopes inside its files (two marker layers), all count."""
    media = MemoryMediaStore()
    messages = messages_with_payloads(seed=7)
    plain = FileStepStore(tmp_path / 'plain', media_store=media, media_threshold_bytes=THRESHOLD)
    layered = OffloadingStepStore(
        FileStepStore(tmp_path / 'layered', media_store=media, media_threshold_bytes=THRESHOLD),
        media_store=media,
        options=WalkOptions(threshold_bytes=THRESHOLD),
    )
    database = SqliteStepStore(database=tmp_path / 'steps.db', media_store=media, media_threshold_bytes=THRESHOLD)
    for store in (plain, layered, database):
        await store.register_run(RunRecord(run_id='r'))
        await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages))
    blobs = await stored(media)
    # At this 64-byte threshold the inner store also moves out the layered envelope's placeholder text.
    placeholders = {uri for uri in blobs if (await media.get(uri)).startswith(b'[mediastash placeholder: ')}
    assert len(blobs - placeholders) == 2 and len(placeholders) == 1
    raw = json.loads(next((tmp_path / 'layered').glob('*/snapshots/*.json')).read_text())
    assert referenced_uris(raw) == placeholders  # the harness wrapped our markers as caller data...
    roots = [as_root(plain), as_root(layered), as_root(database)]
    assert [type(root) for root in roots] == [FileStepStoreRoot, FileStepStoreRoot, SqliteStepStoreRoot]
    for root in roots:  # ...which roots read from storage still count
        found = await references_of(root)
        assert blobs - placeholders <= found <= blobs | {NAMED}, root  # roots from storage may count the look-alike too
    for store in (plain, layered, database):  # their API would restore the harness's markers, hiding them
        with pytest.raises(TypeError, match='media store of its own'):
            StepStoreRoot(store)


async def test_step_store_roots_refuse_what_they_cannot_read_completely(tmp_path: Path) -> None:
    media = MemoryMediaStore()
    steps = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
    await steps.register_run(RunRecord(run_id='r'))
    await steps.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages_with_payloads()))
    (tmp_path / 'steps' / 'r' / 'snapshots' / '7.json').write_text('{"damaged": ')
    with pytest.raises(RootReadError, match='skipped a snapshot'):
        await references_of(as_root(steps))
    with pytest.raises(RootReadError, match=r'7\.json: not JSON'):
        await references_of(FileStepStoreRoot(tmp_path / 'steps'))
    with pytest.raises(TypeError, match='OffloadingKV'):
        as_root(KVStepStore(OffloadingKV(InMemoryAsyncKV(), media_store=media)))

    class LatestOnly:
        async def list_runs(self) -> list[Any]:
            return []

    with pytest.raises(TypeError, match='list_snapshots'):
        as_root(LatestOnly())


class ScanningKV(InMemoryAsyncKV):
    """An in-memory AsyncKV that can list its records (pydantic-ai-persistence's cannot)."""

    async def scan(self) -> AsyncIterator[tuple[str, str, str]]:
        for pk, records in list(self._data.items()):
            for sk, data in list(records.items()):
                yield pk, sk, data


async def test_kv_roots() -> None:
    media = MemoryMediaStore()
    plain = InMemoryAsyncKV()
    kv = OffloadingKV(plain, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD))
    await kv.put('hist#1', 'messages', json.dumps([binary(payload(8))]))
    await kv.put('hist#2', 'messages', json.dumps([binary(payload(9))]))
    await kv.put('hist#3', 'messages', 'not json at all, ' + '__harness_external_')
    with pytest.raises(TypeError, match='cannot list its records'):
        as_root(kv)
    assert await references_of(KVRoot(kv, partitions=['hist#1'])) == {media_uri_for(payload(8))}
    scanning = OffloadingKV(ScanningKV(), media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD))
    await scanning.put('a', 'b', json.dumps({'x': binary(payload(9))}))
    assert await references_of(as_root(scanning)) == {media_uri_for(payload(9))}
    with pytest.raises(TypeError, match='not one string'):
        KVRoot(kv, partitions='hist#1')


# -- harness rows of unknown age ------------------------------------------------------------------


async def test_blobs_the_harness_wrote_survive_the_default_collection(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    ours = SqliteMediaStore(database=database)
    try:
        mine = await ours.put(b'written by mediastash')
        harness = HarnessSqliteMediaStore(database=database)
        theirs = await harness.put(b'written by pydantic-ai-harness')
        await age(ours, mine, time.time() - 2 * HOUR)
        assert {info.uri: info.written_at for info in [i async for i in ours.iter_blobs()]}[theirs] is None

        report = await collect_garbage(ours, [set()], grace=0, dry_run=False, uris_file=tmp_path / 'first')
        assert listed(report) == {mine} and report.skipped_unknown_age == 1
        assert await ours.get(theirs) == b'written by pydantic-ai-harness'

        report = await collect_garbage(
            ours, [set()], grace=0, dry_run=False, include_unknown_age=True, uris_file=tmp_path / 'second'
        )
        assert listed(report) == {theirs}
        assert await stored(ours) == set()
    finally:
        await ours.aclose()


# -- property: random histories, pruning, deletions, then collection with grace 0 -------------------

MEDIA_KINDS = ('disk', 'sqlite')
STEP_KINDS = ('memory', 'file')


def make_media(kind: str, folder: Path) -> Any:
    return DiskMediaStore(folder / 'media') if kind == 'disk' else SqliteMediaStore(database=folder / 'media.db')


def step_message(pool: list[bytes], picks: list[int], step: int) -> ModelMessage:
    """Odd picks as images, even picks as long text parts."""
    images = [BinaryContent(data=pool[pick], media_type='image/png') for pick in picks if pick % 2]
    texts = [UserPromptPart(content=pool[pick].hex()) for pick in picks if not pick % 2]
    return ModelRequest(parts=[UserPromptPart(content=[f'step {step}', *images]), *texts])


def payloads_of(value: Any) -> set[str]:
    """URIs of the payloads at or above the threshold in a full (restored) JSON value."""
    found: set[str] = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get('kind') == 'binary' and isinstance(node.get('data'), str):
                data = base64.urlsafe_b64decode(node['data'].replace('+', '-').replace('/', '_'))
                if len(data) >= THRESHOLD:
                    found.add(media_uri_for(data))
            content = node.get('content')
            text = content.encode() if isinstance(content, str) and isinstance(node.get('part_kind'), str) else b''
            if len(text) >= THRESHOLD:
                found.add(media_uri_for(text))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def dumped(messages: Any) -> Any:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode='json')


history_plans = st.fixed_dictionaries(
    {
        'media': st.sampled_from(MEDIA_KINDS),
        'steps': st.sampled_from(STEP_KINDS),
        'keep': st.sampled_from([None, 1, 2]),
        'runs': st.lists(
            st.lists(st.lists(st.integers(0, 7), max_size=3), min_size=1, max_size=4), min_size=1, max_size=3
        ),
        'deleted_runs': st.sets(st.integers(0, 2), max_size=2),
        'records': st.lists(st.lists(st.integers(0, 7), min_size=1, max_size=2), max_size=3),
        'dropped_records': st.sets(st.integers(0, 2), max_size=2),
        'seed': st.integers(0, 2**16),
    }
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=history_plans)
def test_collection_after_random_histories_keeps_exactly_what_is_referenced(plan: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_history_scenario(plan, Path(folder)))


async def _history_scenario(plan: dict[str, Any], folder: Path) -> None:
    rng = random.Random(plan['seed'])
    pool = [rng.randbytes(rng.randrange(THRESHOLD, 300)) for _ in range(8)]
    media = make_media(plan['media'], folder)
    try:
        if plan['steps'] == 'memory':
            inner: Any = InMemoryStepStore(max_snapshots_per_run=plan['keep'])
        else:
            inner = FileStepStore(folder / 'steps', media_store=None, max_snapshots_per_run=plan['keep'])
        steps = OffloadingStepStore(inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD))
        saved: dict[tuple[str, int], list[ModelMessage]] = {}
        for number, run in enumerate(plan['runs']):
            run_id = f'run-{number}'
            await steps.register_run(RunRecord(run_id=run_id))
            history: list[ModelMessage] = []
            for step, picks in enumerate(run):
                history = [*history, step_message(pool, picks, step)]
                saved[(run_id, step)] = history
                await steps.save_snapshot(ContinuableSnapshot(run_id=run_id, step_index=step, messages=history))
        if plan['steps'] == 'file':
            for number in plan['deleted_runs']:
                shutil.rmtree(folder / 'steps' / f'run-{number}', ignore_errors=True)

        kv = OffloadingKV(ScanningKV(), media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD))
        records: dict[str, str] = {}
        for number, picks in enumerate(plan['records']):
            value = json.dumps([binary(pool[pick]) for pick in picks])
            records[f'rec-{number}'] = value
            await kv.put(f'rec-{number}', 'v', value)
        for number in plan['dropped_records']:
            await kv.delete(f'rec-{number}', 'v')
            records.pop(f'rec-{number}', None)

        live: dict[tuple[str, int], list[ModelMessage]] = {}
        for record in await steps.list_runs():
            for snapshot in await inner.list_snapshots(run_id=record.run_id, include_interrupted=True):
                live[(record.run_id, snapshot.step_index)] = saved[(record.run_id, snapshot.step_index)]
        expected = set()
        for messages in live.values():
            expected |= payloads_of(dumped(messages))
        for value in records.values():
            expected |= payloads_of(json.loads(value))

        before = await stored(media)
        roots = [steps, kv]
        dry = await collect_garbage(media, roots, grace=timedelta(0), uris_file=folder / 'dry.txt')
        assert await stored(media) == before
        assert listed(dry, 'deletable') == before - expected
        real = await collect_garbage(media, roots, grace=timedelta(0), dry_run=False, uris_file=folder / 'real.txt')
        assert listed(real) == listed(dry, 'deletable')
        assert await stored(media) == expected

        reader = OffloadingStepStore(
            inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=False)
        )
        for (run_id, _step), messages in live.items():
            restored = await reader.list_snapshots(run_id=run_id, include_interrupted=True)
            assert dumped(messages) in [dumped(snapshot.messages) for snapshot in restored]
        fresh = OffloadingKV(kv.inner, media_store=media, options=WalkOptions(known_blobs=False))
        for key, value in records.items():
            assert json.loads(await fresh.get(key, 'v')) == json.loads(value)
    finally:
        await media.aclose()


# -- the command line ----------------------------------------------------------------------------


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, 'PYTHONPATH': str(REPO / 'src'), 'COLUMNS': '200'}
    return subprocess.run(
        [sys.executable, '-m', 'mediastash', *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


@pytest.fixture
def cli_store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A disk store with two referenced and two unreferenced old blobs, one young blob, and a lean JSON root."""

    async def build() -> dict[str, str]:
        store = DiskMediaStore(tmp_path / 'media')
        lean = await externalize_media(
            [binary(payload(10)), text_part('t' * 500)], media_store=store, threshold_bytes=THRESHOLD
        )
        (tmp_path / 'lean.json').write_text(json.dumps(lean))
        names = {'orphan-a': await store.put(payload(11)), 'orphan-b': await store.put(payload(12, 1000))}
        await age_all(store, time.time() - 2 * HOUR)
        names['young'] = await store.put(payload(13))
        return names

    return tmp_path, asyncio.run(build())


def test_cli_dry_run_then_delete(cli_store: tuple[Path, dict[str, str]]) -> None:
    folder, names = cli_store
    dry = run_cli('gc', '--store', 'media', '--roots', 'lean.json', '--grace', '1h', cwd=folder)
    assert dry.returncode == 0, dry.stderr
    assert 'dry run' in dry.stdout and 'deletable' in dry.stdout
    assert '--delete to delete 2 blobs' in dry.stdout
    assert len(list((folder / 'media').glob('*.bin'))) == 5

    real = run_cli('gc', '--store', 'media', '--roots', 'lean.json', '--grace', '90m', '--delete', cwd=folder)
    assert real.returncode == 0, real.stderr
    assert 'deleted' in real.stdout
    remaining = {f'media+sha256://{path.name[:64]}' for path in (folder / 'media').glob('*.bin')}
    assert names['orphan-a'] not in remaining and names['orphan-b'] not in remaining
    assert names['young'] in remaining and len(remaining) == 3


def test_cli_delete_sweeps_leftovers_with_nothing_to_delete(cli_store: tuple[Path, dict[str, str]]) -> None:
    """``gc --delete`` sweeps a disk store's old temporary files on every run, a dry run never (issue 17, item 7)."""
    folder, _ = cli_store
    old, fresh = old_leftovers(folder / 'media')
    blobs = sorted(path.name for path in (folder / 'media').glob('*.bin'))
    dry = run_cli('gc', '--store', 'media', '--roots', 'lean.json', '--grace', '1000h', cwd=folder)
    assert dry.returncode == 0, dry.stderr
    assert old.exists() and fresh.exists()
    real = run_cli('gc', '--store', 'media', '--roots', 'lean.json', '--grace', '1000h', '--delete', cwd=folder)
    assert real.returncode == 0, real.stderr
    assert not old.exists() and fresh.exists()
    assert sorted(path.name for path in (folder / 'media').glob('*.bin')) == blobs, 'no blob was old enough'


def test_cli_json(cli_store: tuple[Path, dict[str, str]]) -> None:
    folder, names = cli_store
    listing = folder / 'keep.txt'
    listing.write_text(names['orphan-a'] + '\n')
    result = run_cli(
        'gc', '--store', 'media', '--roots', 'lean.json', f'uris:{listing}', '--grace', '1h', '--json',
        '--uris-file', 'dry.txt', cwd=folder,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document['dry_run'] is True and 'deletable_uris' not in document
    assert (folder / 'dry.txt').read_text() == f'deletable {names["orphan-b"]}\n'
    assert document['uris_file'] == 'dry.txt' and document['shard'] is None
    assert (document['scanned'], document['referenced'], document['skipped_young']) == (5, 3, 1)
    assert document['deletable_bytes'] == 1000 and document['root_names'] == ['lean.json', str(listing)]
    assert document['roots'] == 2 and document['root_items'] == 2

    result = run_cli(
        'gc', '--store', 'media', '--roots', 'lean.json', '--grace', '1h', '--delete', '--json',
        '--uris-file', 'real.txt', cwd=folder,
    )  # fmt: skip
    document = json.loads(result.stdout)
    assert document['deleted'] == 2 and document['bytes_freed'] == 1200
    lines = sorted((folder / 'real.txt').read_text().splitlines())
    assert lines == sorted([f'deleted {names["orphan-a"]}', f'deleted {names["orphan-b"]}'])


@pytest.mark.parametrize(
    ('arguments', 'message'),
    [
        (['--roots', 'absent.json'], 'absent.json: no such file or folder'),
        (['--roots', 'odd.txt'], 'cannot tell what kind of root'),
        (['--roots', 'broken.json', '--delete'], 'broken.json: not JSON'),
        (['--roots', 'sqlite-steps:lean.json'], 'lean.json: cannot read the step store'),
    ],
)
def test_cli_user_errors_are_one_line(
    cli_store: tuple[Path, dict[str, str]], arguments: list[str], message: str
) -> None:
    folder, _ = cli_store
    (folder / 'odd.txt').write_text('hello')
    (folder / 'broken.json').write_text('{')
    result = run_cli('gc', '--store', 'media', *arguments, cwd=folder)
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    assert result.stderr.strip().count('\n') == 0 and message in result.stderr
    assert len(list((folder / 'media').glob('*.bin'))) == 5


def test_cli_bad_store_and_grace(cli_store: tuple[Path, dict[str, str]]) -> None:
    folder, _ = cli_store
    missing = run_cli('gc', '--store', 'nowhere', '--roots', 'lean.json', cwd=folder)
    assert missing.returncode == 1 and 'Traceback' not in missing.stderr and 'nowhere' in missing.stderr
    assert not (folder / 'nowhere').exists()
    grace = run_cli('gc', '--store', 'media', '--roots', 'lean.json', '--grace', 'soon', cwd=folder)
    assert grace.returncode == 2 and 'expected a duration' in grace.stderr


def test_durations() -> None:
    from mediastash.cli._args import parse_duration

    assert parse_duration('24h') == timedelta(hours=24)
    assert parse_duration('1h30m') == timedelta(minutes=90)
    assert parse_duration('2d') == timedelta(days=2)
    assert parse_duration('0') == timedelta(0)
    assert parse_duration('45s') == timedelta(seconds=45)
    assert parse_duration('3600') == timedelta(hours=1)
    for bad in ('', 'h', '-1h', '-5', '1x', '99999999999d'):
        with pytest.raises(Exception, match='duration'):
            parse_duration(bad)


def test_cli_refuses_a_database_without_the_store_table(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / 'other.db') as connection:
        connection.execute('CREATE TABLE notes (text TEXT)')
    (tmp_path / 'keep.txt').write_text('# nothing\n')
    result = run_cli('gc', '--store', 'sqlite:///other.db', '--roots', 'uris:keep.txt', cwd=tmp_path)
    assert result.returncode == 1 and 'Traceback' not in result.stderr
    assert "SQLite table 'media' does not exist" in result.stderr


# -- the examples of docs/gc.md ----------------------------------------------------------------------

GC_DOC = REPO / 'docs' / 'gc.md'


def doc_blocks() -> list[str]:
    return [textwrap.dedent(block) for block in re.findall(r'```python\n(.*?)```', GC_DOC.read_text(), re.DOTALL)]


async def test_the_docs_date_unknown_age_function_dates_harness_blobs(tmp_path: Path) -> None:
    """The page's first example runs as a program with its output checked (tests/test_docs_examples.py); its
    ``date_unknown_age`` block only defines a function, so this test calls it on a harness-written blob."""
    (date_block,) = [block for block in doc_blocks() if 'def date_unknown_age' in block]
    namespace: dict[str, Any] = {}
    exec(date_block, namespace)
    database = tmp_path / 'media.db'
    ours = SqliteMediaStore(database=database)
    try:
        theirs = await HarnessSqliteMediaStore(database=database).put(b'written by pydantic-ai-harness')
        assert await namespace['date_unknown_age'](ours) == 1
        (info,) = [info async for info in ours.iter_blobs()]
        assert info.uri == theirs and info.written_at == pytest.approx(time.time(), abs=60)
        report = await collect_garbage(ours, [set()], grace=timedelta(hours=1), dry_run=False)
        assert report.skipped_young == 1 and report.deleted == 0  # dated now: collectable after the grace period
    finally:
        await ours.aclose()


def test_progress_bars_follow_the_phases() -> None:
    import io

    from rich.console import Console

    from mediastash.cli._gc import _phase_bars
    from mediastash.cli._ui import Ui

    ui = Ui()
    screen = io.StringIO()
    ui.err = Console(file=screen, force_terminal=True, width=100)
    assert ui.shows_progress
    with _phase_bars(ui) as progress:
        progress('mark', 256, None)
        progress('mark', 300, 300)
        progress('list', 1000, 1000)
        progress('delete', 4, 8)
        progress('delete', 8, 8)
    drawn = screen.getvalue()
    assert 'reading roots' in drawn and 'listing blobs' in drawn and 'deleting' in drawn


def test_cli_on_a_single_sqlite_file(tmp_path: Path) -> None:
    """Snapshots (SqliteStepStore) and blobs (SqliteMediaStore) in one database; the root kind is sniffed."""

    async def build() -> tuple[str, str]:
        media = SqliteMediaStore(database=tmp_path / 'agent.db')
        try:
            steps = OffloadingStepStore(
                SqliteStepStore(database=tmp_path / 'agent.db', media_store=None),
                media_store=media,
                options=WalkOptions(threshold_bytes=THRESHOLD),
            )
            await steps.register_run(RunRecord(run_id='r'))
            await steps.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages_with_payloads()))
            orphan = await media.put(b'left over from a deleted run')
            await age_all(media, time.time() - 2 * DAY)
            return orphan, next(iter(await stored(media) - {orphan}))
        finally:
            await media.aclose()

    orphan, kept = asyncio.run(build())
    result = run_cli(
        'gc', '--store', 'sqlite:///agent.db', '--roots', 'agent.db', '--delete', '--json', '--uris-file', 'gone',
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (tmp_path / 'gone').read_text() == f'deleted {orphan}\n' and document['referenced'] == 2
    assert document['root_names'] == ['agent.db']
    with sqlite3.connect(tmp_path / 'agent.db') as connection:
        left = {f'media+sha256://{row[0]}' for row in connection.execute('SELECT sha256 FROM media')}
    assert orphan not in left and kept in left and len(left) == 2
