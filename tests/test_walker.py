"""Behaviour of externalize_media / restore_media on hand-made trees."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
from collections.abc import Mapping
from typing import Any

import pytest

import mediastash.walker._batch as payloads_module
from mediastash import (
    IntegrityError,
    MalformedMarker,
    MediaContextLike,
    MediaNotFoundError,
    MemoryMediaStore,
    UnsupportedMarkerFormat,
    media_uri_for,
)
from mediastash.context import EMPTY_CONTEXT
from mediastash.known_blobs import KnownBlobCache, fingerprint
from mediastash.markers import (
    ESCAPED_KEYS,
    FORMAT_KEY,
    LITERAL_KEY,
    MARKER_KEY,
    TEXT_KEY,
    URI_KEY,
    URLSAFE_KEY,
)
from mediastash.stores.wrapper import WrapperMediaStore
from mediastash.walker import externalize_media, restore_media
from tests.walker_support import CountingStore, LyingStore, UntouchableStore, b64, history, image_part

THRESHOLD = 1000


async def roundtrip(tree: Any, store: Any, **options: Any) -> Any:
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, **options)
    back = await restore_media(lean, media_store=store, **options)
    assert back == tree
    return lean


def markers_in(tree: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get(MARKER_KEY) is True:
                found.append(node)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(tree)
    return found


async def test_binary_payload_moves_to_store_and_back() -> None:
    store = CountingStore()
    raw = os.urandom(5000)
    tree = history(image_part(0, seed=raw))
    lean = await roundtrip(tree, store, known_blobs=False)
    (marker,) = markers_in(lean)
    uri = media_uri_for(raw)
    assert marker[URI_KEY] == uri
    assert marker['uri'] == uri
    assert 'data' not in marker
    assert marker['media_type'] == 'image/png' and marker['identifier'] == 'img'
    assert marker[URLSAFE_KEY] == 'base64-urlsafe-v1'
    assert await store.get(uri) == raw
    assert store.media_type_of(uri) == 'image/png'
    assert len(json.dumps(lean)) < 1000


async def test_standard_alphabet_has_no_urlsafe_stamp() -> None:
    store = MemoryMediaStore()
    lean = await roundtrip(history(image_part(3000, urlsafe=False)), store)
    (marker,) = markers_in(lean)
    assert URLSAFE_KEY not in marker


@pytest.mark.parametrize(
    'part',
    [
        {'part_kind': 'text', 'content': 'é' * 600},
        {'part_kind': 'tool-return', 'tool_name': 't', 'content': 'x' * 1000},
        {'kind': 'text-content', 'content': 'y' * 1000},
        {'kind': 'structured-content', 'content': 'z' * 1000, 'value': {'a': 1}},
    ],
)
async def test_text_payloads_move_out(part: dict[str, Any]) -> None:
    store = MemoryMediaStore()
    lean = await roundtrip([part], store)
    (marker,) = markers_in(lean)
    assert marker[TEXT_KEY] is True and 'content' not in marker
    assert await store.get(marker[URI_KEY]) == part['content'].encode()


async def test_threshold_is_inclusive() -> None:
    store = MemoryMediaStore()
    at = {'part_kind': 'text', 'content': 'a' * THRESHOLD}
    below = {'part_kind': 'text', 'content': 'b' * (THRESHOLD - 1)}
    lean = await roundtrip([at, below, image_part(THRESHOLD), image_part(THRESHOLD - 1)], store)
    assert [MARKER_KEY in node for node in lean] == [True, False, True, False]


async def test_multibyte_text_threshold_counts_utf8_bytes() -> None:
    store = MemoryMediaStore()
    # 334 three-byte characters = 1002 UTF-8 bytes, although only 334 characters.
    lean = await roundtrip([{'part_kind': 'text', 'content': '€' * 334}], store)
    assert len(markers_in(lean)) == 1


async def test_unpaired_surrogates_move_to_the_store_and_back() -> None:
    store = CountingStore()
    text = '\ud800' + 'x' * THRESHOLD + '\udfff'
    lean = await roundtrip([{'part_kind': 'text', 'content': text}], store, known_blobs=False)
    (marker,) = markers_in(lean)
    assert marker[TEXT_KEY] is True and 'content' not in marker
    assert len(store.puts) == 1 and store.gets == [marker[URI_KEY]]  # restore read the text from the store
    assert await store.get(marker[URI_KEY]) == text.encode('utf-8', 'surrogatepass')


async def test_input_is_never_mutated() -> None:
    store = MemoryMediaStore()
    tree = history(image_part(4000), {'kind': 'text-content', 'content': 'q' * 2000})
    tree.append({MARKER_KEY: True, 'uri': 'x'})
    snapshot = copy.deepcopy(tree)
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD)
    assert tree == snapshot
    lean_snapshot = copy.deepcopy(lean)
    await restore_media(lean, media_store=store)
    assert lean == lean_snapshot


@pytest.mark.parametrize(
    'data',
    [
        base64.b64encode(os.urandom(1500)).decode()[:-1] + '!',  # invalid character
        'QR==' * 400,  # non-canonical padding bits (decodes, but does not re-encode the same)
        base64.b64encode(b'\xfb\xff' * 800).decode().replace('+', '-', 1),  # mixed alphabets
        base64.b64encode(os.urandom(1500)).decode()[:-2],  # length not a multiple of 4
        'é' * 2000,  # not ASCII
    ],
)
async def test_invalid_or_non_canonical_base64_stays_inline(data: str) -> None:
    tree = [{'kind': 'binary', 'data': data, 'media_type': 'image/png'}]
    lean = await externalize_media(tree, media_store=UntouchableStore(), threshold_bytes=THRESHOLD, known_blobs=False)
    assert lean == tree


async def test_non_canonical_tail_is_detected_after_long_valid_prefix() -> None:
    store = CountingStore()
    good = base64.b64encode(os.urandom(3000)).decode()
    tree = [{'kind': 'binary', 'data': good + 'QR==', 'media_type': 'x/y'}]
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=False)
    assert lean == tree and store.puts == []


@pytest.mark.parametrize('value', [b'bytes', {1, 2}, object(), (1, 2)])
async def test_non_json_values_raise_type_error_naming_type_and_path(value: object) -> None:
    tree = [{'parts': [{'content': value}]}]
    with pytest.raises(TypeError) as info:
        await externalize_media(tree, media_store=MemoryMediaStore(), threshold_bytes=THRESHOLD)
    message = str(info.value)
    assert type(value).__name__ in message
    assert "$[0]['parts'][0]['content']" in message
    with pytest.raises(TypeError, match=type(value).__name__):
        await restore_media(tree, media_store=MemoryMediaStore())


async def test_message_objects_are_refused() -> None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    with pytest.raises(TypeError, match='ModelRequest'):
        await externalize_media(
            [ModelRequest(parts=[UserPromptPart('hi')])], media_store=MemoryMediaStore(), threshold_bytes=1
        )


async def test_caller_dicts_with_reserved_keys_round_trip_as_data() -> None:
    store = MemoryMediaStore()
    tree = [
        {MARKER_KEY: True, 'uri': media_uri_for(b'nope'), 'kind': 'binary'},
        {LITERAL_KEY: {'a': 1}, FORMAT_KEY: 'literal-v1'},
        {LITERAL_KEY: 'x'},
    ]
    lean = await roundtrip(tree, store)
    assert all(LITERAL_KEY in node for node in lean)
    assert await restore_media(lean, media_store=store) == tree


async def test_reserved_keys_on_an_externalized_part_are_escaped_and_restored() -> None:
    store = MemoryMediaStore()
    part = image_part(2000)
    part.update({MARKER_KEY: 'caller', URI_KEY: 7, FORMAT_KEY: 'mine', ESCAPED_KEYS: [1], 'uri': 'caller-uri'})
    lean = await roundtrip([part], store)
    (marker,) = markers_in(lean)
    assert marker[FORMAT_KEY] == 'escaped-keys-v1'
    assert marker[ESCAPED_KEYS] == {MARKER_KEY: 'caller', URI_KEY: 7, ESCAPED_KEYS: [1], FORMAT_KEY: 'mine'}
    assert marker['uri'] == 'caller-uri'


async def test_resembling_a_marker_is_not_enough_to_hit_the_store() -> None:
    lookalikes = [
        {MARKER_KEY: 'true', 'uri': media_uri_for(b'a')},
        {MARKER_KEY: 1, URI_KEY: media_uri_for(b'a')},
        {'uri': media_uri_for(b'a'), 'kind': 'binary'},
        {LITERAL_KEY: {'a': 1}, FORMAT_KEY: 'not-a-literal-stamp'},
        {LITERAL_KEY: [1], FORMAT_KEY: 'literal-v1'},
    ]
    assert await restore_media(lookalikes, media_store=UntouchableStore()) == lookalikes


async def test_unknown_literal_version_is_rejected() -> None:
    tree = [{'x': {LITERAL_KEY: {'a': 1}, FORMAT_KEY: 'literal-v2'}}]
    with pytest.raises(UnsupportedMarkerFormat, match='literal-v2') as info:
        await restore_media(tree, media_store=UntouchableStore())
    assert isinstance(info.value, ValueError)
    assert "$[0]['x']" in str(info.value)


async def test_unknown_escape_version_is_rejected() -> None:
    marker = {
        MARKER_KEY: True,
        URI_KEY: media_uri_for(b'a'),
        FORMAT_KEY: 'escaped-keys-v9',
        ESCAPED_KEYS: {MARKER_KEY: 'x'},
        'kind': 'binary',
    }
    with pytest.raises(UnsupportedMarkerFormat, match='escaped-keys-v9'):
        await restore_media([marker], media_store=UntouchableStore())


async def test_escape_keys_that_are_not_ours_stay_as_data() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'payload')
    marker = {MARKER_KEY: True, URI_KEY: uri, FORMAT_KEY: 'other', ESCAPED_KEYS: {'k': 1}, 'kind': 'binary'}
    (restored,) = await restore_media([marker], media_store=store)
    assert restored == {FORMAT_KEY: 'other', ESCAPED_KEYS: {'k': 1}, 'kind': 'binary', 'data': b64(b'payload')}


@pytest.mark.parametrize(
    'marker',
    [
        {MARKER_KEY: True, URI_KEY: 5, 'kind': 'binary'},
        {MARKER_KEY: True, 'uri': None, 'kind': 'binary'},
        {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: ['x'], 'part_kind': 'text'},
    ],
)
async def test_marker_without_string_reference_is_malformed(marker: dict[str, Any]) -> None:
    with pytest.raises(MalformedMarker, match=r'\$\[1\]'):
        await restore_media([{}, marker], media_store=UntouchableStore())


class RecordingStore(WrapperMediaStore):
    """A MemoryMediaStore behind a wrapper that records every call the walker makes."""

    def __init__(self) -> None:
        super().__init__(MemoryMediaStore())
        self.calls: list[tuple[str, str]] = []

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        self.calls.append(('get', uri))
        return await super().get(uri, context=context)

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        self.calls.append(('exists', uri))
        return await super().exists(uri, context=context)

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        self.calls.append(('get_metadata', uri))
        return await super().get_metadata(uri, context=context)


SHAPELESS_LOOKALIKES: list[dict[str, Any]] = [
    {MARKER_KEY: True, 'uri': '<uri>'},  # flag and reference, nothing else
    {MARKER_KEY: True, URI_KEY: '<uri>', 'uri': '<uri>'},
    {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: '<uri>'},
    {MARKER_KEY: True, URI_KEY: '<uri>', 'kind': 'image'},  # wrong kind
    {MARKER_KEY: True, URI_KEY: '<uri>', 'kind': ['binary']},  # unhashable kind
    {MARKER_KEY: True, URI_KEY: '<uri>', 'kind': 'text-content'},  # text shape without the text flag
    {MARKER_KEY: True, URI_KEY: '<uri>', 'part_kind': 'text'},
    {MARKER_KEY: True, URI_KEY: '<uri>', 'kind': 'binary', 'data': 'AAAA'},  # payload key still present
    {MARKER_KEY: True, URI_KEY: '<uri>', 'kind': 'binary', 'data': None},
    {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: '<uri>', 'part_kind': 'text', 'content': 'still here'},
    {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: '<uri>', 'kind': 'binary'},  # binary shape with the text flag
    {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: '<uri>', 'kind': 'text'},  # not a text-content kind
    {MARKER_KEY: True, TEXT_KEY: True, URI_KEY: '<uri>', 'part_kind': 5},  # part_kind not a string
    {MARKER_KEY: True, 'kind': 'binary'},  # shape but no reference
    {MARKER_KEY: True, TEXT_KEY: True, 'part_kind': 'text'},
    {MARKER_KEY: True, URI_KEY: 5},  # a broken reference on a dict that is not a marker is data too
    {MARKER_KEY: True, TEXT_KEY: 'yes', URI_KEY: '<uri>', 'part_kind': 'text'},  # text flag not True: binary rules
]


@pytest.mark.parametrize('template', SHAPELESS_LOOKALIKES)
async def test_shapeless_lookalike_is_data_and_never_reaches_the_store(template: dict[str, Any]) -> None:
    store = RecordingStore()
    uri = await store.put(b'a payload a resolved lookalike would receive')
    lookalike = {key: uri if value == '<uri>' else value for key, value in template.items()}
    tree = {'parts': [lookalike, {'nested': [lookalike]}]}
    snapshot = copy.deepcopy(tree)
    for known_blobs in (False, True):
        assert await restore_media(tree, media_store=store, known_blobs=known_blobs) == snapshot
    assert store.calls == []
    assert tree == snapshot


async def test_fields_of_a_lookalike_are_still_walked() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'inner')
    inner = {'kind': 'binary', 'media_type': 'x/y', MARKER_KEY: True, URI_KEY: uri, 'uri': uri}
    wrapped = {LITERAL_KEY: {'a': 1}, FORMAT_KEY: 'literal-v1'}
    tree = [{MARKER_KEY: True, 'uri': uri, 'thumb': inner, 'meta': wrapped}]
    assert await restore_media(tree, media_store=store) == [
        {
            MARKER_KEY: True,
            'uri': uri,
            'thumb': {'kind': 'binary', 'media_type': 'x/y', 'data': b64(b'inner')},
            'meta': {'a': 1},
        }
    ]


@pytest.mark.parametrize(
    ('marker', 'restored'),
    [
        ({'kind': 'binary', MARKER_KEY: True, URI_KEY: '<uri>'}, {'kind': 'binary', 'data': b64(b'shaped')}),
        (
            {'part_kind': 'text', MARKER_KEY: True, TEXT_KEY: True, URI_KEY: '<uri>', 'uri': '<uri>'},
            {'part_kind': 'text', 'content': 'shaped'},
        ),
        (
            {'kind': 'structured-content', 'part_kind': None, MARKER_KEY: True, TEXT_KEY: True, 'uri': '<uri>'},
            {'kind': 'structured-content', 'part_kind': None, 'content': 'shaped'},
        ),
        (  # a text part whose caller data says kind == 'binary' and carries a `data` of its own
            {'part_kind': 'x', 'kind': 'binary', 'data': 'd', MARKER_KEY: True, TEXT_KEY: True, URI_KEY: '<uri>'},
            {'part_kind': 'x', 'kind': 'binary', 'data': 'd', 'content': 'shaped'},
        ),
        (  # escaped caller values; `kind` is not marker-owned, so it stays on the marker
            {
                'kind': 'binary',
                'content': 'caller',
                FORMAT_KEY: 'escaped-keys-v1',
                ESCAPED_KEYS: {MARKER_KEY: 'caller', TEXT_KEY: True},
                MARKER_KEY: True,
                URI_KEY: '<uri>',
            },
            {'kind': 'binary', 'content': 'caller', MARKER_KEY: 'caller', TEXT_KEY: True, 'data': b64(b'shaped')},
        ),
    ],
)
async def test_markers_with_their_source_shape_restore(marker: dict[str, Any], restored: dict[str, Any]) -> None:
    store = RecordingStore()
    uri = await store.put(b'shaped')
    marker = {key: uri if value == '<uri>' else value for key, value in marker.items()}
    assert await restore_media([marker], media_store=store, known_blobs=False) == [restored]
    assert store.calls == [('get', uri)]


async def test_legacy_binary_marker_with_only_plain_uri_restores() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'\x00\x01legacy')
    lean = [{'kind': 'binary', 'media_type': 'image/png', MARKER_KEY: True, 'uri': uri}]
    assert await restore_media(lean, media_store=store) == [
        {'kind': 'binary', 'media_type': 'image/png', 'data': b64(b'\x00\x01legacy')}
    ]


async def test_missing_blob_names_the_uri() -> None:
    uri = media_uri_for(b'gone')
    with pytest.raises(MediaNotFoundError, match=re.escape(uri)) as info:
        await restore_media([{MARKER_KEY: True, URI_KEY: uri, 'kind': 'binary'}], media_store=MemoryMediaStore())
    assert isinstance(info.value, FileNotFoundError)


async def test_restore_verifies_bytes_from_a_store_that_does_not() -> None:
    uri = media_uri_for(b'right')
    with pytest.raises(IntegrityError, match=re.escape(uri)):
        await restore_media([{MARKER_KEY: True, URI_KEY: uri, 'kind': 'binary'}], media_store=LyingStore(b'wrong'))


async def test_own_uri_equal_to_reference_keeps_payload_inline() -> None:
    raw = os.urandom(2000)
    part = image_part(0, seed=raw)
    part['uri'] = media_uri_for(raw)
    store = MemoryMediaStore()
    lean = await roundtrip([part], store)
    assert lean == [part]
    again = await externalize_media([part], media_store=store, threshold_bytes=THRESHOLD)
    assert again == [part]


async def test_identical_payloads_are_stored_once_and_fetched_once() -> None:
    store = CountingStore()
    raw = os.urandom(3000)
    tree = history(*(image_part(0, seed=raw) for _ in range(5)), image_part(0, seed=raw, urlsafe=False))
    lean = await roundtrip(tree, store, known_blobs=False)
    # Five identical strings cost one put; the same bytes spelled in the other
    # alphabet are a second string and may cost one more (idempotent) put.
    assert len(store.puts) == 2
    assert len(set(store.puts)) == 1
    assert len(store.gets) == 1
    assert len({m[URI_KEY] for m in markers_in(lean)}) == 1


async def test_store_calls_run_concurrently_under_the_bound() -> None:
    store = CountingStore(delay=0.01)
    tree = history(*(image_part(2000) for _ in range(12)))
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, max_concurrency=3)
    assert store.max_in_flight == 3
    store.max_in_flight = 0
    await restore_media(lean, media_store=store, known_blobs=False, max_concurrency=4)
    assert store.max_in_flight == 4


async def test_known_payloads_cost_no_store_call_and_no_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    store = CountingStore()
    tree = history(image_part(300_000), {'kind': 'text-content', 'content': 't' * 5000})
    first = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD)
    assert len(store.puts) == 2

    def no_decode(data: str) -> None:
        raise AssertionError('a known payload must not be decoded again')

    monkeypatch.setattr(payloads_module, 'decode_canonical_base64', no_decode)
    fresh_copy = json.loads(json.dumps(tree))  # new string objects, same content
    second = await externalize_media(fresh_copy, media_store=store, threshold_bytes=THRESHOLD)
    assert second == first
    assert len(store.puts) == 2


async def test_fingerprint_collision_never_maps_to_another_payload() -> None:
    store = CountingStore()
    base = base64.b64encode(os.urandom(60_000)).decode()
    # Change one character at a position the sampled fingerprint does not read.
    position = 30_000
    replacement = 'B' if base[position] == 'A' else 'A'
    crafted = base[:position] + replacement + base[position + 1 :]
    assert fingerprint(base) == fingerprint(crafted)
    first = await externalize_media([{'kind': 'binary', 'data': base}], media_store=store, threshold_bytes=10)
    second = await externalize_media([{'kind': 'binary', 'data': crafted}], media_store=store, threshold_bytes=10)
    assert first[0][URI_KEY] == media_uri_for(base64.b64decode(base))
    assert second[0][URI_KEY] == media_uri_for(base64.b64decode(crafted))
    assert first[0][URI_KEY] != second[0][URI_KEY]
    assert len(store.puts) == 2


async def test_cache_can_be_switched_off() -> None:
    store = CountingStore()
    tree = history(image_part(2000))
    for _ in range(3):
        await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=False)
    assert len(store.puts) == 3


async def test_cache_budget_is_respected() -> None:
    store = MemoryMediaStore()
    cache = KnownBlobCache(max_bytes=50_000)
    tree = history(*(image_part(10_000) for _ in range(10)))
    await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD, known_blobs=cache)
    assert 0 < cache.bytes_held <= 50_000
    assert len(cache) < 10


async def test_cache_belongs_to_one_store() -> None:
    cache = KnownBlobCache()
    tree = history(image_part(2000))
    await externalize_media(tree, media_store=MemoryMediaStore(), threshold_bytes=THRESHOLD, known_blobs=cache)
    with pytest.raises(ValueError, match='another media store'):
        await externalize_media(tree, media_store=MemoryMediaStore(), threshold_bytes=THRESHOLD, known_blobs=cache)


async def test_deleting_a_blob_invalidates_the_cache() -> None:
    store = CountingStore()
    tree = history(image_part(2000))
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD)
    (marker,) = markers_in(lean)
    assert await store.delete(marker[URI_KEY])
    await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD)
    assert len(store.puts) == 2
    assert await store.exists(marker[URI_KEY])


async def test_restore_serves_known_payloads_from_memory() -> None:
    store = CountingStore()
    tree = history(image_part(2000), {'part_kind': 'text', 'content': 'w' * 3000})
    lean = await externalize_media(tree, media_store=store, threshold_bytes=THRESHOLD)
    assert await restore_media(lean, media_store=store) == tree
    assert store.gets == []
    assert await restore_media(lean, media_store=store, known_blobs=False) == tree
    assert len(store.gets) == 2


async def test_nested_payloads_in_preserved_fields_go_out_too() -> None:
    store = MemoryMediaStore()
    inner = image_part(1500)
    part = {'part_kind': 'tool-return', 'content': 'c' * 1200, 'metadata': {'thumb': inner}}
    lean = await roundtrip([part], store)
    assert len(markers_in(lean)) == 2


@pytest.mark.parametrize('bad', [-1, 1.5, '10', True])
async def test_bad_threshold_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match='threshold_bytes'):
        await externalize_media([], media_store=MemoryMediaStore(), threshold_bytes=bad)


async def test_bad_concurrency_is_refused() -> None:
    with pytest.raises(ValueError, match='max_concurrency'):
        await restore_media([], media_store=MemoryMediaStore(), max_concurrency=0)


async def test_store_failure_propagates_and_no_tree_is_returned() -> None:
    class FailingStore(MemoryMediaStore):
        async def put(self, data: bytes, *, context: Any = None) -> str:
            raise OSError('disk full')

    with pytest.raises(OSError, match='disk full'):
        await externalize_media(history(image_part(2000)), media_store=FailingStore(), threshold_bytes=THRESHOLD)


async def test_scalars_and_empty_containers_pass_through() -> None:
    tree: list[Any] = [None, True, 1, 2.5, 'x', [], {}, {'a': [{}]}]
    assert await roundtrip(tree, UntouchableStore()) == tree
