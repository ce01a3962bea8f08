"""Output files the commands write (``externalize``/``restore`` OUT, ``--json-file``): atomic, as a shell would.

A new file gets the mode the umask gives (``0644`` under ``022``), an
existing file keeps its mode (and its group where the user may set it), and
a symlink stays a symlink: its target is written. A regular file is written
to a temporary file next to it, ``.<name>.<8 hex>.tmp``, then renamed over
it, so a reader sees the old or the new content, never a part. Something
that is not a regular file (``/dev/null``, a FIFO) is written in place:
renaming over it would replace it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from mediastash.cli._errors import UserError

__all__ = ['check_output', 'output_file', 'write_output']

_NEW_FILE_MODE = 0o666
"""Asked for a new file; the kernel removes the umask's bits (and applies a folder's default ACL)."""
_PRIVATE_MODE = 0o600
"""A temporary file that replaces an existing one starts private until it gets that file's mode."""


def resolved_output(target: str) -> Path:
    """The file ``target`` names once symlinks are followed (the file that gets written)."""
    path = Path(os.path.realpath(target))
    if path.is_symlink():
        raise UserError(f'cannot write {target}: it is a symlink that does not lead to a file (a loop)')
    return path


def check_output(target: str) -> None:
    """Fail before any work when ``target`` cannot be written: a folder, or a folder that does not exist."""
    path = resolved_output(target)
    if path.is_dir():
        raise UserError(f'cannot write {target}: it is a folder')
    if not path.parent.is_dir():
        raise UserError(f'cannot write {target}: the folder {str(path.parent)!r} does not exist')


def write_output(target: str, data: bytes) -> None:
    """Write ``data`` to the file ``target`` names (see the module docstring for modes and symlinks)."""
    with output_file(target) as file:
        file.write(data)


@contextlib.contextmanager
def output_file(target: str) -> Iterator[IO[bytes]]:
    """A binary file to write ``target``'s new content into piece by piece (output larger than memory); a
    regular file is replaced only when the block ends without an error, else left as it was."""
    path = resolved_output(target)
    try:
        existing: os.stat_result | None = path.stat()
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        if stat.S_ISDIR(existing.st_mode):
            raise UserError(f'cannot write {target}: it is a folder')
        with open(path, 'wb') as file:  # a device or FIFO: written like a shell redirection would
            yield file
        return
    temp = path.with_name(f'.{path.name}.{secrets.token_hex(4)}.tmp')
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_CLOEXEC', 0)
    fd = os.open(temp, flags, _NEW_FILE_MODE if existing is None else _PRIVATE_MODE)
    try:
        with open(fd, 'wb', closefd=True) as file:
            if existing is not None:
                _take_over(file.fileno(), existing)
            yield file
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _take_over(fd: int, existing: os.stat_result) -> None:
    """Give the replacement the replaced file's mode, and its owner and group where allowed."""
    if hasattr(os, 'fchown') and (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):
            os.fchown(fd, existing.st_uid, existing.st_gid)  # only root may give a file away
        with contextlib.suppress(OSError):
            os.fchown(fd, -1, existing.st_gid)  # a member of the group may keep it
    if hasattr(os, 'fchmod'):
        os.fchmod(fd, stat.S_IMODE(existing.st_mode))
