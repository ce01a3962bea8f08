"""The kit's payload-site recognisers (issue 30 item 1): each payload shape, composition, and the wrappers using them.

Each built-in recogniser finds its shape's payload strings (path, media type,
text or binary, the ``data:`` head kept) and nothing in near misses; the
pydantic-ai one finds exactly what the walker's JSON route measures; and two
wrappers that compose the registry move Anthropic, Google and ``data:`` URL
payloads through their real plain stores (an OpenAI Agents ``SQLiteSession``,
a LangGraph ``AsyncSqliteSaver``) and back, a plain read showing placeholders.
"""

from __future__ import annotations

import base64
import copy
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from mediastash import DiskMediaStore
from mediastash.errors import InvalidArgumentError
from mediastash.integrations.kit.recognisers import RECOGNISERS, PayloadSites, Site, compose, payload_size
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.integrations.openai_agents import ENVELOPE_KEY, OffloadingSession
from mediastash.uri import media_uri_for
from mediastash.walker import WalkOptions
from mediastash.walker.internal import payload_sizes

RAW = os.urandom(3000)
B64 = base64.b64encode(RAW).decode()
TEXT = 'a long line of text\n' * 200


def found(name: str, node: dict[str, Any], threshold: int = 1) -> list[tuple[tuple[str, ...], bool, str | None, str]]:
    """What the one recogniser ``name`` finds in ``node``: ``(path, text, media_type, prefix)`` per site."""
    return [(s.path, s.text, s.media_type, s.prefix) for s in compose(name).sites(node, threshold)]


BINARY = False
TEXTUAL = True

