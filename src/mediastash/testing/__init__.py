"""Test kit for mediastash stores and their users.

``StoreTests`` (in ``mediastash.testing.store``) is the conformance suite every
store passes; it needs pytest, so install the ``testing`` extra
(``pip install 'mediastash[testing]'``). It is loaded lazily: importing this
package, ``mediastash.testing.counting`` or ``mediastash.testing.histories``
does not import pytest. ``import mediastash`` never imports this package.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from mediastash._counting import CountingMediaStore

if TYPE_CHECKING:
    from mediastash.testing.store import StoreTests

__all__ = ['CountingMediaStore', 'StoreTests']

if 'pytest' in sys.modules:  # under pytest: failed asserts in the suite show their values
    sys.modules['pytest'].register_assert_rewrite('mediastash.testing.store')


def __getattr__(name: str) -> Any:
    """Import ``StoreTests`` (and with it pytest) only when asked for."""
    if name == 'StoreTests':
        from mediastash.testing.store import StoreTests

        return StoreTests
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
