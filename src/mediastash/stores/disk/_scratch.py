"""Scratch namespaces of a disk store: a new sub-folder ``mediastash-tune-<id>-<label>`` of its folder."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from mediastash.stores._scratch import ScratchSpace, scratch_name

if TYPE_CHECKING:  # the store module imports this one when asked for a namespace
    from mediastash.stores.disk._store import DiskMediaStore

__all__ = ['open_scratch']


async def open_scratch(store: DiskMediaStore, label: str, cls: type[DiskMediaStore]) -> ScratchSpace[DiskMediaStore]:
    """A store on a sub-folder made for it (never one that existed), removed with its contents afterwards."""
    name = scratch_name(label)
    folder = store.directory / name
    folder.mkdir()  # refuses a folder that exists: it would be someone else's
    try:
        scratch = cls(folder, key_strategy=store._key_strategy, fsync=store._fsync)
    except BaseException:
        folder.rmdir()
        raise

    async def remove() -> None:
        shutil.rmtree(folder)

    return ScratchSpace(scratch, name, f'folder {folder}', remove)
