"""``OffloadingCheckpointSaver`` on real LangGraph savers: what it recognises, what a plain reader sees, exact
restore, the known-blob cache, errors, the sync bridge and garbage collection with ``CheckpointerRoot``."""

from __future__ import annotations

import asyncio
import base64
import copy
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from mediastash import DiskMediaStore, MediaNotFoundError, MemoryMediaStore
from mediastash.errors import InvalidArgumentError, MalformedMarker, UnsupportedMarkerFormat
from mediastash.gc import CheckpointerRoot, RootReadError, collect_garbage
from mediastash.integrations.langgraph import ENVELOPE_KEY, OffloadingCheckpointSaver, SyncCallError
from mediastash.testing import CountingMediaStore
from mediastash.uri import media_uri_for
from mediastash.walker import WalkOptions

RAW = os.urandom(90_000)
B64 = base64.b64encode(RAW).decode()
OTHER = os.urandom(80_000)
TEXT = 'tool output line\n' * 6000
CONFIG: Any = {'configurable': {'thread_id': 'thread-1', 'checkpoint_ns': ''}}


def styles(data: str = B64) -> list[dict[str, Any]]:
    """One block of every recognised binary style, all holding ``data``."""
    return [
        {'type': 'image', 'base64': data, 'mime_type': 'image/png', 'id': 'block-1'},
        {'type': 'image', 'source_type': 'base64', 'data': data, 'mime_type': 'image/png'},
        {'type': 'image_url', 'image_url': {'url': f'data:image/png;base64,{data}', 'detail': 'high'}},
        {'type': 'image_url', 'image_url': f'data:image/jpeg;base64,{data}'},
        {'type': 'input_audio', 'input_audio': {'data': data, 'format': 'wav'}},
        {'type': 'file', 'file': {'file_data': f'data:application/pdf;base64,{data}', 'filename': 'a.pdf'}},
        {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': data}},
        {'type': 'document', 'source': {'type': 'base64', 'media_type': 'application/pdf', 'data': data}},
        {'type': 'audio', 'base64': data, 'mime_type': 'audio/wav'},
        {'type': 'text', 'text': TEXT},
    ]


def history() -> list[Any]:
    return [
        HumanMessage(content=[{'type': 'text', 'text': 'look at these'}, *styles()], id='human-1'),
        AIMessage(content=TEXT, id='ai-1', tool_calls=[{'name': 'grep', 'args': {'q': 'x'}, 'id': 'call-1'}]),
        ToolMessage(content=TEXT + 'more', tool_call_id='call-1', id='tool-1', artifact={'k': 1}),
        AIMessage(content='short answer', id='ai-2'),
    ]


def checkpoint(values: dict[str, Any]) -> Checkpoint:
    cp = empty_checkpoint()
    cp['channel_values'] = values
    cp['channel_versions'] = dict.fromkeys(values, 1)
    return cp


async def put(saver: Any, values: dict[str, Any], config: Any = CONFIG) -> Any:
    cp = checkpoint(values)
    return await saver.aput(config, cp, {'source': 'loop', 'step': 1, 'parents': {}}, cp['channel_versions'])


async def saved_history(store: Any) -> tuple[InMemorySaver, OffloadingCheckpointSaver, Any, Any]:
    """An ``InMemorySaver``, the wrapper around it, the config of a checkpoint of ``history()``, its lean tuple."""
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=store)
    stored = await put(saver, {'messages': history()})
    plain = await inner.aget_tuple(stored)
    assert plain is not None
    return inner, saver, stored, plain


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DiskMediaStore]:
    media = DiskMediaStore(tmp_path / 'media')
    yield media
    await media.aclose()


def strings(value: Any) -> list[str]:
    """Every string inside a value (dicts, lists, tuples, messages' content and additional_kwargs)."""
    found: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        elif hasattr(node, 'content'):
            stack.extend([node.content, node.additional_kwargs])
    return found


