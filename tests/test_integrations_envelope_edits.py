"""Edits of a plain read written back (issue 28, item 1): a restore never writes over content that is no longer
the placeholder it wrote. Each envelope kind: LangGraph checkpoints (``OffloadingCheckpointSaver``), step-store
snapshots (``OffloadingStepStore``) and KV values (``OffloadingKV``), on real savers and stores.

The rule (``docs/integrations.md``, ``docs/langgraph.md``): a place that still holds its placeholder is
restored; a place holding anything else keeps the edit, and the stale envelope entry is dropped.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    FileStepStore,
    InMemoryStepStore,
    RunRecord,
    SqliteStepStore,
)
from pydantic_ai_persistence import InMemoryAsyncKV, KVStepStore

from mediastash import DiskMediaStore, MemoryMediaStore
from mediastash.gc import CheckpointerRoot, collect_garbage
from mediastash.integrations import ENVELOPE_KEY, OffloadingKV, OffloadingStepStore
from mediastash.integrations.langgraph import ENVELOPE_KEY as LANGGRAPH_KEY
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.integrations.pydantic_ai._placeholders import PLACEHOLDER_PREFIX
from mediastash.uri import media_uri_for
from mediastash.walker import WalkOptions
from tests.integration_support import history, roundtrip

IMAGE = base64.b64encode(os.urandom(90_000)).decode()
NEW_IMAGE = base64.b64encode(os.urandom(70_000)).decode()
TEXT = 'tool output line\n' * 6000
NEW_TEXT = 'an edited answer, long enough to be moved out again\n' * 2000


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def graph_builder() -> Any:
    builder = StateGraph(State)
    builder.add_node('noop', lambda state: {})
    builder.add_edge(START, 'noop')
    return builder


def first_messages() -> list[AnyMessage]:
    return [
        HumanMessage(
            content=[{'type': 'text', 'text': 'look'}, {'type': 'image', 'base64': IMAGE, 'mime_type': 'image/png'}],
            id='human-1',
        ),
        AIMessage(content=TEXT, id='ai-1'),
        ToolMessage(content=TEXT + 'tool', tool_call_id='call-1', id='tool-1'),
    ]


@pytest.fixture
async def media(tmp_path: Path) -> AsyncIterator[DiskMediaStore]:
    store = DiskMediaStore(tmp_path / 'media')
    yield store
    await store.aclose()


CONFIG: Any = {'configurable': {'thread_id': 'thread-1'}}


async def test_langgraph_an_edit_written_back_with_aupdate_state_is_kept(tmp_path: Path, media: DiskMediaStore) -> None:
    """The finding: a message edited with ``model_copy`` keeps its envelope; a fresh wrapper returned the OLD text."""
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'graph.db')) as inner:
        wrapped = graph_builder().compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=media))
        await wrapped.ainvoke({'messages': first_messages()}, CONFIG)

        plain = await graph_builder().compile(checkpointer=inner).aget_state(CONFIG)
        human, ai, tool = plain.values['messages']
        assert LANGGRAPH_KEY in ai.additional_kwargs and LANGGRAPH_KEY in human.content[1]
        edited_ai = ai.model_copy(update={'content': 'my short edit'})
        block = human.content[1]
        edited_human = human.model_copy(update={'content': [human.content[0], {**block, 'base64': NEW_IMAGE}]})
        await wrapped.aupdate_state(CONFIG, {'messages': [edited_human, edited_ai]})

        fresh = graph_builder().compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=media))
        human, ai, tool = (await fresh.aget_state(CONFIG)).values['messages']
        assert ai.content == 'my short edit' and LANGGRAPH_KEY not in ai.additional_kwargs
        assert human.content[1] == {'type': 'image', 'base64': NEW_IMAGE, 'mime_type': 'image/png'}
        assert tool.content == TEXT + 'tool'  # untouched: still restored

        # What the inner saver now holds: the new image moved out under its own URI, no stale slot anywhere.
        plain_human, plain_ai, _ = (await graph_builder().compile(checkpointer=inner).aget_state(CONFIG)).values[
            'messages'
        ]
        assert plain_ai.additional_kwargs == {}
        new_uri = media_uri_for(base64.b64decode(NEW_IMAGE))
        slots = plain_human.content[1][LANGGRAPH_KEY]['slots']
        assert [slot['lean']['uri'] for slot in slots] == [new_uri]
        assert new_uri in plain_human.content[1]['base64']


async def test_langgraph_an_edited_long_text_is_moved_out_again(media: DiskMediaStore) -> None:
    inner = InMemorySaver()
    wrapped = graph_builder().compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=media))
    await wrapped.ainvoke({'messages': first_messages()}, CONFIG)
    ai = (await graph_builder().compile(checkpointer=inner).aget_state(CONFIG)).values['messages'][1]
    await wrapped.aupdate_state(CONFIG, {'messages': [ai.model_copy(update={'content': NEW_TEXT})]})

    plain_ai = (await graph_builder().compile(checkpointer=inner).aget_state(CONFIG)).values['messages'][1]
    ((slot,),) = [plain_ai.additional_kwargs[LANGGRAPH_KEY]['slots']]
    assert slot['lean']['uri'] == media_uri_for(NEW_TEXT.encode())
    fresh = graph_builder().compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=media))
    assert (await fresh.aget_state(CONFIG)).values['messages'][1].content == NEW_TEXT


def checkpoint(values: dict[str, Any]) -> Any:
    cp = empty_checkpoint()
    cp['channel_values'] = values
    cp['channel_versions'] = dict.fromkeys(values, 1)
    return cp


async def put(saver: Any, values: dict[str, Any], thread: str) -> Any:
    cp = checkpoint(values)
    config = {'configurable': {'thread_id': thread, 'checkpoint_ns': ''}}
    return await saver.aput(config, cp, {'source': 'update', 'step': 1, 'parents': {}}, cp['channel_versions'])


async def test_langgraph_a_restore_never_writes_over_an_edit_saved_through_the_inner_saver(
    media: DiskMediaStore,
) -> None:
    """Edits that reach the checkpoint without the wrapper (the inner saver's own aput) are kept on read."""
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=media)
    stored = await put(saver, {'messages': first_messages()}, 'a')
    plain = await inner.aget_tuple(stored)
    assert plain is not None
    human, ai, tool = plain.checkpoint['channel_values']['messages']
    placeholder = ai.content
    block = human.content[1]
    edits = [
        human.model_copy(update={'content': [human.content[0], {**block, 'base64': 'a note instead'}]}),
        ai.model_copy(update={'content': placeholder + ' (checked by a reviewer)'}),
        tool,
    ]
    config = await put(inner, {'messages': edits}, 'b')
    full = await OffloadingCheckpointSaver(inner, media_store=media).aget_tuple(config)
    assert full is not None
    human, ai, tool = full.checkpoint['channel_values']['messages']
    assert ai.content == placeholder + ' (checked by a reviewer)' and LANGGRAPH_KEY not in ai.additional_kwargs
    assert human.content[1] == {'type': 'image', 'base64': 'a note instead', 'mime_type': 'image/png'}
    assert tool.content == TEXT + 'tool'

    # gc keeps every blob an envelope names, stale or not (thread 'a', which holds them live, is gone).
    await inner.adelete_thread('a')
    report = await collect_garbage(media, roots=[CheckpointerRoot(inner)], grace=0)
    assert report.referenced == 3 and report.deletable == 0


