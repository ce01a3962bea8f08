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
    try:
        from mediastash.integrations.openai_agents.session import OffloadingSession
    except ImportError as exc:
        if (exc.name or '').startswith('mediastash'):
            raise  # our own module is broken: no install hint
        raise ImportError(
            'mediastash.integrations.openai_agents.OffloadingSession needs the OpenAI Agents SDK: '
            'pip install "mediastash[openai-agents]"'
        ) from exc
    globals()[name] = OffloadingSession
    return OffloadingSession


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