async def test_every_style_round_trips_exactly_and_the_plain_read_holds_placeholders(store: DiskMediaStore) -> None:
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=store)
    messages = history()
    original = copy.deepcopy(messages)
    stored = await put(saver, {'messages': messages, 'count': 3})
    assert messages == original  # the caller's objects are not changed

    full = await saver.aget_tuple(stored)
    assert full is not None
    restored = full.checkpoint['channel_values']['messages']
    assert restored == original
    assert [type(m) for m in restored] == [type(m) for m in original]
    assert [m.id for m in restored] == ['human-1', 'ai-1', 'tool-1', 'ai-2']
    assert restored[2].artifact == {'k': 1} and restored[1].tool_calls[0]['id'] == 'call-1'
    assert full.checkpoint['channel_values']['count'] == 3
    counting = CountingMediaStore(store)
    cold = OffloadingCheckpointSaver(
        inner, media_store=counting, options=WalkOptions(known_blobs=False)
    )  # no memory: the store
    again = await cold.aget_tuple(stored)
    assert again is not None and again.checkpoint['channel_values']['messages'] == original
    assert counting.calls['get'] == 3  # each distinct blob read once, for eleven payloads

    plain = await inner.aget_tuple(stored)
    assert plain is not None
    lean = plain.checkpoint['channel_values']['messages']
    assert [type(m) for m in lean] == [type(m) for m in original] and [m.id for m in lean] == [m.id for m in original]
    texts = strings(lean)
    assert max(map(len, texts)) < 1000  # every payload left
    uri = media_uri_for(RAW)
    placeholders = [text for text in texts if text.startswith('[mediastash placeholder: ')]
    assert sum(uri in text for text in placeholders) == 9  # every binary style names the one stored blob
    assert any('stored as media+sha256://' in text and 'text' in text for text in placeholders)
    blocks = lean[0].content
    assert blocks[0] == {'type': 'text', 'text': 'look at these'}
    assert blocks[1]['type'] == 'image' and blocks[1]['mime_type'] == 'image/png' and blocks[1]['id'] == 'block-1'
    assert blocks[3]['image_url']['detail'] == 'high'  # the rest of a block stays
    assert ENVELOPE_KEY in blocks[1] and ENVELOPE_KEY in lean[1].additional_kwargs
    assert lean[3] == original[3]  # nothing large: unchanged
    assert await store.get(uri) == RAW
    assert await store.get(media_uri_for(TEXT.encode())) == TEXT.encode()


async def test_dict_forms_anywhere_in_the_state_round_trip(store: DiskMediaStore) -> None:
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=store)
    values = {
        'openai_messages': [{'role': 'user', 'content': styles()[2:4]}, {'role': 'tool', 'content': TEXT}],
        'nested': {'turns': ({'history': messages_to_dict(history())},), 'n': [1, 2.5, None, True]},
        'block': styles()[0],
    }
    original = copy.deepcopy(values)
    stored = await put(saver, values)
    full = await OffloadingCheckpointSaver(inner, media_store=store, options=WalkOptions(known_blobs=False)).aget_tuple(
        stored
    )
    assert full is not None
    assert full == await saver.aget_tuple(stored)  # the same from the wrapper that remembers what it wrote
    reference = InMemorySaver()  # what the saver's own serializer makes of the values (a tuple reads as a list)
    expected = await reference.aget_tuple(await put(reference, original))
    assert expected is not None
    assert full.checkpoint['channel_values'] == expected.checkpoint['channel_values']
    assert full.checkpoint['channel_values']['block'] == original['block']
    assert full.checkpoint['channel_values']['openai_messages'] == original['openai_messages']
    assert values == original
    plain = await inner.aget_tuple(stored)
    assert plain is not None
    assert max(map(len, strings(plain.checkpoint['channel_values']))) < 1000


