"""Pieces both walks share: option checks, cache selection, JSON-type errors with a path."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Final, TypeVar

from mediastash.errors import MalformedMarker, UnsupportedMarkerFormat
from mediastash.known_blobs import KnownBlobCache, cache_for_store

__all__ = [
    'DEFAULT_MAX_CONCURRENCY',
    'DEFAULT_THRESHOLD_BYTES',
    'OFFLOAD_BYTES',
    'TreeCopier',
    'run_all',
    'NotJSON',
    'check_concurrency',
    'find_path',
    'in_thread_if_large',
    'not_json_error',
    'select_cache',
    'with_path',
]

DEFAULT_THRESHOLD_BYTES: Final = 64 * 1024
"""Payloads at least this many bytes are externalized (the pydantic-ai-harness default too)."""

DEFAULT_MAX_CONCURRENCY: Final = 8
"""How many store calls one walk keeps in flight."""

OFFLOAD_BYTES: Final = 1 << 20
"""Payloads this large are decoded / encoded in a worker thread (pybase64 and hashlib release the GIL)."""

_SCALARS: Final = (str, int, float, bool)

T = TypeVar('T')


class NotJSON(Exception):
    """Internal: a value in the tree is not JSON-shaped. Turned into ``TypeError`` with a path."""

    def __init__(self, value: object) -> None:
        self.value = value


def is_scalar(value: object) -> bool:
    return value is None or isinstance(value, _SCALARS)


def find_path(tree: object, target: object) -> str:
    """JSONPath-like location of ``target`` (by identity) inside ``tree``; ``'$'`` when not found."""
    stack: list[tuple[object, str]] = [(tree, '$')]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            stack.extend((value, f'{path}[{key!r}]') for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, f'{path}[{index}]') for index, value in enumerate(node))
    return '$'


def not_json_error(func: str, tree: object, error: NotJSON) -> TypeError:
    path = find_path(tree, error.value)
    return TypeError(
        f'{func} takes a JSON-shaped tree (dict, list, str, int, float, bool, None); '
        f'found {type(error.value).__name__} at {path}. Serialize pydantic-ai messages with '
        "ModelMessagesTypeAdapter.dump_python(messages, mode='json') first"
    )


def with_path(error: UnsupportedMarkerFormat | MalformedMarker, tree: object, node: object) -> Exception:
    """Re-create ``error`` with the location of the offending marker in the message."""
    path = find_path(tree, node)
    if isinstance(error, UnsupportedMarkerFormat):
        return UnsupportedMarkerFormat(error.what, error.version, path=path)
    return MalformedMarker(str(error.args[0]).split(': ', 1)[-1], path=path)


def check_threshold(threshold_bytes: object) -> int:
    if isinstance(threshold_bytes, bool) or not isinstance(threshold_bytes, int) or threshold_bytes < 0:
        raise ValueError(f'threshold_bytes must be a non-negative int, got {threshold_bytes!r}')
    return threshold_bytes


def check_concurrency(max_concurrency: object) -> int:
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ValueError(f'max_concurrency must be a positive int, got {max_concurrency!r}')
    return max_concurrency


def select_cache(known_blobs: KnownBlobCache | bool | None, store: object) -> KnownBlobCache | None:
    """``True``: the store's process-wide cache; ``False``/``None``: none; an instance: that one."""
    if known_blobs is True:
        cache = cache_for_store(store)
    elif known_blobs is False or known_blobs is None:
        return None
    elif isinstance(known_blobs, KnownBlobCache):
        cache = known_blobs
    else:
        raise TypeError(f'known_blobs must be a KnownBlobCache, True or False, got {type(known_blobs).__name__}')
    if cache is not None:
        cache.bind(store)
    return cache


async def in_thread_if_large(size: int, func: Callable[..., T], *args: object) -> T:
    """Run ``func(*args)`` in a worker thread when the payload is large, inline otherwise."""
    if size >= OFFLOAD_BYTES:
        return await asyncio.to_thread(func, *args)
    return func(*args)


async def run_all(calls: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run ``calls`` concurrently; on failure cancel the rest and raise the first error itself.

    Callers see a plain ``MediaNotFoundError`` or ``OSError`` rather than an
    ``ExceptionGroup``; further errors, if any, are mentioned in a note.
    """
    try:
        async with asyncio.TaskGroup() as group:
            for call in calls:
                group.create_task(call)
    except BaseExceptionGroup as group_error:
        leaves = _leaves(group_error)
        first = leaves[0]
        if len(leaves) > 1:
            first.add_note(f'{len(leaves) - 1} more concurrent store call(s) failed as well')
        raise first from None


def _leaves(error: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for inner in error.exceptions:
        if isinstance(inner, BaseExceptionGroup):
            out.extend(_leaves(inner))
        else:
            out.append(inner)
    return out


class TreeCopier:
    """Copies a JSON-shaped tree; subclasses decide what happens to each dict in ``walk_dict``.

    Dispatch is on ``type(value) is ...`` with scalars copied inline, which is
    what keeps a walk over thousands of small parts as fast as a plain copy.
    """

    def walk_dict(self, node: dict[str, Any]) -> dict[str, Any]:
        return self.copy_fields(node)

    def walk_list(self, items: list[Any]) -> list[Any]:
        out: list[Any] = []
        append = out.append
        for value in items:
            kind = type(value)
            if kind is str or kind is int or kind is float or kind is bool or value is None:
                append(value)
            elif kind is dict:
                append(self.walk_dict(value))
            elif kind is list:
                append(self.walk_list(value))
            else:
                append(self.walk_other(value))
        return out

    def copy_fields(self, node: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            kind = type(value)
            if kind is str or kind is int or kind is float or kind is bool or value is None:
                out[key] = value
            elif kind is dict:
                out[key] = self.walk_dict(value)
            elif kind is list:
                out[key] = self.walk_list(value)
            else:
                out[key] = self.walk_other(value)
        return out

    def walk_other(self, value: object) -> object:
        """Subclasses of the JSON types are accepted like their base; anything else is refused."""
        if isinstance(value, dict):
            return self.walk_dict(value)
        if isinstance(value, list):
            return self.walk_list(value)
        if is_scalar(value):
            return value
        raise NotJSON(value)