async def test_langgraph_a_placeholder_with_another_size_label_still_restores(media: DiskMediaStore) -> None:
    """The size is the one part of a placeholder the reader cannot check without the blob: any well-formed one."""
    inner = InMemorySaver()
    saver = OffloadingCheckpointSaver(inner, media_store=media)
    stored = await put(saver, {'messages': first_messages()}, 'a')
    plain = await inner.aget_tuple(stored)
    assert plain is not None
    ai = plain.checkpoint['channel_values']['messages'][1]
    assert ', 99.6 KiB stored as' in ai.content
    for label, restored in ((', 1.0 MiB', True), ('', True), (', big', False), (', 99.6 KiB ', False)):
        content = ai.content.replace(', 99.6 KiB', label)
        config = await put(inner, {'messages': [ai.model_copy(update={'content': content})]}, f't{label}')
        full = await OffloadingCheckpointSaver(
            inner, media_store=media, options=WalkOptions(known_blobs=False)
        ).aget_tuple(config)
        assert full is not None
        assert full.checkpoint['channel_values']['messages'][0].content == (TEXT if restored else content), label


# -- step-store snapshots (OffloadingStepStore) -------------------------------------------------------------

HISTORY = history()

STEP_STORES = {
    'file': lambda tmp, media: FileStepStore(tmp / 'steps', media_store=None),
    'sqlite': lambda tmp, media: SqliteStepStore(database=str(tmp / 'steps.db'), media_store=None),
    'kv': lambda tmp, media: KVStepStore(OffloadingKV(InMemoryAsyncKV(), media_store=media)),
}