async def test_small_and_non_canonical_payloads_stay_inline(store: DiskMediaStore) -> None:
    inner = InMemorySaver()
    counting = CountingMediaStore(store)
    saver = OffloadingCheckpointSaver(inner, media_store=counting)
    small = base64.b64encode(os.urandom(1000)).decode()
    wrapped_lines = '\n'.join(B64[i : i + 76] for i in range(0, len(B64), 76))  # MIME-style: not canonical
    values = {
        'messages': [
            HumanMessage(content=[{'type': 'image', 'base64': small, 'mime_type': 'image/png'}], id='a'),
            HumanMessage(content=[{'type': 'image', 'base64': wrapped_lines, 'mime_type': 'image/png'}], id='b'),
            HumanMessage(content=[{'type': 'image_url', 'image_url': {'url': 'https://example.test/x.png'}}], id='c'),
        ],
        'plain_text': TEXT,  # a bare string is not a message payload
    }
    stored = await put(saver, values)
    assert counting.calls['put'] == 0
    plain = await inner.aget_tuple(stored)
    assert plain is not None and plain.checkpoint['channel_values'] == values


async def test_a_threshold_of_zero_moves_every_recognised_payload(store: DiskMediaStore) -> None:
    saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=store, options=WalkOptions(threshold_bytes=0))
    values = {'messages': [HumanMessage(content='hi', id='h'), AIMessage(content='', id='a')]}
    stored = await put(saver, values)
    plain = await saver.inner.aget_tuple(stored)
    assert plain is not None
    assert plain.checkpoint['channel_values']['messages'][0].content.startswith('[mediastash placeholder: text')
    full = await saver.aget_tuple(stored)
    assert full is not None and full.checkpoint['channel_values'] == values


async def test_resaving_known_media_costs_no_put_and_one_blob_per_payload(store: DiskMediaStore) -> None:
    counting = CountingMediaStore(store)
    saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=counting)
    messages = history()
    await put(saver, {'messages': messages})
    assert counting.calls['put'] == 3  # the image (in nine styles) and the two distinct texts
    counting.reset()
    more = [*messages, HumanMessage(content=[styles(base64.b64encode(OTHER).decode())[0]], id='h2')]
    stored = await put(saver, {'messages': more})
    assert counting.calls['put'] == 1  # only the new image
    assert counting.calls['exists'] == counting.calls['exists_many'] == 0
    counting.reset()
    full = await saver.aget_tuple(stored)
    assert full is not None and full.checkpoint['channel_values']['messages'] == more
    assert counting.calls['get'] == 0  # served by the known-blob cache


async def test_the_same_bytes_are_one_blob_for_langgraph_and_the_json_walk(store: DiskMediaStore) -> None:
    from mediastash.walker import externalize_media

    saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=store)
    await put(saver, {'messages': history()})
    lean = await externalize_media(
        [{'kind': 'binary', 'data': B64, 'media_type': 'image/png'}], media_store=store, known_blobs=False
    )
    assert lean[0]['uri'] == media_uri_for(RAW)
    assert sorted([uri async for uri in store.iter_uris()]) == sorted(
        {media_uri_for(RAW), media_uri_for(TEXT.encode()), media_uri_for((TEXT + 'more').encode())}
    )


async def test_pending_writes_are_offloaded_and_restored(store: DiskMediaStore) -> None:
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=store)
    stored = await put(saver, {})
    writes = [('messages', history()), ('other', {'role': 'assistant', 'content': TEXT})]
    await saver.aput_writes(stored, writes, 'task-1')
    full = await OffloadingCheckpointSaver(inner, media_store=store, recent_bytes=0).aget_tuple(stored)
    assert full is not None and full.pending_writes is not None
    assert [(w[1], w[2]) for w in full.pending_writes] == writes
    plain = await inner.aget_tuple(stored)
    assert plain is not None and plain.pending_writes is not None
    assert max(map(len, strings([w[2] for w in plain.pending_writes]))) < 1000
    listed = [found async for found in saver.alist(None)]
    assert len(listed) == 1 and listed[0].pending_writes == full.pending_writes


