"""Old envelopes still restore (fixtures written by today's code): the pydantic-ai conversation store's entries.

The fixture (``tests/fixtures/envelopes/conversation_store/``, see
``tests/envelope_fixtures.py``) holds six entries saved through
``OffloadingConversationStore`` as ``v: 2`` envelopes in a SQLite conversation
store; read through today's wrapper they must be exactly the saved messages.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.stacks import skip_module_unless

skip_module_unless('conversation_store')

from mediastash import DiskMediaStore
from mediastash.integrations import OffloadingConversationStore
from tests.conversation_support import SqliteConversationStore
from tests.envelope_fixtures import FIXTURES, REFERENCE_KEY, expected_messages

pytestmark = [pytest.mark.pydantic_ai, pytest.mark.conversation_store]


async def test_conversation_store_v2_envelopes_restore(tmp_path: Path) -> None:
    folder = tmp_path / 'conversation_store'
    shutil.copytree(FIXTURES / 'conversation_store', folder)
    inner = SqliteConversationStore(folder / 'conversations.db')
    try:
        raw = await inner.read_history('entry-5')
        assert any('__mediastash_envelope__' in (entry.message.metadata or {}) for entry in raw)
        store = OffloadingConversationStore(
            inner, media_store=DiskMediaStore(folder / 'media'), reference_key=REFERENCE_KEY
        )
        entries = await store.read_history('entry-5')
        assert [entry.message for entry in entries] == expected_messages(folder)
        assert (await store.read_entry('entry-2')).message == expected_messages(folder)[2]
    finally:
        inner.close()
