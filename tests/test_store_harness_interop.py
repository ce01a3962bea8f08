"""Interop with pydantic-ai-harness (a real, pinned dependency).

Our stores as ``media_store=`` of the harness's step stores, and our stores and
the harness's ``DiskMediaStore`` / ``SqliteMediaStore`` sharing one folder or
one database file in both directions (differential: the harness is the oracle).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mediastash import DiskMediaStore, MediaContext, MediaNotFoundError, MediaStore, SqliteMediaStore, media_uri_for
from mediastash.stores.disk import MEDIA_TYPE_SUFFIX
from mediastash.testing.store import MISSING_URI, blob, chunked, collect

harness_steps = pytest.importorskip('pydantic_ai_harness.step_persistence')
harness_media = pytest.importorskip('pydantic_ai_harness.media')
messages_module = pytest.importorskip('pydantic_ai.messages')

IMAGE_BYTES = 200 * 1024
TOOL_TEXT_BYTES = 100 * 1024


def fake_png(size: int) -> bytes:
    """A PNG signature followed by deterministic filler: the store never parses it."""
    filler = b''.join(hashlib.sha256(str(i).encode()).digest() for i in range(size // 32 + 1))
    return (b'\x89PNG\r\n\x1a\n' + filler)[:size]


def conversation(image: bytes, tool_text: str) -> list[Any]:
    m = messages_module
    picture = m.BinaryContent(data=image, media_type='image/png')
    return [
        m.ModelRequest(parts=[m.UserPromptPart(content=['What is in this picture?', picture])]),
        m.ModelResponse(parts=[m.ToolCallPart(tool_name='describe', args={'detail': 'high'}, tool_call_id='call-1')]),
        m.ModelRequest(parts=[m.ToolReturnPart(tool_name='describe', content=tool_text, tool_call_id='call-1')]),
        m.ModelResponse(parts=[m.TextPart(content='A cat on a keyboard.')]),
    ]


def as_json(messages: list[Any]) -> Any:
    return messages_module.ModelMessagesTypeAdapter.dump_python(messages, mode='json')


def snapshot(run_id: str, messages: list[Any]) -> Any:
    return harness_steps.ContinuableSnapshot(run_id=run_id, step_index=3, messages=messages, agent_name='interop')


async def round_trip(step_store: Any, run_id: str) -> tuple[list[Any], bytes, str]:
    image = fake_png(IMAGE_BYTES)
    tool_text = 'Ünïcode tool output — ' + 'x' * TOOL_TEXT_BYTES
    messages = conversation(image, tool_text)
    await step_store.register_run(harness_steps.RunRecord(run_id=run_id, agent_name='interop'))
    await step_store.save_snapshot(snapshot(run_id, messages))
    restored = await step_store.latest_snapshot(run_id=run_id)
    assert restored is not None
    assert as_json(restored.messages) == as_json(messages)
    # Objects compare equal too once the originals take the validated shape
    # (pydantic-ai returns ``BinaryImage`` for images and pydantic's UTC tzinfo).
    adapter = messages_module.ModelMessagesTypeAdapter
    assert restored.messages == adapter.validate_python(adapter.dump_python(messages))
    return messages, image, tool_text


async def test_disk_store_under_file_step_store(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'our-media')
    assert isinstance(media, MediaStore)
    step_store = harness_steps.FileStepStore(tmp_path / 'runs', media_store=media)
    _messages, image, tool_text = await round_trip(step_store, 'run-disk')

    image_uri = media_uri_for(image)
    text_uri = media_uri_for(tool_text.encode())
    assert media.path_for(image_uri).read_bytes() == image
    assert media.path_for(text_uri).read_bytes() == tool_text.encode()
    assert sorted([uri async for uri in media.iter_uris()]) == sorted([image_uri, text_uri])
    assert not (tmp_path / 'runs' / 'media').exists()
    snapshot_files = list((tmp_path / 'runs' / 'run-disk' / 'snapshots').glob('*.json'))
    assert len(snapshot_files) == 1
    assert snapshot_files[0].stat().st_size < 10_000


async def test_sqlite_store_under_sqlite_step_store(tmp_path: Path) -> None:
    database = tmp_path / 'runs.db'
    async with SqliteMediaStore(database=database, table='mediastash_media') as media:
        step_store = harness_steps.SqliteStepStore(database=database, media_store=media)
        _messages, image, tool_text = await round_trip(step_store, 'run-sqlite')

    with closing(sqlite3.connect(database)) as connection:
        rows = dict(connection.execute('SELECT sha256, bytes FROM mediastash_media').fetchall())
        snapshot_bytes = connection.execute('SELECT SUM(LENGTH(messages)) FROM snapshots').fetchone()[0]
    assert rows == {
        media_uri_for(image).removeprefix('media+sha256://'): image,
        media_uri_for(tool_text.encode()).removeprefix('media+sha256://'): tool_text.encode(),
    }
    assert snapshot_bytes < 10_000


async def test_resaving_the_history_reuses_stored_blobs(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    step_store = harness_steps.FileStepStore(tmp_path / 'runs', media_store=media)
    messages, _image, _text = await round_trip(step_store, 'run-again')
    longer = [*messages, messages_module.ModelRequest.user_text_prompt('and now?')]
    await step_store.save_snapshot(snapshot('run-again', longer))
    restored = await step_store.latest_snapshot(run_id='run-again')
    assert restored is not None
    assert as_json(restored.messages[:4]) == as_json(messages)
    assert len([uri async for uri in media.iter_uris()]) == 2


async def test_folder_shared_with_harness_disk_store(tmp_path: Path) -> None:
    theirs = harness_media.DiskMediaStore(directory=tmp_path)
    ours = DiskMediaStore(tmp_path)
    context = harness_media.MediaContext(media_type='image/png', metadata={'written_by': 'harness'})
    uri = await theirs.put(b'written by pydantic-ai-harness', context=context)
    assert await ours.get(uri) == b'written by pydantic-ai-harness'
    assert dict(await ours.get_metadata(uri)) == {'written_by': 'harness'}
    assert [u async for u in ours.iter_uris()] == [uri]

    mine = await ours.put(b'written by mediastash')
    assert await theirs.get(mine) == b'written by mediastash'
    sidecar = ours.path_for(uri).with_name(ours.path_for(uri).name + '.meta.json')
    await ours.put(b'written by pydantic-ai-harness', context=harness_media.MediaContext(metadata={'v': '2'}))
    assert json.loads(sidecar.read_text()) == {'v': '2'}
    assert dict(await theirs.get_metadata(uri)) == {'v': '2'}


# -- one folder / one database shared with the harness's own media stores ---------------


@dataclass(frozen=True)
class Payload:
    """One blob and the context facts its ``put`` carries."""

    name: str
    data: bytes
    media_type: str | None = None
    filename: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return media_uri_for(self.data)

    def harness_context(self) -> Any:
        return harness_media.MediaContext(media_type=self.media_type, filename=self.filename, metadata=self.metadata)

    def our_context(self) -> MediaContext:
        return MediaContext(media_type=self.media_type, filename=self.filename, metadata=self.metadata)


PAYLOADS = [
    Payload('no metadata', b'a blob written without metadata', media_type='text/plain'),
    Payload(
        'metadata',
        blob(5000, seed=1),
        media_type='image/png',
        filename='cat.png',
        metadata={'tenant': 'acme', 'caption': 'Çà et là — 猫 🐈', 'empty': '', 'a': 'keys out of order'},
    ),
    Payload('empty blob', b'', metadata={'kind': 'empty'}),
    Payload('3 MiB', blob(3 << 20, seed=2), media_type='application/pdf', metadata={'size': 'large'}),
]
STORE_KINDS = ['disk', 'sqlite']


def harness_store(kind: str, where: Path) -> Any:
    if kind == 'disk':
        return harness_media.DiskMediaStore(directory=where / 'media')
    return harness_media.SqliteMediaStore(database=where / 'media.db')


def our_store(kind: str, where: Path) -> DiskMediaStore | SqliteMediaStore:
    if kind == 'disk':
        return DiskMediaStore(where / 'media')
    return SqliteMediaStore(database=where / 'media.db')


def stored_state(kind: str, where: Path) -> dict[str, Any]:
    """Everything on storage that either library reads (``created_at`` and ``<blob>.mediatype`` are ours alone)."""
    if kind == 'disk':
        paths = sorted((where / 'media').iterdir())
        return {path.name: path.read_bytes() for path in paths if not path.name.endswith(MEDIA_TYPE_SUFFIX)}
    with closing(sqlite3.connect(where / 'media.db')) as connection:
        rows = connection.execute('SELECT sha256, media_type, bytes, size_bytes, metadata FROM media ORDER BY sha256')
        return {row[0]: row[1:] for row in rows}


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def ours(kind: str, tmp_path: Path) -> AsyncIterator[DiskMediaStore | SqliteMediaStore]:
    async with our_store(kind, tmp_path) as store:
        yield store


async def test_harness_writes_ours_reads(kind: str, tmp_path: Path) -> None:
    theirs = harness_store(kind, tmp_path)
    uris = [await theirs.put(payload.data, context=payload.harness_context()) for payload in PAYLOADS]
    assert uris == [payload.uri for payload in PAYLOADS]

    async with our_store(kind, tmp_path) as ours:
        for payload in PAYLOADS:
            assert await ours.exists(payload.uri), payload.name
            assert await ours.get(payload.uri) == payload.data, payload.name
            assert dict(await ours.get_metadata(payload.uri)) == payload.metadata, payload.name
            streamed = await collect(ours.get_stream(payload.uri, chunk_size=1 << 20))
            assert b''.join(streamed) == payload.data, payload.name
            if isinstance(ours, SqliteMediaStore):
                assert await ours.media_type_of(payload.uri) == payload.media_type
        assert sorted([uri async for uri in ours.iter_uris()]) == sorted(uris)
        assert not await ours.exists(MISSING_URI)
        with pytest.raises(MediaNotFoundError):
            await ours.get_metadata(MISSING_URI)


async def test_ours_writes_harness_reads(ours: DiskMediaStore | SqliteMediaStore, kind: str, tmp_path: Path) -> None:
    for payload in PAYLOADS[:2]:
        assert await ours.put(payload.data, context=payload.our_context()) == payload.uri
    # The other two arrive through a harness context object and through streaming.
    assert await ours.put(PAYLOADS[2].data, context=PAYLOADS[2].harness_context()) == PAYLOADS[2].uri
    large = PAYLOADS[3]
    assert await ours.put_stream(chunked(large.data, 1 << 20), context=large.our_context()) == large.uri

    theirs = harness_store(kind, tmp_path)
    for payload in PAYLOADS:
        assert await theirs.exists(payload.uri), payload.name
        assert await theirs.get(payload.uri) == payload.data, payload.name
        assert dict(await theirs.get_metadata(payload.uri)) == payload.metadata, payload.name
    assert not await theirs.exists(MISSING_URI)
    with pytest.raises(FileNotFoundError):
        await theirs.get_metadata(MISSING_URI)


async def test_same_puts_leave_the_same_bytes_on_storage(kind: str, tmp_path: Path) -> None:
    (tmp_path / 'theirs').mkdir()
    (tmp_path / 'ours').mkdir()
    theirs = harness_store(kind, tmp_path / 'theirs')
    x, y = blob(3000, seed=3), blob(4000, seed=4)
    steps = [
        *PAYLOADS,
        Payload('x first', x, media_type='image/png', metadata={'v': '1', 'ü': 'ß'}),
        Payload('x with other metadata', x, metadata={'v': '2'}),
        Payload('x without metadata', x, media_type='image/jpeg'),
        Payload('y with a filename only', y, filename='y.bin'),
        Payload('y with metadata later', y, metadata={'late': 'yes'}),
    ]
    async with our_store(kind, tmp_path / 'ours') as ours:
        for step in steps:
            await theirs.put(step.data, context=step.harness_context())
            await ours.put(step.data, context=step.our_context())
            assert stored_state(kind, tmp_path / 'ours') == stored_state(kind, tmp_path / 'theirs'), step.name
            mine, their = await ours.get_metadata(step.uri), await theirs.get_metadata(step.uri)
            assert dict(mine) == dict(their), step.name
        # The first media type put is recorded (a disk store's .mediatype file; the harness records none on disk).
        assert (await ours.media_type_of(media_uri_for(x)), await ours.media_type_of(media_uri_for(y))) == (
            'image/png',
            None,
        )


async def test_alternating_writers_agree_on_metadata(
    ours: DiskMediaStore | SqliteMediaStore, kind: str, tmp_path: Path
) -> None:
    theirs = harness_store(kind, tmp_path)
    data = blob(2500, seed=5)
    writes = [
        (theirs, {'v': '1'}),
        (ours, {'v': '2'}),
        (theirs, {}),
        (ours, {}),
        (ours, {'v': '3'}),
        (theirs, {'v': '4'}),
    ]
    for step, (writer, metadata) in enumerate(writes):
        context = harness_media.MediaContext(metadata=metadata)
        assert await writer.put(data, context=context) == media_uri_for(data)
        seen_by_ours = dict(await ours.get_metadata(media_uri_for(data)))
        seen_by_theirs = dict(await theirs.get_metadata(media_uri_for(data)))
        assert seen_by_ours == seen_by_theirs, step
    # Disk: a put with metadata replaces the sidecar. SQLite: the first put's metadata stays.
    assert seen_by_ours == ({'v': '4'} if kind == 'disk' else {'v': '1'})


async def test_sqlite_table_created_by_either_side(tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    theirs = harness_media.SqliteMediaStore(database=database)
    before = await theirs.put(b'before the ALTER', context=harness_media.MediaContext(metadata={'by': 'harness'}))
    with closing(sqlite3.connect(database)) as connection:
        assert 'created_at' not in {row[1] for row in connection.execute('PRAGMA table_info(media)')}

    async with SqliteMediaStore(database=database) as ours:
        assert await ours.get(before) == b'before the ALTER'
        mine = await ours.put(b'ours', context=MediaContext(metadata={'by': 'mediastash'}))
        # The harness names its columns on insert, so the added column does not disturb it.
        after = await theirs.put(b'after the ALTER', context=harness_media.MediaContext(metadata={'by': 'harness'}))
        fresh = harness_media.SqliteMediaStore(database=database)
        after_fresh = await fresh.put(b'from a fresh harness store')
        for uri, data, metadata in [
            (before, b'before the ALTER', {'by': 'harness'}),
            (mine, b'ours', {'by': 'mediastash'}),
            (after, b'after the ALTER', {'by': 'harness'}),
            (after_fresh, b'from a fresh harness store', {}),
        ]:
            for store in (ours, theirs, fresh):
                assert await store.get(uri) == data
                assert dict(await store.get_metadata(uri)) == metadata
    with closing(sqlite3.connect(database)) as connection:
        created = dict(connection.execute('SELECT sha256, created_at FROM media').fetchall())
    assert created[mine.removeprefix('media+sha256://')] > 0
    assert created[after.removeprefix('media+sha256://')] is None

    # The other way round: a table we created, used by the harness.
    other = tmp_path / 'ours-first.db'
    async with SqliteMediaStore(database=other) as ours:
        mine = await ours.put(b'ours first', context=MediaContext(media_type='text/plain'))
        theirs = harness_media.SqliteMediaStore(database=other)
        uri = await theirs.put(b'harness second', context=harness_media.MediaContext(metadata={'k': 'v'}))
        assert await theirs.get(mine) == b'ours first'
        assert dict(await ours.get_metadata(uri)) == {'k': 'v'}
        assert await ours.media_type_of(mine) == 'text/plain'


async def test_database_created_by_harness_sqlite_step_store(tmp_path: Path) -> None:
    database = tmp_path / 'runs.db'
    step_store = harness_steps.SqliteStepStore(database=database)
    image = fake_png(100 * 1024)
    messages = conversation(image, 'a short tool result')
    await step_store.register_run(harness_steps.RunRecord(run_id='run-1', agent_name='interop'))
    await step_store.save_snapshot(snapshot('run-1', messages))
    image_uri = media_uri_for(image)
    with closing(sqlite3.connect(database)) as connection:
        assert connection.execute('SELECT sha256 FROM media').fetchall() == [
            (image_uri.removeprefix('media+sha256://'),)
        ]

    large = blob(3 << 20, seed=6)
    async with SqliteMediaStore(database=database) as ours:
        assert [uri async for uri in ours.iter_uris()] == [image_uri]
        assert await ours.get(image_uri) == image
        assert dict(await ours.get_metadata(image_uri)) == {}
        assert await ours.media_type_of(image_uri) == 'image/png'
        new = await ours.put(b'new from mediastash', context=MediaContext(metadata={'k': 'v'}))
        streamed = await ours.put_stream(chunked(large, 1 << 20))

        restored = await step_store.latest_snapshot(run_id='run-1')
        assert restored is not None
        assert as_json(restored.messages) == as_json(messages)

        # The step store keeps writing media into the altered table, and we read it.
        second_image = fake_png(120 * 1024)[::-1]
        longer = [*messages, *conversation(second_image, 'another short result')]
        await step_store.save_snapshot(snapshot('run-1', longer))
        restored = await step_store.latest_snapshot(run_id='run-1')
        assert restored is not None
        assert as_json(restored.messages) == as_json(longer)
        assert await ours.get(media_uri_for(second_image)) == second_image
        assert len([uri async for uri in ours.iter_uris()]) == 4

    theirs = harness_media.SqliteMediaStore(database=database)
    assert await theirs.get(new) == b'new from mediastash'
    assert dict(await theirs.get_metadata(new)) == {'k': 'v'}
    assert await theirs.get(streamed) == large
    assert await theirs.get(image_uri) == image
    with closing(sqlite3.connect(database)) as connection:
        columns = [row[1] for row in connection.execute('PRAGMA table_info(media)')]
    assert columns == ['sha256', 'media_type', 'bytes', 'size_bytes', 'metadata', 'created_at']
