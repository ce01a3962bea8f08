"""``needs_extra``: an import that fails for want of a framework says which mediastash extra installs it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ['needs_extra']


@contextlib.contextmanager
def needs_extra(what: str, packages: str, extra: str) -> Iterator[None]:
    """Turn an ``ImportError`` in the block into ``'<what> needs <packages>: pip install "mediastash[<extra>]"'``.

    An ``ImportError`` of a mediastash module is re-raised as it is: our own
    module is broken, and an install hint would mislead.
    """
    try:
        yield
    except ImportError as error:
        if (error.name or '').startswith('mediastash'):
            raise
        raise ImportError(f'{what} needs {packages}: pip install "mediastash[{extra}]"') from error
