"""The histories a sweep replays: JSON history files, harness step stores, or the synthetic history.

A history is the JSON form pydantic-ai persists
(``ModelMessagesTypeAdapter.dump_python(messages, mode='json')``, or
``json.loads`` of what ``dump_json`` / ``result.all_messages_json()`` wrote).
A pydantic-ai-harness ``FileStepStore`` folder or ``SqliteStepStore``
database gives one history per run: the run's latest complete snapshot, read
through the harness's public API and ``OffloadingStepStore`` (so envelopes and
markers written by either are restored, from the media store the histories
were written with). Inputs are only read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mediastash._path_kinds import PathKind, PathKindError, classify, file_step_store_runs
from mediastash._sqlite_read import read_only
from mediastash.errors import MediaStashError
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions

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
        if path.is_dir() or step_store_kind(path) is not None or _is_sqlite(path):
            histories.extend(await load_step_store(path, media_store=media_store))
        else:
            histories.append(await _full_history(load_history_file(path), media_store))
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
        raise _missing(error, where, media_store, wrapped=False) from None


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
    skipped, as ``continue_run`` does). The runs of a folder are those the
    classifier gc uses finds (``<run>/run.json`` or ``<run>/snapshots/``). A
    snapshot is read as stored, then through ``OffloadingStepStore`` with
    ``media_store`` (its envelopes restored, whichever envelope version wrote
    them); a message the wrapper leaves unchanged that still holds markers was
    externalized by the harness store itself, and is restored from
    ``media_store`` or, without one, by the harness's own media store. The
    store is only read: the folder or database must already look like a step
    store.
    """
    try:
        from pydantic_ai_harness.step_persistence import FileStepStore, SqliteStepStore

        from mediastash.integrations import OffloadingStepStore
    except ImportError:
        raise HistoryInputError(
            f'reading the step store {path} needs pydantic-ai-harness: pip install "mediastash[harness]"'
        ) from None
    from mediastash.open_store import open_store

    folder = _check_step_store(path) == 'folder'
    try:
        database = None if folder else read_only(path, threads=True)  # the harness's own opening writes (WAL, schema)
    except sqlite3.Error as error:
        raise HistoryInputError(f'cannot read the step store {path}: {type(error).__name__}: {error}') from None

    def opened(media: Any) -> Any:
        if database is None:
            return FileStepStore(path, media_store=media)
        return SqliteStepStore(connection=database.connection, media_store=media)

    plain = opened(None)
    reading = open_store('memory://') if media_store is None else media_store  # empty: any envelope asks for --media
    wrapper = OffloadingStepStore(plain, media_store=reading, options=WalkOptions(known_blobs=False))
    layered = OffloadingStepStore(
        opened('auto' if media_store is None else media_store),
        media_store=reading,
        options=WalkOptions(known_blobs=False),
    )
    histories: list[History] = []
    try:
        runs = list(file_step_store_runs(path)) if folder else [run.run_id for run in await plain.list_runs()]
        for run_id in runs:
            where = f'{path}#{run_id}'
            messages = await _run_history(plain, wrapper, layered, run_id, where, media_store)
            if messages:
                histories.append(History(where, messages))
    except HistoryInputError:
        raise
    except RecursionError:
        raise HistoryInputError(f'cannot read the step store {path}: a snapshot is nested too deeply to read') from None
    except sqlite3.OperationalError as error:
        if 'readonly' in str(error):  # the harness store set out to upgrade an older schema
            raise HistoryInputError(
                f'cannot read the step store {path}: its schema is older than the installed pydantic-ai-harness '
                'and tune only reads (it upgrades nothing); open it once with the harness to upgrade it'
            ) from None
        raise HistoryInputError(f'cannot read the step store {path}: {type(error).__name__}: {error}') from None
    except (OSError, ValueError, sqlite3.Error) as error:
        raise HistoryInputError(f'cannot read the step store {path}: {type(error).__name__}: {error}') from None
    finally:
        if database is not None:
            database.connection.close()
    if database is not None and not database.unchanged():
        raise HistoryInputError(f'the step store {path} was opened by a writer while it was read: run tune again')
    if not histories:
        raise HistoryInputError(f'the step store {path} holds no run with a complete snapshot')
    return histories


async def _run_history(
    plain: Any, wrapper: Any, layered: Any, run_id: str, where: str, media_store: MediaStore | None
) -> list[dict[str, Any]] | None:
    """The JSON messages of a run's latest complete snapshot, every payload restored (``None``: no such snapshot).

    First as the documented layout writes it (``OffloadingStepStore`` over a
    harness store without a media store of its own). When the stored snapshot
    holds markers the harness store wrote itself (it does not even parse
    without them restored, or the wrapper leaves a message with markers
    unchanged), the run is read again through the harness store with its media
    store (``media_store``, or its own default) under the wrapper.
    """
    from mediastash.gc import referenced_uris

    try:
        raw = await plain.latest_snapshot(run_id=run_id)
    except ValueError:  # harness markers where a payload must be: only a store with its media can parse it
        harness_made = True
    else:
        if raw is None or not raw.messages:
            return None
        full = _dumped(await _restoring(wrapper.latest_snapshot(run_id=run_id), where, media_store, wrapped=True))
        stored = _dumped(raw)
        harness_made = any(message == stored[index] and referenced_uris(message) for index, message in enumerate(full))
        if not harness_made:
            return full
    snapshot = await _restoring(layered.latest_snapshot(run_id=run_id), where, media_store, wrapped=False)
    return None if snapshot is None or not snapshot.messages else _dumped(snapshot)


def _dumped(snapshot: Any) -> list[dict[str, Any]]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    messages: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(list(snapshot.messages), mode='json')
    return messages


async def _restoring(read: Awaitable[Any], where: str, media_store: MediaStore | None, *, wrapped: bool) -> Any:
    """Await a read that restores payloads; a missing blob becomes a ``HistoryInputError`` naming it (``_missing``)."""
    try:
        return await read
    except FileNotFoundError as error:
        raise _missing(error, where, media_store, wrapped=wrapped) from None


def _missing(
    error: FileNotFoundError, where: str, media_store: MediaStore | None, *, wrapped: bool
) -> HistoryInputError:
    """The error for a blob a history references that the store it was read from lacks: which URI, and what to do.

    With ``--media`` given, the advice is not to pass it again: the blob is
    missing from that store (deleted, or the histories were written with
    another one). Without it, the advice is ``--media``.
    """
    uri = getattr(error, 'uri', None)
    what = f'media ({uri})' if isinstance(uri, str) else 'media'
    if media_store is not None:
        return HistoryInputError(
            f'{where} references {what} that the --media store {media_store!r} does not hold: the blob was '
            'deleted from it, or the histories were written with another media store'
        )
    if wrapped:
        problem = f'was written through OffloadingStepStore, and its {what} is not in the step store'
    else:
        problem = f'references {what} that is not in the step store'
    return HistoryInputError(f'{where} {problem}: pass --media URL, the media store the histories were written with')


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
