"""Disk media store: one file per blob in a local folder (pydantic-ai-harness's layout).

The store lives in ``_store``, its settings and URL form in ``_options``; this
package owns everything about the backend and exports what ``_store`` does.
"""

from mediastash.stores.disk import _store
from mediastash.stores.disk._options import DiskOptions
from mediastash.stores.disk._store import *  # noqa: F403  (its __all__, listed once there)

__all__ = ['DiskOptions', *_store.__all__]
