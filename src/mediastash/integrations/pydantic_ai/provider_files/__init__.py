"""Provider file references: media a model would get as bytes go as ``UploadedFile`` ids instead.

Used by ``MediaUrls(provider_files=...)``.

``ProviderFiles`` does the request rewrite; ``MemoryUploadRegistry`` (the
default) and ``KVUploadRegistry`` remember uploads per provider account and
blob. ``docs/model-urls.md`` ("Provider file references") has the table of
which model takes what, expiry, recovery and data retention.
"""

try:
    from mediastash.integrations.pydantic_ai.provider_files._registry import (
        DEFAULT_REGISTRY_PARTITION,
        KVUploadRegistry,
        MemoryUploadRegistry,
        UploadRecord,
        UploadRegistry,
        UploadRegistryError,
    )
    from mediastash.integrations.pydantic_ai.provider_files._resolver import (
        DEFAULT_FILE_MIN_VALIDITY,
        ProviderFiles,
        streaming_request,
    )
    from mediastash.integrations.pydantic_ai.provider_files._targets import GEMINI_FILE_LIFETIME
except ImportError as exc:
    if (exc.name or '').startswith('mediastash'):
        raise  # our own module is broken: no install hint
    raise ImportError(
        'mediastash.integrations.provider_files needs pydantic-ai: pip install "mediastash[pydantic-ai]"'
    ) from exc

__all__ = [
    'DEFAULT_FILE_MIN_VALIDITY',
    'DEFAULT_REGISTRY_PARTITION',
    'GEMINI_FILE_LIFETIME',
    'KVUploadRegistry',
    'MemoryUploadRegistry',
    'ProviderFiles',
    'UploadRecord',
    'UploadRegistry',
    'UploadRegistryError',
    'streaming_request',
]
