"""Compatibility shim: the suite now ships as ``mediastash.testing.store.StoreTests``."""

from mediastash.testing.store import MISSING_URI, ForeignContext, blob, chunked, collect
from mediastash.testing.store import StoreTests as StoreConformance

__all__ = ['MISSING_URI', 'ForeignContext', 'StoreConformance', 'blob', 'chunked', 'collect']
