"""Media offloading for LangGraph checkpointers: ``OffloadingCheckpointSaver`` (extra ``langgraph``).

Needs ``langgraph-checkpoint`` and ``langchain-core``, never pydantic-ai or
pydantic-ai-harness. ``docs/langgraph.md`` describes what is recognised, what a
checkpoint then holds, garbage collection (``CheckpointerRoot``, and
``LangGraphSQLiteRoot`` / ``LangGraphPostgresRoot`` for a saver's database) and
the sync methods.
"""

from mediastash.integrations._extras import needs_extra

with needs_extra('mediastash.integrations.langgraph', 'langgraph-checkpoint and langchain-core', 'langgraph'):
    from mediastash.integrations.kit.envelope import ENVELOPE_FORMAT, ENVELOPE_KEY
    from mediastash.integrations.langgraph._roots import CheckpointerRoot, LangGraphPostgresRoot, LangGraphSQLiteRoot
    from mediastash.integrations.langgraph.saver import OffloadingCheckpointSaver, SyncCallError

__all__ = [
    'CheckpointerRoot',
    'ENVELOPE_FORMAT',
    'ENVELOPE_KEY',
    'LangGraphPostgresRoot',
    'LangGraphSQLiteRoot',
    'OffloadingCheckpointSaver',
    'SyncCallError',
]
