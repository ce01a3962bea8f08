"""Media offloading for pydantic-ai: step stores, key-value stores, conversation stores and model requests.

Each name is imported on first use, so the others import without its
framework:

- extra ``pydantic-ai``: ``MediaUrls`` / ``MediaUrlSwapper``, the envelope
  names, ``OffloadingKV`` (for any pydantic-ai-persistence ``AsyncKV``) and
  ``OffloadingConversationStore`` (which needs pydantic-ai 2.66 or later, for
  ``pydantic_ai.conversation_store``); ``provider_files`` (a subpackage);
- extra ``harness``: ``OffloadingStepStore`` (pydantic-ai-harness, with
  pydantic-ai-persistence for its KV step stores);
- the garbage-collection roots of these stores (``StepStoreRoot``,
  ``ConversationStoreRoot``, ``KVRoot``, ``ScannableKV``, ``SQLiteKVRoot``,
  ``PostgresStepStoreRoot``, ``MongoStepStoreRoot``), which import no framework.

The typed walk of pydantic-ai messages lives here too (``_typed_walk``,
``_typed_payloads``): the walker itself imports no framework.
``mediastash.integrations`` re-exports the same names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mediastash.integrations.pydantic_ai._envelope import ENVELOPE_KEY, ENVELOPE_VERSION, EnvelopeError
    from mediastash.integrations.pydantic_ai._roots import (
        ConversationStoreRoot,
        KVRoot,
        MongoStepStoreRoot,
        PostgresStepStoreRoot,
        ScannableKV,
        SQLiteKVRoot,
        StepStoreRoot,
    )
    from mediastash.integrations.pydantic_ai.kv import OffloadingKV
    from mediastash.integrations.pydantic_ai.media_urls import MediaUrls, MediaUrlSwapper
    from mediastash.integrations.pydantic_ai.step_store import OffloadingStepStore

    # OffloadingConversationStore is left out here: the harness stack's pydantic-ai has no ConversationStore
    # (.ci/run type-checks its module on the latest stack). ``__getattr__`` serves it all the same.

__all__ = [
    'ENVELOPE_KEY',
    'ENVELOPE_VERSION',
    'ConversationStoreRoot',
    'EnvelopeError',
    'KVRoot',
    'MediaUrlSwapper',
    'MediaUrls',
    'MongoStepStoreRoot',
    'OffloadingConversationStore',
    'OffloadingKV',
    'OffloadingStepStore',
    'PostgresStepStoreRoot',
    'SQLiteKVRoot',
    'ScannableKV',
    'StepStoreRoot',
]

_ROOTS: Final = (
    'ConversationStoreRoot KVRoot MongoStepStoreRoot PostgresStepStoreRoot SQLiteKVRoot ScannableKV StepStoreRoot'
)
"""The garbage-collection roots of ``_roots`` (names separated by spaces)."""

HOMES: Final = {
    'ENVELOPE_KEY': '_envelope',
    'ENVELOPE_VERSION': '_envelope',
    'EnvelopeError': '_envelope',
    'OffloadingKV': 'kv',
    'MediaUrls': 'media_urls',
    'MediaUrlSwapper': 'media_urls',
    'OffloadingConversationStore': 'conversation_store',
    'OffloadingStepStore': 'step_store',
    **dict.fromkeys(_ROOTS.split(), '_roots'),
}
"""Each public name and the module of this package that defines it."""

_HARNESS_HOMES: Final = frozenset({'step_store'})


def _install_hint(home: str, missing: str) -> str:
    """What to install for the names of ``home``, whose import failed on the module ``missing``."""
    if home in _HARNESS_HOMES:
        return 'needs pydantic-ai-harness: pip install "mediastash[harness]"'
    if home == 'conversation_store' and missing.startswith('pydantic_ai.'):
        return (
            "needs pydantic-ai 2.66 or later (pydantic_ai.conversation_store), which the harness's pin does not "
            'allow: pip install --upgrade "mediastash[pydantic-ai]" "pydantic-ai-slim>=2.66" without the harness'
        )
    return 'needs pydantic-ai: pip install "mediastash[pydantic-ai]"'


def load(name: str, asked_in: str) -> Any:
    """The public name ``name``, its module imported now; an ``ImportError`` saying what to install when a
    framework is missing (``asked_in``: the package the caller imported it from, named in that error)."""
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f'module {asked_in!r} has no attribute {name!r}')
    try:
        module = importlib.import_module(f'{__name__}.{home}')
    except ImportError as exc:
        missing = exc.name or ''
        if missing.startswith('mediastash'):
            raise  # our own module is broken: no install hint
        raise ImportError(f'{asked_in}.{name} {_install_hint(home, missing)}') from exc
    return getattr(module, name)


def __getattr__(name: str) -> Any:
    value = load(name, __name__)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
