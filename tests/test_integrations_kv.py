"""OffloadingKV: lean values in the inner KV, restored on get/query, untouched values byte-identical."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pybase64
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai_harness.step_persistence import ContinuableSnapshot
from pydantic_ai_persistence import InMemoryAsyncKV, KVHistoryStore, KVStepStore

from mediastash import MediaNotFoundError, MemoryMediaStore
from mediastash.integrations import OffloadingKV, _splice
from mediastash.integrations._splice import LiteralCache, dumps_spliced
from mediastash.walker import WalkOptions, restore_media
from tests.integration_support import ALL_MEDIA_STORES, close_store, history, make_media_store, roundtrip
from tests.json_trees import json_trees
from tests.memory_support import drop_blob


@pytest.fixture(params=ALL_MEDIA_STORES)
async def media_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    store = await make_media_store(request.param, tmp_path, request)
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
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=media, options=WalkOptions(known_blobs=False), recent_bytes=0)
    await kv.put('pk', 'sk', json.dumps({'part_kind': 'text', 'content': 'q' * 70_000}))
    (uri,) = [u async for u in media.iter_uris()]
    drop_blob(media, uri)
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


# -- restore by splicing: the text `get`/`query` return is exactly the plain restore's JSON --------------------


def plain_text(full: Any) -> str:
    return json.dumps(full, ensure_ascii=False, separators=(',', ':'))


async def plain_restore(lean: str, media: Any) -> str:
    # OffloadingKV writes structured markers by default: the plain restore reads them too.
    return plain_text(await restore_media(json.loads(lean), media_store=media, known_blobs=False, structured=True))


async def check_round_trip(kv: OffloadingKV, inner: InMemoryAsyncKV, media: Any, tree: Any) -> None:
    """``tree`` written through ``kv`` reads back (twice: cold and warm caches) as the plain restore's text."""
    value = json.dumps(tree)
    await kv.put('p', 's', value)
    lean = await inner.get('p', 's')
    assert lean is not None
    expected = value if lean is value else await plain_restore(lean, media)
    for _ in range(2):
        got = await kv.get('p', 's')
        assert got == expected
        assert await kv.query('p') == [('s', expected)]
    assert canonical(json.loads(expected)) == canonical(tree)


def canonical(tree: Any) -> str:
    return json.dumps(tree, sort_keys=True, ensure_ascii=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=json_trees, threshold=st.sampled_from([0, 1, 4, 16]), known=st.booleans())
def test_any_tree_reads_back_as_the_plain_restore(tree: Any, threshold: int, known: bool) -> None:
    async def scenario() -> None:
        inner = InMemoryAsyncKV()
        media = MemoryMediaStore()
        kv = OffloadingKV(
            inner, media_store=media, options=WalkOptions(threshold_bytes=threshold, known_blobs=known), recent_bytes=0
        )
        await check_round_trip(kv, inner, media, tree)

    asyncio.run(scenario())


def b64(raw: bytes, urlsafe: bool = False) -> str:
    return pybase64.urlsafe_b64encode(raw).decode() if urlsafe else pybase64.b64encode_as_string(raw)


TEXT_PAYLOADS = {
    'ascii': 'plain text ' * 8_000,
    'escapes': 'quote " backslash \\ newline \n tab \t nul \x00 del \x7f / slash ' * 2_000,
    'unicode': 'ü€😀 ' * 20_000,
    'surrogates': ('\ud800 lone \udfff halves \udbff\udc00 ' * 3_000),
    'placeholder-like': '"mediastash-splice-' * 5_000,
}


@pytest.mark.parametrize('name', sorted(TEXT_PAYLOADS))
async def test_text_payloads_splice_exactly(name: str) -> None:
    inner = InMemoryAsyncKV()
    media = MemoryMediaStore()
    kv = OffloadingKV(inner, media_store=media, recent_bytes=0)
    content = TEXT_PAYLOADS[name]
    tree = {
        'parts': [
            {'part_kind': 'tool-return', 'content': content, 'tool_call_id': 'a'},
            {'part_kind': 'text', 'content': content},  # the same payload twice
            {'part_kind': 'user-prompt', 'content': [{'kind': 'text-content', 'content': content + 'x'}]},
        ],
        'note': content[:100],
    }
    await check_round_trip(kv, inner, media, tree)
    stored = await inner.get('p', 's')
    assert stored is not None and len(stored) < 3_000


@pytest.mark.parametrize('urlsafe', [False, True])
async def test_both_base64_alphabets_splice_exactly(urlsafe: bool) -> None:
    inner = InMemoryAsyncKV()
    media = MemoryMediaStore()
    kv = OffloadingKV(inner, media_store=media, recent_bytes=0)
    raw = b'\xfb\xff\xbf' * 30_000 + bytes(range(256))  # every 6-bit group, '+/' or '-_' included
    data = b64(raw, urlsafe)
    assert ('-' in data) == urlsafe and ('+' in data) != urlsafe
    tree = [
        {'kind': 'binary', 'data': data, 'media_type': 'image/png', 'identifier': 'i'},
        {'kind': 'binary', 'data': data, 'media_type': 'image/png', 'uri': 'caller-uri'},
        {'kind': 'binary', 'data': b64(raw[::-1], not urlsafe), 'media_type': None},
        {'__harness_external_media__': True, 'uri': 'caller data, not a marker'},
    ]
    await check_round_trip(kv, inner, media, tree)


