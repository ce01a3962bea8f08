"""Media offloading for OpenAI Agents SDK sessions: ``OffloadingSession`` (extra ``openai-agents``).

Needs ``openai-agents``, never pydantic-ai or LangChain. ``docs/openai-agents.md``
describes what is recognised, what a session then holds and garbage collection
(``SessionRoot``; every session of a database: ``SQLiteSessionRoot``,
``PostgresSessionRoot``). The roots and the envelope names import without the
SDK (a database is read with SQL); ``OffloadingSession`` is imported on first
use and names the extra when the SDK is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mediastash.integrations._extras import needs_extra
from mediastash.integrations.kit.envelope import ENVELOPE_FORMAT, ENVELOPE_KEY
from mediastash.integrations.openai_agents._roots import PostgresSessionRoot, SessionRoot, SQLiteSessionRoot

if TYPE_CHECKING:
    from mediastash.integrations.openai_agents.session import OffloadingSession

__all__ = [
    'ENVELOPE_FORMAT',
    'ENVELOPE_KEY',
    'OffloadingSession',
    'PostgresSessionRoot',
    'SQLiteSessionRoot',
    'SessionRoot',
]


def __getattr__(name: str) -> Any:
    if name != 'OffloadingSession':
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    with needs_extra(
        'mediastash.integrations.openai_agents.OffloadingSession', 'the OpenAI Agents SDK', 'openai-agents'
    ):
        from mediastash.integrations.openai_agents.session import OffloadingSession
    globals()[name] = OffloadingSession
    return OffloadingSession


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
