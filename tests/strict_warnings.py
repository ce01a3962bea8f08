"""``every_warning_an_error()``: a block in which any warning is an error, started on a clean heap.

Earlier tests' garbage is collected first. A socket left open by a provider SDK's
process-wide cached HTTP client is reported (``ResourceWarning``) when the collector
frees it, in whichever test is running then; inside a strict block it would fail a
test that has nothing to do with it.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
from collections.abc import Iterator

__all__ = ['every_warning_an_error']


@contextlib.contextmanager
def every_warning_an_error() -> Iterator[None]:
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        yield
