"""What ``tune`` and the integrations that read its inputs share: a history, its error, and step-store checks.

Tuning sits above the integrations and an integration never imports it, so
the names both need live here, importing no framework: ``History`` (what a
reader returns), ``HistoryInputError`` (what it raises), the message for a
blob a history references but no store holds, and the read-only look that
tells a harness step store from anything else (``mediastash._path_kinds``).
``mediastash.tuning`` re-exports ``History`` and ``HistoryInputError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mediastash._path_kinds import PathKind, PathKindError, classify
from mediastash.errors import MediaStashError
from mediastash.stores.protocols import MediaStore

__all__ = [
    'History',
    'HistoryInputError',
    'check_step_store',
    'missing_media_error',
    'step_store_kind',
]


class HistoryInputError(MediaStashError, ValueError):
    """An input of ``tune`` is missing, unreadable, or not a message history or step store."""


@dataclass(frozen=True, slots=True)
class History:
    """One message history to replay, with where it came from (a file, ``file#run_id``, or ``synthetic``)."""

    name: str
    messages: list[dict[str, Any]]


def missing_media_error(
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


def check_step_store(path: Path) -> Literal['folder', 'sqlite']:
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
