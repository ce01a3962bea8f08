"""A third-party framework's garbage-collection root, declared only in its ``mediastash.roots`` entry point.

Its "framework" keeps notes: a text file of lines ``keep <media+sha256 URI>``.
``notes_root(path)`` is the factory ``mediastash gc --roots notes:PATH`` calls.
The root satisfies ``mediastash.roots.Root`` without subclassing anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from mediastash.roots import RootReadError


class NotesRoot:
    def __init__(self, path: str) -> None:
        self.path = Path(path)

    async def reference_batches(self) -> AsyncIterator[set[str]]:
        try:
            lines = self.path.read_text(encoding='utf-8').splitlines()
        except OSError:
            raise RootReadError(f'{self.path}: cannot read the notes') from None
        found: set[str] = set()
        for line in lines:
            verb, _, uri = line.partition(' ')
            if verb != 'keep':
                raise RootReadError(f'{self.path}: a line that is not "keep URI"')
            found.add(uri)
        yield found

    def describe(self) -> str:
        return f'notes {self.path}'


def notes_root(argument: str) -> NotesRoot:
    return NotesRoot(argument)
