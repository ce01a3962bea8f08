"""Which reader turns a ``tune`` input into histories: a registry the integrations and plug-ins fill.

A JSON history file is read by tuning itself. Any other input (a framework's
store on disk) is read by its integration, through a reader of two parts:
``claims(path)``, a read-only look that imports no framework (is this path my
kind?), and ``read(path, *, media_store=...)``, which may import its framework
and returns ``History`` objects (``mediastash._history_inputs``) or raises
``HistoryInputError``.

The built-in readers are listed here with their claim and their read as a
``module:attribute`` string, imported only when an input of their kind is
read, so neither this module nor the CLI imports a framework or an
integration. A plug-in adds a reader with no edit to mediastash by declaring
an entry point in the group ``mediastash.tune_inputs`` (name: the kind,
value: ``module`` or ``module:attribute`` naming an object with ``claims`` and
``read``), or at run time with ``register_history_reader``. Readers are asked
in order: built-ins, registrations, then plug-ins by kind name; the first that
claims a path reads it. A registration replaces a reader of the same kind.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from mediastash._history_inputs import History, HistoryInputError, step_store_kind
from mediastash._plugins import declared, import_target
from mediastash.errors import InvalidArgumentError, MediaStashError
from mediastash.stores.protocols import MediaStore

__all__ = [
    'ENTRY_POINT_GROUP',
    'HistoryRead',
    'available_history_readers',
    'read_with',
    'reader_for',
    'register_history_reader',
]

ENTRY_POINT_GROUP: Final = 'mediastash.tune_inputs'
"""The entry-point group plug-ins declare tune input readers in (name: the kind, value: ``module[:attribute]``)."""

HistoryRead = Callable[..., Awaitable[list[History]]]
"""``await read(path, media_store=store_or_None)``: the histories one input holds."""

_KIND_NAME: Final = re.compile(r'[a-z][a-z0-9-]{1,39}')


@dataclass(slots=True)
class _Reader:
    """One reader of ``tune`` inputs, as the registry keeps it.

    ``read`` is a string (``module:attribute``) until first use; ``claims`` is
    ``None`` for a plug-in until its object is imported. ``what`` and
    ``needs`` word a built-in's install hint (``reading the step store P needs
    pydantic-ai-harness: pip install "mediastash[harness]"``); an error a
    built-in does not turn into a ``HistoryInputError`` is a bug, raised as
    is. ``origin`` and ``rivals``: the entry points declaring a plug-in's kind
    (with more than one target, the kind is refused).
    """

    kind: str
    read: HistoryRead | str
    claims: Callable[[Path], bool] | None
    what: str = 'the input'
    needs: str = ''
    built_in: bool = False
    origin: str = ''
    rivals: list[str] = field(default_factory=list)


def _is_harness_step_store(path: Path) -> bool:
    return step_store_kind(path) is not None


HARNESS_STEPS: Final = 'harness-steps'
"""The built-in kind of a pydantic-ai-harness ``FileStepStore`` folder or ``SqliteStepStore`` database."""

_BUILT_IN: Final = (
    _Reader(
        HARNESS_STEPS,
        'mediastash.integrations.pydantic_ai._tune_inputs:read_step_store',
        _is_harness_step_store,
        'the step store',
        'pydantic-ai-harness: pip install "mediastash[harness]"',
        built_in=True,
    ),
)

_registered: dict[str, _Reader] = {reader.kind: reader for reader in _BUILT_IN}
"""Built-ins, then registrations, in the order they are asked."""


def register_history_reader(kind: str, read: HistoryRead | str, *, claims: Callable[[Path], bool]) -> None:
    """Make ``tune`` read the inputs ``claims(path)`` accepts with ``await read(path, media_store=...)``.

    ``read``: a callable, or ``'module:attribute'`` imported on first use.
    ``claims`` must only look (a name, a few bytes, a table list) and import
    no framework: it is asked about every input no earlier reader claimed.
    """
    if not isinstance(kind, str) or _KIND_NAME.fullmatch(kind) is None:
        raise InvalidArgumentError('kind', 'a lowercase name of 2 to 40 letters, digits or -', kind)
    if not (callable(read) or (isinstance(read, str) and ':' in read)):
        raise InvalidArgumentError('read', "a callable or a 'module:attribute' string", read)
    if not callable(claims):
        raise InvalidArgumentError('claims', 'a callable taking a Path and returning a bool', claims)
    _registered[kind] = _Reader(kind, read, claims)


def available_history_readers() -> list[str]:
    """Every kind a registry entry or an installed plug-in declares, in the order they are asked (nothing imported)."""
    return [*_registered, *(kind for kind in sorted(_entry_point_readers()) if kind not in _registered)]


def reader_for(path: Path) -> str | None:
    """The kind of the first reader that claims ``path`` (``None``: no one does; tune reads it as a history file)."""
    for reader in _readers():
        claims = reader.claims if reader.claims is not None else _plugin(reader).claims
        assert claims is not None
        try:
            claimed = claims(path)
        except MediaStashError:
            raise
        except Exception as error:
            raise HistoryInputError(
                f'the tune input reader {reader.kind} ({reader.origin or "registered"}) failed on {path}: '
                f'{type(error).__name__}'
            ) from error
        if claimed:
            return reader.kind
    return None


async def read_with(kind: str, path: Path, *, media_store: MediaStore | None) -> list[History]:
    """The histories the reader of ``kind`` finds in ``path``; a missing framework names the extra to install.

    A reader that returns anything but a non-empty list of ``History`` objects
    is refused (``HistoryInputError``): a claimed input never gives less.
    """
    reader = _registered.get(kind) or _entry_point_readers()[kind]
    read = _read_of(reader, path)
    try:
        histories = await read(path, media_store=media_store)
    except MediaStashError:
        raise
    except Exception as error:
        if reader.built_in:
            raise
        raise HistoryInputError(
            f'the tune input reader {kind} ({reader.origin or "registered"}) failed on {path}: {type(error).__name__}'
        ) from error
    if not isinstance(histories, list) or not histories or not all(isinstance(one, History) for one in histories):
        # a claimed input must give its histories or fail: one silently dropped would skew the sweep
        if not isinstance(histories, list):
            got = f'a {type(histories).__name__}'
        elif not histories:
            got = 'no history'
        else:
            got = f'a list holding a {next(type(one).__name__ for one in histories if not isinstance(one, History))}'
        raise HistoryInputError(
            f'the tune input reader {kind} ({reader.origin or "registered"}) returned {got} for {path}: '
            'expected a non-empty list of History objects, or a HistoryInputError'
        )
    return histories


def _readers() -> Iterator[_Reader]:
    yield from list(_registered.values())  # a copy: a claims() or another thread may register meanwhile
    plugins = _entry_point_readers()
    for kind in sorted(plugins):
        if kind not in _registered:
            yield plugins[kind]


def _read_of(reader: _Reader, path: Path) -> HistoryRead:
    """The reader's read, imported now if it is named by a string."""
    if reader.claims is None:
        _plugin(reader)
    if isinstance(reader.read, str):
        reader.read = _imported(reader, reader.read, path)
    return reader.read


