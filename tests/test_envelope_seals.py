"""Envelopes from untrusted input never make a restore read a blob (issue 27 follow-up, ``docs/security.md``).

A save honours an envelope that arrives in its input (a plain read of the inner store written back) only when
a wrapper sealed it under the reference key for the media store's namespace; anything else is refused with
``UnvouchedEnvelopeError`` and nothing is saved or read. Envelopes already in storage restore as before,
unsealed ones included. Real step stores (harness File/Sqlite), LangGraph savers and an OpenAI Agents
SQLiteSession; blob reads counted with ``mediastash.testing.CountingMediaStore``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from agents import SQLiteSession
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic_ai.messages import BinaryContent, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore, RunRecord, SqliteStepStore

from mediastash import DiskMediaStore, ReferenceKey, UnvouchedEnvelopeError
from mediastash.integrations import ENVELOPE_KEY, OffloadingStepStore
from mediastash.integrations.langgraph import ENVELOPE_KEY as LANGGRAPH_KEY
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.integrations.openai_agents import ENVELOPE_KEY as OPENAI_KEY
from mediastash.integrations.openai_agents import OffloadingSession
from mediastash.testing import CountingMediaStore
from mediastash.uri import media_uri_for

ALICE_IMAGE = b'\x89PNG alice ' + os.urandom(150_000)
BOB_IMAGE = b'\x89PNG bob ' + os.urandom(150_000)
KEY = secrets.token_bytes(32)


def reads(store: CountingMediaStore) -> int:
    """Every call that reads a blob's bytes."""
    return sum(count for name, count in store.calls.items() if name.startswith('get') and name != 'get_metadata')


def prompt(text: str, image: bytes) -> list[Any]:
    return [ModelRequest(parts=[UserPromptPart(content=[text, BinaryContent(data=image, media_type='image/png')])])]


def snapshot(run_id: str, messages: list[Any], step: int) -> ContinuableSnapshot:
    return ContinuableSnapshot(run_id=run_id, step_index=step, messages=messages, state='complete')


STEP_STORES = {
    'file': lambda tmp: FileStepStore(tmp / 'steps', media_store=None),
    'sqlite': lambda tmp: SqliteStepStore(database=str(tmp / 'steps.db'), media_store=None),
}


def swapped(messages: list[Any], old: bytes, new: bytes) -> list[Any]:
    """``messages`` (a plain read) with every mention of ``old``'s URI made ``new``'s: the edit an attacker makes."""
    text = ModelMessagesTypeAdapter.dump_json(messages).decode()
    assert media_uri_for(old) in text
    return list(ModelMessagesTypeAdapter.validate_json(text.replace(media_uri_for(old), media_uri_for(new))))


def unsealed(messages: list[Any]) -> list[Any]:
    """``messages`` with the seal taken off every envelope (what mediastash wrote before envelopes were sealed)."""
    out = json.loads(ModelMessagesTypeAdapter.dump_json(messages))
    for message in out:
        envelope = (message.get('metadata') or {}).get(ENVELOPE_KEY)
        if envelope is not None:
            del envelope['seal']
    return list(ModelMessagesTypeAdapter.validate_python(out))


