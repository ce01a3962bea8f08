"""``OffloadingConversationStore`` over pydantic-ai's ``InMemoryConversationStore`` and a durable SQLite store.

Agent runs with ``conversation=`` and the base class's ``save`` / ``load`` /
``fork`` / ``branch`` / ``update`` go through the wrapper exactly as through
any ``ConversationStore``. Runs on the latest stack only (pydantic-ai 2.66+).
"""

from __future__ import annotations

import pytest

from tests.stacks import skip_module_unless

skip_module_unless('conversation_store')

import base64
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationStore, InMemoryConversationStore
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel
from pydantic_ai.ui.vercel_ai import VercelAIAdapter

from mediastash import MediaNotFoundError, MemoryMediaStore, make_static_public_url, media_uri_for
from mediastash.errors import InvalidArgumentError
from mediastash.gc import ConversationStoreRoot, as_root, collect_garbage
from mediastash.integrations import EnvelopeError, MediaUrls, OffloadingConversationStore
from mediastash.integrations.pydantic_ai._placeholders import PLACEHOLDER_PREFIX
from mediastash.testing import CountingMediaStore
from mediastash.walker import WalkOptions
from tests.conversation_support import SqliteConversationStore, scripted_agent

pytestmark = [pytest.mark.pydantic_ai, pytest.mark.conversation_store]

THRESHOLD = 4096
IMAGE_BYTES = 60_000
TOOL_OUTPUT_BYTES = 20_000
CDN = 'https://cdn.example/media'


@pytest.fixture(params=['memory', 'sqlite'])
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == 'memory':
        yield InMemoryConversationStore()
        return
    store = SqliteConversationStore(tmp_path / 'conversations.db')
    yield store
    store.close()


def image(seed: int) -> bytes:
    return seed.to_bytes(4, 'big') + os.urandom(IMAGE_BYTES)


def wrap(inner: ConversationStore, media: Any, **options: Any) -> OffloadingConversationStore:
    walk = {key: options.pop(key) for key in ('known_blobs', 'max_concurrency') if key in options}
    return OffloadingConversationStore(
        inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD, **walk), **options
    )


async def talk(
    store: ConversationStore,
    conversation_id: str,
    turns: int,
    *,
    first: int = 0,
    images: dict[int, bytes] | None = None,
) -> list[ModelMessage]:
    """``turns`` agent runs, each loading the conversation, sending a prompt with an image and saving the result.

    Returns the messages of the last run's result (the whole conversation as the runs produced it).
    """
    agent = scripted_agent(TOOL_OUTPUT_BYTES)
    images = {} if images is None else images
    messages: list[ModelMessage] = []
    for turn in range(first, first + turns):
        conversation = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
        picture = images.setdefault(turn % 7, image(turn % 7))  # some images come back in later turns
        result = await agent.run(
            [f'turn {turn}: what is in it?', BinaryImage(picture, media_type='image/png')], conversation=conversation
        )
        await store.save(result)
        messages = result.all_messages()
    return messages


def binary_parts(messages: list[ModelMessage]) -> list[BinaryContent]:
    return [
        item
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
        if isinstance(item, BinaryContent)
    ]


def inner_json(messages: list[ModelMessage]) -> str:
    return ModelMessagesTypeAdapter.dump_json(messages).decode()


# -- the agent conversation ---------------------------------------------------------------------


async def test_a_twenty_turn_agent_conversation_loads_exactly_what_the_runs_produced(
    inner: Any, tmp_path: Path
) -> None:
    media = CountingMediaStore(MemoryMediaStore())
    store = wrap(inner, media)
    produced = await talk(store, 'chat', 20)

    loaded = await store.load('chat')
    assert loaded is not None
    assert loaded.messages == produced
    assert [item.data for item in binary_parts(loaded.messages)] == [item.data for item in binary_parts(produced)]
    assert len(binary_parts(produced)) == 20
    # Seven distinct images, each stored once; every third turn's tool output stored as well.
    tool_outputs = [
        part
        for message in produced
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == 'read_log'
    ]
    assert len(tool_outputs) == 6
    assert len([uri async for uri in media.inner.iter_uris()]) == 7 + 6

    # The inner store holds no payload: its messages are as long as a few placeholders, not the media.
    plain = await inner.load('chat')
    assert plain is not None and len(plain.messages) == len(produced)
    stored, full = len(inner_json(plain.messages)), len(inner_json(produced))
    assert stored * 20 < full, (stored, full)
    if isinstance(inner, SqliteConversationStore):
        rows = sqlite3.connect(inner.path).execute('SELECT sum(length(message)) FROM entries').fetchone()[0]
        assert rows * 20 < full, (rows, full)


