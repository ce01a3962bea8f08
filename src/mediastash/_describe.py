"""One line for an error a user can act on, shared by the CLI's error line and sync's failure list.

Lives in the library so ``sync`` need not import the CLI. Store calls raise
``MediaStashError`` subclasses for their drivers' errors (the store base maps
them), so no driver is named here.
"""

from __future__ import annotations

from mediastash.errors import MediaStashError

__all__ = ['describe_error']


def describe_error(error: BaseException) -> str | None:
    """The error's one-line text, or ``None`` when it is not one mediastash words (a bug, a foreign error).

    ``MediaStashError`` messages never carry secrets; an ``OSError`` (a local
    file) gives its reason and the file it names.
    """
    if isinstance(error, MediaStashError):
        return str(error)
    if isinstance(error, OSError):
        where = f': {error.filename}' if error.filename else ''
        return f'{error.strerror or error}{where}'
    return None