async def two_users(tmp_path: Path, kind: str, **wrapper: Any) -> tuple[Any, OffloadingStepStore, list[Any]]:
    """One shared media store; Bob's run and Alice's run saved through one wrapper; Alice's plain read."""
    inner = STEP_STORES[kind](tmp_path)
    media = DiskMediaStore(tmp_path / 'media')
    store = OffloadingStepStore(inner, media_store=media, **wrapper)
    for run_id, image in (('bob', BOB_IMAGE), ('alice', ALICE_IMAGE)):
        await store.register_run(RunRecord(run_id=run_id))
        await store.save_snapshot(snapshot(run_id, prompt(f'{run_id} here', image), 1))
    plain = await inner.latest_snapshot(run_id='alice')
    assert plain is not None and ENVELOPE_KEY in plain.messages[0].metadata
    return inner, store, list(plain.messages)


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
@pytest.mark.parametrize('forgery', ['swapped URI', 'no seal', 'garbage seal'])
async def test_step_store_an_envelope_naming_another_users_blob_is_refused_and_nothing_is_read(
    kind: str, forgery: str, tmp_path: Path
) -> None:
    inner, _, plain = await two_users(tmp_path, kind)
    if forgery == 'swapped URI':
        forged, reason = swapped(plain, ALICE_IMAGE, BOB_IMAGE), 'invalid'
    elif forgery == 'no seal':
        forged, reason = unsealed(swapped(plain, ALICE_IMAGE, BOB_IMAGE)), 'unsigned'
    else:
        forged = swapped(plain, ALICE_IMAGE, BOB_IMAGE)
        forged[0].metadata[ENVELOPE_KEY]['seal'] = 'ms1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA'
        reason = 'invalid'
    counting = CountingMediaStore(DiskMediaStore(tmp_path / 'media'))
    store = OffloadingStepStore(inner, media_store=counting)
    with pytest.raises(UnvouchedEnvelopeError) as caught:
        await store.save_snapshot(snapshot('alice', forged, 2))
    assert caught.value.reason == reason and caught.value.where == 'message 0'
    assert 'message 0' in str(caught.value) and media_uri_for(BOB_IMAGE)[15:] not in str(caught.value)
    assert 'ms1.' not in str(caught.value)
    assert reads(counting) == 0
    latest = await inner.latest_snapshot(run_id='alice')
    assert latest is not None and latest.step_index == 1  # nothing was saved
    back = await store.latest_snapshot(run_id='alice')
    assert back is not None and back.messages[0].parts[0].content[1].data == ALICE_IMAGE


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
async def test_step_store_a_sealed_plain_read_written_back_stays_lean_and_restores(kind: str, tmp_path: Path) -> None:
    inner, store, plain = await two_users(tmp_path, kind)
    await store.save_snapshot(snapshot('alice', plain, 2))
    stored = await inner.latest_snapshot(run_id='alice')
    assert stored is not None and stored.step_index == 2 and stored.messages == plain  # the same sealed envelope
    back = await store.latest_snapshot(run_id='alice')
    assert back is not None and back.messages[0].parts[0].content[1].data == ALICE_IMAGE


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
async def test_step_store_an_application_key_vouches_across_instances_and_another_key_does_not(
    kind: str, tmp_path: Path
) -> None:
    inner, _, plain = await two_users(tmp_path, kind, reference_key=KEY)
    media = DiskMediaStore(tmp_path / 'media')
    other_process = OffloadingStepStore(STEP_STORES[kind](tmp_path), media_store=media, reference_key=KEY)
    await other_process.save_snapshot(snapshot('alice', plain, 2))
    back = await other_process.latest_snapshot(run_id='alice')
    assert back is not None and back.step_index == 2 and back.messages[0].parts[0].content[1].data == ALICE_IMAGE

    rotated = ReferenceKey(secrets.token_bytes(32), KEY)  # the old key still accepted after a rotation
    await OffloadingStepStore(inner, media_store=media, reference_key=rotated).save_snapshot(
        snapshot('alice', plain, 3)
    )

    for key in (None, secrets.token_bytes(32)):  # the process key, or another application's key
        stranger = OffloadingStepStore(inner, media_store=media, reference_key=key)
        with pytest.raises(UnvouchedEnvelopeError) as caught:
            await stranger.save_snapshot(snapshot('alice', plain, 4))
        assert caught.value.reason == 'invalid'
    latest = await inner.latest_snapshot(run_id='alice')
    assert latest is not None and latest.step_index == 3


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
async def test_step_store_an_envelope_replayed_into_another_namespace_is_refused(kind: str, tmp_path: Path) -> None:
    inner = STEP_STORES[kind](tmp_path)
    media = DiskMediaStore(tmp_path / 'media')
    alice = OffloadingStepStore(inner, media_store=media.namespace('alice'), reference_key=KEY)
    await alice.register_run(RunRecord(run_id='r'))
    await alice.save_snapshot(snapshot('r', prompt('mine', ALICE_IMAGE), 1))
    plain = await inner.latest_snapshot(run_id='r')
    assert plain is not None
    counting = CountingMediaStore(media.namespace('bob'))
    bob = OffloadingStepStore(inner, media_store=counting, reference_key=KEY)
    with pytest.raises(UnvouchedEnvelopeError) as caught:
        await bob.save_snapshot(snapshot('r', list(plain.messages), 2))
    assert caught.value.reason == 'other-namespace' and reads(counting) == 0


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
async def test_step_store_old_unsealed_envelopes_in_storage_still_restore(kind: str, tmp_path: Path) -> None:
    inner, store, plain = await two_users(tmp_path, kind)
    await inner.save_snapshot(snapshot('alice', unsealed(plain), 2))  # as an older mediastash stored it
    back = await store.latest_snapshot(run_id='alice')
    assert back is not None and back.step_index == 2 and back.messages[0].parts[0].content[1].data == ALICE_IMAGE


# -- LangGraph (OffloadingCheckpointSaver) ---------------------------------------------------------------------

