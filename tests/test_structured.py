"""Structured payloads: a tool return's JSON ``content`` stored as one blob behind a structured marker.

Round trips are checked strictly (``exact``: types, key order and float bits,
so ``-0.0`` differs from ``0.0`` and ``1`` from ``1.0``), through the JSON walks,
through ``OffloadingStepStore`` over the harness's File and SQLite step stores,
and through ``OffloadingKV``. Readers of marker format version 1 (the harness,
``restore_media`` without ``structured=True``) refuse the marker.
"""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pybase64
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    StructuredContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.media import _walker as harness_walker
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore, RunRecord, SqliteStepStore
from pydantic_ai_persistence import InMemoryAsyncKV, KVStepStore

from mediastash import MemoryMediaStore, UnsupportedMarkerFormat, WalkOptions, markers
from mediastash.gc import referenced_uris
from mediastash.integrations import OffloadingKV, OffloadingStepStore
from mediastash.integrations.pydantic_ai._placeholders import PLACEHOLDER_PREFIX
from mediastash.markers import (
    ESCAPED_KEYS,
    FORMAT_KEY,
    MARKER_KEY,
    TEXT_KEY,
    URI_KEY,
    escape_stash_of,
    is_structured_marker,
    marker_shape,
)
from mediastash.walker import externalize_media, restore_media
from mediastash.walker._recognise import EMBEDDED_MARKERS, canonical_json
from tests.integration_support import roundtrip

# -- strict equality ------------------------------------------------------------------------------


def exact(value: Any) -> Any:
    """A form of ``value`` that compares equal only for the same types, key order and float bits."""
    if isinstance(value, bool) or value is None:
        return ('b', value)
    if isinstance(value, int):
        return ('i', value)
    if isinstance(value, float):
        return ('f', struct.pack('>d', value))
    if isinstance(value, str):
        return ('s', value)
    if isinstance(value, list):
        return ('l', [exact(item) for item in value])
    assert isinstance(value, dict), type(value)
    return ('d', [(key, exact(item)) for key, item in value.items()])


# -- values -----------------------------------------------------------------------------------------

_strings = st.text(max_size=12) | st.text(st.characters(codec='utf-8') | st.characters(categories=['Cs']), max_size=6)
_typed_strings = st.text(max_size=12)  # pydantic's dump_json refuses unpaired surrogates, so typed messages have none
_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([-0.0, 0.0, 5e-324, 1e16, 0.1])
_ints = st.integers() | st.integers(min_value=-(2**300), max_value=2**300) | st.sampled_from([2**63, -(2**64) - 1])


def json_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | _ints | _floats | strings
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=5) | st.dictionaries(strings, children, max_size=5),
        max_leaves=30,
    )


