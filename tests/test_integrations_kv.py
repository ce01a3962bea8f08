"""OffloadingKV: lean values in the inner KV, restored on get/query, untouched values byte-identical."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pybase64
import pytest
from pydantic_ai_harness.step_persistence import ContinuableSnapshot
from pydantic_ai_persistence import InMemoryAsyncKV, KVHistoryStore, KVStepStore

from mediastash import MediaNotFoundError, MemoryMediaStore
from mediastash.integrations import OffloadingKV
from tests.integration_support import MEDIA_STORES, close_store, history, roundtrip


@pytest.fixture(params=sorted(MEDIA_STORES))
async def media_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    store = MEDIA_STORES[request.param](tmp_path)
    yield store
    await close_store(store)


async def test_history_store_round_trip(media_store: Any) -> None:
    inner = InMemoryAsyncKV()
    store = KVHistoryStore(OffloadingKV(inner, media_store=media_store))
    messages = history()
    await store.save('conv', messages)
    raw = await inner.get('hist#conv', 'messages')
    assert raw is not None and len(raw) < 12_000
    assert await store.load('conv') == roundtrip(messages)


async def test_step_store_round_trip(media_store: Any) -> None:
    inner = InMemoryAsyncKV()
    store = KVStepStore(OffloadingKV(inner, media_store=media_store), max_snapshots_per_run=2)
    messages = history()
    for step in range(3):
        await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=step, messages=messages[: step + 3]))
    rows = await inner.query('run#r', 'snap#')
    assert len(rows) == 2 and all(len(value) < 12_000 for _, value in rows)
    latest = await store.latest_snapshot(run_id='r')
    assert latest is not None and latest.messages == roundtrip(messages)
    assert [s.step_index for s in await store.list_snapshots(run_id='r')] == [1, 2]


@pytest.mark.parametrize(
    'value',
    [
        'not json at all ' * 10_000,
        json.dumps({'content': 'short', 'part_kind': 'text'}),
        json.dumps({'data': 'x' * 100_000}),  # big, but not a payload the walker moves
        '{"content": ' + '"' + 'y' * 100_000,  # truncated JSON
        json.dumps({'__harness_external_marker_format__': 1, 'content': 'z'}),
    ],
)
async def test_values_with_nothing_to_move_pass_through_unchanged(value: str) -> None:
    inner = InMemoryAsyncKV()
    kv = OffloadingKV(inner, media_store=MemoryMediaStore())
    await kv.put('p', 's', value)
    assert await inner.get('p', 's') == value
    assert await kv.get('p', 's') == value
    assert await kv.query('p') == [('s', value)]


@pytest.mark.parametrize(
    'doc',
    [
        {'__harness_external_media__': True, 'uri': 'media+sha256://' + '0' * 64},
        {'x': {'__harness_external_literal__': {}, '__harness_external_marker_format__': 'literal-v1'}},
    ],
)
async def test_short_values_that_look_like_markers_are_escaped(doc: dict[str, Any]) -> None:
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore())
    await kv.put('p', 's', json.dumps(doc))
    assert json.loads(await kv.get('p', 's') or '') == doc


async def test_payload_document_round_trips_semantically() -> None:
    inner = InMemoryAsyncKV()
    kv = OffloadingKV(inner, media_store=MemoryMediaStore())
    doc = {
        'a': [{'kind': 'binary', 'data': pybase64.b64encode_as_string(b'\x07' * 70_000), 'media_type': 'x/y'}],
        'b': {'part_kind': 'text', 'content': 'ü' * 40_000},
        'c': {'__harness_external_media__': True, 'uri': 'caller data'},
    }
    await kv.put('p', 's', json.dumps(doc))
    stored = await inner.get('p', 's')
    assert stored is not None and len(stored) < 2_000
    assert json.loads(await kv.get('p', 's') or '') == doc
    assert await kv.get('p', 'missing') is None


async def test_missing_blob_names_uri_and_key() -> None:
    media = MemoryMediaStore()
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=media, known_blobs=False, recent_bytes=0)
    await kv.put('pk', 'sk', json.dumps({'part_kind': 'text', 'content': 'q' * 70_000}))
    (uri,) = [u async for u in media.iter_uris()]
    media.drop_for_tests(uri)
    with pytest.raises(MediaNotFoundError, match="needed by the value at 'pk'/'sk'") as caught:
        await kv.query('pk')
    assert caught.value.uri == uri


async def test_delete_and_passthrough() -> None:
    inner = InMemoryAsyncKV()
    kv = OffloadingKV(inner, media_store=MemoryMediaStore())
    await kv.put('p', 's', '{}')
    await kv.delete('p', 's')
    assert await kv.get('p', 's') is None
    assert kv._data is inner._data


async def test_recent_values_are_served_only_while_the_inner_value_is_unchanged() -> None:
    inner = InMemoryAsyncKV()
    media = MemoryMediaStore()
    kv = OffloadingKV(inner, media_store=media)
    value = json.dumps({'part_kind': 'text', 'content': 'w' * 70_000})
    await kv.put('p', 's', value)
    assert await kv.get('p', 's') is value  # no restore needed
    other = json.dumps({'part_kind': 'text', 'content': 'v' * 70_000})
    writer = OffloadingKV(inner, media_store=media)  # another writer changes the inner value behind our back
    await writer.put('p', 's', other)
    assert await kv.get('p', 's') == json.dumps(json.loads(other), separators=(',', ':'))
    with pytest.raises(ValueError, match='recent_bytes'):
        OffloadingKV(inner, media_store=media, recent_bytes=-1)
