"""What users plug in, each name imported on first use so the others import without its framework.

- extra ``pydantic-ai``: ``MediaUrls`` / ``MediaUrlSwapper``, the envelope
  names and ``OffloadingKV`` (for any
  pydantic-ai-persistence ``AsyncKV``);
- extra ``harness``: ``OffloadingStepStore`` (pydantic-ai-harness, with
  pydantic-ai-persistence for its KV step stores);
- ``mediastash.integrations.langgraph`` (extra ``langgraph``) needs neither.

The core ``mediastash`` package never imports this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mediastash.integrations._envelope import ENVELOPE_KEY, ENVELOPE_VERSION, EnvelopeError
    from mediastash.integrations.kv import OffloadingKV
    from mediastash.integrations.media_urls import MediaUrls, MediaUrlSwapper
    from mediastash.integrations.step_store import OffloadingStepStore

__all__ = [
    'ENVELOPE_KEY',
    'ENVELOPE_VERSION',
    'EnvelopeError',
    'MediaUrlSwapper',
    'MediaUrls',
    'OffloadingKV',
    'OffloadingStepStore',
]

_HOMES: Final = {
    'ENVELOPE_KEY': '_envelope',
    'ENVELOPE_VERSION': '_envelope',
    'EnvelopeError': '_envelope',
    'OffloadingKV': 'kv',
    'MediaUrls': 'media_urls',
    'MediaUrlSwapper': 'media_urls',
    'OffloadingStepStore': 'step_store',
}

_HARNESS_HOMES: Final = frozenset({'step_store'})


def _install_hint(home: str) -> str:
    """What to install for the names of ``home``."""
    if home in _HARNESS_HOMES:
        return 'needs pydantic-ai-harness: pip install "mediastash[harness]"'
    return 'needs pydantic-ai: pip install "mediastash[pydantic-ai]"'


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    try:
        module = importlib.import_module(f'{__name__}.{home}')
    except ImportError as exc:
        if (exc.name or '').startswith('mediastash'):
            raise  # our own module is broken: no install hint
        raise ImportError(f'mediastash.integrations.{name} {_install_hint(home)}') from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
