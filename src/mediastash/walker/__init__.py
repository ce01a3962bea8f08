"""The two walks over JSON-shaped message histories: ``externalize_media`` and ``restore_media``."""

from mediastash.walker._common import DEFAULT_MAX_CONCURRENCY, DEFAULT_THRESHOLD_BYTES
from mediastash.walker.externalize import externalize_media
from mediastash.walker.restore import restore_media

__all__ = ['DEFAULT_MAX_CONCURRENCY', 'DEFAULT_THRESHOLD_BYTES', 'externalize_media', 'restore_media']
