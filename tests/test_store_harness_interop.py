"""Our stores as ``media_store=`` of pydantic-ai-harness's own step stores (a real, pinned dependency)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from mediastash import DiskMediaStore, MediaStore, SqliteMediaStore, media_uri_for

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
        rows = dict(connection.execute('SELECT sha256, data FROM mediastash_media').fetchall())
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
    assert json.loads(sidecar.read_text())['metadata'] == {'v': '2'}
