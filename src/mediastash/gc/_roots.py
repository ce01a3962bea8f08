"""Picking a root: for a value given to ``collect_garbage``, or a ``KIND:ARGUMENT`` of ``mediastash gc --roots``.

gc's own kinds are the framework-free roots of ``mediastash.roots`` (files,
folders, step-store databases); every other kind and every framework object
is asked of the registry the integrations fill (``mediastash.roots``), so gc
imports no integration and knows no framework class.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from mediastash._path_kinds import PathKind, PathKindError, classify
from mediastash.errors import RootReadError
from mediastash.roots import Root, _files, root_adapters, root_kind
from mediastash.roots._files import *  # noqa: F403  (the framework-free roots: their __all__, listed once there)
from mediastash.roots._registry import available_root_kinds, built_in_root_kinds

__all__ = ['ROOT_KINDS', 'Root', 'RootReadError', 'as_root', 'root_from_spec', *_files.__all__]

ROOT_KINDS: Final = (*_files.FILE_KINDS, *built_in_root_kinds())
"""The built-in ``KIND:`` prefixes of ``root_from_spec`` (``mediastash gc --roots``): gc's own and those of the
integrations; a plug-in's come on top (``mediastash.roots.available_root_kinds``)."""


def as_root(value: object) -> Root:
    """The root for ``value``.

    A ``Root`` as is; a ``str`` or path: ``root_from_spec`` (a file or folder,
    its kind sniffed or given by a prefix); a ``set``/``frozenset`` of URIs;
    a ``dict``/``list`` lean tree; anything else is asked of the integrations
    (``mediastash.roots.root_adapters``): a step store, an ``OffloadingKV``, a
    conversation store, a LangGraph saver, an OpenAI Agents session...
    """
    if isinstance(value, Root):
        return value
    if isinstance(value, str):
        return root_from_spec(value)
    if isinstance(value, os.PathLike):
        return root_from_path(Path(value))
    if isinstance(value, set | frozenset):
        return _files.UriRoot(value)
    if isinstance(value, dict | list | tuple):
        return _files.JsonTreeRoot(value)
    for adapter in root_adapters():
        root = adapter(value)
        if root is not None:
            return root
    raise TypeError(
        f'{type(value).__name__} is not a root: give a lean tree, a path, a set of URIs, a mediastash.gc Root, '
        'or an object an integration reads (a step store, a conversation store, an OffloadingKV, a saver, a session)'
    )


_FILE_ROOTS: Final[dict[str, Callable[[Path], Root]]] = {
    'json': _files.JsonFileRoot,
    'jsonl': _files.JsonLinesFileRoot,
    'uris': _files.UriFileRoot,
    'file-steps': _files.FileStepStoreRoot,
    'sqlite-steps': _files.SqliteStepStoreRoot,
}


def root_from_spec(spec: str) -> Root:
    """The root a command-line argument names: ``KIND:ARGUMENT`` or a bare path whose kind is recognised.

    gc's own kinds: ``json`` (a lean JSON file, or a folder: every file below
    it read as the root it is), ``jsonl`` (one JSON value per line), ``uris``
    (one URI per line), ``file-steps`` (a ``FileStepStore`` folder, every file
    below it read too), ``sqlite-steps`` (a ``SqliteStepStore`` database). The
    integrations' kinds (``langgraph-sqlite``, ``agents-sqlite``, ``pg-steps``...)
    and plug-ins' come from ``mediastash.roots.root_kind``; ``docs/gc.md``
    lists them. A bare path is recognised by ``mediastash._path_kinds.classify``,
    the classifier tune uses too: a SQLite file is a step-store database; a
    folder with ``<run>/snapshots/`` or ``<run>/run.json`` inside is a
    ``FileStepStore``, any other folder a folder of roots; a ``*.jsonl`` file
    starting with ``{`` or ``[`` is JSON lines, any other such file JSON; one
    starting with ``media+sha256://`` (or ``#``) a URI list.
    """
    kind, separator, rest = spec.partition(':')
    if separator:
        file_root = _FILE_ROOTS.get(kind)
        factory = root_kind(kind) if file_root is None else None
        if file_root is not None or factory is not None:
            if not rest:
                raise RootReadError(f'{spec!r}: give a path after {kind}:')
            if file_root is not None:
                return file_root(Path(rest).expanduser())
            assert factory is not None
            return factory(rest)
    return root_from_path(Path(spec).expanduser())


def root_from_path(path: Path) -> Root:
    """A path's root, its kind recognised by the classifier gc and tune share (see ``root_from_spec``)."""
    try:
        kind = classify(path)
    except PathKindError as error:
        raise RootReadError(f'{path}: cannot read ({error.strerror})') from None
    if kind is PathKind.MISSING:
        raise RootReadError(f'{path}: no such file or folder')
    if kind is PathKind.FILE_STEP_STORE:
        return _files.FileStepStoreRoot(path)
    if kind in (PathKind.SQLITE_STEP_STORE, PathKind.SQLITE_MEDIA_STORE, PathKind.SQLITE_OTHER):
        return _files.SqliteStepStoreRoot(path)  # reading it says what is missing
    if kind in (PathKind.FOLDER, PathKind.JSON):
        return _files.JsonFileRoot(path)
    if kind is PathKind.URI_LIST:
        return _files.UriFileRoot(path)
    if kind is PathKind.JSON_LINES:
        return _files.JsonLinesFileRoot(path)
    kinds = ', '.join(f'{name}:' for name in (*_FILE_ROOTS, *available_root_kinds()))
    raise RootReadError(f'{path}: cannot tell what kind of root this is; prefix it with one of {kinds}')
