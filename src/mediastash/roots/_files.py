"""The roots no framework is needed to read: lean trees and URIs in memory, files, folders of them, and the
storage of a pydantic-ai-harness ``FileStepStore`` (a folder of JSON files) or ``SqliteStepStore`` (SQL).

Every root yields the URIs it references, one set per item read (a snapshot,
a file, a page of rows), so the collector can count progress. A root that cannot be
read completely raises ``RootReadError``: the collector then deletes nothing.
Roots read from storage count markers inside literal wrappers too (see
``referenced_uris(inside_literals=True)``), so data that went through two
marker layers keeps every blob it needs.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, ClassVar, Final

from mediastash._path_kinds import NOT_ROOTS, PathKind, PathKindError, classify, walk_files
from mediastash.errors import RootReadError
from mediastash.roots._protocol import Root
from mediastash.roots._references import add_references
from mediastash.roots._sql import SQLiteTablesRoot, json_text_references
from mediastash.uri import parse_media_uri

__all__ = [
    'FILE_KINDS',
    'FileStepStoreRoot',
    'JsonFileRoot',
    'JsonLinesFileRoot',
    'JsonTreeRoot',
    'SqliteStepStoreRoot',
    'UriFileRoot',
    'UriRoot',
]


FILE_KINDS: Final = {
    'json': ('a lean JSON file or a folder', 'PATH'),
    'jsonl': ('a JSON-lines file', 'PATH'),
    'uris': ('a file of media+sha256:// URIs one per line', 'PATH'),
    'file-steps': ('a pydantic-ai-harness FileStepStore folder', 'DIR'),
    'sqlite-steps': ('a pydantic-ai-harness SqliteStepStore database', 'DB'),
}
"""The kinds read here, with no framework (``mediastash gc --roots KIND:ARGUMENT``): what each names, and how."""


# -- in memory --------------------------------------------------------------------------------


class JsonTreeRoot(Root):
    """A lean JSON tree in memory (``dict``/``list``), as ``externalize_media`` returns it."""

    def __init__(self, tree: object) -> None:
        self.tree = tree

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        found: set[str] = set()
        add_references(self.tree, found, inside_literals=True)
        yield found

    def describe(self) -> str:
        return f'a {type(self.tree).__name__} tree'


class UriRoot(Root):
    """URIs you name yourself (every one is checked to be a ``media+sha256://`` URI)."""

    def __init__(self, uris: Iterable[str]) -> None:
        if isinstance(uris, str):
            raise TypeError('UriRoot takes an iterable of URI strings, not one string')
        self.uris = frozenset(uris)
        for uri in self.uris:
            parse_media_uri(uri)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        yield set(self.uris)

    def describe(self) -> str:
        return f'{len(self.uris)} URIs'


# -- files ------------------------------------------------------------------------------------


class _FileRoot(Root):
    """A root read from one file or folder, named by its path."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def describe(self) -> str:
        return str(self.path)


class JsonFileRoot(_FileRoot):
    """A lean JSON file, or a folder: every file below it, each read as the root it is.

    In a folder, lean JSON files, JSON-lines files, URI lists and step-store
    databases are read; blobs and sidecars of a disk media store, SQLite media
    databases and writers' temporary files hold no references and are passed
    over; any other file stops the collection (``docs/gc.md``). A file that
    vanishes while a folder is read is skipped (its references went with it).
    A folder holding no root file at all is refused as a likely mistake.
    """

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        if self.path.is_dir():
            async for batch in _folder_batches(self.path, allow_empty=False):
                yield batch
            return
        found = await asyncio.to_thread(_json_file_references, self.path, False)
        assert found is not None
        yield found


class JsonLinesFileRoot(_FileRoot):
    """A JSON-lines file: one lean JSON value per line (blank lines ignored), such as an append-only log."""

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        found = await asyncio.to_thread(_json_lines_references, self.path)
        if found is None:
            raise RootReadError(f'{self.path}: no such file')
        yield found


class UriFileRoot(_FileRoot):
    """A text file of ``media+sha256://`` URIs, one per line (blank lines and ``#`` comments ignored)."""

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        yield await asyncio.to_thread(self.read)

    def read(self) -> set[str]:
        """The URIs of the file (blocking)."""
        try:
            text = self.path.read_text(encoding='utf-8')
        except (OSError, UnicodeDecodeError) as error:
            raise RootReadError(f'{self.path}: cannot read the URI list ({_reason(error)})') from None
        found: set[str] = set()
        for number, line in enumerate(text.splitlines(), start=1):
            entry = line.strip()
            if not entry or entry.startswith('#'):
                continue
            try:
                parse_media_uri(entry)
            except ValueError:
                raise RootReadError(f'{self.path}, line {number}: not a media+sha256:// URI') from None
            found.add(entry)
        return found


class FileStepStoreRoot(Root):
    """The folder of a pydantic-ai-harness ``FileStepStore``, read from its files (no blob restored).

    Reads every ``<run>/snapshots/<seq>.json``, whether or not the run has a
    ``run.json``, so runs the store cannot list still count. Use this (not the
    store object) when the step store externalizes into the store you collect.
    Every other file below the folder is read as the root it is, exactly as
    ``JsonFileRoot`` reads a folder: a step store never hides files kept beside
    its runs.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        if not self.directory.is_dir():
            raise RootReadError(f'{self.directory}: not a folder (expected a FileStepStore folder)')
        async for found in _folder_batches(self.directory, allow_empty=True):
            yield found

    def describe(self) -> str:
        return str(self.directory)


class SqliteStepStoreRoot(SQLiteTablesRoot):
    """The database of a pydantic-ai-harness ``SqliteStepStore``, read with SQL (read-only, no blob restored).

    Reads every snapshot row and every stored message (``snapshots.messages``,
    ``snapshot_messages.message``) in one read transaction. It is gc's own
    (no framework is needed to read it): a step-store database met in a root
    folder is read with it.
    """

    reading: ClassVar[str] = 'the step store'

    def queries(self, tables: set[str]) -> list[str]:
        if 'snapshots' not in tables:
            raise RootReadError(f'{self.database}: no snapshots table (not a SqliteStepStore database)')
        queries = ["SELECT 'snapshot', messages FROM snapshots"]
        if 'snapshot_messages' in tables:
            queries.append("SELECT 'message', message FROM snapshot_messages")
        return queries

    def references(self, kind: Any, value: Any) -> set[str]:
        return json_text_references(value, str(self.database), kind)


def _json_file_references(path: Path, may_vanish: bool) -> set[str] | None:
    """The references of one JSON file (``None`` when it vanished and that is allowed)."""
    raw = _read_file(path, may_vanish)
    if raw is None:
        return None
    found: set[str] = set()
    add_references(_parse_json(raw, path), found, inside_literals=True)
    return found


def _json_lines_references(path: Path) -> set[str] | None:
    """The references of a JSON-lines file, one JSON value per line (``None`` when it vanished).

    Blank lines are passed over. A last line without its newline that is not
    JSON is an append still being written (pydantic-ai-harness appends events
    this way) and is passed over too; any other line that is not JSON stops the
    collection.
    """
    raw = _read_file(path, True)
    if raw is None:
        return None
    found: set[str] = set()
    lines = raw.split(b'\n')
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        unfinished = number == len(lines)
        try:
            tree = _parse_json(line, path, line=number)
        except RootReadError:
            if unfinished:
                continue
            raise
        add_references(tree, found, inside_literals=True)
    return found


def _read_file(path: Path, may_vanish: bool) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if may_vanish:
            return None
        raise RootReadError(f'{path}: no such file') from None
    except OSError as error:
        raise RootReadError(f'{path}: cannot read ({_reason(error)})') from None


def _parse_json(raw: str | bytes, path: object, *, line: int | None = None) -> object:
    """``json.loads``, with every failure (nesting too deep for the parser included) a ``RootReadError``."""
    where = f'{path}' if line is None else f'{path}, line {line}'
    try:
        return json.loads(raw)
    except RecursionError:
        raise RootReadError(f'{where}: JSON nested too deeply to read (no lean tree is this deep)') from None
    except ValueError as error:
        raise RootReadError(f'{where}: not JSON ({_json_reason(error)})') from None


def _json_reason(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f'{error.msg} at line {error.lineno} column {error.colno}'
    return type(error).__name__


# -- a folder: every file read as the root it is -----------------------------------------------

_READ_AS: Final = {PathKind.JSON: 'json', PathKind.JSON_LINES: 'json-lines', PathKind.URI_LIST: 'uris'}


async def _folder_batches(folder: Path, *, allow_empty: bool) -> AsyncIterator[set[str]]:
    """Every root file below ``folder``, classified first (a file no reader understands stops everything)."""
    files = await asyncio.to_thread(_classified_files, folder)
    read = 0
    for path, kind in files:
        if kind is PathKind.SQLITE_STEP_STORE:
            async for found in SqliteStepStoreRoot(path).reference_batches():
                yield found
        elif kind is PathKind.EMPTY:
            pass  # holds no reference, whatever it was meant to be
        else:
            result = await asyncio.to_thread(_file_references, path, kind)
            if result is None:
                continue  # vanished while the folder was read
            yield result
        read += 1
    if not read and not allow_empty:
        raise RootReadError(
            f'{folder}: the folder holds no root file (lean JSON, JSON lines, a URI list or a step-store database)'
        )


def _file_references(path: Path, kind: PathKind) -> set[str] | None:
    if kind is PathKind.JSON:
        return _json_file_references(path, True)
    if kind is PathKind.JSON_LINES:
        return _json_lines_references(path)
    assert kind is PathKind.URI_LIST
    try:
        return UriFileRoot(path).read()
    except RootReadError:
        if not path.exists():
            return None
        raise


def _classified_files(folder: Path) -> list[tuple[Path, PathKind]]:
    """The files below ``folder`` that hold references, with their kind; refuses any file no reader understands."""
    found: list[tuple[Path, PathKind]] = []
    try:
        for path in walk_files(folder):
            kind = classify(path)
            if kind is PathKind.MISSING or kind in NOT_ROOTS:
                continue
            problem = _unreadable(kind)
            if problem is not None:
                raise RootReadError(
                    f'{path}: {problem}; nothing was deleted: move it out of {folder}, '
                    f'or give the roots inside {folder} one by one'
                )
            found.append((path, kind))
    except PathKindError as error:
        raise RootReadError(f'{error.filename}: cannot read ({error.strerror})') from None
    return found


def _unreadable(kind: PathKind) -> str | None:
    """Why a file under a root folder cannot be read as a root, or ``None`` when it can."""
    if kind in _READ_AS or kind is PathKind.SQLITE_STEP_STORE:
        return None
    if kind is PathKind.EMPTY:
        return None  # an empty *.json never gets here: it is read as JSON, and refused as not JSON
    if kind is PathKind.SPECIAL:
        return 'a FIFO, socket or device, not a root file'
    if kind is PathKind.SQLITE_OTHER:
        return 'a SQLite database that is neither a step store (no snapshots table) nor a media store'
    if kind is PathKind.FOLDER or kind is PathKind.FILE_STEP_STORE:
        return None
    return (
        'cannot tell what kind of root this file is (not lean JSON, JSON lines, a URI list, a step-store '
        'database, nor part of a media store)'
    )


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return type(error).__name__
