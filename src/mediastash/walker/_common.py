"""Pieces both walks share: the tree copier, cache selection, JSON-type and depth errors with a path."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, TypeVar

from mediastash.errors import MalformedMarker, TreeDepthError, UnsupportedMarkerFormat
from mediastash.known_blobs import KnownBlobCache, cache_for_store

__all__ = [
    'MIN_DEPTH_LIMIT',
    'OFFLOAD_BYTES',
    'RECURSIVE_LEVELS',
    'TooDeep',
    'TreeCopier',
    'deepest_path',
    'depth_error',
    'depth_limit',
    'find_cycle',
    'render_path',
    'NotJSON',
    'find_path',
    'in_thread_if_large',
    'not_json_error',
    'select_cache',
    'with_path',
]

OFFLOAD_BYTES: Final = 1 << 20
"""Payloads this large are decoded / encoded in a worker thread (pybase64 and hashlib release the GIL)."""

MIN_DEPTH_LIMIT: Final = 1000
"""Walks handle at least this many nested containers (more when the recursion limit is raised)."""

RECURSIVE_LEVELS: Final = 50
"""Levels copied by plain recursion (fast); deeper levels go through an explicit stack."""

_SCALARS: Final = (str, int, float, bool)

T = TypeVar('T')


class NotJSON(Exception):
    """Internal: a value in the tree is not JSON-shaped. Turned into ``TypeError`` with a path."""

    def __init__(self, value: object) -> None:
        self.value = value


def is_scalar(value: object) -> bool:
    return value is None or isinstance(value, _SCALARS)


def find_path(tree: object, target: object) -> str:
    """JSONPath-like location of ``target`` (by identity) inside ``tree``; ``'$'`` when not found.

    Iterative, visits each container once (cycles end), and builds only the one path it returns.
    """
    located = _locate(tree, target)
    return '$' if located is None else render_path(located)


def _locate(tree: object, target: object, *, deepest: bool = False) -> list[str | int] | None:
    """Steps from ``tree`` to ``target``; when it is not found and ``deepest``, to the deepest container."""
    parents: dict[int, tuple[int, str | int, int] | None] = {id(tree): None}
    keep: list[object] = [tree]  # keeps every id in ``parents`` alive and distinct during the search
    stack: list[tuple[object, int]] = [(tree, 0)]
    bottom, bottom_depth = tree, -1
    while stack:
        node, depth = stack.pop()
        if node is target:
            return _steps(parents, node)
        items: Iterable[tuple[str | int, object]]
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        if depth > bottom_depth:
            bottom, bottom_depth = node, depth
        for key, value in items:
            if (isinstance(value, dict | list) or value is target) and id(value) not in parents:
                parents[id(value)] = (id(node), key, depth + 1)
                keep.append(value)
                stack.append((value, depth + 1))
    return _steps(parents, bottom) if deepest else None


def _steps(parents: dict[int, tuple[int, str | int, int] | None], node: object) -> list[str | int]:
    path: list[str | int] = []
    link = parents[id(node)]
    while link is not None:
        path.append(link[1])
        link = parents[link[0]]
    path.reverse()
    return path


def deepest_path(tree: object) -> str:
    """Location of the most deeply nested container of ``tree`` (iterative; cycles end)."""
    located = _locate(tree, _NOTHING, deepest=True)
    return '$' if located is None else render_path(located)


_NOTHING: Final = object()

_PATH_HEAD: Final = 8
_PATH_TAIL: Final = 4


def render_path(steps: list[str | int]) -> str:
    """``$['a'][0]...``; a long path keeps its first and last steps around the number left out."""

    def one(step: str | int) -> str:
        return f'[{step}]' if isinstance(step, int) else f'[{step!r}]'

    if len(steps) <= _PATH_HEAD + _PATH_TAIL + 1:
        return '$' + ''.join(map(one, steps))
    head = ''.join(map(one, steps[:_PATH_HEAD]))
    tail = ''.join(map(one, steps[-_PATH_TAIL:]))
    return f'${head}...({len(steps) - _PATH_HEAD - _PATH_TAIL} more levels)...{tail}'


def find_cycle(tree: object) -> str | None:
    """Path of a container that sits inside itself, or ``None`` when ``tree`` has no cycle (iterative)."""
    on_path: set[int] = set()
    done: set[int] = set()
    keep: list[object] = []
    steps: list[str | int] = []
    if not isinstance(tree, dict | list):
        return None
    stack: list[tuple[object, Iterator[tuple[str | int, object]]]] = [(tree, _children(tree))]
    on_path.add(id(tree))
    while stack:
        node, children = stack[-1]
        for key, value in children:
            if not isinstance(value, dict | list):
                continue
            if id(value) in on_path:
                return render_path([*steps, key])
            if id(value) in done:
                continue
            on_path.add(id(value))
            steps.append(key)
            stack.append((value, _children(value)))
            break
        else:
            stack.pop()
            on_path.discard(id(node))
            done.add(id(node))
            keep.append(node)
            if steps:
                steps.pop()
    return None


def _children(node: object) -> Iterator[tuple[str | int, object]]:
    if isinstance(node, dict):
        return iter(node.items())
    assert isinstance(node, list)
    return enumerate(node)


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


class TooDeep(Exception):
    """Internal: the walk reached its depth limit at ``node``. Turned into ``TreeDepthError``."""

    def __init__(self, node: object, limit: int) -> None:
        self.node = node
        self.limit = limit


def depth_error(tree: object, error: TooDeep) -> TreeDepthError:
    """A cycle when ``tree`` has one (the usual cause of an endless descent), else the depth and its path."""
    cycle = find_cycle(tree)
    if cycle is not None:
        return TreeDepthError(limit=error.limit, path=cycle, cycle=True)
    located = _locate(tree, error.node, deepest=True)
    return TreeDepthError(limit=error.limit, path='$' if located is None else render_path(located))


def depth_limit() -> int:
    """How deep a walk may nest: the interpreter's recursion limit, at least ``MIN_DEPTH_LIMIT``.

    The standard ``json`` module round-trips a little less than the recursion limit.
    """
    return max(MIN_DEPTH_LIMIT, sys.getrecursionlimit())


class TreeCopier:
    """Copies a JSON-shaped tree; subclasses decide what happens to each dict in ``walk_dict``.

    Dispatch is on ``type(value) is ...`` with scalars copied inline, which is
    what keeps a walk over thousands of small parts as fast as a plain copy.
    The first ``RECURSIVE_LEVELS`` levels are copied by plain recursion; below
    that a container is returned empty and filled later from an explicit stack
    (``walk`` drains it), so any depth up to ``depth_limit()`` works without
    ``RecursionError``, and deeper (or cyclic) input raises ``TooDeep``.

    ``depth`` is the number of containers above the one being walked. A
    ``walk_dict`` override may hand back a container that ``copy_fields`` /
    ``walk_list`` returned, or one holding it, but must not read what it holds:
    below the recursive levels it is filled after the hook returns.
    """

    _deferred: list[tuple[dict[str, Any] | list[Any], Any, int]]
    _limit: int

    def walk(self, tree: object) -> Any:
        """Copy ``tree``: the one entry point."""
        deferred: list[tuple[dict[str, Any] | list[Any], Any, int]] = []
        self._deferred = deferred
        self._limit = depth_limit()
        out = self.walk_other(tree, 0)
        pop = deferred.pop
        child = self._child
        while deferred:
            target, source, depth = pop()
            below = depth + 1
            if isinstance(target, dict):
                for key, value in source.items():
                    target[key] = child(value, below)
            else:
                append = target.append
                for value in source:
                    append(child(value, below))
        return out

    def _child(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is str or kind is int or kind is float or kind is bool or value is None:
            return value
        if kind is dict:
            return self.walk_dict(value, depth)
        if kind is list:
            return self.walk_list(value, depth)
        return self.walk_other(value, depth)

    def _defer(self, target: dict[str, Any] | list[Any], source: Any, depth: int) -> Any:
        if depth >= self._limit:
            raise TooDeep(source, self._limit)
        self._deferred.append((target, source, depth))
        return target

    def walk_dict(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        return self.copy_fields(node, depth)

    def walk_list(self, items: list[Any], depth: int) -> list[Any]:
        if depth >= RECURSIVE_LEVELS:
            return self._defer([], items, depth)  # type: ignore[no-any-return]
        out: list[Any] = []
        append = out.append
        below = depth + 1
        for value in items:
            kind = type(value)
            if kind is str or kind is int or kind is float or kind is bool or value is None:
                append(value)
            elif kind is dict:
                append(self.walk_dict(value, below))
            elif kind is list:
                append(self.walk_list(value, below))
            else:
                append(self.walk_other(value, below))
        return out

    def copy_fields(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        """A copy of ``node``'s fields, each walked (``depth``: the containers above ``node``)."""
        if depth >= RECURSIVE_LEVELS:
            return self._defer({}, node, depth)  # type: ignore[no-any-return]
        out: dict[str, Any] = {}
        below = depth + 1
        for key, value in node.items():
            kind = type(value)
            if kind is str or kind is int or kind is float or kind is bool or value is None:
                out[key] = value
            elif kind is dict:
                out[key] = self.walk_dict(value, below)
            elif kind is list:
                out[key] = self.walk_list(value, below)
            else:
                out[key] = self.walk_other(value, below)
        return out

    def walk_other(self, value: object, depth: int) -> object:
        """Subclasses of the JSON types are accepted like their base; anything else is refused."""
        if isinstance(value, dict):
            return self.walk_dict(value, depth)
        if isinstance(value, list):
            return self.walk_list(value, depth)
        if is_scalar(value):
            return value
        raise NotJSON(value)