async def test_caller_data_holding_the_placeholder_token_falls_back_to_the_plain_dump(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = 'ab' * 16
    monkeypatch.setattr(_splice.secrets, 'token_hex', lambda n: token)
    needle = f'mediastash-splice-{token}:'
    inner = InMemoryAsyncKV()
    media = MemoryMediaStore()
    kv = OffloadingKV(inner, media_store=media, recent_bytes=0)
    content = 'c' * 70_000
    for tree in (
        {'part_kind': 'text', 'content': content, 'x': f'{needle}0'},
        {'part_kind': 'text', 'content': content, f'"{needle}0': 1},
        [{'part_kind': 'text', 'content': content}, f'"{needle}1"'],
        [{'part_kind': 'text', 'content': content}, {'part_kind': 'text', 'content': content, 'n': f'{needle}0"'}],
    ):
        await check_round_trip(kv, inner, media, tree)
    assert len(kv._literals) == 0  # every read above took the plain path
    # A payload may hold the token: it is not in the dump that is searched.
    await check_round_trip(kv, inner, media, [{'part_kind': 'text', 'content': f'"{needle}0"' * 3_000}])
    assert len(kv._literals) == 1


def test_dumps_spliced_matches_json_dumps_and_restores_the_tree() -> None:
    literals = LiteralCache()
    big = 'é"\n' * 10
    tree: dict[str, Any] = {'a': [{'data': 'QUJD'}, {'content': big}], 'b': {'content': big}}
    slots = [(tree['a'][0], 'data'), (tree['a'][1], 'content'), (tree['b'], 'content')]
    before = copy.deepcopy(tree)
    text = dumps_spliced(tree, slots, literals)
    assert text == json.dumps(before, ensure_ascii=False, separators=(',', ':'))
    assert tree == before and tree['b']['content'] is big
    ascii_literals = LiteralCache(ensure_ascii=True)
    assert dumps_spliced(tree, slots, ascii_literals) == json.dumps(before, separators=(',', ':'))
    assert dumps_spliced(tree, [(tree['b'], 'content'), (tree['b'], 'content')], literals) == text  # a slot twice
    tree['a'][0]['data'] = 7
    assert dumps_spliced(tree, slots, literals) == json.dumps(tree, ensure_ascii=False, separators=(',', ':'))


def test_literal_cache_is_keyed_by_identity_and_bounded() -> None:
    cache = LiteralCache(max_bytes=3_000)
    clean = 'A' * 1_000
    assert cache.literal(clean) is None and len(cache) == 1  # nothing to escape: no copy kept
    dirty = 'q"' * 300
    assert cache.literal(dirty) == json.dumps(dirty, ensure_ascii=False)
    same_text = ''.join(['q"'] * 300)
    assert same_text is not dirty
    assert cache.literal(same_text) == json.dumps(dirty, ensure_ascii=False)
    assert cache.bytes_held <= cache.max_bytes
    for _ in range(5):
        cache.literal('B' * 1_000 + str(_))
    assert cache.bytes_held <= cache.max_bytes and len(cache) <= 3
    assert cache.literal('Z' * 5_000) is None and cache.bytes_held <= cache.max_bytes  # too big to keep
    cache.clear()
    assert len(cache) == 0 and cache.bytes_held == 0
    with pytest.raises(ValueError, match='max_bytes'):
        LiteralCache(-1)
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore(), options=WalkOptions(known_blobs=False))
    assert kv._literals.max_bytes == 0  # fresh payload strings on every read: nothing worth keeping
    with pytest.raises(ValueError, match='literal_bytes'):
        OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore(), literal_bytes=-1)


async def test_recent_memo_and_splice_agree_on_a_step_store() -> None:
    media = MemoryMediaStore()
    plain_inner, spliced_inner = InMemoryAsyncKV(), InMemoryAsyncKV()
    remembering = KVStepStore(OffloadingKV(plain_inner, media_store=media))
    splicing = KVStepStore(OffloadingKV(spliced_inner, media_store=media, recent_bytes=0))
    messages = history()
    for step in range(3):
        snapshot = ContinuableSnapshot(run_id='r', step_index=step, messages=messages[: step + 3])
        await remembering.save_snapshot(snapshot)
        await splicing.save_snapshot(snapshot)
    assert await plain_inner.query('run#r') == await spliced_inner.query('run#r')
    a = await remembering.list_snapshots(run_id='r')
    b = await splicing.list_snapshots(run_id='r')
    assert a == b and b[-1].messages == roundtrip(messages[:5])
