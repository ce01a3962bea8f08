"""What users plug in: one subpackage per framework, each importing only its own framework.

- ``mediastash.integrations.pydantic_ai`` (extras ``pydantic-ai`` and
  ``harness``): ``OffloadingStepStore``, ``OffloadingKV``,
  ``OffloadingConversationStore``, ``MediaUrls`` / ``MediaUrlSwapper``, the
  envelope names and ``provider_files``. This package re-exports those names,
  each imported on first use, so the others import without its framework;
  ``mediastash.integrations.provider_files`` is the same module as
  ``mediastash.integrations.pydantic_ai.provider_files``;
- ``mediastash.integrations.langgraph`` (extra ``langgraph``) and
  ``mediastash.integrations.openai_agents`` (extra ``openai-agents``) need no
  pydantic-ai.

The core ``mediastash`` package never imports this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mediastash.integrations import pydantic_ai as _pydantic_ai
from mediastash.integrations.pydantic_ai import __all__ as __all__

if TYPE_CHECKING:
    from mediastash.integrations.pydantic_ai import *  # noqa: F403  (for type checkers; served by ``__getattr__``)


def __getattr__(name: str) -> Any:
    value = _pydantic_ai.load(name, __name__)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
