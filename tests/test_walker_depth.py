"""Deep, cyclic and odd trees: the walks, the typed path and OffloadingKV raise typed errors, never RecursionError."""

from __future__ import annotations

import base64
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent, ModelMessagesTypeAdapter, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, InMemoryStepStore
from pydantic_ai_persistence import InMemoryAsyncKV

from mediastash import (
    DiskMediaStore,
    MalformedMarker,
    MemoryMediaStore,
    TreeDepthError,
    externalize_media,
    restore_media,
)
from mediastash.integrations import OffloadingKV, OffloadingStepStore
from mediastash.markers import MARKER_KEY, TEXT_KEY, URI_KEY, URLSAFE_KEY
from mediastash.walker import WalkOptions
from mediastash.walker._common import MIN_DEPTH_LIMIT, RECURSIVE_LEVELS, find_path
from tests.integration_support import roundtrip

PAYLOAD = 'x' * 100_000
"""Text above the default threshold, so the walk has something to move at the bottom of a deep tree."""


def nested(depth: int, kind: str, leaf: object) -> Any:
    """``depth`` containers around ``leaf``; each level also holds a scalar so levels differ."""
    value = leaf
    for level in range(depth):
        value = {'down': value, 'level': level} if kind == 'dict' else [value, level]
    return value