B64_ALICE = base64.b64encode(ALICE_IMAGE).decode()
B64_BOB = base64.b64encode(BOB_IMAGE).decode()


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def graph_builder() -> Any:
    builder = StateGraph(State)
    builder.add_node('noop', lambda state: {})
    builder.add_edge(START, 'noop')
    return builder


def thread(name: str) -> Any:
    return {'configurable': {'thread_id': name}}


def human(image_b64: str, message_id: str) -> HumanMessage:
    block = {'type': 'image', 'base64': image_b64, 'mime_type': 'image/png'}
    return HumanMessage(content=[{'type': 'text', 'text': 'look'}, block], id=message_id)


async def plain_messages(inner: Any, name: str) -> list[Any]:
    """The messages of a thread as the inner saver holds them (lean: placeholders and envelopes)."""
    state = await graph_builder().compile(checkpointer=inner).aget_state(thread(name))
    messages: list[Any] = state.values['messages']
    assert LANGGRAPH_KEY in messages[0].content[1]
    return messages


def forged_block(message: HumanMessage, forgery: str) -> HumanMessage:
    """Alice's own lean message, its image block now naming Bob's blob (or its seal removed or garbled)."""
    block = json.loads(json.dumps(message.content[1]).replace(media_uri_for(ALICE_IMAGE), media_uri_for(BOB_IMAGE)))
    if forgery == 'no seal':
        del block[LANGGRAPH_KEY]['seal']
    elif forgery == 'garbage seal':
        block[LANGGRAPH_KEY]['seal'] = 'ms1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA'
    return HumanMessage(content=[message.content[0], block], id='mallory-1')


@pytest.mark.parametrize('forgery', ['swapped URI', 'no seal', 'garbage seal'])
async def test_langgraph_a_client_sent_envelope_naming_another_users_blob_is_refused(
    forgery: str, tmp_path: Path
) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'graph.db')) as inner:
        graph = graph_builder().compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=media))
        await graph.ainvoke({'messages': [human(B64_BOB, 'bob-1')]}, thread('bob'))
        await graph.ainvoke({'messages': [human(B64_ALICE, 'alice-1')]}, thread('alice'))
        (alice,) = await plain_messages(inner, 'alice')

        counting = CountingMediaStore(DiskMediaStore(tmp_path / 'media'))
        server = graph_builder().compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=counting))
        with pytest.raises(UnvouchedEnvelopeError) as caught:  # a LangGraph server accepts message dicts like this
            await server.ainvoke({'messages': [forged_block(alice, forgery)]}, thread('mallory'))
        reason = 'unsigned' if forgery == 'no seal' else 'invalid'
        assert caught.value.reason == reason and "['content'][1]" in caught.value.where
        assert media_uri_for(BOB_IMAGE)[15:] not in str(caught.value) and 'ms1.' not in str(caught.value)
        assert reads(counting) == 0
        stored = await inner.aget_tuple(thread('mallory'))
        assert stored is None or media_uri_for(BOB_IMAGE) not in repr(stored.checkpoint)  # nothing names Bob's blob


async def test_langgraph_sealed_write_back_app_key_other_key_and_namespace_replay(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'graph.db')) as inner:
        saver = OffloadingCheckpointSaver(inner, media_store=media.namespace('alice'), reference_key=KEY)
        graph = graph_builder().compile(checkpointer=saver)
        await graph.ainvoke({'messages': [human(B64_ALICE, 'alice-1')]}, thread('alice'))
        (plain,) = await plain_messages(inner, 'alice')
        edited = plain.model_copy(update={'content': [{'type': 'text', 'text': 'edited'}, plain.content[1]]})

        # Another process with the same application key: the sealed plain read is kept lean and restores.
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'graph.db')) as other_inner:
            other = OffloadingCheckpointSaver(other_inner, media_store=media.namespace('alice'), reference_key=KEY)
            other_graph = graph_builder().compile(checkpointer=other)
            await other_graph.aupdate_state(thread('alice'), {'messages': [edited]})
            (back,) = (await other_graph.aget_state(thread('alice'))).values['messages']
            assert back.content == [{'type': 'text', 'text': 'edited'}, human(B64_ALICE, 'x').content[1]]
        (still,) = await plain_messages(inner, 'alice')
        assert still.content[1] == plain.content[1]  # stayed lean: the same placeholder and envelope

        refusals = {
            'invalid': OffloadingCheckpointSaver(inner, media_store=media.namespace('alice')),  # the process key
            'other-namespace': OffloadingCheckpointSaver(inner, media_store=media.namespace('bob'), reference_key=KEY),
        }
        for reason, stranger in refusals.items():
            with pytest.raises(UnvouchedEnvelopeError) as caught:
                await graph_builder().compile(checkpointer=stranger).ainvoke({'messages': [edited]}, thread(reason))
            assert caught.value.reason == reason


