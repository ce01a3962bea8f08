"""The histories a sweep replays: JSON history files, harness step stores, or the synthetic history.

A history is the JSON form pydantic-ai persists
(``ModelMessagesTypeAdapter.dump_python(messages, mode='json')``, or
``json.loads`` of what ``dump_json`` / ``result.all_messages_json()`` wrote).
A pydantic-ai-harness ``FileStepStore`` folder or ``SqliteStepStore``
database gives one history per run: the run's latest complete snapshot, read
by the pydantic-ai integration (``integrations/pydantic_ai/_tune_inputs.py``),
which ``tuning/_readers.py`` finds by name, so tuning imports no framework.
Any other input a reader claims (a plug-in's) is read by that reader. Inputs
are only read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mediastash._history_inputs import (
    History,
    HistoryInputError,
    check_step_store,
    missing_media_error,
    step_store_kind,
)
from mediastash._path_kinds import PathKind, classify
from mediastash.stores.protocols import MediaStore
from mediastash.tuning._readers import HARNESS_STEPS, read_with, reader_for

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


def synthetic_history(*, steps: int = 50, seed: int = 0) -> History:
    """The walker benchmark's history: ``steps`` round trips, 40 MiB of distinct images, four large tool outputs."""
    from mediastash._histories import MiB, agent_history

    return History(f'synthetic ({steps} steps)', agent_history(steps=steps, image_bytes_total=40 * MiB, seed=seed))


async def load_inputs(paths: list[Path], *, media_store: MediaStore | None = None) -> list[History]:
    """Every history the paths hold, in order: a file gives one, a step store one per run.

    ``media_store``: the store the histories were written with (``tune
    --media``), read only. Without it, a step store's payloads come from the
    harness's own media store inside the folder or database, and an input that
    needs another store is refused with a ``HistoryInputError`` saying so.
    """
    histories: list[History] = []
    for path in paths:
        if not path.exists():
            raise HistoryInputError(f'no such file or folder: {path}')
        kind = reader_for(path)
        if kind is not None:
            histories.extend(_checked(kind, await read_with(kind, path, media_store=media_store)))
        elif path.is_dir() or _is_sqlite(path):
            check_step_store(path)  # says what the folder or database is not
            raise HistoryInputError(f'no tune input reader claims {path}')  # its kind's reader was replaced
        else:
            histories.append(await _full_history(load_history_file(path), media_store))
    return histories


def _checked(kind: str, histories: list[History]) -> list[History]:
    """A reader's histories, each refused unless it is the JSON form of messages the sweep can replay (or empty)."""
    for history in histories:
        problem = _history_problem(history.messages) if history.messages != [] else None
        if problem is not None:
            raise HistoryInputError(
                f'the tune input reader {kind} gave {history.name}, which is not a pydantic-ai message history: '
                f'{problem}'
            )
    return histories


async def _full_history(history: History, media_store: MediaStore | None) -> History:
    """A history file as the agent saw it: a lean one (markers in place of payloads) restored from ``media_store``."""
    from mediastash.gc import referenced_uris

    if not referenced_uris(history.messages):
        return history
    if media_store is None:
        raise HistoryInputError(
            f'{history.name} is a lean history (its payloads are in a media store): pass --media URL, '
            'the media store it was written with'
        )
    return History(history.name, await _restored(history.messages, media_store, history.name))


async def _restored(tree: Any, media_store: MediaStore, where: str) -> Any:
    from mediastash.walker import restore_media

    try:
        return await restore_media(tree, media_store=media_store, known_blobs=False, structured=True)
    except FileNotFoundError as error:
        raise missing_media_error(error, where, media_store, wrapped=False) from None


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


async def load_step_store(path: Path, *, media_store: MediaStore | None = None) -> list[History]:
    """One history per run of a harness ``FileStepStore`` folder or ``SqliteStepStore`` file.

    Each run's latest complete snapshot is its history (an interrupted one is
    skipped, as ``continue_run`` does), every payload restored: from
    ``media_store`` or, without one, from the harness's own media store. The
    store is only read: the folder or database must already look like a step
    store. The pydantic-ai integration reads it (``tuning/_readers.py`` finds
    it by name), so pydantic-ai-harness is needed: a ``HistoryInputError``
    names the extra when it is not installed.
    """
    check_step_store(path)
    return await read_with(HARNESS_STEPS, path, media_store=media_store)


def _is_sqlite(path: Path) -> bool:
    return classify(path) in (PathKind.SQLITE_MEDIA_STORE, PathKind.SQLITE_OTHER)