def containers(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    values = json_values(strings)
    return st.lists(values, max_size=5) | st.dictionaries(strings, values, max_size=5)


def tool_tree(content: Any, **extra: Any) -> list[dict[str, Any]]:
    part = {'part_kind': 'tool-return', 'tool_name': 'search', 'content': content, 'tool_call_id': 'c1', **extra}
    return [{'kind': 'request', 'parts': [part]}]


def rows(count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """Search-hit-like rows: what a big tool output usually is."""
    return [
        {'id': seed * 100_000 + i, 'title': f'hit {i} \u00e9\u4e2d', 'score': i / 7, 'tags': ['a', 'b'], 'none': None}
        for i in range(count)
    ]


def part_of(lean: Any) -> dict[str, Any]:
    part: dict[str, Any] = lean[0]['parts'][0]
    return part


# -- the JSON walks -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=containers(_strings), threshold=st.sampled_from([0, 2, 64]))
def test_json_tree_round_trip_is_exact(content: Any, threshold: int) -> None:
    async def scenario() -> None:
        media = MemoryMediaStore()
        tree = tool_tree(content)
        lean = await externalize_media(tree, media_store=media, threshold_bytes=threshold, structured=True)
        raw = canonical_json(content)
        assert raw is not None
        part = part_of(lean)
        if threshold <= 2 and not any(
            marker in raw for marker in EMBEDDED_MARKERS
        ):  # compact JSON has at least 2 bytes
            assert 'content' not in part and is_structured_marker(part)
        for known in (True, False):
            back = await restore_media(lean, media_store=media, known_blobs=known, structured=True)
            assert exact(part_of(back)['content']) == exact(content)
            assert exact(back) != exact(tree) or 'content' in part  # only the part's key order may move
            assert {k: v for k, v in part_of(back).items() if k != 'content'} == {
                k: v for k, v in part_of(tree).items() if k != 'content'
            }

    asyncio.run(scenario())


async def test_marker_shape_and_blob() -> None:
    media = MemoryMediaStore()
    content = rows(2000)
    tree = tool_tree(content, metadata={'q': 'x'})
    lean = await externalize_media(tree, media_store=media, structured=True)
    part = part_of(lean)
    assert list(part) == [
        'part_kind',
        'tool_name',
        'tool_call_id',
        'metadata',
        FORMAT_KEY,
        ESCAPED_KEYS,
        MARKER_KEY,
        TEXT_KEY,
        URI_KEY,
        'uri',
    ]
    assert part[FORMAT_KEY] == markers.JSON_ESCAPE_FORMAT
    assert part[ESCAPED_KEYS] == {FORMAT_KEY: markers.JSON_FORMAT}
    assert marker_shape(part) == 'text'
    blob = await media.get(part[URI_KEY])
    assert blob == json.dumps(content, separators=(',', ':'), ensure_ascii=False).encode()
    assert (await media.stat(part[URI_KEY])).media_type == 'application/json'
    assert referenced_uris(lean) == {part[URI_KEY]}
    assert len(json.dumps(lean)) < 1000


async def test_caller_reserved_keys_are_escaped_one_level_down() -> None:
    media = MemoryMediaStore()
    tree = tool_tree(rows(2000), **{URI_KEY: 'mine', FORMAT_KEY: 'theirs', 'uri': 'own'})
    lean = await externalize_media(tree, media_store=media, structured=True)
    part = part_of(lean)
    escaped = {URI_KEY: 'mine', FORMAT_KEY: 'theirs'}
    assert part[ESCAPED_KEYS] == {FORMAT_KEY: markers.JSON_FORMAT, ESCAPED_KEYS: escaped}
    assert part['uri'] == 'own'
    back = part_of(await restore_media(lean, media_store=media, structured=True))
    assert back == part_of(tree)
    assert exact(back['content']) == exact(part_of(tree)['content'])


async def test_equal_values_are_stored_once() -> None:
    media = MemoryMediaStore()
    first, second = rows(2000), rows(2000)
    tree = tool_tree(first) + tool_tree(second) + tool_tree(rows(2000, seed=1))
    lean = await externalize_media(tree, media_store=media, structured=True)
    uris = [message['parts'][0][URI_KEY] for message in lean]
    assert uris[0] == uris[1] != uris[2]
    assert len([uri async for uri in media.iter_uris()]) == 2


async def test_small_and_embedded_contents_take_the_ordinary_walk() -> None:
    media = MemoryMediaStore()
    image = pybase64.b64encode(bytes(range(256)) * 400).decode()
    with_binary = [{'kind': 'binary', 'data': image, 'media_type': 'image/png'}, *rows(2000)]
    tree = tool_tree({'small': 1}) + tool_tree(with_binary) + tool_tree(rows(2000), **{MARKER_KEY: 5})
    lean = await externalize_media(tree, media_store=media, structured=True)
    assert part_of(lean[0:1])['content'] == {'small': 1}
    holding = part_of(lean[1:2])
    assert 'content' in holding and not is_structured_marker(holding)
    assert marker_shape(holding['content'][0]) == 'binary'  # the image still moves on its own
    assert is_structured_marker(part_of(lean[2:3]))  # the part's own reserved key is escaped, as for text
    media_content = {'kind': 'binary', 'data': image, 'media_type': 'image/png'}  # a tool returning media
    for content in (media_content, {'picture': media_content, 'rows': rows(2000)}):
        media_lean = await externalize_media(tool_tree(content), media_store=media, structured=True)
        assert not is_structured_marker(part_of(media_lean)) and 'content' in part_of(media_lean)
    assert await restore_media(lean, media_store=media, structured=True) == tree  # a marker's keys move: ==


async def test_non_json_values_are_refused_as_before() -> None:
    with pytest.raises(TypeError, match='tuple'):
        await externalize_media(tool_tree([(1, 2)] * 20_000), media_store=MemoryMediaStore(), structured=True)


async def test_structured_off_by_default_matches_the_harness() -> None:
    media = MemoryMediaStore()
    tree = tool_tree(rows(2000)) + tool_tree('x' * 70_000)
    ours = await externalize_media(tree, media_store=media)
    theirs = await harness_walker.externalize_media(tree, media_store=media, threshold_bytes=64 * 1024)
    assert json.dumps(ours) == json.dumps(theirs)
    assert part_of(ours)['content'] == part_of(tree)['content']


async def test_version_one_readers_refuse_a_structured_marker() -> None:
    media = MemoryMediaStore()
    lean = await externalize_media(tool_tree(rows(2000)), media_store=media, structured=True)
    with pytest.raises(ValueError, match='escaped-keys-v2'):
        await harness_walker.restore_media(lean, media_store=media)
    with pytest.raises(UnsupportedMarkerFormat, match=r"structured=True.*\$\[0\]\['parts'\]\[0\]"):
        await restore_media(lean, media_store=media)
    with pytest.raises(UnsupportedMarkerFormat):
        escape_stash_of(part_of(lean))  # the version 1 reading of the stash
    with pytest.raises(UnsupportedMarkerFormat):
        await restore_media(lean, media_store=media, options=WalkOptions(structured=False))


@pytest.mark.parametrize(
    'stash',
    [
        {FORMAT_KEY: 'json-v2'},
        {FORMAT_KEY: markers.JSON_FORMAT, 'x': 1},
        {FORMAT_KEY: markers.JSON_FORMAT, ESCAPED_KEYS: {'x': 1}},
    ],
)
async def test_an_unknown_structured_stash_is_refused(stash: dict[str, Any]) -> None:
    media = MemoryMediaStore()
    lean = await externalize_media(tool_tree(rows(2000)), media_store=media, structured=True)
    part_of(lean)[ESCAPED_KEYS] = stash
    if not set(stash) <= {FORMAT_KEY, ESCAPED_KEYS}:  # not a stash by its shape: caller data on a text marker
        back = part_of(await restore_media(lean, media_store=media, structured=True))
        assert back[ESCAPED_KEYS] == stash and json.loads(back['content']) == rows(2000)
        return
    with pytest.raises(UnsupportedMarkerFormat):
        await restore_media(lean, media_store=media, structured=True)


async def test_a_blob_that_is_not_json_is_a_malformed_marker() -> None:
    media = MemoryMediaStore()
    lean = await externalize_media(tool_tree(rows(2000)), media_store=media, structured=True)
    other = await media.put(b'{"not json')
    part_of(lean)[URI_KEY] = part_of(lean)['uri'] = other
    with pytest.raises(ValueError, match='not JSON'):
        await restore_media(lean, media_store=media, structured=True, known_blobs=False)


# -- OffloadingStepStore over the harness's step stores --------------------------------------------


def conversation(content: Any) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart(content='find things')]),
        ModelResponse(parts=[ToolCallPart(tool_name='search', args={'q': 'x'}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart(tool_name='search', content=content, tool_call_id='c1')]),
    ]


