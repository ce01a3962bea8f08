"""What users plug in: ``OffloadingStepStore``, ``OffloadingKV`` and ``MediaUrls`` (extra ``harness``).

These names need pydantic-ai and pydantic-ai-harness and are imported on first
use, so ``mediastash.integrations.langgraph`` (extra ``langgraph``) imports
without them. The core ``mediastash`` package never imports this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

_HOMES = {
    'ENVELOPE_KEY': '_envelope',
    'ENVELOPE_VERSION': '_envelope',
    'EnvelopeError': '_envelope',
    'OffloadingKV': 'kv',
    'MediaUrls': 'media_urls',
    'MediaUrlSwapper': 'media_urls',
    'OffloadingStepStore': 'step_store',
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    try:
        module = importlib.import_module(f'{__name__}.{home}')
    except ImportError as exc:
        if (exc.name or '').startswith('mediastash'):
            raise  # our own module is broken: no install hint
        raise ImportError(
            'mediastash.integrations needs pydantic-ai and pydantic-ai-harness: pip install "mediastash[harness]"'
        ) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
