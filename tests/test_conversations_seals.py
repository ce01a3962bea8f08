"""``OffloadingConversationStore`` honours an envelope in a conversation to save only when it sealed it (issue 27
follow-up, ``docs/security.md``): a client-sent history naming another user's blob is refused and nothing is read
or stored; a sealed plain read saved back stays lean; old unsealed envelopes in storage still load. Latest stack
only (pydantic-ai 2.66+); the same checks on the step store, LangGraph and OpenAI Agents are in
``test_envelope_seals``.
"""

from __future__ import annotations

import pytest

from tests.stacks import skip_module_unless

skip_module_unless('conversation_store')

import json
import os
from pathlib import Path
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import InMemoryConversationStore
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

from mediastash import MemoryMediaStore, UnvouchedEnvelopeError, media_uri_for
from mediastash.integrations import ENVELOPE_KEY, OffloadingConversationStore
from mediastash.testing import CountingMediaStore
from tests.conversation_support import SqliteConversationStore

pytestmark = [pytest.mark.pydantic_ai, pytest.mark.conversation_store]

ALICE_IMAGE = b'\x89PNG alice ' + os.urandom(150_000)
BOB_IMAGE = b'\x89PNG bob ' + os.urandom(150_000)


@pytest.fixture(params=['memory', 'sqlite'])
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == 'memory':
        yield InMemoryConversationStore()
        return
    store = SqliteConversationStore(tmp_path / 'conversations.db')
    yield store
    store.close()


def prompt(image: bytes) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(content=['look', BinaryContent(data=image, media_type='image/png')])])]


def reads(store: CountingMediaStore) -> int:
    return sum(count for name, count in store.calls.items() if name.startswith('get') and name != 'get_metadata')


def swapped(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with Alice's URI made Bob's wherever it appears: the edit an attacking client makes."""
    text = ModelMessagesTypeAdapter.dump_json(messages).decode()
    return list(
        ModelMessagesTypeAdapter.validate_json(text.replace(media_uri_for(ALICE_IMAGE), media_uri_for(BOB_IMAGE)))
    )


def unsealed(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with the first envelope's seal taken off (as mediastash wrote envelopes before seals)."""
    data = json.loads(ModelMessagesTypeAdapter.dump_json(messages))
    del data[0]['metadata'][ENVELOPE_KEY]['seal']
    return list(ModelMessagesTypeAdapter.validate_python(data))


async def saved(inner: Any, media: Any) -> tuple[OffloadingConversationStore, list[ModelMessage]]:
    store = OffloadingConversationStore(inner, media_store=media)
    for name, image in (('bob', BOB_IMAGE), ('alice', ALICE_IMAGE)):
        await store.save(Conversation(conversation_id=name, messages=prompt(image)))
    plain = await inner.load('alice')
    assert plain is not None and ENVELOPE_KEY in (plain.messages[0].metadata or {})
    return store, list(plain.messages)


async def test_a_client_sent_envelope_naming_another_users_blob_is_refused(inner: Any) -> None:
    media = MemoryMediaStore()
    _, plain = await saved(inner, media)
    counting = CountingMediaStore(media)
    store = OffloadingConversationStore(inner, media_store=counting)
    for forged, reason in (
        (swapped(plain), 'invalid'),
        (unsealed(swapped(plain)), 'unsigned'),
    ):
        with pytest.raises(UnvouchedEnvelopeError) as caught:
            await store.save(Conversation(conversation_id='mallory', messages=forged))
        assert caught.value.reason == reason and caught.value.where == 'message 0'
        assert media_uri_for(BOB_IMAGE)[15:] not in str(caught.value)
    assert reads(counting) == 0
    assert await inner.load('mallory') is None


async def test_a_sealed_plain_read_saved_back_stays_lean_and_old_unsealed_envelopes_load(inner: Any) -> None:
    media = MemoryMediaStore()
    store, plain = await saved(inner, media)
    await store.save(Conversation(conversation_id='copy', messages=plain))
    stored = await inner.load('copy')
    assert stored is not None and ENVELOPE_KEY in (stored.messages[0].metadata or {})
    loaded = await store.load('copy')
    assert loaded is not None and loaded.messages[0].parts[0].content[1].data == ALICE_IMAGE

    await inner.save(Conversation(conversation_id='old', messages=unsealed(plain)))
    old = await store.load('old')
    assert old is not None and old.messages[0].parts[0].content[1].data == ALICE_IMAGE