async def test_async_sqlite_plain_read_and_wrapped_read(tmp_path: Path, store: DiskMediaStore) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'cp.db')) as inner:
        saver = OffloadingCheckpointSaver(inner, media_store=store)
        stored = await put(saver, {'messages': history()})
        full = await saver.aget_tuple(stored)
        assert full is not None and full.checkpoint['channel_values']['messages'] == history()
        plain = await inner.aget_tuple(stored)
        assert plain is not None
        assert max(map(len, strings(plain.checkpoint['channel_values']))) < 1000


async def test_a_missing_blob_fails_loudly(store: DiskMediaStore) -> None:
    saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=store)
    stored = await put(saver, {'messages': history()})
    other = OffloadingCheckpointSaver(
        saver.inner, media_store=MemoryMediaStore(), options=WalkOptions(known_blobs=False)
    )
    with pytest.raises(MediaNotFoundError):
        await other.aget_tuple(stored)


async def test_envelopes_this_reader_does_not_know_fail_loudly(store: DiskMediaStore) -> None:
    inner, saver, _, plain = await saved_history(store)
    lean = plain.checkpoint['channel_values']['messages']
    block = lean[0].content[1]
    newer = {**block, ENVELOPE_KEY: {**block[ENVELOPE_KEY], 'format': 'mediastash-langgraph-v2'}}
    broken = {**block, ENVELOPE_KEY: {**block[ENVELOPE_KEY], 'slots': []}}
    for bad, error in ((newer, UnsupportedMarkerFormat), (broken, MalformedMarker)):
        message = lean[0].model_copy(update={'content': [bad]})
        config = await put(inner, {'messages': [message]}, {'configurable': {'thread_id': 'x', 'checkpoint_ns': ''}})
        with pytest.raises(error, match=r"\$\[0\]\[0\]\['content'\]\[0\]"):
            await saver.aget_tuple(config)


async def test_a_plain_read_written_back_stays_lean_and_restores(store: DiskMediaStore) -> None:
    _, saver, _, plain = await saved_history(store)
    again = await put(
        saver, plain.checkpoint['channel_values'], {'configurable': {'thread_id': 'y', 'checkpoint_ns': ''}}
    )
    full = await saver.aget_tuple(again)
    assert full is not None and full.checkpoint['channel_values']['messages'] == history()


async def test_the_reserved_key_in_caller_data_is_refused(store: DiskMediaStore) -> None:
    saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=store)
    with pytest.raises(InvalidArgumentError, match=ENVELOPE_KEY) as raised:
        await put(saver, {'data': [{ENVELOPE_KEY: 'SECRET-VALUE'}]})
    assert 'SECRET-VALUE' not in str(raised.value)
    assert "$[0][0]['__mediastash_offloaded__']" in str(raised.value)


def test_bad_settings_are_typed_errors() -> None:
    with pytest.raises(InvalidArgumentError, match='threshold_bytes'):
        OffloadingCheckpointSaver(
            InMemorySaver(), media_store=MemoryMediaStore(), options=WalkOptions(threshold_bytes=-1)
        )
    with pytest.raises(InvalidArgumentError, match='recent_bytes'):
        OffloadingCheckpointSaver(InMemorySaver(), media_store=MemoryMediaStore(), recent_bytes=-1)
    with pytest.raises(TypeError, match='BaseCheckpointSaver'):
        OffloadingCheckpointSaver(object(), media_store=MemoryMediaStore())  # type: ignore[arg-type]


async def test_everything_else_delegates(store: DiskMediaStore) -> None:
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=store)
    assert saver.get_next_version(None, None).split('.')[0] == inner.get_next_version(None, None).split('.')[0]
    assert saver.config_specs == inner.config_specs
    assert saver.serde is not None
    await put(saver, {'messages': history()})
    await saver.adelete_thread('thread-1')
    assert await saver.aget_tuple(CONFIG) is None
    assert await store.exists(media_uri_for(RAW))  # blobs stay: gc collects them
    allowed = saver.with_allowlist([('tests', 'Thing')])
    assert isinstance(allowed, OffloadingCheckpointSaver) and allowed.media_store is store
    copied = copy.copy(saver)  # what BaseCheckpointSaver.with_allowlist does to other savers
    assert type(copied) is type(saver) and copied.inner is inner


