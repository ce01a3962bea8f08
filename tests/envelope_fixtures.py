"""Persisted histories of every integration, for ``test_envelope_fixtures.py``: what they hold and how to write them.

``tests/fixtures/envelopes/<integration>/`` holds what one wrapper saved: the
inner store's own files (a harness ``FileStepStore`` folder, a KV dump, SQLite
databases of a conversation store, a LangGraph ``SqliteSaver`` and an OpenAI
Agents ``SQLiteSession``), the disk media store's folder (``media/``) and
``expected.json``, the history as it was handed to the wrapper. Each history
holds images, a big text and a structured tool output; ``REFERENCE_KEY`` sealed
the envelopes. The committed fixtures were written by the mediastash of the
commit that added them (envelopes ``v: 2``, ``mediastash-langgraph-v1`` and
``mediastash-envelope-v1``), so the test proves those formats keep restoring.
Rewriting them (``python -m tests.envelope_fixtures``) writes today's format
instead: only do that to add a fixture, and keep the old folders.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Final, TypedDict

from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from mediastash import DiskMediaStore
from mediastash.walker import WalkOptions

__all__ = [
    'FIXTURES',
    'INTEGRATIONS',
    'REFERENCE_KEY',
    'THRESHOLD',
    'expected_graph_messages',
    'expected_items',
    'expected_messages',
    'graph_builder',
    'kv_rows',
]

FIXTURES: Final = Path(__file__).parent / 'fixtures' / 'envelopes'
REFERENCE_KEY: Final = b'mediastash envelope fixtures key'
"""The fixed reference key (32 bytes) every fixture's wrapper used: a test key, never a secret."""
THRESHOLD: Final = 1024
"""Small, so the fixtures stay small: every payload below is larger, every other string smaller."""
INTEGRATIONS: Final = ('step_store', 'kv', 'conversation_store', 'langgraph', 'openai_agents')

PNG: Final = b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 8
JPEG: Final = b'\xff\xd8\xff\xe0' + bytes(reversed(range(256))) * 6
PDF: Final = b'%PDF-1.4\n' + bytes(index * 7919 % 251 for index in range(1800))
BIG_TEXT: Final = 'A long report on the quarterly numbers. ' * 60
TOOL_OUTPUT: Final = {'rows': [{'id': index, 'name': f'item {index}', 'price': index * 1.5} for index in range(60)]}


def pydantic_ai_history() -> list[ModelMessage]:
    """Images, a PDF, a big text response and a structured tool return (fixed timestamps: the JSON is exact)."""
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                UserPromptPart(
                    content=[
                        'what is in these?',
                        BinaryImage(data=PNG, media_type='image/png', identifier='photo-1'),
                        BinaryContent(data=PDF, media_type='application/pdf'),
                    ]
                )
            ],
            metadata={'note': 'first turn'},
        ),
        ModelResponse(parts=[ToolCallPart(tool_name='prices', args={'limit': 60}, tool_call_id='call-1')]),
        ModelRequest(parts=[ToolReturnPart(tool_name='prices', content=TOOL_OUTPUT, tool_call_id='call-1')]),
        ModelResponse(parts=[TextPart(BIG_TEXT)]),
        ModelRequest(
            parts=[UserPromptPart(content=['and this one?', BinaryImage(data=JPEG, media_type='image/jpeg')])]
        ),
        ModelResponse(parts=[TextPart('a small picture')]),
    ]
    text = ModelMessagesTypeAdapter.dump_json(messages).decode()
    return list(ModelMessagesTypeAdapter.validate_json(_fixed_times(text)))


def _fixed_times(text: str) -> str:
    """``text`` (messages' JSON) with every timestamp made one fixed instant."""
    value = json.loads(text)
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in node:
                if key == 'timestamp':
                    node[key] = '2026-01-02T03:04:05Z'
                else:
                    stack.append(node[key])
        elif isinstance(node, list):
            stack.extend(node)
    return json.dumps(value)


