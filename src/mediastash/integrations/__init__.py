"""What users plug in: ``OffloadingStepStore``, ``OffloadingKV`` and ``MediaUrls`` (extra ``harness``).

Importing this package needs pydantic-ai and pydantic-ai-harness; the core
``mediastash`` package never imports it.
"""

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