async def test_loading_a_window_and_continuing_appends_through_the_wrapper(inner: Any) -> None:
    media = MemoryMediaStore()
    store = wrap(inner, media)
    produced = await talk(store, 'chat', 4)
    window = await store.load('chat', limit=3)
    assert window is not None and window.messages == produced[-3:]
    result = await scripted_agent().run('and now?', conversation=window)
    await store.save(result)
    whole = await store.load('chat')
    assert whole is not None and whole.messages == [*produced, *result.new_messages()]


async def test_entries_already_stored_are_never_written_again(inner: Any) -> None:
    media = CountingMediaStore(MemoryMediaStore())
    store = wrap(inner, media)
    await talk(store, 'chat', 3)
    entries = await store.load_entries('chat')
    assert entries is not None
    envelopes_before = [entry.message for entry in await inner.read_history(entries[-1].id)]
    puts = media.calls['put']
    await talk(store, 'chat', 1, first=3)
    after = await inner.read_history(entries[-1].id)
    assert [entry.message for entry in after] == envelopes_before
    assert media.calls['put'] == puts + 1  # only the new turn's image (its tool output is not due)


# -- fork, branch, update, delete, conflicts ----------------------------------------------------


async def test_fork_and_branch_store_no_blob_again(inner: Any) -> None:
    media = CountingMediaStore(MemoryMediaStore())
    store = wrap(inner, media)
    produced = await talk(store, 'chat', 5)
    puts = media.calls['put']

    fork = await store.fork('chat', at=4, new_conversation_id='fork')
    assert fork.messages == produced[:4]
    loaded = await store.load('chat')
    assert loaded is not None
    branched = await store.branch('chat', at=2, expected_revision=loaded.revision)
    assert branched.messages == produced[:2]
    assert media.calls['put'] == puts

    # Both go on with runs of their own; the images they repeat are known and not stored again.
    forked = await store.load('fork')
    assert forked is not None and forked.messages == produced[:4]
    result = await scripted_agent().run('more', conversation=forked)
    await store.save(result)
    again = await store.load('fork')
    assert again is not None and again.messages == result.all_messages()
    record = await store.read_record('chat')
    assert record is not None and len(record.branches) == 1
    back = await store.branch('chat', from_entry=record.branches[0], expected_revision=record.revision)
    assert back.messages == produced
    assert media.calls['put'] == puts


async def test_conflicts_titles_and_deletes_pass_through(inner: Any) -> None:
    media = MemoryMediaStore()
    store = wrap(inner, media)
    await talk(store, 'chat', 2)
    stale = await store.load('chat')
    assert stale is not None
    saved = await talk(store, 'chat', 1, first=2)
    result = await scripted_agent().run(['late', BinaryImage(image(99), media_type='image/png')], conversation=stale)
    with pytest.raises(ConversationConflict):
        await store.save(result)
    current = await store.load('chat')
    assert current is not None and current.messages == saved  # the stale save wrote nothing

    record = await store.update('chat', title='Pictures', metadata={'model': 'test'})
    assert (record.title, record.metadata) == ('Pictures', {'model': 'test'})
    with pytest.raises(ConversationConflict):
        await store.update('chat', title='Other', expected_title=None)
    assert [r.conversation_id for r in await store.list_conversations()] == ['chat']
    await store.save(await scripted_agent().run('one more', conversation=current))
    reread = await inner.read_record('chat')
    assert reread is not None and reread.title == 'Pictures'  # a save keeps the title an update set

    await store.delete('chat')
    assert await store.load('chat') is None
    assert await inner.read_record('chat') is None


async def test_scopes_keep_conversations_apart(inner: Any) -> None:
    store = wrap(inner, MemoryMediaStore())
    result = await scripted_agent().run(['hi', BinaryImage(image(1), media_type='image/png')], conversation_id='a')
    await store.save(result, scope='alice')
    assert await store.load('a', scope='bob') is None
    mine = await store.load('a', scope='alice')
    assert mine is not None and mine.messages == result.all_messages()
    assert [r.conversation_id for r in await store.list_conversations(scope='alice')] == ['a']
    assert await store.list_conversations(scope='bob') == []


