"""``OffloadingConversationStore``: media offloading for any pydantic-ai ``ConversationStore`` (pydantic-ai 2.66+)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pydantic_ai.conversation_store import (
    ConversationDetails,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from mediastash.errors import InvalidArgumentError
from mediastash.integrations.pydantic_ai._envelope import EntriesPlace
from mediastash.integrations.pydantic_ai._store_wrapper import MessageStoreWrapper

__all__ = ['OffloadingConversationStore']


class OffloadingConversationStore(MessageStoreWrapper[ConversationStore], ConversationStore):
    """A ``ConversationStore`` that keeps payloads at or above ``threshold_bytes`` in ``media_store``.

    It wraps ``inner``, any ``ConversationStore``, and is one itself: ``load``,
    ``save``, ``fork``, ``branch``, ``update``, ``delete`` and
    ``list_conversations`` are pydantic-ai's, built on the primitives below.
    ``write_record`` stores the payloads of each new entry's message, then hands
    ``inner`` the entry with an envelope in its place (the step store's format:
    every part kept, each payload a placeholder naming its URI, so a reader
    without mediastash sees the whole conversation). Entries already stored are
    never written again, so a fork or a branch stores nothing. ``read_entry``
    and ``read_history`` restore the messages, a history in one batch (one read
    per distinct blob, known blobs from the cache). Records, scopes, revisions,
    conflicts, ``write_details`` and ``delete_record`` are ``inner``'s.

    ``restore``, ``reference_key`` and ``options`` (and, deprecated, the
    separate walk keywords) are those of ``OffloadingStepStore``:
    with ``restore='references'`` a load reads no blob and gives reference
    parts sealed with ``reference_key`` (give ``MediaUrls`` the same one), and
    a save writes markers only for references that key vouches for
    (``docs/conversations.md``).
    """

    _wrapper_name = 'OffloadingConversationStore'

    def _check_inner(self, inner: ConversationStore) -> None:
        if not isinstance(inner, ConversationStore):
            raise InvalidArgumentError(
                'inner', 'a pydantic-ai ConversationStore (pydantic_ai.conversation_store)', inner
            )

    # -- writing: payloads out of new entries ---------------------------------------------------

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store the new entries' payloads, then ``inner.write_record`` with their lean messages."""
        entries = list(new_entries)
        if entries:
            lean = await self._offloader.offload([entry.message for entry in entries])
            entries = [
                entry if message is entry.message else dataclasses.replace(entry, message=message)
                for entry, message in zip(entries, lean, strict=True)
            ]
        await self.inner.write_record(record, new_entries=entries, expected_revision=expected_revision)

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        """``inner.write_details``: a record's title and metadata hold no message."""
        return await self.inner.write_details(
            conversation_id, details, expected_revision=expected_revision, expected=expected
        )

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """``inner.delete_record`` (blobs go only by garbage collection: other entries may share them)."""
        await self.inner.delete_record(conversation_id, expected_revision=expected_revision)

    # -- reading: records as they are, entries restored -----------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """``inner.read_record``."""
        return await self.inner.read_record(conversation_id)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        """``inner.read_records``."""
        return await self.inner.read_records(scope=scope, limit=limit)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """``inner.read_entry`` with its message restored."""
        (entry,) = await self._restored([await self.inner.read_entry(entry_id)])
        return entry

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        """``inner.read_history`` (one query where the inner store has one), restored in one batch."""
        return await self._restored(list(await self.inner.read_history(head_id, limit=limit)))

    async def _restored(self, entries: list[ConversationEntry]) -> list[ConversationEntry]:
        messages = [entry.message for entry in entries]
        restored = await self._offloader.restore_at(
            messages,
            EntriesPlace([entry.id for entry in entries]),
            references=self.restore_mode == 'references',
        )
        return [
            entry if message is entry.message else dataclasses.replace(entry, message=message)
            for entry, message in zip(entries, restored, strict=True)
        ]

    def __repr__(self) -> str:
        mode = '' if self.restore_mode == 'bytes' else f', restore={self.restore_mode!r}'
        return f'OffloadingConversationStore({self.inner!r}, media_store={self.media_store!r}{mode})'
