"""Garbage collection: delete blobs no root references, safely against writers in other processes.

``collect_garbage(store, roots)`` marks every URI the roots reference (lean
trees and files, folders, step-store databases, and whatever the integrations
read: step stores, ``OffloadingKV`` records, LangGraph checkpointers, OpenAI
Agents sessions...), lists the store's blobs with their age, and deletes those
unreferenced and untouched for the grace period. ``docs/gc.md`` states the
rule that makes this safe and what the collector cannot know.

A root is anything satisfying ``Root`` (``mediastash.roots``, the contract gc
and the integrations share); gc imports no integration. The framework roots
it used to define live in their integration now and are still served from
here, imported on first use (``CheckpointerRoot``, ``SQLiteSessionRoot``,
``StepStoreRoot``...).
"""

from typing import Any

from mediastash.gc import _roots
from mediastash.gc._collect import DEFAULT_GRACE, StoreNotCollectable, collect_garbage
from mediastash.gc._report import GcReport, GcUriOutcome
from mediastash.gc._roots import *  # noqa: F403  (gc's own root kinds: their __all__, listed once there)
from mediastash.gc._sweep import GcPhase, GcProgress
from mediastash.roots import referenced_uris
from mediastash.roots._registry import moved_root, moved_roots

__all__ = [
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


def __getattr__(name: str) -> Any:
    value = moved_root(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *moved_roots()})
