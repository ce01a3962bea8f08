"""Old envelopes still restore (fixtures written by today's code): every integration's committed history.

``tests/fixtures/envelopes/`` holds what each wrapper saved before the kit's one
envelope format existed (``tests/envelope_fixtures.py`` says how): step store
envelopes ``v: 2``, LangGraph ``mediastash-langgraph-v1``, OpenAI Agents
``mediastash-envelope-v1`` and the KV's lean JSON. Each is copied to a temporary
folder, read through today's wrapper and must give back exactly the history
that was saved; a plain read written back is still honoured only under the key
that sealed it. The conversation store's fixture is read in
``test_envelope_fixtures_conversations.py`` (it needs the latest stack).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from agents import SQLiteSession
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore
from pydantic_ai_persistence import InMemoryAsyncKV, KVHistoryStore

from mediastash import DiskMediaStore, UnvouchedEnvelopeError
from mediastash.integrations import OffloadingKV, OffloadingStepStore
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.integrations.openai_agents import OffloadingSession
from tests.envelope_fixtures import (
    FIXTURES,
    REFERENCE_KEY,
    expected_graph_messages,
    expected_items,
    expected_messages,
    graph_builder,
    kv_rows,
)

OTHER_KEY = b'some other application key 32 by'


def copied(name: str, tmp_path: Path) -> Path:
    """A copy of one fixture folder (reading may write, e.g. SQLite journals; the committed files stay as they are)."""
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    return folder


def stored_text(folder: Path) -> str:
    """Everything the inner store holds, as text (SQLite rows decoded leniently), to check which format it is."""
    texts: list[str] = []
    for path in sorted(folder.rglob('*')):
        if path.suffix == '.json' and path.name != 'expected.json':
            texts.append(path.read_text())
        elif path.suffix == '.db':
            with sqlite3.connect(path) as db:
                tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    for row in db.execute(f'SELECT * FROM "{table}"'):
                        texts.extend(
                            value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)
                            for value in row
                        )
    return '\n'.join(texts)


async def test_step_store_v2_envelopes_restore_and_a_sealed_plain_read_is_honoured(tmp_path: Path) -> None:
    folder = copied('step_store', tmp_path)
    assert '"__mediastash_envelope__": {"v": 2' in stored_text(folder)
    expected = expected_messages(folder)
    media = DiskMediaStore(folder / 'media')
    store = OffloadingStepStore(
        FileStepStore(folder / 'steps', media_store=None), media_store=media, reference_key=REFERENCE_KEY
    )
    latest = await store.latest_snapshot(run_id='run-1')
    assert latest is not None and latest.messages == expected
    snapshots = await store.list_snapshots(run_id='run-1')
    assert [len(snapshot.messages) for snapshot in snapshots] == [2, 4, 6]
    assert all(snapshot.messages == expected[: len(snapshot.messages)] for snapshot in snapshots)

    # A plain read of the old envelopes written back: kept under the key that sealed them, refused under another.
    plain = await FileStepStore(folder / 'steps', media_store=None).latest_snapshot(run_id='run-1')
    assert plain is not None
    again = ContinuableSnapshot(run_id='run-2', step_index=1, messages=plain.messages, state='complete')
    await store.save_snapshot(again)
    back = await store.latest_snapshot(run_id='run-2')
    assert back is not None and back.messages == expected
    stranger = OffloadingStepStore(
        FileStepStore(folder / 'steps', media_store=None), media_store=media, reference_key=OTHER_KEY
    )
    with pytest.raises(UnvouchedEnvelopeError):
        await stranger.save_snapshot(ContinuableSnapshot(run_id='run-3', step_index=1, messages=plain.messages))

    # Restored as references (no blob read) and saved again: the stored envelopes are written in today's format,
    # their placeholders' sizes kept.
    references = OffloadingStepStore(
        FileStepStore(folder / 'steps', media_store=None),
        media_store=media,
        reference_key=REFERENCE_KEY,
        restore='references',
    )
    resumed = await references.latest_snapshot(run_id='run-1')
    assert resumed is not None
    await references.save_snapshot(ContinuableSnapshot(run_id='run-4', step_index=1, messages=resumed.messages))
    written = stored_text(folder / 'steps' / 'run-4')
    assert '"format": "mediastash-envelope-v2"' in written and '"v": 2' not in written
    assert 'image/png, 2.0 KiB stored as' in written
    back = await store.latest_snapshot(run_id='run-4')
    assert back is not None and back.messages == expected


async def test_kv_lean_values_restore(tmp_path: Path) -> None:
    folder = copied('kv', tmp_path)
    inner = InMemoryAsyncKV()
    for pk, sk, value in kv_rows(folder / 'kv.json'):
        await inner.put(pk, sk, value)
    store = KVHistoryStore(
        OffloadingKV(inner, media_store=DiskMediaStore(folder / 'media'), reference_key=REFERENCE_KEY)
    )
    assert await store.load('conversation-1') == expected_messages(folder)


def test_langgraph_v1_envelopes_restore_through_get_state(tmp_path: Path) -> None:
    folder = copied('langgraph', tmp_path)
    assert 'mediastash-langgraph-v1' in stored_text(folder)
    thread = {'configurable': {'thread_id': 'thread-1'}}
    with SqliteSaver.from_conn_string(str(folder / 'checkpoints.db')) as inner:
        saver = OffloadingCheckpointSaver(
            inner, media_store=DiskMediaStore(folder / 'media'), reference_key=REFERENCE_KEY
        )
        try:
            graph = graph_builder().compile(checkpointer=saver)
            assert graph.get_state(thread).values['messages'] == expected_graph_messages(folder)
            history = list(graph.get_state_history(thread))
            plain = graph_builder().compile(checkpointer=inner).get_state(thread).values['messages']
            assert history and all(
                state.values.get('messages', [])
                == expected_graph_messages(folder)[: len(state.values.get('messages', []))]
                for state in history
            )
            # A plain read of the old envelopes written back: kept (in today's format) under the key that sealed them.
            graph.invoke({'messages': plain}, {'configurable': {'thread_id': 'thread-2'}})
            again = graph.get_state({'configurable': {'thread_id': 'thread-2'}}).values['messages']
            assert again == expected_graph_messages(folder)
        finally:
            saver.close()
        stranger = OffloadingCheckpointSaver(
            inner, media_store=DiskMediaStore(folder / 'media'), reference_key=OTHER_KEY
        )
        try:
            with pytest.raises(UnvouchedEnvelopeError):
                graph_builder().compile(checkpointer=stranger).invoke(
                    {'messages': plain}, {'configurable': {'thread_id': 'x'}}
                )
        finally:
            stranger.close()
    assert 'mediastash-envelope-v2' in stored_text(folder)


async def test_openai_agents_envelope_v1_items_restore_exactly(tmp_path: Path) -> None:
    folder = copied('openai_agents', tmp_path)
    assert 'mediastash-envelope-v1' in stored_text(folder)
    expected = expected_items(folder)
    inner = SQLiteSession('session-1', folder / 'sessions.db')
    try:
        session = OffloadingSession(inner, media_store=DiskMediaStore(folder / 'media'), reference_key=REFERENCE_KEY)
        assert await session.get_items() == expected
        assert await session.get_items(limit=2) == expected[-2:]
        assert await session.pop_item() == expected[-1]
        assert await session.get_items() == expected[:-1]
        plain = await inner.get_items()
    finally:
        inner.close()

    # The edit rule on the old envelopes: an edited placeholder is kept, the untouched ones restore.
    plain[2]['output'] = 'summarised by hand'
    edited = SQLiteSession('edited', folder / 'sessions.db')
    try:
        await edited.add_items(plain)
        session = OffloadingSession(edited, media_store=DiskMediaStore(folder / 'media'))
        assert await session.get_items() == [*expected[:2], {**expected[2], 'output': 'summarised by hand'}]
    finally:
        edited.close()

    # Written back through a wrapper: kept under the key that sealed it (now in today's format), refused otherwise.
    for key, name in ((REFERENCE_KEY, 'again'), (OTHER_KEY, 'stranger')):
        target = SQLiteSession(name, folder / 'sessions.db')
        try:
            session = OffloadingSession(target, media_store=DiskMediaStore(folder / 'media'), reference_key=key)
            if key == OTHER_KEY:
                with pytest.raises(UnvouchedEnvelopeError):
                    await session.add_items(plain[:2])
                assert await target.get_items() == []
            else:
                await session.add_items(plain[:2])
                assert await session.get_items() == expected[:2]
                assert (await target.get_items())[0]['content'][1]['__mediastash_offloaded__']['format'] == (
                    'mediastash-envelope-v2'
                )
        finally:
            target.close()
