"""What users plug in: ``OffloadingStepStore``, ``OffloadingKV`` and ``MediaUrls`` (extra ``harness``).

Importing this package needs pydantic-ai and pydantic-ai-harness; the core
``mediastash`` package never imports it.
"""

try:
    from mediastash.integrations._envelope import ENVELOPE_KEY, ENVELOPE_VERSION, EnvelopeError
    from mediastash.integrations.kv import OffloadingKV
    from mediastash.integrations.media_urls import MediaUrls, MediaUrlSwapper
    from mediastash.integrations.step_store import OffloadingStepStore
except ImportError as exc:
    if (exc.name or '').startswith('mediastash'):
        raise  # our own module is broken: no install hint
    raise ImportError(
        'mediastash.integrations needs pydantic-ai and pydantic-ai-harness: pip install "mediastash[harness]"'
    ) from exc

__all__ = [
    'ENVELOPE_KEY',
    'ENVELOPE_VERSION',
    'EnvelopeError',
    'MediaUrlSwapper',
    'MediaUrls',
    'OffloadingKV',
    'OffloadingStepStore',
]
