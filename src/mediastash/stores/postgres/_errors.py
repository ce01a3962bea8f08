"""How asyncpg's errors read as ``StoreOperationError`` kinds: by SQLSTATE class, never by message.

A server error's message can quote the statement's values; the reason kept
is the SQLSTATE code and the exception class name only.
"""

from __future__ import annotations

from typing import Final

import asyncpg

from mediastash.errors import StoreOperationError, StorePermissionError, StoreUnavailableError
from mediastash.stores.base import DriverError

__all__ = ['SCHEMA_LOSS', 'classify']

_UNAVAILABLE_CLASSES: Final = ('08', '53', '57')
"""Connection exceptions, insufficient resources (too many connections), operator intervention (shutdown)."""
_PERMISSION_CLASSES: Final = ('28', '42501')
"""Invalid authorization (a wrong password, an unknown role) and insufficient privilege."""
SCHEMA_LOSS: Final = frozenset({'42P01', '42703'})
"""Undefined table, undefined column: the tables changed since the store looked at them."""


def classify(exc: Exception) -> DriverError | None:
    """The ``DriverError`` for an asyncpg exception; ``None`` for anything else."""
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, 'sqlstate', '') or '')
        reason = f'{type(exc).__name__} {state}'.strip()
        kind: type[StoreOperationError] = StoreOperationError
        if state.startswith(_PERMISSION_CLASSES):
            kind = StorePermissionError
        elif state.startswith(_UNAVAILABLE_CLASSES):
            kind = StoreUnavailableError
        return DriverError(kind, reason)
    if isinstance(exc, asyncpg.InterfaceError):
        connection = (
            isinstance(exc, asyncpg.exceptions.ConnectionDoesNotExistError) or 'onnection' in type(exc).__name__
        )
        return DriverError(StoreUnavailableError if connection else StoreOperationError, type(exc).__name__)
    return None