def harness_store(kind: str, folder: Path) -> Any:
    if kind == 'file':
        return FileStepStore(folder / 'steps', media_store=None)
    return SqliteStepStore(database=str(folder / 'steps.db'), media_store=None)


async def step_store_round_trip(kind: str, content: Any, threshold: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        inner = harness_store(kind, Path(tmp))
        store = OffloadingStepStore(
            inner, media_store=MemoryMediaStore(), options=WalkOptions(threshold_bytes=threshold)
        )
        messages = conversation(content)
        await store.register_run(RunRecord(run_id='r'))
        await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages, state='complete'))
        back = await store.latest_snapshot(run_id='r')
        assert back is not None
        assert ModelMessagesTypeAdapter.dump_json(back.messages) == ModelMessagesTypeAdapter.dump_json(messages)
        assert back.messages == roundtrip(messages)
        returned = back.messages[2].parts[0]
        assert isinstance(returned, ToolReturnPart)
        assert exact(returned.content) == exact(json.loads(json.dumps(content)))
        plain = await harness_store(kind, Path(tmp)).latest_snapshot(run_id='r')  # a reader without mediastash
        shown = plain.messages[2].parts[0].content
        raw = canonical_json(content)
        if raw is not None and any(marker in raw for marker in EMBEDDED_MARKERS):
            # JSON that may hold a payload or marker of its own (a key named part_kind...) is left to the
            # ordinary walk: with no media inside, the plain reader sees it as it was.
            assert exact(shown) == exact(json.loads(json.dumps(content)))
        else:
            assert isinstance(shown, str) and shown.startswith(PLACEHOLDER_PREFIX) and 'JSON' in shown


