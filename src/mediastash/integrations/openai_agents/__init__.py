"""Media offloading for OpenAI Agents SDK sessions: ``OffloadingSession`` (extra ``openai-agents``).

Needs ``openai-agents``, never pydantic-ai or LangChain. ``docs/openai-agents.md``
describes what is recognised, what a session then holds and garbage collection
(``SessionRoot``; a whole ``SQLiteSession`` database: ``mediastash.gc.SQLiteSessionRoot``).
"""

try:
    from mediastash.integrations.kit.envelope import ENVELOPE_FORMAT, ENVELOPE_KEY
    from mediastash.integrations.openai_agents._roots import SessionRoot
    from mediastash.integrations.openai_agents.session import OffloadingSession
except ImportError as exc:
    if (exc.name or '').startswith('mediastash'):
        raise  # our own module is broken: no install hint
    raise ImportError(
        'mediastash.integrations.openai_agents needs the OpenAI Agents SDK: pip install "mediastash[openai-agents]"'
    ) from exc

__all__ = ['ENVELOPE_FORMAT', 'ENVELOPE_KEY', 'OffloadingSession', 'SessionRoot']
