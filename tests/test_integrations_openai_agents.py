"""``OffloadingSession`` over the OpenAI Agents SDK's real ``SQLiteSession``, plain vs wrapped.

Thirty turns of user messages with images (``input_image`` data URLs), PDFs
(``input_file`` data URLs and bare base64) and 200 KB tool outputs: the same
items back (``get_items``, ``limit=``, ``pop_item``), a database at least twenty
times smaller, one blob per distinct payload, placeholders naming the blob for a
plain reader, garbage collection through ``SessionRoot`` and
``SQLiteSessionRoot``, and a real ``Runner.run`` against a local Responses
endpoint that receives the restored media.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from mediastash import DiskMediaStore
from mediastash.errors import InvalidArgumentError, UnsupportedMarkerFormat
from mediastash.gc import RootReadError, SQLiteSessionRoot, collect_garbage
from mediastash.integrations.openai_agents import ENVELOPE_FORMAT, ENVELOPE_KEY, OffloadingSession, SessionRoot
from mediastash.uri import media_uri_for
from mediastash.walker import WalkOptions
from tests.provider_endpoint import ProviderEndpoint

TURNS = 30
RNG = random.Random(30)
IMAGES = [RNG.randbytes(80_000) for _ in range(TURNS)]
PDFS = [b'%PDF-1.7\n' + RNG.randbytes(100_000) for _ in range(TURNS // 3)]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def tool_output(turn: int) -> str:
    return ''.join(f'turn {turn} row {row:06d}: a line of a large tool result\n' for row in range(200_000 // 45))


def turn_items(turn: int) -> list[Any]:
    """One turn: a user message with an image (the first image again every fifth turn) and every third turn a PDF,
    a tool call with a 200 KB output, and a short assistant answer."""
    image = IMAGES[0] if turn % 5 == 4 else IMAGES[turn]
    content: list[Any] = [
        {'type': 'input_text', 'text': f'turn {turn}: what is in this picture?'},
        {'type': 'input_image', 'image_url': f'data:image/png;base64,{b64(image)}', 'detail': 'auto'},
    ]
    if turn % 3 == 0:
        pdf = PDFS[turn // 3]
        data = f'data:application/pdf;base64,{b64(pdf)}' if turn % 2 == 0 else b64(pdf)  # bare base64 too
        content.append({'type': 'input_file', 'file_data': data, 'filename': f'report-{turn}.pdf'})
    return [
        {'role': 'user', 'content': content},
        {
            'type': 'function_call',
            'call_id': f'call_{turn}',
            'name': 'read_log',
            'arguments': json.dumps({'turn': turn}),
            'id': f'fc_{turn}',
            'status': 'completed',
        },
        {'type': 'function_call_output', 'call_id': f'call_{turn}', 'output': tool_output(turn)},
        {
            'type': 'message',
            'role': 'assistant',
            'id': f'msg_{turn}',
            'status': 'completed',
            'content': [{'type': 'output_text', 'text': f'answer {turn}', 'annotations': []}],
        },
    ]


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    media = DiskMediaStore(tmp_path / 'media')
    yield media
    await media.aclose()


async def fill(session: Any) -> list[Any]:
    added: list[Any] = []
    for turn in range(TURNS):
        items = turn_items(turn)
        await session.add_items(items)
        added += items
    return added


async def test_thirty_turns_read_back_exactly_from_a_database_twenty_times_smaller(
    tmp_path: Path, store: DiskMediaStore
) -> None:
    plain = SQLiteSession('chat', tmp_path / 'plain.db')
    inner = SQLiteSession('chat', tmp_path / 'wrapped.db')
    wrapped = OffloadingSession(inner, media_store=store)
    items = await fill(plain)
    originals = copy.deepcopy(items)
    assert await fill(wrapped) == originals  # the caller's items are never changed

    assert await wrapped.get_items() == await plain.get_items() == originals
    for limit in (1, 3, 7, 120):
        assert await wrapped.get_items(limit=limit) == await plain.get_items(limit=limit) == originals[-limit:]
    fresh = OffloadingSession(
        inner, media_store=store, options=WalkOptions(known_blobs=False)
    )  # remembers nothing: reads the store
    assert await fresh.get_items(limit=9) == originals[-9:]

    plain.close()
    inner.close()
    plain_bytes = (tmp_path / 'plain.db').stat().st_size
    wrapped_bytes = (tmp_path / 'wrapped.db').stat().st_size
    assert plain_bytes >= 20 * wrapped_bytes, (plain_bytes, wrapped_bytes)

    images = {IMAGES[0] if turn % 5 == 4 else IMAGES[turn] for turn in range(TURNS)}
    distinct = {*images, *PDFS, *(tool_output(turn).encode() for turn in range(TURNS))}
    uris = {uri async for uri in store.iter_uris()}
    assert uris == {media_uri_for(payload) for payload in distinct}  # one blob per distinct payload


async def test_pop_item_returns_the_last_item_exactly_and_removes_it(tmp_path: Path, store: DiskMediaStore) -> None:
    plain = SQLiteSession('chat', tmp_path / 'plain.db')
    wrapped = OffloadingSession(SQLiteSession('chat', tmp_path / 'wrapped.db'), media_store=store)
    await fill(plain)
    await fill(wrapped)
    for _ in range(3):  # an assistant message, a 200 KB tool output, a tool call
        assert await wrapped.pop_item() == await plain.pop_item()
    assert (await wrapped.get_items(limit=1))[0]['role'] == 'user'
    assert await wrapped.get_items() == await plain.get_items()
    await wrapped.clear_session()
    assert await wrapped.pop_item() is None
    assert await wrapped.inner.get_items() == []


async def test_a_plain_reader_sees_every_item_with_placeholders_naming_the_blobs(
    tmp_path: Path, store: DiskMediaStore
) -> None:
    inner = SQLiteSession('chat', tmp_path / 'wrapped.db')
    wrapped = OffloadingSession(inner, media_store=store)
    await wrapped.add_items(turn_items(0))
    lean = await inner.get_items()
    assert len(lean) == 4
    user, call, output, answer = lean
    image = user['content'][1]
    assert image['image_url'].startswith('[mediastash placeholder: image/png, 78.1 KiB stored as ')
    assert media_uri_for(IMAGES[0]) in image['image_url']
    assert image[ENVELOPE_KEY]['format'] == ENVELOPE_FORMAT == 'mediastash-envelope-v2'
    assert image[ENVELOPE_KEY]['slots'][0]['prefix'] == 'data:image/png;base64,'
    pdf = user['content'][2]
    assert pdf['file_data'].startswith('[mediastash placeholder: application/pdf') and pdf['filename'] == 'report-0.pdf'
    assert output['output'].startswith('[mediastash placeholder: text, ')
    assert media_uri_for(tool_output(0).encode()) in output['output']
    assert user['content'][0] == turn_items(0)[0]['content'][0]  # small items and parts stay as they are
    assert call == turn_items(0)[1] and answer == turn_items(0)[3]
    assert wrapped.session_id == 'chat' and wrapped.session_settings is inner.session_settings


async def test_an_edit_made_through_a_plain_reader_is_kept(tmp_path: Path, store: DiskMediaStore) -> None:
    inner = SQLiteSession('chat', tmp_path / 'wrapped.db')
    wrapped = OffloadingSession(inner, media_store=store)
    await wrapped.add_items(turn_items(0))
    lean = await inner.get_items()
    lean[2]['output'] = 'the tool output, summarised by hand'  # edited where the placeholder was
    await inner.clear_session()
    await inner.add_items(lean)
    restored = await wrapped.get_items()
    assert restored[2] == {'type': 'function_call_output', 'call_id': 'call_0', 'output': lean[2]['output']}
    assert restored[0] == turn_items(0)[0]  # the untouched image and PDF come back


async def test_reserved_keys_and_unknown_envelopes_are_refused(tmp_path: Path, store: DiskMediaStore) -> None:
    inner = SQLiteSession('chat', tmp_path / 'wrapped.db')
    wrapped = OffloadingSession(inner, media_store=store)
    with pytest.raises(InvalidArgumentError, match=ENVELOPE_KEY) as caught:
        await wrapped.add_items([{'role': 'user', 'content': 'hi', ENVELOPE_KEY: 'secret-value'}])
    assert 'secret-value' not in str(caught.value)
    assert await inner.get_items() == []
    future = {'format': 'mediastash-envelope-v9', 'slots': []}
    await inner.add_items([{'role': 'user', 'content': 'placeholder', ENVELOPE_KEY: future}])
    with pytest.raises(UnsupportedMarkerFormat):
        await wrapped.get_items()
    with pytest.raises(RootReadError, match='SQLiteSession'):
        await collect_garbage(store, [SessionRoot(wrapped)], grace=0, dry_run=True)
    with pytest.raises(TypeError, match='SessionABC'):
        OffloadingSession(object(), media_store=store)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match='threshold_bytes'):
        OffloadingSession(inner, media_store=store, options=WalkOptions(threshold_bytes=-1))


async def test_gc_keeps_what_any_session_references(tmp_path: Path, store: DiskMediaStore) -> None:
    database = tmp_path / 'sessions.db'
    first = OffloadingSession(SQLiteSession('first', database), media_store=store)
    second = OffloadingSession(SQLiteSession('second', database), media_store=store)
    await first.add_items(turn_items(1))
    await second.add_items(turn_items(2))
    await second.add_items(turn_items(4))  # its image is the first turn's image again
    orphan = await store.put(b'no session references this' * 100)
    kept_first = {media_uri_for(IMAGES[1]), media_uri_for(tool_output(1).encode())}
    kept_second = {media_uri_for(IMAGES[2]), media_uri_for(IMAGES[0])} | {
        media_uri_for(tool_output(turn).encode()) for turn in (2, 4)
    }
    report = await collect_garbage(store, [SQLiteSessionRoot(database)], grace=0, uris_file=tmp_path / 'dry')
    assert set(report.iter_uris('deletable')) == {orphan}
    roots = [SessionRoot(first), SessionRoot(second)]
    report = await collect_garbage(store, roots, grace=0, dry_run=False, uris_file=tmp_path / 'a')
    assert set(report.iter_uris('deleted')) == {orphan}
    await second.clear_session()  # blobs stay until the collector runs
    assert {uri async for uri in store.iter_uris()} == kept_first | kept_second
    report = await collect_garbage(
        store, [SQLiteSessionRoot(database)], grace=0, dry_run=False, uris_file=tmp_path / 'b'
    )
    assert set(report.iter_uris('deleted')) == kept_second
    assert await first.get_items() == turn_items(1)
    sqlite3.connect(tmp_path / 'empty.db').execute('CREATE TABLE other (x)').connection.close()
    with pytest.raises(RootReadError, match='agent_messages'):
        await collect_garbage(store, [SQLiteSessionRoot(tmp_path / 'empty.db')], grace=0, dry_run=True)
    with pytest.raises(InvalidArgumentError, match='messages_table'):
        SQLiteSessionRoot(database, messages_table='x; DROP TABLE y')


async def test_runner_run_sends_the_restored_media_and_stores_it_lean(tmp_path: Path, store: DiskMediaStore) -> None:
    set_tracing_disabled(True)
    image = IMAGES[3]
    async with ProviderEndpoint(reply='A picture of noise.') as endpoint:
        client = AsyncOpenAI(base_url=endpoint.openai_base_url, api_key='test')
        agent = Agent(name='looker', model=OpenAIResponsesModel(model='gpt-test', openai_client=client))
        inner = SQLiteSession('runner', tmp_path / 'runner.db')
        session = OffloadingSession(inner, media_store=store)
        question = {
            'role': 'user',
            'content': [
                {'type': 'input_text', 'text': 'What is this?'},
                {'type': 'input_image', 'image_url': f'data:image/png;base64,{b64(image)}', 'detail': 'auto'},
            ],
        }
        first = await Runner.run(agent, [question], session=session)
        assert first.final_output == 'A picture of noise.'
        second = await Runner.run(agent, 'And again?', session=session)
        assert second.final_output == 'A picture of noise.'
        sent = endpoint.model_requests('openai-responses')[-1].json['input']
        images = [part for item in sent for part in item.get('content', []) if isinstance(part, dict)]
        assert any(part.get('image_url') == question['content'][1]['image_url'] for part in images)
    items = await session.get_items()
    assert [item.get('role') for item in items] == ['user', 'assistant', 'user', 'assistant']
    assert items[0]['content'][1]['image_url'] == question['content'][1]['image_url']
    lean = json.dumps(await inner.get_items())
    assert b64(image)[:1000] not in lean and media_uri_for(image) in lean
    with sqlite3.connect(tmp_path / 'runner.db') as connection:
        stored = connection.execute('SELECT SUM(LENGTH(message_data)) FROM agent_messages').fetchone()[0]
    assert stored < 5_000
