"""SQLite media store: one row per blob in pydantic-ai-harness's ``media`` table layout.

The store lives in ``_store``, its settings and URL form in ``_options``; this
package owns everything about the backend.
"""

from mediastash.stores.sqlite._options import SqliteOptions
from mediastash.stores.sqlite._store import SqliteMediaStore

__all__ = ['SqliteMediaStore', 'SqliteOptions']
