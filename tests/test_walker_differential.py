"""Differential tests on real pydantic-ai histories: ours and pydantic-ai-harness read each other's output."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from pydantic_ai.messages import (
    BinaryContent,
    FilePart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    StructuredContent,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.media import externalize_media as harness_externalize
from pydantic_ai_harness.media import restore_media as harness_restore

from mediastash import MemoryMediaStore
from mediastash.markers import ESCAPED_KEYS, FORMAT_KEY, MARKER_KEY, URI_KEY, marker_shape
from mediastash.walker import externalize_media, restore_media

THRESHOLD = 4096


def real_history() -> list[ModelMessage]:
    photo = BinaryContent(data=b'\x89PNG\r\n\x1a\n' + os.urandom(50_000), media_type='image/png', identifier='photo')
    tiny = BinaryContent(data=b'GIF89a' + os.urandom(100), media_type='image/gif')
    pdf = BinaryContent(
        data=b'%PDF-1.7' + os.urandom(20_000), media_type='application/pdf', vendor_metadata={'detail': 'high'}
    )
    return [
        ModelRequest(parts=[UserPromptPart(['What is in this picture?', photo, tiny, TextContent('t' * 9000)])]),
        ModelResponse(
            parts=[
                ThinkingPart('thinking ' * 1000, signature='sig'),
                TextPart('Let me look at the PDF.'),
                ToolCallPart('read_pdf', {'name': 'report.pdf'}, tool_call_id='call-1'),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart('read_pdf', 'page text ' * 2000, tool_call_id='call-1'),
                UserPromptPart(['and this one', pdf, photo]),
            ]
        ),
        ModelResponse(parts=[FilePart(BinaryContent(data=os.urandom(30_000), media_type='image/webp'))]),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    'lookup',
                    [StructuredContent({'rows': list(range(50))}, content='rendered ' * 800), photo],
                    tool_call_id='call-2',
                ),
                UserPromptPart('short question'),
            ]
        ),
        ModelResponse(parts=[TextPart('answer ' * 2000)]),
    ]


def dump(messages: list[ModelMessage]) -> list[Any]:
    tree = ModelMessagesTypeAdapter.dump_python(messages, mode='json')
    assert isinstance(tree, list)
    return tree


def count_markers(tree: Any) -> int:
    return json.dumps(tree).count(f'"{MARKER_KEY}": true')


@pytest.fixture
def messages() -> list[ModelMessage]:
    return real_history()


async def test_ours_writes_what_harness_restores(messages: list[ModelMessage]) -> None:
    tree = dump(messages)
    store = MemoryMediaStore()
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=False)
    assert count_markers(lean) >= 9
    assert len(json.dumps(lean)) < len(json.dumps(tree)) // 10
    restored = await harness_restore(lean, media_store=store)
    assert restored == tree
    assert ModelMessagesTypeAdapter.validate_python(restored) == ModelMessagesTypeAdapter.validate_python(tree)


async def test_harness_writes_what_we_restore(messages: list[ModelMessage]) -> None:
    tree = dump(messages)
    store = MemoryMediaStore()
    lean = await harness_externalize(tree, media_store=store, threshold_bytes=THRESHOLD)
    restored = await restore_media(lean, media_store=store, known_blobs=False)
    assert restored == tree
    assert ModelMessagesTypeAdapter.validate_python(restored) == ModelMessagesTypeAdapter.validate_python(tree)


async def test_lean_trees_are_identical_json(messages: list[ModelMessage]) -> None:
    tree = dump(messages)
    store = MemoryMediaStore()
    ours = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=False)
    theirs = await harness_externalize(tree, media_store=store, threshold_bytes=THRESHOLD)
    assert json.dumps(ours) == json.dumps(theirs)


async def test_lean_tree_still_validates_after_restore_through_json_text(messages: list[ModelMessage]) -> None:
    """The lean tree survives a trip through JSON text (as a step store writes it) and restores."""
    store = MemoryMediaStore()
    tree = dump(messages)
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD)
    reread = json.loads(json.dumps(lean))
    restored = await restore_media(reread, media_store=store, known_blobs=False)
    assert ModelMessagesTypeAdapter.validate_python(restored) == ModelMessagesTypeAdapter.validate_python(tree)


async def test_every_step_snapshot_round_trips_with_both_readers(messages: list[ModelMessage]) -> None:
    store = MemoryMediaStore()
    for end in range(1, len(messages) + 1):
        prefix = dump(messages[:end])
        lean = await externalize_media(prefix, media_store=store, threshold_bytes=THRESHOLD)
        assert await restore_media(lean, media_store=store) == prefix
        assert await harness_restore(lean, media_store=store) == prefix


async def test_own_uri_equal_to_the_reference_survives_only_with_us() -> None:
    """The reference writer loses such a `uri` on restore; mediastash keeps the payload inline instead."""
    import base64

    from mediastash import media_uri_for

    raw = os.urandom(5000)
    node = {'kind': 'binary', 'data': base64.b64encode(raw).decode(), 'media_type': 'x/y', 'uri': media_uri_for(raw)}
    store = MemoryMediaStore()
    theirs = await harness_restore(
        await harness_externalize([node], media_store=store, threshold_bytes=1), media_store=store
    )
    assert theirs != [node]
    ours = await restore_media(await externalize_media([node], media_store=store, threshold_bytes=1), media_store=store)
    assert ours == [node]


async def test_shapeless_lookalike_is_resolved_only_by_the_harness() -> None:
    """The harness resolves any dict flagged `true` with a URI; mediastash needs the marker shape too.

    Neither writer emits such a dict (a caller dict with the flag is written
    literal-wrapped), so only hand-made input tells the readers apart; the
    property tests leave exactly these dicts out of the reader comparison.
    """
    store = MemoryMediaStore()
    uri = await store.put(b'not yours')
    lookalike = {MARKER_KEY: True, 'uri': uri, 'note': 'caller data'}
    assert await harness_restore([lookalike], media_store=store) == [{'note': 'caller data', 'data': 'bm90IHlvdXJz'}]
    assert await restore_media([lookalike], media_store=store) == [lookalike]


async def test_harness_markers_for_parts_with_reserved_keys_keep_their_shape(messages: list[ModelMessage]) -> None:
    """Escaping moves only marker-owned keys, so `kind` / `part_kind` stay on every marker the harness writes."""
    tree = dump(messages)
    for part in (tree[0]['parts'][0]['content'][1], tree[1]['parts'][0], tree[0]['parts'][0]['content'][3]):
        part.update({MARKER_KEY: 'caller', URI_KEY: 'caller-uri', FORMAT_KEY: 'caller', 'uri': 'own'})
    store = MemoryMediaStore()
    lean = await harness_externalize(tree, media_store=store, threshold_bytes=THRESHOLD)
    markers = [node for node in walk_dicts(lean) if node.get(MARKER_KEY) is True]
    assert len(markers) >= 9
    assert all(marker_shape(marker) is not None for marker in markers)
    assert sum(ESCAPED_KEYS in marker for marker in markers) == 3
    assert await restore_media(lean, media_store=store, known_blobs=False) == tree


def walk_dicts(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [found for value in node for found in walk_dicts(value)]
    if isinstance(node, dict):
        return [node, *(found for value in node.values() for found in walk_dicts(value))]
    return []


def with_structured_payloads() -> list[ModelMessage]:
    """The real history plus a large JSON tool output and a large StructuredContent prompt."""
    hits = [{'id': i, 'title': f'hit {i}', 'score': i / 9, 'tags': ['a']} for i in range(400)]
    return [
        *real_history(),
        ModelResponse(parts=[ToolCallPart('search', {'q': 'x'}, tool_call_id='call-3')]),
        ModelRequest(
            parts=[
                ToolReturnPart('search', hits, tool_call_id='call-3'),
                UserPromptPart(['and the state', StructuredContent(value={'hits': hits}, tag='ui_state')]),
            ]
        ),
    ]


@pytest.mark.parametrize('structured', [None, False])
async def test_structured_off_writes_exactly_what_the_harness_writes(structured: bool | None) -> None:
    tree = dump(with_structured_payloads())
    store = MemoryMediaStore()
    ours = await externalize_media(
        tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=False, structured=structured
    )
    theirs = await harness_externalize(tree, media_store=store, threshold_bytes=THRESHOLD)
    assert json.dumps(ours) == json.dumps(theirs)
    assert await harness_restore(ours, media_store=store) == tree
    assert await restore_media(theirs, media_store=store, known_blobs=False, structured=structured) == tree


async def test_structured_on_moves_more_and_only_we_read_it() -> None:
    tree = dump(with_structured_payloads())
    store = MemoryMediaStore()
    off = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=False)
    on = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=False, structured=True)
    assert count_markers(on) == count_markers(off) + 1  # the tool output; the prompt's text was moved already
    assert len(json.dumps(on)) < len(json.dumps(off)) - 40_000
    assert await restore_media(on, media_store=store, known_blobs=False, structured=True) == tree
    with pytest.raises(ValueError, match='escaped-keys-v2'):
        await harness_restore(on, media_store=store)
