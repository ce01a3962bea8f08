"""``mediastash tune``'s reader of pydantic-ai-harness step stores: one history per run (extra ``harness``).

A ``FileStepStore`` folder or ``SqliteStepStore`` database gives each run's
latest complete snapshot, read through the harness's public API and
``OffloadingStepStore`` (so envelopes and markers written by either are
restored, from the media store the histories were written with), as the JSON
form pydantic-ai persists. The store is only read. ``mediastash.tuning``
finds this reader by name in its registry (``tuning/_readers.py``) and
imports it only for a step-store input: tuning imports no framework.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai_harness.step_persistence import FileStepStore, SqliteStepStore

from mediastash._history_inputs import History, HistoryInputError, check_step_store, missing_media_error
from mediastash._path_kinds import file_step_store_runs
from mediastash._sqlite_read import read_only
from mediastash.integrations.pydantic_ai.step_store import OffloadingStepStore
from mediastash.roots import referenced_uris
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions

__all__ = ['read_step_store']


async def read_step_store(path: Path, *, media_store: MediaStore | None = None) -> list[History]:
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
    folder = check_step_store(path) == 'folder'
    try:
        database = None if folder else read_only(path, threads=True)  # the harness's own opening writes (WAL, schema)
    except sqlite3.Error as error:
        raise HistoryInputError(f'cannot read the step store {path}: {type(error).__name__}: {error}') from None

    def opened(media: Any) -> Any:
        if database is None:
            return FileStepStore(path, media_store=media)
        return SqliteStepStore(connection=database.connection, media_store=media)

    plain = opened(None)
    reading = MemoryMediaStore() if media_store is None else media_store  # empty: any envelope asks for --media
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
    messages: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(list(snapshot.messages), mode='json')
    return messages


async def _restoring(read: Awaitable[Any], where: str, media_store: MediaStore | None, *, wrapped: bool) -> Any:
    """Await a read that restores payloads; a missing blob becomes a ``HistoryInputError`` naming it."""
    try:
        return await read
    except FileNotFoundError as error:
        raise missing_media_error(error, where, media_store, wrapped=wrapped) from None