async def test_sync_methods_bridge_to_the_loop_in_use_and_refuse_on_its_own_thread(store: DiskMediaStore) -> None:
    saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=store)
    stored = await put(saver, {'messages': history()})  # binds the wrapper to this loop
    with pytest.raises(SyncCallError, match='aget_tuple'):
        saver.get_tuple(stored)  # waiting for this loop on its own thread would deadlock
    found = await asyncio.to_thread(saver.get_tuple, stored)
    assert found is not None and found.checkpoint['channel_values']['messages'] == history()
    listed = await asyncio.to_thread(lambda: list(saver.list(None)))
    assert len(listed) == 1 and listed[0].checkpoint['channel_values']['messages'] == history()
    config = {'configurable': {'thread_id': 'sync', 'checkpoint_ns': ''}}
    cp = checkpoint({'messages': history()})
    metadata: Any = {'source': 'loop', 'step': 1, 'parents': {}}
    written = await asyncio.to_thread(saver.put, config, cp, metadata, cp['channel_versions'])
    plain = await saver.inner.aget_tuple(written)
    assert plain is not None and max(map(len, strings(plain.checkpoint['channel_values']))) < 1000
    assert not saver._loop_thread.started  # the store I/O ran on the loop in use, not on one of the wrapper's


def test_sync_methods_with_no_loop_run_the_store_on_a_thread_of_the_wrappers_own(tmp_path: Path) -> None:
    inner = InMemorySaver()
    store = DiskMediaStore(tmp_path / 'media')
    with OffloadingCheckpointSaver(inner, media_store=store) as saver:
        cp = checkpoint({'messages': history()})
        written = saver.put(CONFIG, cp, {'source': 'loop', 'step': 1, 'parents': {}}, cp['channel_versions'])
        saver.put_writes(written, [('messages', [HumanMessage(content=[styles()[0]], id='w')])], 'task-1')
        plain = inner.get_tuple(written)
        assert plain is not None and max(map(len, strings(plain.checkpoint['channel_values']))) < 1000
        assert plain.pending_writes is not None and max(map(len, strings(plain.pending_writes))) < 1000
        found = saver.get_tuple(written)
        assert found is not None and found.checkpoint['channel_values']['messages'] == history()
        assert found.pending_writes is not None and found.pending_writes[0][2][0].content[0] == styles()[0]
        assert [t.checkpoint['channel_values'] for t in saver.list(None)] == [{'messages': history()}]
        thread = saver._loop_thread._thread
        assert thread is not None and thread.is_alive() and thread.daemon
        saver.delete_thread('thread-1')
        assert saver.get_tuple(CONFIG) is None
    thread.join(timeout=0)
    assert not thread.is_alive()  # close() (the with block) joined it
    with pytest.raises(SyncCallError, match='close'):
        saver.put(CONFIG, cp, {'source': 'loop', 'step': 1, 'parents': {}}, cp['channel_versions'])
    assert inner.get_tuple(CONFIG) is None  # nothing written after close
    saver.close()  # idempotent