SHAPES: list[tuple[str, dict[str, Any], list[tuple[tuple[str, ...], bool, str | None, str]]]] = [
    ('pydantic-ai', {'kind': 'binary', 'data': B64, 'media_type': 'image/png'}, [(('data',), BINARY, 'image/png', '')]),
    ('pydantic-ai', {'part_kind': 'tool-return', 'content': TEXT}, [(('content',), TEXTUAL, 'text/plain', '')]),
    ('pydantic-ai', {'kind': 'text-content', 'content': TEXT}, [(('content',), TEXTUAL, 'text/plain', '')]),
    ('langchain', {'type': 'image', 'base64': B64, 'mime_type': 'image/png'}, [(('base64',), BINARY, 'image/png', '')]),
    (
        'langchain',
        {'type': 'file', 'source_type': 'base64', 'data': B64, 'mime_type': 'application/pdf'},
        [(('data',), BINARY, 'application/pdf', '')],
    ),
    ('langchain', {'type': 'text', 'text': TEXT}, [(('text',), TEXTUAL, 'text/plain', '')]),
    ('langchain-messages', {'type': 'ai', 'content': TEXT}, [(('content',), TEXTUAL, 'text/plain', '')]),
    ('chat-messages', {'role': 'tool', 'content': TEXT}, [(('content',), TEXTUAL, 'text/plain', '')]),
    (
        'openai-chat',
        {'type': 'image_url', 'image_url': {'url': f'data:image/jpeg;base64,{B64}', 'detail': 'low'}},
        [(('image_url', 'url'), BINARY, 'image/jpeg', 'data:image/jpeg;base64,')],
    ),
    (
        'openai-chat',
        {'type': 'input_audio', 'input_audio': {'data': B64, 'format': 'wav'}},
        [(('input_audio', 'data'), BINARY, 'audio/wav', '')],
    ),
    (
        'openai-chat',
        {'type': 'file', 'file': {'file_data': f'data:application/pdf;base64,{B64}', 'filename': 'a.pdf'}},
        [(('file', 'file_data'), BINARY, 'application/pdf', 'data:application/pdf;base64,')],
    ),
    (
        'openai-responses',
        {'type': 'input_image', 'image_url': f'data:image/png;base64,{B64}', 'detail': 'auto'},
        [(('image_url',), BINARY, 'image/png', 'data:image/png;base64,')],
    ),
    (
        'openai-responses',
        {'type': 'input_file', 'file_data': B64, 'filename': 'report.pdf'},
        [(('file_data',), BINARY, None, '')],
    ),
    (
        'openai-responses',
        {'type': 'function_call_output', 'call_id': 'c1', 'output': TEXT},
        [(('output',), TEXTUAL, 'text/plain', '')],
    ),
    ('openai-responses', {'type': 'output_text', 'text': TEXT}, [(('text',), TEXTUAL, 'text/plain', '')]),
    (
        'anthropic',
        {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/webp', 'data': B64}},
        [(('source', 'data'), BINARY, 'image/webp', '')],
    ),
    (
        'anthropic',
        {'type': 'document', 'source': {'type': 'base64', 'media_type': 'application/pdf', 'data': B64}},
        [(('source', 'data'), BINARY, 'application/pdf', '')],
    ),
    (
        'google',
        {'inline_data': {'mime_type': 'audio/mp3', 'data': B64}},
        [(('inline_data', 'data'), BINARY, 'audio/mp3', '')],
    ),
    (
        'google',
        {'inlineData': {'mimeType': 'image/png', 'data': B64}},
        [(('inlineData', 'data'), BINARY, 'image/png', '')],
    ),
    (
        'data-url',
        {'kind': 'thumbnail', 'preview': f'data:image/gif;charset=x;base64,{B64}', 'note': 'data: is not a URL'},
        [(('preview',), BINARY, 'image/gif', 'data:image/gif;charset=x;base64,')],
    ),
]


@pytest.mark.parametrize(('name', 'node', 'expected'), SHAPES, ids=[f'{s[0]}-{i}' for i, s in enumerate(SHAPES)])
def test_each_recogniser_finds_its_shape(
    name: str, node: dict[str, Any], expected: list[tuple[tuple[str, ...], bool, str | None, str]]
) -> None:
    assert found(name, node) == expected
    (site,) = compose(name).sites(node, 1)
    value: Any = node
    for key in site.path:
        value = value[key]
    assert value == site.whole == site.prefix + site.payload  # the string at the path, head and payload
    assert payload_size(site) == (len(TEXT) if site.text else len(RAW))


NEAR_MISSES: list[tuple[str, dict[str, Any]]] = [
    ('anthropic', {'type': 'image', 'source': {'type': 'url', 'url': 'https://example.invalid/a.png'}}),
    ('anthropic', {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': 12}}),
    ('google', {'inline_data': 'not a blob'}),
    ('google', {'file_data': {'mime_type': 'image/png', 'file_uri': 'gs://bucket/a.png'}}),
    ('data-url', {'url': f'data:text/plain,{B64}'}),  # not base64: a plain data: URL stays
    ('data-url', {'url': f'https://example.invalid/{B64}'}),
    ('data-url', {7: f'data:image/png;base64,{B64}'}),  # not a JSON key
    ('openai-responses', {'type': 'input_image', 'image_url': 'https://example.invalid/a.png'}),
    ('openai-chat', {'type': 'image_url', 'image_url': {'url': 'https://example.invalid/a.png'}}),
    ('langchain', {'type': 'image', 'url': 'https://example.invalid/a.png'}),
    ('langchain-messages', {'type': 'unknown', 'content': TEXT}),
    ('chat-messages', {'role': 'user', 'content': [{'type': 'text', 'text': 'short'}]}),
    ('pydantic-ai', {'kind': 'binary-url', 'url': 'https://example.invalid/a.png'}),
]


@pytest.mark.parametrize(('name', 'node'), NEAR_MISSES, ids=[f'{n[0]}-{i}' for i, n in enumerate(NEAR_MISSES)])
def test_near_misses_are_not_payloads(name: str, node: dict[str, Any]) -> None:
    assert found(name, node) == []


def test_every_built_in_recogniser_is_tested() -> None:
    assert {name for name, _, _ in SHAPES} == set(RECOGNISERS)


def test_a_candidate_below_the_threshold_by_length_is_not_a_site() -> None:
    node = {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': B64}}
    assert found('anthropic', node, threshold=len(B64)) != []
    assert found('anthropic', node, threshold=len(B64) + 1) == []  # no base64 of n characters decodes to more


def test_composition_keeps_order_and_the_first_recogniser_at_a_path_wins() -> None:
    """A message whose string content is a ``data:`` URL: text for ``chat-messages`` first, binary for
    ``data-url`` first; one site either way."""
    node = {'role': 'user', 'content': f'data:image/png;base64,{B64}', 'source': {'type': 'base64', 'data': B64}}
    text_first = compose('chat-messages', 'data-url', 'anthropic').sites(node, 1)
    assert [(s.path, s.text) for s in text_first] == [(('content',), True), (('source', 'data'), False)]
    binary_first = compose('data-url', 'chat-messages').sites(node, 1)
    assert [(s.path, s.text, s.media_type) for s in binary_first] == [(('content',), False, 'image/png')]


def test_an_integration_adds_its_own_recogniser_as_a_function() -> None:
    def thumbnails(node: Any, sites: PayloadSites) -> None:
        if node.get('type') == 'thumbnail':
            sites.binary(('pixels',), node.get('pixels'), node.get('format'))

    node = {'type': 'thumbnail', 'pixels': B64, 'format': 'image/bmp', 'inline_data': {'mime_type': 'x/y', 'data': B64}}
    sites = compose(thumbnails, 'google').sites(node, 1)
    assert [(s.path, s.media_type) for s in sites] == [(('pixels',), 'image/bmp'), (('inline_data', 'data'), 'x/y')]


def test_an_unknown_recogniser_is_a_typed_error_that_does_not_echo_it() -> None:
    with pytest.raises(InvalidArgumentError, match=r'^recognisers must be names from \[') as raised:
        compose('anthropic', 'secret-name-xyz')
    assert 'secret-name-xyz' not in str(raised.value)
    with pytest.raises(InvalidArgumentError, match='got an int'):
        compose(42)  # type: ignore[arg-type]


def _all_sites(tree: Any, name: str) -> list[Site]:
    """The sites ``name`` finds in every dict of a JSON tree (what a wrapper's walk over the tree would find)."""
    recognisers = compose(name)
    out: list[Site] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            sites = recognisers.sites(node, 1)
            out += sites
            taken = {site.path[0] for site in sites}
            stack.extend(value for key, value in node.items() if key not in taken)
        elif isinstance(node, list):
            stack.extend(node)
    return out


def test_the_pydantic_ai_recogniser_finds_what_the_walker_measures() -> None:
    """The registry's pydantic-ai shape and the JSON walk agree: the same payloads, the same sizes."""
    history = [
        {
            'kind': 'request',
            'parts': [
                {
                    'part_kind': 'user-prompt',
                    'content': ['look', {'kind': 'binary', 'data': B64, 'media_type': 'image/png', 'identifier': 'i'}],
                },
                {'part_kind': 'tool-return', 'tool_name': 't', 'content': TEXT + 'é' * 300},
                {'part_kind': 'tool-return', 'tool_name': 'u', 'content': [{'kind': 'text-content', 'content': TEXT}]},
            ],
        },
        {'kind': 'response', 'parts': [{'part_kind': 'text', 'content': 'short answer'}]},
    ]
    sizes = sorted(payload_size(site) for site in _all_sites(history, 'pydantic-ai'))
    assert sizes == sorted(payload_sizes(history, structured=False))
    assert sizes == sorted([12, len(TEXT), len(RAW), len(TEXT) + 600])  # 'é' is two UTF-8 bytes


# -- wrappers composing the registry, through their real plain stores -------------------------------------------

IMAGE = os.urandom(100_000)  # every one above the default threshold (64 KiB)
PDF = b'%PDF-1.7\n' + os.urandom(90_000)
AUDIO = os.urandom(80_000)
THUMB = os.urandom(70_000)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def foreign_blocks() -> list[dict[str, Any]]:
    """An Anthropic image and document, a Google part in each spelling, a ``data:`` URL under a key of its own."""
    return [
        {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': b64(IMAGE)}},
        {'type': 'document', 'source': {'type': 'base64', 'media_type': 'application/pdf', 'data': b64(PDF)}},
        {'inline_data': {'mime_type': 'audio/mp3', 'data': b64(AUDIO)}},
        {'inlineData': {'mimeType': 'image/png', 'data': b64(IMAGE)}},
        {'type': 'custom', 'thumbnail': f'data:image/jpeg;base64,{b64(THUMB)}', 'caption': 'a thumbnail'},
    ]


EXPECTED_PLACEHOLDERS = [
    ('source', 'data', 'image/png', IMAGE),
    ('source', 'data', 'application/pdf', PDF),
    ('inline_data', 'data', 'audio/mp3', AUDIO),
    ('inlineData', 'data', 'image/png', IMAGE),
    ('thumbnail', None, 'image/jpeg', THUMB),
]


def assert_placeholders(lean_blocks: list[dict[str, Any]]) -> None:
    """Each foreign block of a plain read holds a placeholder naming its blob's URI and media type, the rest kept."""
    assert len(lean_blocks) == len(EXPECTED_PLACEHOLDERS)
    for block, original, (key, inner, media_type, payload) in zip(
        lean_blocks, foreign_blocks(), EXPECTED_PLACEHOLDERS, strict=True
    ):
        value = block[key] if inner is None else block[key][inner]
        assert value.startswith(f'[mediastash placeholder: {media_type}, '), value[:80]
        assert media_uri_for(payload) in value
        others = {k: v for k, v in block.items() if k not in (key, ENVELOPE_KEY)}
        assert others == {k: v for k, v in original.items() if k != key}  # the rest of the block stays


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DiskMediaStore]:
    media = DiskMediaStore(tmp_path / 'media')
    yield media
    await media.aclose()


async def test_openai_agents_session_moves_anthropic_google_and_data_url_payloads(
    tmp_path: Path, store: DiskMediaStore
) -> None:
    inner = SQLiteSession('chat', tmp_path / 'session.db')
    wrapped = OffloadingSession(inner, media_store=store)
    items = [{'role': 'user', 'content': foreign_blocks()}, {'role': 'assistant', 'content': 'ok'}]
    original = copy.deepcopy(items)
    await wrapped.add_items(items)
    assert items == original

    assert await wrapped.get_items() == original
    fresh = OffloadingSession(
        inner, media_store=store, options=WalkOptions(known_blobs=False)
    )  # reads the store, verified
    assert await fresh.get_items() == original

    plain = await inner.get_items()  # the SDK's own reader: JSON rows in SQLite
    assert_placeholders(plain[0]['content'])
    assert plain[1] == original[1]
    assert len(json.dumps(plain)) < 10_000
    assert {uri async for uri in store.iter_uris()} == {media_uri_for(p) for p in (IMAGE, PDF, AUDIO, THUMB)}
    inner.close()


async def test_langgraph_saver_moves_anthropic_google_and_data_url_payloads(
    tmp_path: Path, store: DiskMediaStore
) -> None:
    config: Any = {'configurable': {'thread_id': 't', 'checkpoint_ns': ''}}
    values = {'blocks': foreign_blocks(), 'step': 3}
    original = copy.deepcopy(values)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'checkpoints.db')) as inner:
        saver = OffloadingCheckpointSaver(inner, media_store=store)
        checkpoint = empty_checkpoint()
        checkpoint['channel_values'] = values
        checkpoint['channel_versions'] = dict.fromkeys(values, 1)
        stored = await saver.aput(config, checkpoint, {'source': 'loop', 'step': 3, 'parents': {}}, {})
        assert values == original

        full = await OffloadingCheckpointSaver(
            inner, media_store=store, options=WalkOptions(known_blobs=False)
        ).aget_tuple(stored)
        assert full is not None and full.checkpoint['channel_values'] == original

        plain = await inner.aget_tuple(stored)
        assert plain is not None
        assert_placeholders(plain.checkpoint['channel_values']['blocks'])
    assert {uri async for uri in store.iter_uris()} == {media_uri_for(p) for p in (IMAGE, PDF, AUDIO, THUMB)}
