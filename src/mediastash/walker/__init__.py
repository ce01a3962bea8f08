"""The two walks over JSON-shaped message histories: ``externalize_media`` and ``restore_media``.

``WalkOptions`` holds the settings they share. ``mediastash.walker.internal`` is
the walker's interface for mediastash's own integrations (not public API). The
walker imports no agent framework: typed messages are walked by their
integration (``mediastash.integrations.pydantic_ai``).
"""

from mediastash.walker._options import DEFAULT_MAX_CONCURRENCY, DEFAULT_THRESHOLD_BYTES, WalkOptions
from mediastash.walker.externalize import externalize_media
from mediastash.walker.restore import restore_media

__all__ = ['DEFAULT_MAX_CONCURRENCY', 'DEFAULT_THRESHOLD_BYTES', 'WalkOptions', 'externalize_media', 'restore_media']