async def test_gc_keeps_what_checkpoints_and_writes_reference(store: DiskMediaStore, tmp_path: Path) -> None:
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=store)
    stored = await put(saver, {'messages': history()})
    await saver.aput_writes(
        stored, [('messages', [HumanMessage(content=[styles(base64.b64encode(OTHER).decode())[0]], id='w')])], 't'
    )
    await put(
        saver,
        {'messages': [ToolMessage(content=TEXT + 'x', tool_call_id='c', id='t')]},
        {'configurable': {'thread_id': 'other', 'checkpoint_ns': 'sub'}},
    )
    orphan = await store.put(os.urandom(5000))
    kept = {
        media_uri_for(RAW),
        media_uri_for(OTHER),
        media_uri_for(TEXT.encode()),
        media_uri_for((TEXT + 'more').encode()),
        media_uri_for((TEXT + 'x').encode()),
    }
    report = await collect_garbage(store, [CheckpointerRoot(saver)], grace=0, dry_run=False, uris_file=tmp_path / 'a')
    assert set(report.iter_uris('deleted')) == {orphan}
    assert set([uri async for uri in store.iter_uris()]) == kept
    await saver.adelete_thread('thread-1')
    await saver.adelete_thread('other')
    report = await collect_garbage(store, [CheckpointerRoot(inner)], grace=0, dry_run=False, uris_file=tmp_path / 'b')
    assert set(report.iter_uris('deleted')) == kept


async def test_gc_stops_on_an_envelope_it_cannot_read(store: DiskMediaStore) -> None:
    inner = InMemorySaver()
    block = {'type': 'image', 'base64': 'x', ENVELOPE_KEY: {'format': 'mediastash-langgraph-v9', 'slots': []}}
    await put(inner, {'messages': [HumanMessage(content=[block], id='h')]})
    orphan = await store.put(os.urandom(5000))
    with pytest.raises(RootReadError, match='InMemorySaver'):
        await collect_garbage(store, [CheckpointerRoot(inner)], grace=0, dry_run=False)
    assert await store.exists(orphan)
    with pytest.raises(TypeError, match='alist'):
        CheckpointerRoot(object())


async def test_optional_methods_delegate_async_and_sync(store: DiskMediaStore) -> None:
    calls: list[tuple[str, Any]] = []

    class Recording(InMemorySaver):
        async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
            calls.append(('copy', (source_thread_id, target_thread_id)))

        async def aprune(self, thread_ids: Any, *, strategy: str = 'keep_latest') -> None:
            calls.append(('prune', (list(thread_ids), strategy)))

    saver = OffloadingCheckpointSaver(Recording(), media_store=store)
    assert type(saver).adelete_for_runs is BaseCheckpointSaver.adelete_for_runs  # the inner class has none
    await saver.acopy_thread('a', 'b')
    await asyncio.to_thread(saver.copy_thread, 'c', 'd')
    await asyncio.to_thread(saver.prune, ['e'], strategy='delete')
    assert calls == [('copy', ('a', 'b')), ('copy', ('c', 'd')), ('prune', (['e'], 'delete'))]
    with pytest.raises(SyncCallError, match='aprune'):
        saver.prune(['e'])


async def test_state_nested_too_deeply_or_containing_itself_is_a_typed_error(store: DiskMediaStore) -> None:
    from mediastash.errors import TreeDepthError

    saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=store)
    deep: Any = {'type': 'text', 'text': 'leaf'}
    for _ in range(300):
        deep = {'inner': [deep]}
    looped: list[Any] = []
    looped.append(looped)
    for value in (deep, looped):
        with pytest.raises(TreeDepthError, match=r'deeper than 200 levels at \$\[0\]'):
            await put(saver, {'value': value})


def test_an_optional_method_the_inner_class_has_only_sync_is_offered_only_sync() -> None:
    """``PostgresSaver`` has ``prune`` and no ``aprune``: the wrapper offers the same and calls the sync one."""
    calls: list[tuple[list[str], str]] = []

    class SyncPrune(InMemorySaver):
        def prune(self, thread_ids: Any, *, strategy: str = 'keep_latest') -> None:
            calls.append((list(thread_ids), strategy))

    with OffloadingCheckpointSaver(SyncPrune(), media_store=MemoryMediaStore()) as saver:
        assert type(saver).aprune is BaseCheckpointSaver.aprune
        assert type(saver).prune is not BaseCheckpointSaver.prune
        saver.prune(['a'], strategy='delete')
        assert calls == [(['a'], 'delete')]
        assert not saver._loop_thread.started  # no store I/O: nothing ran on a loop