async def test_langgraph_old_unsealed_envelopes_in_storage_still_restore(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'graph.db')) as inner:
        graph = graph_builder().compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=media))
        await graph.ainvoke({'messages': [human(B64_ALICE, 'alice-1')]}, thread('alice'))
        (plain,) = await plain_messages(inner, 'alice')
        block = {**plain.content[1], LANGGRAPH_KEY: dict(plain.content[1][LANGGRAPH_KEY])}
        del block[LANGGRAPH_KEY]['seal']  # as an older mediastash wrote it
        old = plain.model_copy(update={'content': [plain.content[0], block]})
        await graph_builder().compile(checkpointer=inner).aupdate_state(thread('alice'), {'messages': [old]})
        (back,) = (await graph.aget_state(thread('alice'))).values['messages']
        assert back.content[1] == human(B64_ALICE, 'x').content[1]


def test_langgraph_sync_graph_invoke_refuses_a_forged_envelope(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    with SqliteSaver.from_conn_string(str(tmp_path / 'sync.db')) as inner:
        saver = OffloadingCheckpointSaver(inner, media_store=media)
        try:
            graph = graph_builder().compile(checkpointer=saver)
            graph.invoke({'messages': [human(B64_BOB, 'bob-1')]}, thread('bob'))
            graph.invoke({'messages': [human(B64_ALICE, 'alice-1')]}, thread('alice'))
            (alice,) = graph_builder().compile(checkpointer=inner).get_state(thread('alice')).values['messages']
            with pytest.raises(UnvouchedEnvelopeError):
                graph.invoke({'messages': [forged_block(alice, 'swapped URI')]}, thread('mallory'))
            (again,) = graph.get_state(thread('alice')).values['messages']
            assert again.content[1]['base64'] == B64_ALICE
        finally:
            saver.close()


# -- OpenAI Agents SDK (OffloadingSession over SQLiteSession) ---------------------------------------------------


def user_item(image: bytes) -> dict[str, Any]:
    url = 'data:image/png;base64,' + base64.b64encode(image).decode()
    return {
        'role': 'user',
        'content': [
            {'type': 'input_text', 'text': 'look'},
            {'type': 'input_image', 'image_url': url, 'detail': 'auto'},
        ],
    }


async def two_sessions(tmp_path: Path, **wrapper: Any) -> tuple[DiskMediaStore, list[Any]]:
    """Bob's and Alice's sessions in one database and one media store; Alice's items as the inner session holds them."""
    media = DiskMediaStore(tmp_path / 'media')
    for name, image in (('bob', BOB_IMAGE), ('alice', ALICE_IMAGE)):
        session = OffloadingSession(SQLiteSession(name, tmp_path / 'sessions.db'), media_store=media, **wrapper)
        await session.add_items([user_item(image)])
    plain = await SQLiteSession('alice', tmp_path / 'sessions.db').get_items()
    assert OPENAI_KEY in plain[0]['content'][1]
    return media, plain


@pytest.mark.parametrize('forgery', ['swapped URI', 'no seal', 'garbage seal'])
async def test_openai_session_an_item_naming_another_users_blob_is_refused(forgery: str, tmp_path: Path) -> None:
    _, plain = await two_sessions(tmp_path)
    forged = json.loads(json.dumps(plain).replace(media_uri_for(ALICE_IMAGE), media_uri_for(BOB_IMAGE)))
    if forgery == 'no seal':
        del forged[0]['content'][1][OPENAI_KEY]['seal']
    elif forgery == 'garbage seal':
        forged[0]['content'][1][OPENAI_KEY]['seal'] = 'ms1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA'
    counting = CountingMediaStore(DiskMediaStore(tmp_path / 'media'))
    session = OffloadingSession(SQLiteSession('mallory', tmp_path / 'sessions.db'), media_store=counting)
    with pytest.raises(UnvouchedEnvelopeError) as caught:  # a chat client sends its history as item dicts
        await session.add_items(forged)
    assert caught.value.reason == ('unsigned' if forgery == 'no seal' else 'invalid')
    assert caught.value.where == f"$[0]['content'][1][{OPENAI_KEY!r}]"
    assert media_uri_for(BOB_IMAGE)[15:] not in str(caught.value) and 'ms1.' not in str(caught.value)
    assert reads(counting) == 0
    assert await SQLiteSession('mallory', tmp_path / 'sessions.db').get_items() == []  # nothing added


async def test_openai_session_sealed_write_back_app_key_other_key_and_namespace_replay(tmp_path: Path) -> None:
    media, plain = await two_sessions(tmp_path, reference_key=KEY)
    # Another process with the application key: the plain read written back stays lean and restores exactly.
    other = OffloadingSession(SQLiteSession('copy', tmp_path / 'sessions.db'), media_store=media, reference_key=KEY)
    await other.add_items(plain)
    assert await SQLiteSession('copy', tmp_path / 'sessions.db').get_items() == plain
    assert await other.get_items() == [user_item(ALICE_IMAGE)]

    refusals = {
        'invalid': OffloadingSession(SQLiteSession('x', tmp_path / 'sessions.db'), media_store=media),
        'other-namespace': OffloadingSession(
            SQLiteSession('y', tmp_path / 'sessions.db'), media_store=media.namespace('bob'), reference_key=KEY
        ),
    }
    for reason, stranger in refusals.items():
        with pytest.raises(UnvouchedEnvelopeError) as caught:
            await stranger.add_items(plain)
        assert caught.value.reason == reason
        assert await stranger.inner.get_items() == []


async def test_openai_session_a_written_back_edit_is_looked_at_afresh_with_the_placeholder_rule(
    tmp_path: Path,
) -> None:
    """The exact placeholder rule LangGraph and step stores use: a placeholder with words added is an edit,
    and a large payload an edit puts in a lean item's place moves out (before, the stale envelope went through)."""
    media, plain = await two_sessions(tmp_path)
    session = OffloadingSession(SQLiteSession('edits', tmp_path / 'sessions.db'), media_store=media)
    annotated, replaced = json.loads(json.dumps(plain)), json.loads(json.dumps(plain))
    placeholder = plain[0]['content'][1]['image_url']
    annotated[0]['content'][1]['image_url'] = placeholder[:-1] + ' (seen by a reviewer)]'
    new_image = b'\x89PNG new ' + os.urandom(150_000)
    replaced[0]['content'][1]['image_url'] = user_item(new_image)['content'][1]['image_url']
    await session.add_items([*annotated, *replaced])

    stored = await SQLiteSession('edits', tmp_path / 'sessions.db').get_items()
    assert OPENAI_KEY not in stored[0]['content'][1]  # the edit is plain text now: no slot left
    assert media_uri_for(new_image) in stored[1]['content'][1]['image_url']  # moved out under its own URI
    slots = stored[1]['content'][1][OPENAI_KEY]['slots']
    assert [slot['lean']['uri'] for slot in slots] == [media_uri_for(new_image)]
    back = await session.get_items()
    assert back[0]['content'][1]['image_url'] == placeholder[:-1] + ' (seen by a reviewer)]'
    assert back[1] == user_item(new_image)


async def test_openai_session_old_unsealed_envelopes_in_storage_still_restore(tmp_path: Path) -> None:
    media, plain = await two_sessions(tmp_path)
    old = json.loads(json.dumps(plain))
    del old[0]['content'][1][OPENAI_KEY]['seal']  # as an older mediastash wrote it
    await SQLiteSession('old', tmp_path / 'sessions.db').add_items(old)
    session = OffloadingSession(SQLiteSession('old', tmp_path / 'sessions.db'), media_store=media)
    assert await session.get_items() == [user_item(ALICE_IMAGE)]


@pytest.mark.parametrize('kind', sorted(STEP_STORES))
async def test_step_store_a_references_restore_of_an_old_unsealed_envelope_saves_a_sealed_one(
    kind: str, tmp_path: Path
) -> None:
    """Saving a history restored with references reuses the stored envelope (it knows the payload sizes) only when
    it is sealed: an old unsealed one is written anew with a seal, so a plain read of it can be written back."""
    inner, _, plain = await two_users(tmp_path, kind)
    await inner.save_snapshot(snapshot('alice', unsealed(plain), 2))
    store = OffloadingStepStore(inner, media_store=DiskMediaStore(tmp_path / 'media'), restore='references')
    restored = await store.latest_snapshot(run_id='alice')
    assert restored is not None
    await store.save_snapshot(snapshot('alice', list(restored.messages), 3))
    again = await inner.latest_snapshot(run_id='alice')
    assert again is not None and 'seal' in again.messages[0].metadata[ENVELOPE_KEY]
    await store.save_snapshot(snapshot('alice', list(again.messages), 4))  # the plain read written back
    back = await OffloadingStepStore(inner, media_store=DiskMediaStore(tmp_path / 'media')).latest_snapshot(
        run_id='alice'
    )
    assert back is not None and back.step_index == 4 and back.messages[0].parts[0].content[1].data == ALICE_IMAGE
