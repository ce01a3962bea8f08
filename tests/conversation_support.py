"""A durable pydantic-ai ``ConversationStore`` on SQLite, written the way a user would, and a scripted agent.

``SqliteConversationStore`` keeps each message as pydantic-ai's JSON in an
``entries`` table and each record as JSON next to the columns it is looked up
by; ``read_history`` walks a history in one recursive query. It knows nothing
of mediastash: the tests and ``benchmarks/conversations.py`` wrap it. Needs
pydantic-ai 2.66+ (the latest stack).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationDetails,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = ['SqliteConversationStore', 'scripted_agent']

_RECORD = TypeAdapter(ConversationRecord)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    conversation_id TEXT PRIMARY KEY,
    scope TEXT,
    revision TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, parent_id TEXT, message TEXT NOT NULL);
"""


class SqliteConversationStore(ConversationStore):
    """Conversations in one SQLite file. ``delete_record`` keeps the entries (a fork may share them)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def _record(self, conversation_id: str) -> ConversationRecord | None:
        row = self._db.execute('SELECT record FROM records WHERE conversation_id = ?', (conversation_id,)).fetchone()
        return None if row is None else _RECORD.validate_json(row[0])

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        return self._record(conversation_id)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        query = 'SELECT record FROM records'
        arguments: list[Any] = []
        if scope is not None:
            query += ' WHERE scope = ?'
            arguments.append(scope)
        query += ' ORDER BY updated_at DESC'
        if limit is not None:
            query += ' LIMIT ?'
            arguments.append(limit)
        return [_RECORD.validate_json(row[0]) for row in self._db.execute(query, arguments)]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        db = self._db
        db.execute('BEGIN IMMEDIATE')
        try:
            stored = self._record(record.conversation_id)
            if (stored.revision if stored is not None else None) != expected_revision:
                raise ConversationConflict(record.conversation_id)
            new_ids = {entry.id for entry in new_entries}
            head_known = record.head_id is None or record.head_id in new_ids
            if (
                not head_known
                and db.execute('SELECT 1 FROM entries WHERE id = ?', (record.head_id,)).fetchone() is None
            ):
                raise ConversationConflict(record.conversation_id)
            db.executemany(
                'INSERT INTO entries (id, parent_id, message) VALUES (?, ?, ?)',
                [
                    (entry.id, entry.parent_id, ModelMessagesTypeAdapter.dump_json([entry.message]).decode())
                    for entry in new_entries
                ],
            )
            if stored is not None:
                record = dataclasses.replace(record, title=stored.title, metadata=stored.metadata)
            db.execute(
                'INSERT OR REPLACE INTO records (conversation_id, scope, revision, updated_at, record) '
                'VALUES (?, ?, ?, ?, ?)',
                (
                    record.conversation_id,
                    record.scope,
                    record.revision,
                    record.updated_at.isoformat(),
                    _RECORD.dump_json(record).decode(),
                ),
            )
        except BaseException:
            db.execute('ROLLBACK')
            raise
        db.execute('COMMIT')

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        db = self._db
        db.execute('BEGIN IMMEDIATE')
        try:
            stored = self._record(conversation_id)
            if stored is None or stored.revision != expected_revision:
                raise ConversationConflict(conversation_id)
            if expected and any(getattr(stored, key) != value for key, value in expected.items()):
                raise ConversationConflict(conversation_id)
            changed = dataclasses.replace(stored, **details)  # type: ignore[arg-type]
            db.execute(
                'UPDATE records SET record = ? WHERE conversation_id = ?',
                (_RECORD.dump_json(changed).decode(), conversation_id),
            )
        except BaseException:
            db.execute('ROLLBACK')
            raise
        db.execute('COMMIT')
        return changed

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        deleted = self._db.execute(
            'DELETE FROM records WHERE conversation_id = ? AND revision = ?', (conversation_id, expected_revision)
        )
        if deleted.rowcount != 1:
            raise ConversationConflict(conversation_id)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        row = self._db.execute('SELECT parent_id, message FROM entries WHERE id = ?', (entry_id,)).fetchone()
        if row is None:
            raise KeyError(entry_id)
        return ConversationEntry(id=entry_id, parent_id=row[0], message=_message(row[1]))

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        """The history up to ``head_id`` in one recursive query."""
        if head_id is None:
            return []
        rows = self._db.execute(
            'WITH RECURSIVE chain(id, parent_id, message, depth) AS ('
            ' SELECT id, parent_id, message, 0 FROM entries WHERE id = ?'
            ' UNION ALL SELECT e.id, e.parent_id, e.message, chain.depth + 1'
            ' FROM entries e JOIN chain ON e.id = chain.parent_id WHERE ? IS NULL OR chain.depth + 1 < ?)'
            ' SELECT id, parent_id, message FROM chain ORDER BY depth DESC',
            (head_id, limit, limit),
        ).fetchall()
        if not rows:
            raise KeyError(head_id)
        return [ConversationEntry(id=row[0], parent_id=row[1], message=_message(row[2])) for row in rows]


def _message(text: str) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_json(text)[0]


def scripted_agent(tool_output_bytes: int = 0, *, sent: list[list[ModelMessage]] | None = None) -> Agent[None, str]:
    """An agent whose model answers each prompt in text.

    With ``tool_output_bytes``, every third turn first calls a tool that returns
    that much text (a large tool output), then answers. ``sent`` collects the
    messages of every model request.
    """

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sent is not None:
            sent.append(list(messages))
        turn = sum(1 for message in messages for part in message.parts if part.part_kind == 'user-prompt')
        answered = any(part.part_kind == 'tool-return' for part in messages[-1].parts)
        if tool_output_bytes and turn % 3 == 0 and not answered:
            return ModelResponse(parts=[ToolCallPart('read_log', {'turn': turn})])
        return ModelResponse(parts=[TextPart(f'answer {turn}')])

    agent: Agent[None, str] = Agent(FunctionModel(reply))

    @agent.tool_plain
    def read_log(turn: int) -> str:
        """A large tool output, different per turn."""
        line = f'turn {turn}: all systems nominal. '
        return (line * (tool_output_bytes // len(line) + 1))[:tool_output_bytes]

    return agent