@pytest.mark.parametrize('kind', ['file', 'sqlite'])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=containers(_typed_strings))
@example(content=[{'part_kind': None}])  # once found by hypothesis: a key that looks like a part's
def test_step_store_round_trip_is_exact(kind: str, content: Any) -> None:
    asyncio.run(step_store_round_trip(kind, content, 0))


@pytest.mark.parametrize('kind', ['file', 'sqlite'])
async def test_step_store_moves_a_big_tool_output(kind: str, tmp_path: Path) -> None:
    await step_store_round_trip(kind, rows(3000), 64 * 1024)
    inner = harness_store(kind, tmp_path)
    store = OffloadingStepStore(inner, media_store=MemoryMediaStore())
    await store.register_run(RunRecord(run_id='r'))
    messages = conversation(rows(3000))
    await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages, state='complete'))
    plain = await harness_store(kind, tmp_path).latest_snapshot(run_id='r')
    assert len(ModelMessagesTypeAdapter.dump_json(plain.messages)) < 5000
    off_inner = harness_store(kind, tmp_path / 'off')
    off = OffloadingStepStore(off_inner, media_store=MemoryMediaStore(), options=WalkOptions(structured=False))
    await off.register_run(RunRecord(run_id='r'))
    await off.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages, state='complete'))
    kept = await harness_store(kind, tmp_path / 'off').latest_snapshot(run_id='r')
    inline = kept.messages[2].parts[0]
    assert isinstance(inline, ToolReturnPart) and inline.content == rows(3000)  # off: stays inline


# -- OffloadingKV -------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=containers(_strings), known=st.booleans())
@example(content={'part_kind': None}, known=False)  # JSON that may hold a part of its own: walked, not moved
def test_kv_round_trip_is_exact(content: Any, known: bool) -> None:
    async def scenario() -> None:
        inner = InMemoryAsyncKV()
        media = MemoryMediaStore()
        kv = OffloadingKV(
            inner, media_store=media, options=WalkOptions(threshold_bytes=0, known_blobs=known), recent_bytes=0
        )
        tree = tool_tree(content)
        await kv.put('p', 's', json.dumps(tree))
        lean = await inner.get('p', 's')
        assert lean is not None
        raw = canonical_json(content)
        if raw is not None and any(marker in raw for marker in EMBEDDED_MARKERS):
            # JSON that may hold a payload or marker of its own (a key named part_kind...) is left to the
            # ordinary walk, as in the JSON walks above: the part keeps its content, not one structured marker.
            assert 'content' in part_of(json.loads(lean))
        else:
            assert markers.JSON_ESCAPE_FORMAT in lean
        for _ in range(2):
            got = await kv.get('p', 's')
            assert got is not None
            assert exact(part_of(json.loads(got))['content']) == exact(content)

    asyncio.run(scenario())


async def test_kv_step_store_round_trip() -> None:
    inner = InMemoryAsyncKV()
    media = MemoryMediaStore()
    store = KVStepStore(OffloadingKV(inner, media_store=media))
    messages = conversation(rows(3000))
    await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages, state='complete'))
    stored = sum(len(value) for values in inner._data.values() for value in values.values())  # what the KV holds
    back = await store.latest_snapshot(run_id='r')
    assert back is not None
    assert ModelMessagesTypeAdapter.dump_json(back.messages) == ModelMessagesTypeAdapter.dump_json(messages)
    assert stored < 100_000


# -- StructuredContent: its text and value move as one blob -----------------------------------------


def structured_item(value: Any, content: str | None = None) -> dict[str, Any]:
    rendered = json.dumps(value, separators=(',', ':'), ensure_ascii=False) if content is None else content
    return {
        'content': rendered,
        'metadata': None,
        'kind': 'structured-content',
        'value': value,
        'tag': 'ui_state',
        'description': None,
    }


def prompt_tree(*items: Any) -> list[dict[str, Any]]:
    part = {'part_kind': 'user-prompt', 'content': ['look at this', *items], 'timestamp': '2026-01-01T00:00:00Z'}
    return [{'kind': 'request', 'parts': [part]}]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values(_strings), content=_strings)
