"""Garbage collection: delete blobs no root references, safely against writers in other processes.

``collect_garbage(store, roots)`` marks every URI the roots reference (lean
trees and files, step stores, ``OffloadingKV`` records, LangGraph checkpointers, URI sets), lists the
store's blobs with their age, and deletes those unreferenced and untouched for
the grace period. ``docs/gc.md`` states the rule that makes this safe and what
the collector cannot know.
"""

from mediastash.gc import _roots
from mediastash.gc._checkpointer import CheckpointerRoot
from mediastash.gc._collect import DEFAULT_GRACE, StoreNotCollectable, collect_garbage
from mediastash.gc._refs import referenced_uris
from mediastash.gc._report import GcReport, GcUriOutcome
from mediastash.gc._roots import *  # noqa: F403  (the root kinds: their __all__, listed once there)
from mediastash.gc._sweep import GcPhase, GcProgress

__all__ = [
    'CheckpointerRoot',
    'DEFAULT_GRACE',
    'GcPhase',
    'GcProgress',
    'GcReport',
    'GcUriOutcome',
    'StoreNotCollectable',
    'collect_garbage',
    'referenced_uris',
]
__all__ += _roots.__all__
