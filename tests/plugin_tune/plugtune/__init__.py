"""A third-party framework's ``tune`` input reader, declared only in its ``mediastash.tune_inputs`` entry point.

Its "framework" keeps chat logs: a ``*.chatlog`` text file of lines ``user: TEXT``
or ``model: TEXT``, one history per file. The module itself is the reader:
``claims(path)`` looks at the name only, ``read(path, media_store=...)`` turns the
lines into the JSON form of pydantic-ai messages.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mediastash.tuning import History, HistoryInputError


def claims(path: Path) -> bool:
    return path.suffix == '.chatlog'


async def read(path: Path, *, media_store: object = None) -> list[History]:
    messages: list[dict[str, Any]] = []
    text = await asyncio.to_thread(path.read_text, encoding='utf-8')
    for line in text.splitlines():
        who, _, said = line.partition(': ')
        if who == 'user':
            messages.append({'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': said}]})
        elif who == 'model':
            messages.append({'kind': 'response', 'parts': [{'part_kind': 'text', 'content': said}]})
        else:
            raise HistoryInputError(f'{path}: a line that is not "user: TEXT" or "model: TEXT"')
    return [History(f'{path} (chat log)', messages)]