def test_structured_content_round_trip_is_exact(value: Any, content: str) -> None:
    async def scenario() -> None:
        media = MemoryMediaStore()
        tree = prompt_tree(structured_item(value, content))
        lean = await externalize_media(tree, media_store=media, threshold_bytes=0, structured=True)
        marker = lean[0]['parts'][0]['content'][1]
        assert 'content' not in marker and 'value' not in marker and is_structured_marker(marker)
        assert marker[ESCAPED_KEYS] == {FORMAT_KEY: markers.JSON_FIELDS_FORMAT}
        for known in (True, False):
            back = await restore_media(lean, media_store=media, known_blobs=known, structured=True)
            item = back[0]['parts'][0]['content'][1]
            assert exact(item['value']) == exact(value) and exact(item['content']) == exact(content)
            assert item == tree[0]['parts'][0]['content'][1]

    asyncio.run(scenario())


async def test_structured_content_through_the_step_store(tmp_path: Path) -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(content=['what now?', StructuredContent(value=rows(3000), tag='hits')])]),
        ModelResponse(parts=[TextPart('noted')]),
    ]
    inner = harness_store('file', tmp_path)
    store = OffloadingStepStore(inner, media_store=MemoryMediaStore())
    await store.register_run(RunRecord(run_id='r'))
    await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages, state='complete'))
    back = await store.latest_snapshot(run_id='r')
    assert back is not None
    assert ModelMessagesTypeAdapter.dump_json(back.messages) == ModelMessagesTypeAdapter.dump_json(messages)
    plain = await harness_store('file', tmp_path).latest_snapshot(run_id='r')
    shown = plain.messages[0].parts[0].content
    assert len(ModelMessagesTypeAdapter.dump_json(plain.messages)) < 5000  # neither the text nor the value stayed
    assert any(isinstance(item, str) and item.startswith(PLACEHOLDER_PREFIX) and 'JSON' in item for item in shown)
    lean = await externalize_media(
        ModelMessagesTypeAdapter.dump_python(messages, mode='json'), media_store=MemoryMediaStore(), structured=True
    )
    with pytest.raises(ValueError, match='escaped-keys-v2'):
        await harness_walker.restore_media(lean, media_store=MemoryMediaStore())


async def test_a_fields_blob_of_another_shape_is_a_malformed_marker() -> None:
    media = MemoryMediaStore()
    lean = await externalize_media(
        prompt_tree(structured_item(rows(2000))), media_store=media, structured=True, known_blobs=False
    )
    marker = lean[0]['parts'][0]['content'][1]
    other = await media.put(b'{"value":1,"content":"x"}')
    marker[URI_KEY] = marker['uri'] = other
    with pytest.raises(ValueError, match='not JSON'):
        await restore_media(lean, media_store=media, structured=True, known_blobs=False)


# -- the command line -----------------------------------------------------------------------------------


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, '-m', 'mediastash', *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_cli_externalize_moves_structured_payloads_unless_told_not_to(tmp_path: Path) -> None:
    tree = tool_tree(rows(3000))
    (tmp_path / 'in.json').write_text(json.dumps(tree))
    report = json.loads(cli('externalize', 'in.json', 'lean.json', '--store', 'media', '--json', cwd=tmp_path).stdout)
    assert report['structured'] is True and report['blobs'] == 1
    lean = json.loads((tmp_path / 'lean.json').read_text())
    assert is_structured_marker(part_of(lean))
    cli('restore', 'lean.json', 'back.json', '--store', 'media', cwd=tmp_path)
    assert exact(json.loads((tmp_path / 'back.json').read_text())[0]['parts'][0]['content']) == exact(rows(3000))

    cli('externalize', 'in.json', 'kept.json', '--store', 'media2', '--no-structured', cwd=tmp_path)
    assert json.loads((tmp_path / 'kept.json').read_text()) == tree  # the harness's format: nothing to move here


async def test_saving_a_restored_history_again_costs_no_store_call() -> None:
    from mediastash.testing import CountingMediaStore

    media = CountingMediaStore(MemoryMediaStore())
    tree = tool_tree(rows(3000)) + prompt_tree(structured_item(rows(2000)))
    lean = await externalize_media(tree, media_store=media, structured=True)
    fresh = CountingMediaStore(media.inner)  # the same storage, so the same known-blob cache
    back = await restore_media(lean, media_store=fresh, structured=True)
    again = await externalize_media(back, media_store=fresh, structured=True)
    assert again == lean
    assert fresh.calls['put'] == 0 and fresh.calls['get'] <= 2