def snapshot(messages: list[Any], step: int) -> ContinuableSnapshot:
    return ContinuableSnapshot(run_id='run-1', step_index=step, messages=messages, state='complete')  # type: ignore[arg-type]


async def saved_run(inner: Any, media: Any) -> tuple[OffloadingStepStore, list[Any], list[Any]]:
    """A run of ``HISTORY`` saved through the wrapper, the history as read back, and ``inner``'s plain read."""
    store = OffloadingStepStore(inner, media_store=media)
    await store.register_run(RunRecord(run_id='run-1'))
    await store.save_snapshot(snapshot(HISTORY, 1))
    plain = await inner.latest_snapshot(run_id='run-1')
    assert plain is not None and [ENVELOPE_KEY in (m.metadata or {}) for m in plain.messages] == [
        True,
        False,
        True,
        True,
        False,
    ]
    return store, roundtrip(HISTORY), list(plain.messages)


def edited(messages: list[Any]) -> list[Any]:
    """The plain messages with the prompt's first text (message 0: the other items are stand-ins), the tool
    return (message 2) and the answer's text (message 3) edited."""
    out = list(messages)
    prompt = out[0].parts[0]
    assert prompt.content[0] == 'what is in these?' and prompt.content[1].startswith(PLACEHOLDER_PREFIX)
    return with_edits(out)


def with_edits(messages: list[Any]) -> list[Any]:
    """``messages`` (a plain read, or the original history) with the edits of ``edited``."""
    out = list(messages)
    prompt = out[0].parts[0]
    content = ['what is in this one?', *prompt.content[1:]]
    out[0] = dataclasses.replace(out[0], parts=[dataclasses.replace(prompt, content=content)])
    tool = out[2].parts[0]
    out[2] = dataclasses.replace(out[2], parts=[dataclasses.replace(tool, content='a short edited tool output')])
    text, file = out[3].parts
    out[3] = dataclasses.replace(out[3], parts=[dataclasses.replace(text, content='an edited answer'), file])
    return out


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
async def test_step_store_an_edited_plain_read_saved_back_keeps_the_edits_and_restores_the_rest(
    kind: str, tmp_path: Path
) -> None:
    media = MemoryMediaStore()
    inner = STEP_STORES[kind](tmp_path, media)
    store, original, plain = await saved_run(inner, media)
    await store.save_snapshot(snapshot(edited(plain), 2))

    fresh = OffloadingStepStore(inner, media_store=media)
    back = await fresh.latest_snapshot(run_id='run-1')
    assert back is not None and back.step_index == 2
    assert back.messages == with_edits(original)  # edits kept, every other payload back, metadata as written
    stored = await inner.latest_snapshot(run_id='run-1')
    assert stored is not None
    assert stored.messages[2].metadata is None or ENVELOPE_KEY not in stored.messages[2].metadata
    assert stored.messages[2].parts[0].content == 'a short edited tool output'


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
async def test_step_store_a_plain_read_saved_back_unedited_is_the_same_envelopes(kind: str, tmp_path: Path) -> None:
    media = MemoryMediaStore()
    inner = STEP_STORES[kind](tmp_path, media)
    store, original, plain = await saved_run(inner, media)
    await store.save_snapshot(snapshot(plain, 2))
    again = await inner.latest_snapshot(run_id='run-1')
    assert again is not None and again.messages == plain  # the same envelopes, placeholders with their sizes
    back = await OffloadingStepStore(inner, media_store=media).latest_snapshot(run_id='run-1')
    assert back is not None and back.messages == original