# -- what a plain reader sees, and errors -------------------------------------------------------


async def test_a_plain_reader_sees_every_part_with_placeholders_naming_the_blobs(inner: Any) -> None:
    media = MemoryMediaStore()
    store = wrap(inner, media)
    produced = await talk(store, 'chat', 3)
    plain = await inner.load('chat')
    assert plain is not None
    assert [len(message.parts) for message in plain.messages] == [len(message.parts) for message in produced]
    assert binary_parts(plain.messages) == []
    prompts = [
        item
        for message in plain.messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
    ]
    shown = [item for item in prompts if isinstance(item, str) and item.startswith(PLACEHOLDER_PREFIX)]
    assert [text.split(' stored as ')[1].split(';')[0] for text in shown] == [
        media_uri_for(item.data) for item in binary_parts(produced)
    ]
    assert all('image/png' in text and "mediastash's OffloadingConversationStore" in text for text in shown)
    # An agent that continues from the plain read sees the placeholders and runs.
    result = await scripted_agent().run('what did I send?', conversation=plain)
    assert result.output.startswith('answer')


async def test_a_missing_blob_and_a_damaged_envelope_raise_errors_naming_the_entry(inner: Any) -> None:
    media = MemoryMediaStore()
    store = wrap(inner, media)
    await talk(store, 'chat', 1)
    entries = await inner.load_entries('chat')
    assert entries is not None
    first = entries[0]

    fresh = wrap(inner, MemoryMediaStore(), known_blobs=False)  # the blobs live elsewhere
    with pytest.raises(MediaNotFoundError) as missing:
        await fresh.load('chat')
    assert f'conversation entry {first.id!r}' in str(missing.value)

    envelope = first.message.metadata
    assert isinstance(envelope, dict)
    (key,) = envelope
    damaged = {key: {**envelope[key], 'format': 'mediastash-envelope-v99'}}
    if isinstance(inner, SqliteConversationStore):
        body = json.loads(
            sqlite3.connect(inner.path).execute('SELECT message FROM entries WHERE id = ?', (first.id,)).fetchone()[0]
        )
        body[0]['metadata'] = damaged
        with sqlite3.connect(inner.path) as db:
            db.execute('UPDATE entries SET message = ? WHERE id = ?', (json.dumps(body), first.id))
    else:
        inner._entries[first.id].message.metadata = damaged
    with pytest.raises(EnvelopeError) as damaged_error:
        await store.load('chat')
    assert damaged_error.value.entry_id == first.id
    assert str(damaged_error.value).startswith(
        f"conversation entry {first.id!r}: mediastash envelope has unsupported format 'mediastash-envelope-v99'"
    )


def test_settings_are_checked_without_echoing_values() -> None:
    with pytest.raises(InvalidArgumentError, match=r'^inner must be a pydantic-ai ConversationStore.*got a dict'):
        OffloadingConversationStore({'secret': 'x'}, media_store=MemoryMediaStore())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"restore must be 'bytes' or 'references' \(got a str\)"):
        OffloadingConversationStore(InMemoryConversationStore(), media_store=MemoryMediaStore(), restore='urls')  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match='threshold_bytes'):
        OffloadingConversationStore(
            InMemoryConversationStore(), media_store=MemoryMediaStore(), options=WalkOptions(threshold_bytes=-1)
        )


# -- references: loads that read no blob --------------------------------------------------------