# -- the typed walk finds a tool return's JSON without the dump, and writes the same markers ------------

_typed_values = st.recursive(
    st.none()
    | st.booleans()
    | _ints
    | st.floats(allow_nan=False)  # infinities too: their dump is null, so the typed pass must leave them to it
    | _typed_strings
    | st.tuples(st.integers()),  # a tuple dumps as a list: also left to the dump
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_typed_strings, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.lists(_typed_values, max_size=5) | st.dictionaries(_typed_strings, _typed_values, max_size=5))
def test_the_typed_walk_writes_what_the_json_walk_writes(content: Any) -> None:
    from mediastash.integrations.pydantic_ai._typed import Offloader

    async def scenario() -> None:
        messages = conversation(content)
        options = WalkOptions(threshold_bytes=0, known_blobs=False, structured=True)
        typed, _ = await Offloader(MemoryMediaStore(), options=options).lean_json(messages)
        tree = ModelMessagesTypeAdapter.dump_python(messages, mode='json')
        plain = await externalize_media(tree, media_store=MemoryMediaStore(), options=options)
        assert json.dumps(typed) == json.dumps(plain)

    asyncio.run(scenario())


def test_each_tool_output_is_checked_once_across_saves_unless_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: every save repeats the history, and the plain-JSON check of every earlier tool output was most of
    a save's own time. The walker remembers outputs that passed, by object and exact JSON: an unchanged history is
    not checked again, an output changed in place (or a new object with the same JSON) is, and what it writes is
    what the JSON walk of the dump writes."""
    from mediastash.integrations.pydantic_ai import _typed_payloads
    from mediastash.integrations.pydantic_ai._typed import Offloader

    checked: list[int] = []
    original = _typed_payloads._plain_json

    def counting(value: Any) -> bool:
        checked.append(id(value))
        return original(value)

    monkeypatch.setattr(_typed_payloads, '_plain_json', counting)
    options = WalkOptions(threshold_bytes=1024, known_blobs=False, structured=True)
    first, second = rows(200, seed=1), rows(200, seed=2)
    history = [*conversation(first), *conversation(second)]
    offloader = Offloader(MemoryMediaStore(), options=options)

    async def lean_of(messages: list[ModelMessage]) -> list[Any]:
        lean, _ = await offloader.lean_json(messages)
        plain = await externalize_media(
            ModelMessagesTypeAdapter.dump_python(messages, mode='json'), media_store=MemoryMediaStore(), options=options
        )
        assert json.dumps(lean) == json.dumps(plain)
        return lean

    async def scenario() -> None:
        await lean_of(history)
        assert sorted(checked) == sorted([id(first), id(second)])
        checked.clear()
        await lean_of(history)
        await lean_of(history)
        assert checked == []  # unchanged: no value walked again
        first.append({'late': float('inf')})  # changed in place: checked again, and now left to the dump
        await lean_of(history)
        assert checked == [id(first)]
        checked.clear()
        copy = [*conversation(rows(200, seed=2)), *conversation(second)]  # same JSON, another object
        await lean_of(copy)
        assert len(checked) == 1 and checked[0] != id(second)

    asyncio.run(scenario())


def test_the_typed_pass_takes_plain_json_and_leaves_the_rest() -> None:
    from mediastash.integrations.pydantic_ai._typed_payloads import typed_payloads

    plain = typed_payloads(conversation(rows(3000)), 64 * 1024, structured=True)
    assert [item.structured for item in plain] == [True]
    assert plain[0].source == json.dumps(rows(3000), separators=(',', ':'), ensure_ascii=False).encode()
    for other in ([*rows(3000), float('inf')], [*rows(3000), (1, 2)], {1: 'int key', 'rows': rows(3000)}):
        assert not any(item.structured for item in typed_payloads(conversation(other), 64 * 1024, structured=True))
    assert typed_payloads(conversation(rows(3000)), 64 * 1024) == []  # off: as before
    cyclic: list[Any] = rows(3000)
    cyclic.append(cyclic)
    shared = rows(3000)
    for other in (cyclic, [shared, shared]):  # left to the dump, which refuses the cycle and copies the sharing
        assert not any(item.structured for item in typed_payloads(conversation(other), 64 * 1024, structured=True))
