"""Concurrent store calls under ``asyncio.TaskGroup`` that fail with the first error itself.

Callers (and users) see a plain ``MediaNotFoundError`` or ``StoreOperationError``,
not an ``ExceptionGroup``; the error keeps its own cause (the driver error a
store mapped), and further failures are mentioned in a note.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, NoReturn, TypeVar

__all__ = ['for_each', 'raise_first', 'run_all']

T = TypeVar('T')


def _leaves(error: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for inner in error.exceptions:
        out.extend(_leaves(inner) if isinstance(inner, BaseExceptionGroup) else [inner])
    return out


def raise_first(error: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Raise the group's first leaf error, with its own cause and a note counting the others."""
    leaves = _leaves(error)
    first = leaves[0]
    if len(leaves) > 1:
        first.add_note(f'{len(leaves) - 1} more concurrent store call(s) failed as well')
    raise first from first.__cause__


async def run_all(calls: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run ``calls`` concurrently; on failure cancel the rest and raise the first error itself."""
    try:
        async with asyncio.TaskGroup() as group:
            for call in calls:
                group.create_task(call)
    except BaseExceptionGroup as error:
        raise_first(error)


async def for_each(items: Sequence[T], jobs: int, work: Callable[[T], Awaitable[None]]) -> None:
    """Run ``work`` on every item, at most ``jobs`` at a time; the first error cancels the rest and is raised."""
    pending = iter(items)

    async def worker() -> None:
        for item in pending:
            await work(item)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(jobs, len(items))):
                group.create_task(worker())
    except BaseExceptionGroup as error:
        raise_first(error)