def _imported(reader: _Reader, target: str, path: Path) -> HistoryRead:
    """Import a read named ``module:attribute``: a missing framework is the install hint, our own module's
    failure the import error itself, any other failure of a registered read its type only."""
    try:
        found: Any = import_target(target)
    except ImportError as error:
        ours = (error.name or '').startswith('mediastash')
        if reader.needs and not ours:
            raise HistoryInputError(f'reading {reader.what} {path} needs {reader.needs}') from None
        problem = f'cannot be imported: {type(error).__name__}: {error}'
    except Exception as error:  # a missing attribute, or the module failing as it runs: its message kept out
        if reader.built_in:
            raise
        problem = f'cannot be imported: {type(error).__name__}'
    else:
        if callable(found):
            return cast(HistoryRead, found)
        problem = 'is not callable'
    raise HistoryInputError(f'the tune input reader {reader.kind} ({target}) {problem}')


def _plugin(reader: _Reader) -> _Reader:
    """Import a plug-in's reader object and take its ``claims`` and ``read`` (a ``HistoryInputError`` if it cannot)."""
    if reader.rivals:
        origins = ', '.join([reader.origin, *reader.rivals])
        raise HistoryInputError(
            f'more than one installed plug-in declares the tune input kind {reader.kind}: ({origins})'
        )
    assert isinstance(reader.read, str)
    try:
        found = import_target(reader.read)
    except Exception as error:
        raise HistoryInputError(
            f'the tune input reader {reader.kind} (entry point {reader.origin}) cannot be imported: '
            f'{type(error).__name__}'
        ) from error
    claims: Any = getattr(found, 'claims', None)
    read: Any = getattr(found, 'read', None)
    if not (callable(claims) and callable(read)):
        raise HistoryInputError(
            f'the tune input reader {reader.kind} (entry point {reader.origin}) has no callable claims and read'
        )
    reader.claims, reader.read = claims, read
    return reader


@functools.cache
def _entry_point_readers() -> dict[str, _Reader]:
    """The readers installed distributions declare in ``mediastash.tune_inputs``, read once."""
    plugins = declared(ENTRY_POINT_GROUP, _KIND_NAME)
    return {
        kind: _Reader(kind, entry.target, None, origin=entry.origin, rivals=entry.rivals)
        for kind, entry in plugins.items()
    }
