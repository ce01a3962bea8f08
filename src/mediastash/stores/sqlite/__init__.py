"""SQLite media store: one row per blob in pydantic-ai-harness's ``media`` table layout.

The store lives in ``_store``; this package owns everything about the backend.
"""

from mediastash.stores.sqlite._store import SqliteMediaStore

__all__ = ['SqliteMediaStore']
