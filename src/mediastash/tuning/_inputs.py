"""The histories a sweep replays: JSON history files, harness step stores, or the synthetic history.

A history is the JSON form pydantic-ai persists
(``ModelMessagesTypeAdapter.dump_python(messages, mode='json')``, or
``json.loads`` of what ``dump_json`` / ``result.all_messages_json()`` wrote).
A pydantic-ai-harness ``FileStepStore`` folder or ``SqliteStepStore``
database gives one history per run: the run's latest complete snapshot, read
through the harness's public API (so its own media store restores it).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mediastash._path_kinds import PathKind, PathKindError, classify
from mediastash.errors import MediaStashError

__all__ = [
    'History',
    'HistoryInputError',
    'load_history_file',
    'load_inputs',
    'load_step_store',
    'step_store_kind',
    'synthetic_history',
]

_MESSAGE_KINDS = frozenset({'request', 'response'})


class HistoryInputError(MediaStashError, ValueError):
    """An input of ``tune`` is missing, unreadable, or not a message history or step store."""


@dataclass(frozen=True, slots=True)
class History:
    """One message history to replay, with where it came from (a file, ``file#run_id``, or ``synthetic``)."""

    name: str
    messages: list[dict[str, Any]]


def synthetic_history(*, steps: int = 50, seed: int = 0) -> History:
    """The walker benchmark's history: ``steps`` round trips, 40 MiB of distinct images, four large tool outputs."""
    from mediastash.testing.histories import MiB, agent_history

    return History(f'synthetic ({steps} steps)', agent_history(steps=steps, image_bytes_total=40 * MiB, seed=seed))


async def load_inputs(paths: list[Path]) -> list[History]:
    """Every history the paths hold, in order: a file gives one, a step store one per run."""
    histories: list[History] = []
    for path in paths:
        if not path.exists():
            raise HistoryInputError(f'no such file or folder: {path}')
        if path.is_dir() or step_store_kind(path) is not None or _is_sqlite(path):
            histories.extend(await load_step_store(path))
        else:
            histories.append(load_history_file(path))
    return histories


def load_history_file(path: Path) -> History:
    """A message history saved as JSON (a list of ``ModelRequest`` / ``ModelResponse`` objects)."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise HistoryInputError(f'cannot read {path}: {error.strerror or error}') from None
    try:
        tree = json.loads(raw)
    except RecursionError:
        raise HistoryInputError(
            f'{path} is JSON nested too deeply to read: expected a pydantic-ai message history'
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        where = f' (line {error.lineno})' if isinstance(error, json.JSONDecodeError) else ''
        raise HistoryInputError(f'{path} is not JSON{where}: expected a pydantic-ai message history') from None
    problem = _history_problem(tree)
    if problem is not None:
        raise HistoryInputError(f'{path} is not a pydantic-ai message history: {problem}')
    return History(str(path), tree)


def _history_problem(tree: object) -> str | None:
    """Why ``tree`` is not the JSON form of a message history, or ``None`` when it is."""
    if not isinstance(tree, list):
        return f'expected a JSON list of messages, got a JSON {_json_type(tree)}'
    if not tree:
        return 'the list holds no messages'
    for index, message in enumerate(tree):
        if not isinstance(message, dict):
            return f'message {index} is a JSON {_json_type(message)}, not an object'
        if message.get('kind') not in _MESSAGE_KINDS:
            return f'message {index} has no "kind" of "request" or "response"'
        if not isinstance(message.get('parts'), list):
            return f'message {index} has no "parts" list'
    return None


def _json_type(value: object) -> str:
    names = {dict: 'object', list: 'list', str: 'string', bool: 'boolean', int: 'number', float: 'number'}
    return 'null' if value is None else names.get(type(value), type(value).__name__)


async def load_step_store(path: Path) -> list[History]:
    """One history per run of a harness ``FileStepStore`` folder or ``SqliteStepStore`` file.

    Each run's latest complete snapshot is its history (an interrupted one is
    skipped, as ``continue_run`` does). The store is only read: the folder or
    database must already look like a step store.
    """
    try:
        from pydantic_ai.messages import ModelMessagesTypeAdapter
        from pydantic_ai_harness.step_persistence import FileStepStore, SqliteStepStore
    except ImportError:
        raise HistoryInputError(
            f'reading the step store {path} needs pydantic-ai-harness: pip install "mediastash[harness]"'
        ) from None
    folder = _check_step_store(path) == 'folder'
    store = FileStepStore(path) if folder else SqliteStepStore(database=path)
    histories: list[History] = []
    try:
        for run in await store.list_runs():
            snapshot = await store.latest_snapshot(run_id=run.run_id)
            if snapshot is None or not snapshot.messages:
                continue
            messages = ModelMessagesTypeAdapter.dump_python(snapshot.messages, mode='json')
            histories.append(History(f'{path}#{run.run_id}', messages))
    except HistoryInputError:
        raise
    except (OSError, ValueError, sqlite3.Error) as error:
        raise HistoryInputError(f'cannot read the step store {path}: {type(error).__name__}: {error}') from None
    if not histories:
        raise HistoryInputError(f'the step store {path} holds no run with a complete snapshot')
    return histories


def step_store_kind(path: Path) -> Literal['folder', 'sqlite'] | None:
    """``'folder'`` for a harness ``FileStepStore`` folder, ``'sqlite'`` for a ``SqliteStepStore`` database.

    The answer of ``mediastash._path_kinds.classify``, the classifier garbage
    collection uses too (a read-only look).
    """
    try:
        kind = classify(path)
    except PathKindError as error:
        raise HistoryInputError(f'cannot read {path}: {error.strerror}') from None
    if kind is PathKind.FILE_STEP_STORE:
        return 'folder'
    if kind is PathKind.SQLITE_STEP_STORE:
        return 'sqlite'
    return None


def _is_sqlite(path: Path) -> bool:
    return classify(path) in (PathKind.SQLITE_MEDIA_STORE, PathKind.SQLITE_OTHER)


def _check_step_store(path: Path) -> Literal['folder', 'sqlite']:
    """Refuse what does not look like a harness step store (a read-only look)."""
    kind = step_store_kind(path)
    if kind is not None:
        return kind
    if path.is_dir():
        raise HistoryInputError(
            f'{path} is a folder but not a pydantic-ai-harness FileStepStore (no <run>/run.json or <run>/snapshots/ '
            'in it)'
        )
    raise HistoryInputError(f'{path} is not a pydantic-ai-harness SqliteStepStore database (no snapshots table)')