def same(a: object, b: object) -> bool:
    """Deep equality without recursion (``==`` on a 1,000-deep tree can itself hit the recursion limit)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, dict):
            assert isinstance(y, dict)
            if list(x) != list(y):
                return False
            stack.extend((x[key], y[key]) for key in x)
        elif isinstance(x, list):
            assert isinstance(y, list)
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True


def text_part() -> dict[str, Any]:
    return {'part_kind': 'user-prompt', 'content': PAYLOAD}


@pytest.mark.parametrize('kind', ['dict', 'list'])
@pytest.mark.parametrize('depth', [600, MIN_DEPTH_LIMIT - 2])
async def test_deep_trees_round_trip(kind: str, depth: int) -> None:
    store = MemoryMediaStore()
    tree = nested(depth, kind, [text_part()])  # depth + 2 containers: the list and the part
    lean = await externalize_media(tree, media_store=store, known_blobs=False)
    assert not same(lean, tree)  # the payload at the bottom moved out
    assert len(store._blobs) == 1
    assert same(await restore_media(lean, media_store=store, known_blobs=False), tree)
    if depth == 600:
        assert await restore_media(lean, media_store=store) == tree


async def test_deep_marker_fields_and_literal_wrappers_round_trip() -> None:
    """Below the recursive levels, a marker's own fields and a literal wrapper's content are filled from the stack."""
    store = MemoryMediaStore()
    deep_meta = nested(300, 'dict', 'bottom')
    part = {'part_kind': 'user-prompt', 'content': PAYLOAD, 'meta': deep_meta, MARKER_KEY: 'caller'}
    tree = nested(RECURSIVE_LEVELS + 5, 'list', [part, {MARKER_KEY: True, 'deep': deep_meta}])
    lean = await externalize_media(tree, media_store=store, known_blobs=False)
    back = await restore_media(lean, media_store=store, known_blobs=False)
    assert back == tree


@pytest.mark.parametrize('kind', ['dict', 'list'])
@pytest.mark.parametrize('depth', [MIN_DEPTH_LIMIT + 1, 100_000])
async def test_too_deep_trees_raise_the_typed_error(kind: str, depth: int) -> None:
    tree = nested(depth, kind, 1)
    for walk in (externalize_media, restore_media):
        with pytest.raises(TreeDepthError, match=f'deeper than {MIN_DEPTH_LIMIT} levels') as caught:
            await walk(tree, media_store=MemoryMediaStore())
        assert isinstance(caught.value, ValueError) and not caught.value.cycle
        assert caught.value.limit == MIN_DEPTH_LIMIT
        step = "['down']" if kind == 'dict' else '[0]'
        assert caught.value.path.startswith('$' + step * 8) and 'more levels' in caught.value.path


@pytest.mark.parametrize('kind', ['dict', 'list'])
async def test_cyclic_trees_raise_the_typed_error_naming_the_cycle(kind: str) -> None:
    inner: dict[str, Any] = {'part_kind': 'user-prompt', 'content': 'short'}
    tree: Any = {'messages': [{'parts': [inner]}]}
    if kind == 'dict':
        inner['again'] = tree
        where = "$['messages'][0]['parts'][0]['again']"
    else:
        loop: list[Any] = [1]
        loop.append(loop)
        inner['items'] = loop
        where = "$['messages'][0]['parts'][0]['items'][1]"
    for walk in (externalize_media, restore_media):
        with pytest.raises(TreeDepthError, match='a cycle') as caught:
            await walk(tree, media_store=MemoryMediaStore())
        assert caught.value.cycle and caught.value.path == where


def test_find_path_ends_on_cycles_and_deep_trees() -> None:
    loop: dict[str, Any] = {}
    loop['self'] = loop
    assert find_path(loop, object()) == '$'
    target: dict[str, Any] = {}
    deep = nested(50_000, 'dict', target)
    path = find_path(deep, target)
    assert path.startswith("$['down']") and '(49988 more levels)' in path


async def test_text_marker_pointing_at_binary_blob_names_uri_and_path() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'\x89PNG\r\n\x1a\n\xff\xfe')
    marker = {'part_kind': 'user-prompt', MARKER_KEY: True, TEXT_KEY: True, URI_KEY: uri, 'uri': uri}
    tree = {'messages': [{'parts': [marker]}]}
    with pytest.raises(MalformedMarker, match='not UTF-8') as caught:
        await restore_media(tree, media_store=store)
    assert uri in str(caught.value)
    assert caught.value.path == "$['messages'][0]['parts'][0]"
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=store)
    await kv.inner.put('p', 's', json.dumps(tree))
    with pytest.raises(MalformedMarker, match='not UTF-8'):
        await kv.get('p', 's')


async def test_unpaired_surrogates_still_round_trip() -> None:
    store = MemoryMediaStore()
    tree = {'part_kind': 'user-prompt', 'content': '\ud800 lone ' * 20_000}
    lean = await externalize_media(tree, media_store=store, known_blobs=False)
    assert MARKER_KEY in lean
    assert await restore_media(lean, media_store=store, known_blobs=False) == tree


# -- OffloadingKV ------------------------------------------------------------------------


async def test_kv_round_trips_a_600_deep_value() -> None:
    store = MemoryMediaStore()
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=store, recent_bytes=0)
    value = json.dumps({'parts': [text_part()], 'deep': nested(600, 'dict', 1), 'list': nested(600, 'list', 2)})
    await kv.put('p', 's', value)
    stored = await kv.inner.get('p', 's')
    assert len(stored) < 60_000 and len(store._blobs) == 1
    assert json.loads(await kv.get('p', 's')) == json.loads(value)


async def test_kv_refuses_values_nested_deeper_than_json_takes() -> None:
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore())
    depth = 100_000
    value = '{"parts": [{"part_kind": "user-prompt", "content": "' + PAYLOAD + '"}], "deep": '
    value += '{"a": ' * depth + '1' + '}' * depth + '}'
    with pytest.raises(TreeDepthError, match='nested deeper') as caught:
        await kv.put('p', 's', value)
    assert isinstance(caught.value, ValueError)
    assert await kv.inner.get('p', 's') is None
    await kv.inner.put('p', 's', value.replace('"part_kind"', f'"{MARKER_KEY}": true, "part_kind"'))
    with pytest.raises(TreeDepthError):
        await kv.get('p', 's')


# -- the typed path ------------------------------------------------------------------------


def deep_messages(depth: int) -> list[Any]:
    image = BinaryContent(data=b'\xff\xfe' * 50_000, media_type='image/png')
    deep_binary = {'kind': 'binary', 'data': base64.b64encode(b'\x01' * 100_000).decode(), 'media_type': 'audio/wav'}
    return [
        ModelRequest(
            parts=[
                UserPromptPart(content=['look', image]),
                ToolReturnPart(tool_name='t', tool_call_id='c', content=nested(depth, 'dict', deep_binary)),
            ]
        )
    ]


async def test_typed_path_takes_the_depth_pydantic_serializes() -> None:
    """pydantic-core stops serializing at about 250 levels; the typed path adds no lower limit of its own."""
    store = MemoryMediaStore()
    steps = OffloadingStepStore(InMemoryStepStore(), media_store=store)
    messages = deep_messages(240)
    await steps.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages))
    assert len(store._blobs) == 2
    latest = await steps.latest_snapshot(run_id='r')
    assert latest is not None and list(latest.messages) == roundtrip(messages)


@pytest.mark.parametrize('depth', [600, 100_000])
async def test_typed_path_too_deep_raises_the_typed_error(depth: int) -> None:
    steps = OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore())
    messages = [ModelRequest(parts=[UserPromptPart(content='hi')]), *deep_messages(depth)]
    with pytest.raises(TreeDepthError, match='deeper than pydantic-core') as caught:
        await steps.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages))
    assert isinstance(caught.value, ValueError) and caught.value.path == '$[1]'


async def test_typed_path_cycle_raises_the_typed_error() -> None:
    loop: dict[str, Any] = {'note': 'n'}
    loop['self'] = loop
    messages = [ModelRequest(parts=[ToolReturnPart(tool_name='t', tool_call_id='c', content=loop)])]
    steps = OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore())
    with pytest.raises(TreeDepthError, match='cycle') as caught:
        await steps.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages))
    assert caught.value.cycle and caught.value.path == '$[0]'


async def test_typed_restore_holds_the_payload_once(tmp_path: Path) -> None:
    """A URL-safe stamped payload is validated from the raw bytes read: no base64 copy on the way.

    Measured inside the running loop: ``asyncio.run`` of Python 3.11 may build a
    repr of its result on the way out, which would count the payload again.
    """
    size = 32 << 20
    payload = bytes(range(256)) * (size // 256)  # its URL-safe base64 uses '-' and '_': the marker is stamped
    store = DiskMediaStore(tmp_path / 'media')
    inner = InMemoryStepStore()
    steps = OffloadingStepStore(inner, media_store=store, options=WalkOptions(known_blobs=False))
    messages = [ModelRequest(parts=[UserPromptPart(content=[BinaryContent(data=payload, media_type='image/png')])])]
    await steps.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages))
    lean = await inner.latest_snapshot(run_id='r')
    assert lean is not None and URLSAFE_KEY in json.dumps(
        ModelMessagesTypeAdapter.dump_python(lean.messages, mode='json')
    )
    del messages, lean
    tracemalloc.start()
    try:
        latest = await steps.latest_snapshot(run_id='r')
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert latest is not None
    content = latest.messages[0].parts[0].content
    assert isinstance(content, list) and content[0].data == payload
    assert peak < 1.5 * size, f'peak {peak / size:.2f}x the payload'