def expected_messages(folder: Path) -> list[ModelMessage]:
    return list(ModelMessagesTypeAdapter.validate_json((folder / 'expected.json').read_text()))


# -- LangGraph (imported only here: each stack has only some of the frameworks) ------------------------------


def graph_builder() -> Any:
    from langchain_core.messages import AnyMessage
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages

    # Functional form: the class form's annotation would be resolved in this module's globals, without these names.
    state = TypedDict('state', {'messages': Annotated[list[AnyMessage], add_messages]})  # type: ignore[misc]  # noqa: UP013
    builder = StateGraph(state)
    builder.add_node('noop', lambda state: {})
    builder.add_edge(START, 'noop')
    return builder


def graph_history() -> list[Any]:
    import base64

    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    return [
        HumanMessage(
            content=[
                {'type': 'text', 'text': 'what is in these?'},
                {'type': 'image', 'base64': base64.b64encode(PNG).decode(), 'mime_type': 'image/png'},
                {
                    'type': 'image_url',
                    'image_url': {'url': 'data:image/jpeg;base64,' + base64.b64encode(JPEG).decode()},
                },
            ],
            id='human-1',
        ),
        AIMessage(content='', tool_calls=[{'name': 'prices', 'args': {'limit': 60}, 'id': 'call-1'}], id='ai-1'),
        ToolMessage(content=json.dumps(TOOL_OUTPUT), tool_call_id='call-1', id='tool-1'),
        AIMessage(content=BIG_TEXT, id='ai-2'),
    ]


def expected_graph_messages(folder: Path) -> list[Any]:
    from langchain_core.messages import messages_from_dict

    return messages_from_dict(json.loads((folder / 'expected.json').read_text()))


# -- OpenAI Agents -----------------------------------------------------------------------------------------


def session_items() -> list[dict[str, Any]]:
    import base64

    return [
        {
            'role': 'user',
            'content': [
                {'type': 'input_text', 'text': 'what is in these?'},
                {
                    'type': 'input_image',
                    'image_url': 'data:image/png;base64,' + base64.b64encode(PNG).decode(),
                    'detail': 'auto',
                },
                {
                    'type': 'input_file',
                    'file_data': 'data:application/pdf;base64,' + base64.b64encode(PDF).decode(),
                    'filename': 'report.pdf',
                },
            ],
        },
        {'type': 'function_call', 'call_id': 'call-1', 'name': 'prices', 'arguments': '{"limit": 60}'},
        {'type': 'function_call_output', 'call_id': 'call-1', 'output': json.dumps(TOOL_OUTPUT)},
        {
            'type': 'message',
            'role': 'assistant',
            'id': 'msg-1',
            'status': 'completed',
            'content': [{'type': 'output_text', 'text': BIG_TEXT, 'annotations': []}],
        },
    ]


def expected_items(folder: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((folder / 'expected.json').read_text())
    return items


# -- KV ------------------------------------------------------------------------------------------------------


def kv_rows(path: Path) -> list[tuple[str, str, str]]:
    """The ``(pk, sk, value)`` rows of a KV dump written by ``_write_kv``."""
    return [(pk, sk, value) for pk, sk, value in json.loads(path.read_text())]


# -- writing ---------------------------------------------------------------------------------------------------


async def _write_step_store(folder: Path, media: DiskMediaStore) -> None:
    from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore

    from mediastash.integrations import OffloadingStepStore

    messages = pydantic_ai_history()
    store = OffloadingStepStore(
        FileStepStore(folder / 'steps', media_store=None),
        media_store=media,
        options=WalkOptions(threshold_bytes=THRESHOLD),
        reference_key=REFERENCE_KEY,
    )
    for step in (2, 4, 6):
        snapshot = ContinuableSnapshot(run_id='run-1', step_index=step, messages=messages[:step], state='complete')
        await store.save_snapshot(snapshot)
    (folder / 'expected.json').write_bytes(ModelMessagesTypeAdapter.dump_json(messages, indent=1))


async def _write_kv(folder: Path, media: DiskMediaStore) -> None:
    from pydantic_ai_persistence import InMemoryAsyncKV, KVHistoryStore

    from mediastash.integrations import OffloadingKV

    messages = pydantic_ai_history()
    inner = InMemoryAsyncKV()
    store = KVHistoryStore(
        OffloadingKV(
            inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD), reference_key=REFERENCE_KEY
        )
    )
    await store.save('conversation-1', messages)
    rows = [[pk, sk, value] for pk in ('hist#conversation-1',) for sk, value in await inner.query(pk)]
    (folder / 'kv.json').write_text(json.dumps(rows, indent=1))
    (folder / 'expected.json').write_bytes(ModelMessagesTypeAdapter.dump_json(messages, indent=1))