async def test_references_load_reads_no_blob_and_media_urls_send_urls(inner: Any) -> None:
    media = CountingMediaStore(MemoryMediaStore(public_url=make_static_public_url(CDN)))
    produced = await talk(wrap(inner, media), 'chat', 3)
    gets = media.calls['get'] + media.calls['get_many']

    lazy = wrap(inner, media, restore='references')
    loaded = await lazy.load('chat')
    assert loaded is not None
    assert media.calls['get'] + media.calls['get_many'] == gets
    references = [
        item
        for message in loaded.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
        if isinstance(item, ImageUrl)
    ]
    # Each reference is the blob's URI, sealed for this process (the part after '#' vouches for it).
    assert [ref.url.partition('#')[0] for ref in references] == [
        media_uri_for(item.data) for item in binary_parts(produced)
    ]
    assert all(ref.url.partition('#')[2] for ref in references)

    sent: list[list[ModelMessage]] = []
    result = await scripted_agent(sent=sent).run(
        'and the last one?', conversation=loaded, capabilities=[MediaUrls(media)]
    )
    await lazy.save(result)
    urls = [item.url for item in _items(sent[0]) if isinstance(item, ImageUrl)]
    assert urls and all(url.startswith(CDN) for url in urls)
    assert not any(isinstance(item, BinaryContent) for item in _items(sent[0]))

    # A bytes load of the same conversation gives every image back.
    whole = await wrap(inner, media).load('chat')
    assert whole is not None
    assert [item.data for item in binary_parts(whole.messages)] == [item.data for item in binary_parts(produced)]
    assert whole.messages[: len(produced)] == produced


def _items(messages: list[ModelMessage]) -> list[Any]:
    return [
        item
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
    ]


# -- garbage collection -------------------------------------------------------------------------


async def test_gc_keeps_every_blob_a_record_or_branch_reaches(inner: Any) -> None:
    media = MemoryMediaStore()
    store = wrap(inner, media)
    images = {turn: image(100 + turn) for turn in range(7)}
    await talk(store, 'chat', 4, images=images)
    loaded = await store.load('chat')
    assert loaded is not None
    await store.branch('chat', at=2, expected_revision=loaded.revision)  # turns 1-2 only on the branch left
    await talk(store, 'other', 1, first=5, images=images)
    stored = {uri async for uri in media.iter_uris()}

    assert isinstance(as_root(store), ConversationStoreRoot)
    assert isinstance(as_root(inner), ConversationStoreRoot)
    kept = await collect_garbage(media, [store], grace=0, dry_run=False)
    assert kept.deleted == 0
    assert {uri async for uri in media.iter_uris()} == stored
    whole = await store.load('chat')
    assert whole is not None and len(binary_parts(whole.messages)) == 1

    await store.delete('chat')
    report = await collect_garbage(media, [inner], grace=0, dry_run=False)
    # Only the other conversation's one image is left: the deleted one's images and tool output went.
    assert {uri async for uri in media.iter_uris()} == {media_uri_for(images[5])}
    assert report.deleted == len(stored) - 1
    other = await store.load('other')
    assert other is not None and [item.data for item in binary_parts(other.messages)] == [images[5]]


# -- a UI adapter that takes the store ----------------------------------------------------------


async def test_the_vercel_ai_adapter_loads_and_saves_through_the_wrapper(inner: Any) -> None:
    """The adapter holds the conversation on the server: each request sends the client's messages, the
    adapter loads the stored ones through the wrapper, runs, and saves the new turn through it."""
    media = CountingMediaStore(MemoryMediaStore())
    store = wrap(inner, media)
    agent: Agent[None, str] = Agent(TestModel(custom_output_text='a picture'))
    first = image(1)
    pictures = [first, image(2), first]
    client: list[dict[str, Any]] = []
    for turn, picture in enumerate(pictures):
        url = 'data:image/png;base64,' + base64.b64encode(picture).decode()
        client.append(
            {
                'id': f'user-{turn}',
                'role': 'user',
                'parts': [
                    {'type': 'text', 'text': f'look {turn}'},
                    {'type': 'file', 'mediaType': 'image/png', 'url': url},
                ],
            }
        )
        body = json.dumps({'trigger': 'submit-message', 'id': 'chat', 'messages': client}).encode()
        adapter = VercelAIAdapter(
            agent=agent, run_input=VercelAIAdapter.build_run_input(body), conversation_store=store
        )
        events = [event async for event in adapter.encode_stream(adapter.run_stream())]
        assert '"finishReason":"error"' not in ''.join(events)
        assert '"type":"text-delta"' in ''.join(events)
        client.append(
            {'id': f'assistant-{turn}', 'role': 'assistant', 'parts': [{'type': 'text', 'text': 'a picture'}]}
        )

    loaded = await store.load('chat')
    assert loaded is not None
    assert [item.data for item in binary_parts(loaded.messages)] == pictures
    assert media.calls['put'] == 2, (media.put_sizes, dict(media.calls))  # the repeated picture is stored once
    plain = await inner.load('chat')
    assert plain is not None and binary_parts(plain.messages) == []
