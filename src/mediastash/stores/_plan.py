"""``StorePlan``: a store URL parsed and checked, not opened yet (what ``plan_from_url`` returns).

Its own module because both the store base (``plan_from_url``) and
``open_store`` need it and neither should import the other's layer: the base
sits below the registry that finds backends by scheme.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ['StorePlan']

S = TypeVar('S')


@dataclass(frozen=True, slots=True)
class StorePlan(Generic[S]):
    """A store URL that was parsed and checked but not opened yet: ``open()`` makes the store.

    ``plan_from_url`` returns one so that ``open_cached_store`` can check two
    URLs before it creates anything. ``folders`` lists the local folders
    ``build`` may create; if building fails, ``open()`` removes those of them
    (and their parents) that it created and that are still empty.
    """

    build: Callable[[], S]
    folders: tuple[str, ...] = ()

    def open(self) -> S:
        """Build the store; on failure, remove the empty folders the attempt created."""
        with _undone_on_failure(self.folders):
            return self.build()


@contextlib.contextmanager
def _undone_on_failure(folders: tuple[str, ...]) -> Iterator[None]:
    """On an error in the block, remove the empty folders among ``folders`` (and parents) that it created."""
    missing: list[str] = []
    for folder in folders:
        current = os.path.abspath(folder)
        while not os.path.lexists(current) and current not in missing:
            missing.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    try:
        yield
    except BaseException:
        for folder in sorted(missing, key=len, reverse=True):  # children before their parents
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only ever an empty folder: nothing anyone wrote is removed
        raise