async def _write_conversation_store(folder: Path, media: DiskMediaStore) -> None:
    from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord

    from mediastash.integrations import OffloadingConversationStore
    from tests.conversation_support import SqliteConversationStore

    messages = pydantic_ai_history()
    inner = SqliteConversationStore(folder / 'conversations.db')
    try:
        store = OffloadingConversationStore(
            inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD), reference_key=REFERENCE_KEY
        )
        entries = []
        parent: str | None = None
        for index, message in enumerate(messages):
            entries.append(ConversationEntry(id=f'entry-{index}', parent_id=parent, message=message))
            parent = f'entry-{index}'
        record = ConversationRecord(conversation_id='conversation-1', head_id=parent, revision='r1')
        await store.write_record(record, new_entries=entries, expected_revision=None)
    finally:
        inner.close()
    (folder / 'expected.json').write_bytes(ModelMessagesTypeAdapter.dump_json(messages, indent=1))


def _write_langgraph(folder: Path, media: DiskMediaStore) -> None:
    from langchain_core.messages import messages_to_dict
    from langgraph.checkpoint.sqlite import SqliteSaver

    from mediastash.integrations.langgraph import OffloadingCheckpointSaver

    messages = graph_history()
    with SqliteSaver.from_conn_string(str(folder / 'checkpoints.db')) as inner:
        saver = OffloadingCheckpointSaver(
            inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD), reference_key=REFERENCE_KEY
        )
        try:
            graph = graph_builder().compile(checkpointer=saver)
            graph.invoke({'messages': messages}, {'configurable': {'thread_id': 'thread-1'}})
        finally:
            saver.close()
    (folder / 'expected.json').write_text(json.dumps(messages_to_dict(messages), indent=1))


async def _write_openai_agents(folder: Path, media: DiskMediaStore) -> None:
    from agents import SQLiteSession

    from mediastash.integrations.openai_agents import OffloadingSession

    items = session_items()
    inner = SQLiteSession('session-1', folder / 'sessions.db')
    session = OffloadingSession(
        inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD), reference_key=REFERENCE_KEY
    )
    await session.add_items(items[:2])
    await session.add_items(items[2:])
    inner.close()
    (folder / 'expected.json').write_text(json.dumps(items, indent=1))


async def write_all(names: Sequence[str] = INTEGRATIONS, root: Path = FIXTURES) -> None:
    """Write the fixture folders of ``names`` under ``root`` (each folder replaced whole).

    ``conversation_store`` needs the latest stack (``.venv-latest``), the others the harness stack.
    """
    for name in names:
        folder = root / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        media = DiskMediaStore(folder / 'media')
        if name == 'langgraph':
            await asyncio.to_thread(_write_langgraph, folder, media)
        else:
            await globals()[f'_write_{name}'](folder, media)
        for database in folder.glob('*.db'):  # one self-contained file each (no -wal / -shm beside it)
            with sqlite3.connect(database) as connection:
                connection.execute('PRAGMA wal_checkpoint(TRUNCATE)')
                connection.execute('PRAGMA journal_mode=DELETE')


if __name__ == '__main__':
    asyncio.run(write_all(sys.argv[1:] or INTEGRATIONS))
