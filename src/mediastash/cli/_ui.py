"""What every command shares: user errors, progress, tables and JSON output.

Commands raise ``UserError`` (or a ``MediaStashError`` / ``OSError``) for
things the user can fix; ``main`` prints one line and exits non-zero, never a
traceback. Progress goes to stderr and only when stderr is a terminal and
``--quiet`` was not given; tables go to stdout; with ``--json`` stdout holds
JSON only; ``--json-file FILE`` writes the same JSON to FILE as well.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from mediastash._describe import describe_error  # the error line: the library's wording, no driver named
from mediastash.cli._errors import UserError
from mediastash.cli._output import output_file, write_output

__all__ = ['EXIT_FAILED', 'EXIT_USAGE', 'Step', 'Ui', 'UserError', 'describe_error']

EXIT_FAILED = 1
"""The command ran and found a problem (``verify`` found corrupt blobs), or a user error."""

_PIPED_WIDTH = 240
"""Table width when stdout is not a terminal (and ``COLUMNS`` does not say otherwise)."""

EXIT_USAGE = 2
"""Bad command-line arguments (argparse's own code)."""


class Step(Protocol):
    """A progress handle: ``advance`` by units of work done."""

    def advance(self, amount: float = 1) -> None: ...


class _NoStep:
    def advance(self, amount: float = 1) -> None:
        pass


class Ui:
    """Output of one command run.

    ``quiet`` silences progress. ``as_json``: JSON on stdout instead of
    tables. ``json_file``: a path to write the JSON to as well (``None``:
    none); the two combine.
    """

    def __init__(self, *, quiet: bool = False, as_json: bool = False, json_file: str | None = None) -> None:
        self.quiet = quiet
        self.as_json = as_json
        self.json_file = json_file
        self.out = Console(file=sys.stdout, soft_wrap=True, highlight=False)
        if not self.out.is_terminal and 'COLUMNS' not in os.environ:
            # Piped or redirected: do not fold wide tables at 80 columns.
            self.out = Console(file=sys.stdout, soft_wrap=True, highlight=False, width=_PIPED_WIDTH)
        self.err = Console(file=sys.stderr, soft_wrap=True, highlight=False)

    @property
    def shows_progress(self) -> bool:
        return not self.quiet and self.err.is_terminal

    def info(self, message: str) -> None:
        """A line of narration on stderr (dropped with ``--quiet``)."""
        if not self.quiet:
            self.err.print(message, markup=False)

    @contextmanager
    def progress(self, description: str, total: float | None = None) -> Iterator[Step]:
        """A progress bar on stderr for long work (a no-op when quiet or not a terminal).

        With a ``total``: done of total, time elapsed and the estimated time
        left (``eta``, from the recent rate; ``-:--:--`` until there is one).
        Without: a count and the time elapsed.
        """
        if not self.shows_progress:
            yield _NoStep()
            return
        with Progress(*progress_columns(total), console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)

            class _Step:
                def advance(self, amount: float = 1) -> None:
                    bar.advance(task, amount)

            yield _Step()

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """A table on stdout (skipped with ``--json``); numeric columns are right-aligned."""
        if self.as_json:
            return
        table = Table(title=title, title_justify='left')
        for index, name in enumerate(columns):
            numeric = bool(rows) and all(isinstance(row[index], int | float) for row in rows)
            table.add_column(name, justify='right' if numeric else 'left')
        for row in rows:
            table.add_row(*(_cell(value) for value in row))
        self.out.print(table)

    def line(self, text: str) -> None:
        """A line of results on stdout (skipped with ``--json``)."""
        if not self.as_json:
            self.out.print(text, markup=False)

    def json(self, value: Any) -> None:
        """The command's result as JSON, where ``--json`` or ``--json-file`` asked for it (else nothing)."""
        if not self.as_json and self.json_file is None:
            return
        text = json.dumps(value, indent=2) + '\n'
        if self.as_json:
            sys.stdout.write(text)
        if self.json_file is not None:
            try:
                write_output(self.json_file, text.encode())
            except OSError as error:
                raise self._unwritable(error) from None

    @contextmanager
    def json_stream(self) -> Iterator[Callable[[str], None] | None]:
        """A writer for the command's JSON in pieces, for results larger than memory (``None`` when neither
        ``--json`` nor ``--json-file`` asked for JSON). Pieces go to stdout as they come; ``--json-file`` is
        replaced only once the block ends without an error."""
        if not self.as_json and self.json_file is None:
            yield None
            return
        if self.json_file is None:

            def to_stdout(text: str) -> None:
                sys.stdout.write(text)

            yield to_stdout
            return
        with ExitStack() as stack:
            try:
                file = stack.enter_context(output_file(self.json_file))
            except OSError as error:
                raise self._unwritable(error) from None

            def write(text: str) -> None:
                try:
                    file.write(text.encode())
                except OSError as error:
                    raise self._unwritable(error) from None
                if self.as_json:
                    sys.stdout.write(text)

            yield write

    def _unwritable(self, error: OSError) -> UserError:
        return UserError(f'cannot write {self.json_file}: {error.strerror or error}')

    def error(self, message: str) -> None:
        """The one-line error for a user error."""
        self.err.print(f'mediastash: error: {message}', markup=False, highlight=False)


def progress_columns(total: float | None) -> list[ProgressColumn]:
    """The columns of a progress bar: the estimated time left only where the ``total`` is known."""
    columns: list[ProgressColumn] = [
        TextColumn('{task.description}'),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ]
    if total is not None:
        columns += [TextColumn('eta'), TimeRemainingColumn()]
    return columns


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return 'yes' if value else 'no'
    if isinstance(value, int):
        return f'{value:,}'
    if isinstance(value, float):
        return f'{value:,.2f}'
    return str(value)