async def test_step_store_a_restore_never_writes_over_an_edit_saved_through_the_inner_store(tmp_path: Path) -> None:
    media = MemoryMediaStore()
    inner = FileStepStore(tmp_path / 'steps', media_store=None)
    _, original, plain = await saved_run(inner, media)
    await inner.save_snapshot(snapshot(edited(plain), 2))  # the envelopes' metadata still names the old payloads
    back = await OffloadingStepStore(inner, media_store=media).latest_snapshot(run_id='run-1')
    assert back is not None and back.messages == with_edits(original)


async def test_step_store_an_edit_holding_a_new_large_payload_is_moved_out(tmp_path: Path) -> None:
    media = MemoryMediaStore()
    inner = InMemoryStepStore()
    store, original, plain = await saved_run(inner, media)
    text, file = plain[3].parts
    plain[3] = dataclasses.replace(plain[3], parts=[dataclasses.replace(text, content=NEW_TEXT), file])
    await store.save_snapshot(snapshot(plain, 2))
    stored = await inner.latest_snapshot(run_id='run-1')
    assert stored is not None
    shown = stored.messages[3].parts[0].content
    assert shown.startswith(PLACEHOLDER_PREFIX) and media_uri_for(NEW_TEXT.encode()) in shown
    back = await OffloadingStepStore(inner, media_store=media).latest_snapshot(run_id='run-1')
    assert back is not None and back.messages[3].parts[0].content == NEW_TEXT
    assert back.messages[3].parts[1] == original[3].parts[1]


# -- KV values (OffloadingKV) ----------------------------------------------------------------------------------


async def test_kv_an_edit_beside_a_marker_is_kept() -> None:
    """A KV value holds markers, no placeholders: an edit that puts content back beside a marker's keys wins."""
    inner = InMemoryAsyncKV()
    kv = OffloadingKV(inner, media_store=MemoryMediaStore())
    await kv.put('pk', 'sk', json.dumps({'parts': [{'part_kind': 'text', 'content': TEXT}]}))
    lean = json.loads(await inner.get('pk', 'sk'))
    assert 'content' not in lean['parts'][0]
    lean['parts'][0]['content'] = 'my edit'
    await inner.put('pk', 'sk', json.dumps(lean))
    fresh = OffloadingKV(inner, media_store=kv.media_store)
    assert json.loads(await fresh.get('pk', 'sk'))['parts'][0]['content'] == 'my edit'


async def test_step_store_a_stand_in_with_another_size_label_still_restores(tmp_path: Path) -> None:
    """As for LangGraph: any well-formed size label (or none) is still the stand-in; other text is an edit."""
    media = MemoryMediaStore()
    inner = InMemoryStepStore()
    _, original, plain = await saved_run(inner, media)
    tool = plain[2].parts[0]
    size = tool.content.split(', ', 1)[1].split(' stored as ', 1)[0]
    for label, restored in ((', 2.0 MiB', True), ('', True), (', huge', False)):
        content = tool.content.replace(f', {size}', label)
        messages = list(plain)
        messages[2] = dataclasses.replace(plain[2], parts=[dataclasses.replace(tool, content=content)])
        await inner.save_snapshot(snapshot(messages, 2))
        back = await OffloadingStepStore(
            inner, media_store=media, options=WalkOptions(known_blobs=False)
        ).latest_snapshot(run_id='run-1')
        assert back is not None
        assert back.messages[2].parts[0].content == (original[2].parts[0].content if restored else content), label
