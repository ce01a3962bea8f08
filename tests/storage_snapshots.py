"""What a backend holds, captured for before/after comparisons (``StoreTests.raw_storage_snapshot``).

Each capture changes when anything is written: a file's bytes or mtime, a row or
document, an object's ETag or Last-Modified. Used to check that reads change
nothing and that an erased namespace leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

__all__ = ['bucket_state', 'folder_state', 'mongo_state', 'sqlite_state']


def folder_state(folder: Path) -> list[tuple[Any, ...]]:
    """Every entry under ``folder``: folders by path, files by path, size, mtime and sha256 of their bytes.

    A folder's own mtime is left out (creating and removing an entry in it changes it, and a namespace
    that is erased does both)."""
    if not folder.exists():
        return []
    found: list[tuple[Any, ...]] = []
    for path in sorted(folder.rglob('*')):
        name = str(path.relative_to(folder))
        if path.is_dir():
            found.append((name, 'folder'))
        else:
            info = path.stat()
            found.append((name, info.st_size, info.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()))
    return found


async def mongo_state(database: Any, prefix: str) -> list[tuple[str, list[Any]]]:
    """Every document of every collection of ``database`` whose name starts with ``prefix``."""
    names = sorted(name for name in await database.list_collection_names() if name.startswith(prefix))
    state = []
    for name in names:
        documents = [document async for document in database[name].find()]
        state.append((name, sorted(documents, key=lambda document: str(document['_id']))))
    return state


async def bucket_state(client: Any, bucket: str) -> list[tuple[Any, ...]]:
    """Every object of ``bucket``: key, size, ETag and Last-Modified."""
    found: list[tuple[Any, ...]] = []
    async for page in client.get_paginator('list_objects_v2').paginate(Bucket=bucket):
        found.extend(
            (item['Key'], item['Size'], item['ETag'], item['LastModified']) for item in page.get('Contents', [])
        )
    return sorted(found)


def sqlite_state(database: Path) -> tuple[list[str], list[tuple[str, list[Any]]]]:
    """The files beside the database (by name; its journal and shared memory left out) and every row of every
    table, read through a read-only connection of its own. Rows rather than bytes: dropping an emptied namespace
    table leaves free pages behind, which is no data."""
    journal = ('-wal', '-shm', '-journal')
    names = sorted(path.name for path in database.parent.iterdir() if not path.name.endswith(journal))
    if not database.exists():
        return names, []
    with closing(sqlite3.connect(f'file:{database}?mode=ro', uri=True)) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = [
            (table, sorted(connection.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr))
            for table in sorted(tables)
        ]
    return names, rows
