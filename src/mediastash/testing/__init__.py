"""Test kit for mediastash stores and their users.

``StoreTests`` (in ``mediastash.testing.store``) is the conformance suite every
store passes; it needs pytest, so install the ``testing`` extra
(``pip install 'mediastash[testing]'``). It is loaded lazily: importing this
package does not import pytest. ``CountingMediaStore`` and the synthetic
histories (``agent_history`` ...) are defined in private modules that the demo
and tune use too, so that no production module imports the test kit; this
package is where users import them from. ``import mediastash`` never imports it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from mediastash import _histories
from mediastash._counting import CountingMediaStore
from mediastash._histories import *  # noqa: F403  (the history builders: their __all__, listed once there)

if TYPE_CHECKING:
    from mediastash.testing.store import StoreTests

__all__ = ['CountingMediaStore', 'StoreTests', *_histories.__all__]

if 'pytest' in sys.modules:  # under pytest: failed asserts in the suite show their values
    sys.modules['pytest'].register_assert_rewrite('mediastash.testing.store')


def __getattr__(name: str) -> Any:
    """Import ``StoreTests`` (and with it pytest) only when asked for."""
    if name == 'StoreTests':
        from mediastash.testing.store import StoreTests

        return StoreTests
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
