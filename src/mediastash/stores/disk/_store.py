"""``DiskMediaStore``: one file per blob in a local directory.

The default layout is ``<directory>/<hex>.bin`` with user metadata in a flat
JSON sidecar ``<hex>.bin.meta.json``, the files pydantic-ai-harness's
``DiskMediaStore`` writes and reads, so either library can use the other's
folder. The media type of a ``put`` goes to a second small file,
``<hex>.bin.mediatype``, which pydantic-ai-harness neither reads nor writes.
Every file is written to a unique temporary name in the same directory
and renamed into place (``os.replace``), so a reader never sees a partial file
under its final name.

For garbage collection a blob's last-write time is its file's mtime: a ``put``
of stored bytes (or ``touch_many``) sets it to now once it is older than
``TOUCH_AFTER_SECONDS``, and ``delete_unless_touched`` first renames the file
to a tombstone, so no writer can touch it between the age check and the unlink.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping
from contextlib import aclosing
from datetime import timedelta
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, TypeVar

import aiofiles

from mediastash._lru import BoundedLRU
from mediastash.context import (
    EMPTY_CONTEXT,
    METADATA_LIMIT_BYTES,
    MediaContextLike,
    context_media_type,
    context_metadata,
)
from mediastash.errors import (
    CorruptMetadataError,
    InvalidMediaType,
    NotARegularFileError,
    StoreOperationError,
    StorePermissionError,
    UnsafeKeyError,
)
from mediastash.keys import KeyStrategy, default_key_strategy, sharded_key_strategy
from mediastash.stores._metadata import decode_metadata_json, encode_metadata_json, metadata_object
from mediastash.stores._namespaces import namespace_segment
from mediastash.stores._range import DigestRange
from mediastash.stores.base import (
    TOUCH_AFTER_SECONDS,
    BaseMediaStore,
    BlobInfo,
    DriverError,
    Ingest,
    driver_errors_mapped,
    errno_name,
)
from mediastash.stores.disk._options import DiskOptions
from mediastash.stores.protocols import BlobStat
from mediastash.uri import DIGEST_PATTERN, EMBEDDED_DIGEST_PATTERN, media_uri, parse_media_uri
from mediastash.urls import PublicUrlResolver

if TYPE_CHECKING:
    from mediastash.stores.verify import VerifyReport

__all__ = [
    'MAX_KEY_DEPTH',
    'NAMESPACES_FOLDER',
    'MEDIA_TYPE_LIMIT_BYTES',
    'MEDIA_TYPE_SUFFIX',
    'METADATA_LIMIT_BYTES',
    'SIDECAR_SUFFIX',
    'TEMP_FILE_MAX_AGE',
    'DiskMediaStore',
]

SIDECAR_SUFFIX = '.meta.json'
"""Appended to a blob's file name to name its metadata sidecar (``<key>.meta.json``)."""
MEDIA_TYPE_SUFFIX = '.mediatype'
"""Appended to a blob's file name to name the file holding its media type (``<key>.mediatype``)."""
MEDIA_TYPE_LIMIT_BYTES = 1024
"""Most UTF-8 bytes of a media type the store records (a longer one is refused at ``put``, nothing written)."""
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')

NAMESPACES_FOLDER = '.mediastash-namespaces'
"""The sub-folder of a store's folder holding one folder per namespace (``namespace(name)``); the store's own
listing, garbage collection, verification and sweeps never enter it, and no key may start with it."""

_LEGACY_SIDECAR_KEY = 'mediastash_sidecar'
_LEGACY_SIDECAR_VERSION = 1
"""Marks our earlier, versioned sidecar (``{"mediastash_sidecar": 1, "metadata": {...}}``): read, never written."""
MAX_KEY_DEPTH = 32
"""Most path segments a key strategy may produce (checked before any folder is created)."""
TEMP_FILE_MAX_AGE = timedelta(hours=1)
"""Temporary files (of writers and of garbage collection) untouched this long are crash leftovers."""
_NAME_MAX_FALLBACK = 255
_SWEEP_INTERVAL = 600.0
_SWEPT_FOLDERS = 4096
"""How many folders one instance remembers having swept lately (a sharded layout has up to 65,536)."""
_TMP_PREFIX = '.mediastash-tmp-'
_TOMB_PREFIX = _TMP_PREFIX + 'gc-'
"""A blob being deleted by garbage collection (a temporary name: never listed, never a valid key)."""
_DEFAULT_SUFFIX = '.bin'
_DEFAULT_NAME_LENGTH = 64 + len(_DEFAULT_SUFFIX)
_LIST_BATCH = 1024
_NOT_THERE = (FileNotFoundError, NotADirectoryError)
_HEX_PAIR = re.compile(r'[0-9a-f]{2}')
_CANNOT_TOUCH = frozenset({errno.EPERM, errno.EACCES, errno.EROFS})
_T = TypeVar('_T')


class DiskMediaStore(BaseMediaStore):
    """Content-addressed blobs as files under ``directory`` (created if missing; ``~`` is expanded).

    ``key_strategy`` maps a URI to a relative path; the result is refused with
    ``UnsafeKeyError`` when it could escape the directory. User metadata lives
    in a ``<key>.meta.json`` sidecar holding a flat JSON object, written only
    when a ``put`` carries metadata; as in pydantic-ai-harness, a later ``put``
    that carries metadata replaces it and one without leaves it alone. The
    media type goes to ``<key>.mediatype`` (``media_type_of``): the first
    ``put`` that carries one records it. The filename is not persisted. ``fsync=True`` flushes each file and
    its directory before a write returns, for durability across power loss.

    Capabilities: listing, deleting, streaming, garbage collection (a blob's
    age is its file's mtime). Listing finds files named ``<hex>.bin`` (default
    strategy) or, for a custom strategy, any file whose name contains a 64-hex
    digest; a strategy that keeps the digest out of the file name cannot be
    listed. Two instances on the same folder (after resolving symlinks) share
    one ``storage_key``.

    The settings are one ``DiskOptions``: pass ``options=DiskOptions(...)`` or
    the keywords (given keywords replace fields of ``options``).
    """

    options_class = DiskOptions

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        key_strategy: KeyStrategy = default_key_strategy,
        public_url: PublicUrlResolver | None = None,
        fsync: bool = False,
        options: DiskOptions | None = None,
    ) -> None:
        self._options = options = DiskOptions.settled(options, locals())  # the keywords above, by name
        super().__init__(public_url=options.public_url)
        self._root = Path(options.directory).expanduser()
        with driver_errors_mapped(self, 'open'):  # a file in the way, a read-only parent: a typed store error
            self._root.mkdir(parents=True, exist_ok=True)
            self._real_root = self._root.resolve()
            self._identity = ('disk', os.path.realpath(self._root))
            self._name_max = _name_max(self._root)
        self._key_strategy = options.key_strategy
        self._fsync = options.fsync
        self._swept: BoundedLRU[Path | None, float] = BoundedLRU(max_items=_SWEPT_FOLDERS)
        self._sweep_lock = threading.Lock()

    def _open_namespace(self, name: str) -> DiskMediaStore:
        """A store on ``<directory>/.mediastash-namespaces/<name>/`` (see ``NAMESPACES_FOLDER``), same options.

        Nothing is created until the namespace's first write, so reading an
        unknown namespace changes nothing on disk.
        """
        view = object.__new__(type(self))
        BaseMediaStore.__init__(view)
        segment = namespace_segment(name)
        view._root = self._root / NAMESPACES_FOLDER / segment
        view._real_root = self._real_root / NAMESPACES_FOLDER / segment
        view._identity = self._identity
        view._name_max = self._name_max
        view._options = self._options
        view._key_strategy = self._key_strategy
        view._fsync = self._fsync
        view._swept = BoundedLRU(max_items=_SWEPT_FOLDERS)
        view._sweep_lock = threading.Lock()
        return view

    @property
    def directory(self) -> Path:
        """The folder the store writes to, as given (a leading ``~`` expanded to the home folder)."""
        return self._root

    def _describe(self) -> str:
        return f'DiskMediaStore({str(self._root)!r})'

    def _storage_identity(self) -> tuple[str, str]:
        return self._identity

    def _classify_error(self, exc: Exception) -> DriverError | None:
        """A file-system ``OSError`` other than a missing file (which means "not stored"): a full disk, a path
        through a file, a read-only folder (``StorePermissionError``)."""
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
            refused = isinstance(exc, PermissionError) or exc.errno == errno.EROFS
            return DriverError(StorePermissionError if refused else StoreOperationError, errno_name(exc))
        return super()._classify_error(exc)

    # -- keys and paths ----------------------------------------------------------------

    def _key_for(self, digest: str, context: MediaContextLike) -> str:
        """Run the key strategy and refuse results that are not a plain relative path."""
        key: object = self._key_strategy(media_uri(digest), context)
        if not isinstance(key, str):
            raise UnsafeKeyError(key, f'a key strategy must return str, got {type(key).__name__}')
        if not key:
            raise UnsafeKeyError(key, 'the key is empty')
        if '\x00' in key:
            raise UnsafeKeyError(key, 'the key contains a NUL character')
        if '\\' in key:
            raise UnsafeKeyError(key, 'the key contains a backslash')
        if PurePosixPath(key).is_absolute() or PureWindowsPath(key).anchor:
            raise UnsafeKeyError(key, 'the key is an absolute path')
        parts = key.split('/')
        if len(parts) > MAX_KEY_DEPTH:
            raise UnsafeKeyError(key[:200] + '...', f'the key has {len(parts)} segments, more than {MAX_KEY_DEPTH}')
        for part in parts:
            if len(part.encode(errors='surrogateescape')) > self._name_max:
                raise UnsafeKeyError(key, f'the segment {part[:40]!r}... is longer than {self._name_max} bytes')
        if len(parts[-1].encode(errors='surrogateescape')) + len(SIDECAR_SUFFIX) > self._name_max:
            raise UnsafeKeyError(key, f'the file name and its {SIDECAR_SUFFIX!r} sidecar exceed {self._name_max} bytes')
        if '..' in parts:
            raise UnsafeKeyError(key, "the key contains a '..' segment")
        if any(part in ('', '.') for part in parts):
            raise UnsafeKeyError(key, "the key has an empty or '.' segment")
        if parts[0] == NAMESPACES_FOLDER:
            raise UnsafeKeyError(key, f'the key starts with {NAMESPACES_FOLDER!r}, the folder of namespaces')
        name = parts[-1]
        if name.startswith(_TMP_PREFIX) or name.endswith((SIDECAR_SUFFIX, MEDIA_TYPE_SUFFIX)):
            raise UnsafeKeyError(key, 'the file name collides with temporary or sidecar files')
        return key

    def _path_for_key(self, key: str) -> Path:
        """``directory/key``, after checking that symlinks do not lead it outside the directory."""
        path = self._root / key
        try:
            real = path.resolve()
        except RuntimeError:  # Python < 3.13 reports a symlink loop so (3.13 raises OSError ELOOP, mapped by the base)
            raise UnsafeKeyError(key, 'the path is a symlink loop') from None
        if real == self._real_root or not real.is_relative_to(self._real_root):
            raise UnsafeKeyError(key, f'the path resolves to {str(real)!r}, outside {str(self._real_root)!r}')
        return path

    def path_for(self, uri: str, context: MediaContextLike = EMPTY_CONTEXT) -> Path:
        """The file that holds (or would hold) ``uri``; raises ``UnsafeKeyError`` for an unsafe key."""
        return self._path_for_key(self._key_for(parse_media_uri(uri), context))

    # -- primitives --------------------------------------------------------------------

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        key = self._key_for(digest, context)
        media_type = self._recordable_media_type(context)
        await asyncio.to_thread(self._write_sync, key, data, context, media_type)

    def _write_sync(
        self, key: str, data: bytes, context: MediaContextLike, media_type: bytes | None, *, force: bool = False
    ) -> None:
        path = self._path_for_key(key)
        self._ensure_parent(path)
        self._sweep_now_and_then(path.parent)
        fresh = force or not self._confirm_blob(path, key, len(data))
        if fresh:
            self._atomic_write(path, data)
        self._update_sidecar(path, context)
        self._record_media_type(path, media_type, fresh=fresh)

    async def _rewrite(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Replace the file atomically (a temp file renamed over it): readers see old or new bytes, never none."""
        key = self._key_for(digest, context)
        media_type = self._recordable_media_type(context)
        await asyncio.to_thread(self._write_sync, key, data, context, media_type, force=True)

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        return await self._found_in_thread(self._read_sync, digest, context)

    async def _found_in_thread(
        self, call: Callable[[str, str], _T | None], digest: str, context: MediaContextLike
    ) -> _T:
        """``call(key, uri)`` in a worker thread; ``MediaNotFoundError`` when it finds nothing (``None``)."""
        found = await asyncio.to_thread(call, self._key_for(digest, context), media_uri(digest))
        if found is None:
            raise self._not_found(digest)
        return found

    def _read_sync(self, key: str, uri: str) -> bytes | None:
        path = self._path_for_key(key)
        try:
            fd = _open_regular(path, uri=uri)
        except _NOT_THERE:
            return None
        with open(fd, 'rb') as file:
            return file.read()

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        key = self._key_for(digest, context)
        return await asyncio.to_thread(self._contains_sync, key)

    def _contains_sync(self, key: str) -> bool:
        return self._path_for_key(key).is_file()

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        key = self._key_for(digest, context)
        metadata = await asyncio.to_thread(self._read_metadata_sync, key, media_uri(digest))
        if metadata is None:
            raise self._not_found(digest)
        return metadata

    def _read_metadata_sync(self, key: str, uri: str) -> dict[str, str] | None:
        path = self._path_for_key(key)
        sidecar = self._path_for_key(key + SIDECAR_SUFFIX)  # the blob's no-escape rule holds for its sidecar
        where = f'{self._describe()} sidecar {str(sidecar)!r}'
        try:
            fd = _open_regular(sidecar, uri=uri)
        except _NOT_THERE:
            return {} if path.is_file() else None
        with open(fd, 'rb') as file:
            raw = file.read(METADATA_LIMIT_BYTES + 1)
        if len(raw) > METADATA_LIMIT_BYTES:
            raise CorruptMetadataError(uri, f'the sidecar is larger than {METADATA_LIMIT_BYTES} bytes', where=where)
        if not path.is_file():
            return None
        return _parse_sidecar(raw, uri=uri, where=where)

    # -- file helpers (run in worker threads) ------------------------------------------

    def _ensure_parent(self, path: Path) -> None:
        if path.parent != self._root or self._namespace_name is not None:  # a namespace's folder: made on first write
            path.parent.mkdir(parents=True, exist_ok=True)

    def _confirm_blob(self, path: Path, key: str, size: int) -> bool:
        """True when ``path`` holds a sound copy of the blob of ``size`` bytes (see ``_stored_copy_is_sound``:
        the size matches and a small blob hashes right); its mtime is refreshed when older than
        ``TOUCH_AFTER_SECONDS``. ``False``: missing, not a regular file, or unsound; the caller writes it."""
        try:
            info = path.stat()
        except _NOT_THERE:
            return False
        if not stat.S_ISREG(info.st_mode):
            return False
        digest = _digest_in(key)
        if digest is None and info.st_size != size:
            return False
        if digest is not None and not self._stored_copy_is_sound(digest, size, info.st_size, lambda: _read_all(path)):
            return False
        return info.st_mtime >= time.time() - TOUCH_AFTER_SECONDS or _touch_file(path)

    def _temp_path(self, directory: Path) -> Path:
        return directory / f'{_TMP_PREFIX}{uuid.uuid4().hex}'

    def _atomic_write(self, path: Path, data: bytes) -> None:
        """Write ``data`` to a unique temp file next to ``path``, then rename it over ``path``."""
        temp = self._temp_path(path.parent)
        try:
            with open(temp, 'xb') as file:
                file.write(data)
                if self._fsync:
                    file.flush()
                    os.fsync(file.fileno())
            os.replace(temp, path)
        except BaseException:
            _unlink_quietly(temp)
            raise
        if self._fsync:
            _fsync_directory(path.parent)

    def _recordable_media_type(self, context: MediaContextLike) -> bytes | None:
        """The context's media type as the bytes to record (``None``: none given); checked before any write."""
        media_type = context_media_type(context)
        if not media_type:
            return None
        try:
            raw = media_type.encode()
        except UnicodeEncodeError:
            raw = None
        if raw is None or len(raw) > MEDIA_TYPE_LIMIT_BYTES or _CONTROL.search(media_type):
            raise InvalidMediaType(
                f'context.media_type cannot be recorded by {self._describe()}: it must be UTF-8 text of at most '
                f'{MEDIA_TYPE_LIMIT_BYTES} bytes without control characters (nothing was stored)'
            )
        return raw

    def _record_media_type(self, path: Path, media_type: bytes | None, *, fresh: bool) -> None:
        """Write ``<blob>.mediatype``: always with a blob just written, else only where none is recorded yet
        (a blob pydantic-ai-harness or an earlier release stored), so the first recorded type stays.

        A new record is created in place (one create and one write: a few bytes, so a concurrent reader
        sees it empty, that is unknown, for an instant at most; an empty record counts as none). Replacing
        one goes through a temporary file like every other write.
        """
        if media_type is None:
            return
        target = _media_type_path(path)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_CLOEXEC', 0), 0o666)
        except FileExistsError:
            if fresh or _is_empty_file(target):
                self._atomic_write(target, media_type)
            return
        try:
            left = memoryview(media_type)
            while left:
                left = left[os.write(fd, left) :]
            if self._fsync:
                os.fsync(fd)
        except BaseException:
            _unlink_quietly(target)  # never leave part of a media type behind (a disk full, a signal)
            raise
        finally:
            os.close(fd)
        if self._fsync:
            _fsync_directory(target.parent)

    async def media_type_of(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        """The media type the first ``put`` that carried one recorded; ``None`` when none was recorded (the blob
        was put without one, or written by pydantic-ai-harness, which records none) or the blob is not stored."""
        digest = self._open_digest(uri)
        key = self._key_for(digest, context)
        return await asyncio.to_thread(self._read_media_type_sync, key, media_uri(digest))

    def _read_media_type_sync(self, key: str, uri: str) -> str | None:
        path = self._path_for_key(key)
        record = self._path_for_key(key + MEDIA_TYPE_SUFFIX)  # the blob's no-escape rule holds here too
        try:
            fd = _open_regular(record, uri=uri)
        except _NOT_THERE:
            return None
        with open(fd, 'rb') as file:
            raw = file.read(MEDIA_TYPE_LIMIT_BYTES + 1)
        if not path.is_file():
            return None
        where = f'{self._describe()} media type file {str(record)!r}'
        try:
            media_type = raw.decode()
        except UnicodeDecodeError:
            raise CorruptMetadataError(uri, 'the media type file is not UTF-8 text', where=where) from None
        if len(raw) > MEDIA_TYPE_LIMIT_BYTES or _CONTROL.search(media_type):
            raise CorruptMetadataError(uri, 'the media type file holds no media type', where=where)
        return media_type or None

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        """The file's size and mtime (one ``stat``) and its ``.mediatype`` record; the blob is not read."""
        return await self._found_in_thread(self._stat_sync, digest, context)

    def _stat_sync(self, key: str, uri: str) -> BlobStat | None:
        try:
            info = self._path_for_key(key).stat()
        except _NOT_THERE:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        return BlobStat(info.st_size, self._read_media_type_sync(key, uri), info.st_mtime)

    @property
    def unknown_media_type_reason(self) -> str:
        """Why a blob here may have no recorded media type (``mediastash stats`` and ``ls -l`` print it)."""
        return (
            'no media type was recorded for them: they were put without one, or written by pydantic-ai-harness '
            '(which records none on disk) or an earlier mediastash; a put with a media type records it'
        )

    def _update_sidecar(self, path: Path, context: MediaContextLike) -> None:
        """(Re)write the sidecar when the put carries metadata; leave it alone otherwise.

        The content is the shared metadata codec's JSON, the bytes
        pydantic-ai-harness writes for the same put.
        """
        if context_metadata(context):
            self._atomic_write(_sidecar_path(path), encode_metadata_json(context).encode())

    # -- optional capabilities ---------------------------------------------------------

    async def _list_digests(self) -> AsyncIterator[str]:
        """Every stored digest (see the class docstring for what custom strategies can list). Changes nothing."""
        async for digest, _path in _in_batches(self._scan_files()):
            yield digest

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        """Every stored blob with its file's size and mtime (a ``stat`` each, no reads). Changes nothing."""
        async for info in _in_batches(_stat_blobs(self._scan_files())):
            yield info

    async def _list_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        """The blobs of one digest range: with the sharded layout only the prefix folders of the range are
        read; with the default layout names outside the range are passed over before any ``stat``. A custom
        key strategy lists everything and filters."""
        if self._key_strategy is default_key_strategy:
            files = _blob_files_in(self._root, digest_range)
        elif self._key_strategy is sharded_key_strategy:
            files = self._sharded_range_files(digest_range)
        else:
            async for info in super()._list_blobs_in_range(digest_range):
                yield info
            return
        async for info in _in_batches(_stat_blobs(files)):
            yield info

    def _sharded_range_files(self, digest_range: DigestRange) -> Generator[tuple[str, str], None, None]:
        """``<h0h1>/<h2h3>/<hex>.bin`` files of the range, reading only the folders whose prefix it covers."""
        wanted = digest_range.prefixes(4)
        for top in digest_range.prefixes(2):
            upper = f'{top:02x}'
            for lower in _subfolders(self._root / upper):
                if len(lower) != 2 or not _HEX_PAIR.fullmatch(lower) or int(upper + lower, 16) not in wanted:
                    continue
                yield from _blob_files_in(os.path.join(self._root, upper, lower), digest_range, prefix=upper + lower)

    def _sweep_now_and_then(self, folder: Path | None = None) -> None:
        """Sweep crash leftovers of ``folder`` (``None``: the whole store) with the default age, at most once
        per ``_SWEEP_INTERVAL`` seconds per folder and instance; run by writers only, in their worker thread.

        Reads (listing, ``get``, ``exists``) never call it: a read-only command leaves the folder as it was.
        """
        now = time.monotonic()
        with self._sweep_lock:
            last = self._swept.get(folder)
            if last is not None and now - last < _SWEEP_INTERVAL:
                return
            self._swept.put(folder, now)
        self._sweep_temp_sync(TEMP_FILE_MAX_AGE.total_seconds(), quiet=True, folder=folder)

    async def verify(
        self, uris: Iterable[str] | None = None, *, repair: bool = False, max_concurrency: int = 4
    ) -> VerifyReport:
        """``BaseMediaStore.verify``; ``repair=True`` first sweeps crash leftovers (see ``sweep_temp_files``)."""
        if repair:
            self._check_open()
            await asyncio.to_thread(self._sweep_temp_sync, TEMP_FILE_MAX_AGE.total_seconds(), quiet=True)
        return await super().verify(uris, repair=repair, max_concurrency=max_concurrency)

    async def sweep_temp_files(self, *, older_than: timedelta = TEMP_FILE_MAX_AGE) -> int:
        """Remove crash leftovers: temporary files whose mtime is older than ``older_than``; how many went.

        A writer killed mid-``put`` leaves ``.mediastash-tmp-<hex>``: it is
        unlinked (it never became a blob). A garbage collection killed between
        burying a blob and settling it leaves ``.mediastash-tmp-gc-<hex>``, aged
        by its ctime (the burial; its mtime is the blob's): it is renamed back
        to its blob's name when that name is free (the next collection decides
        again), otherwise unlinked. A live writer keeps its
        temp file's mtime fresh, so it is never touched; a writer stalled for
        longer than ``older_than`` loses its file and its ``put`` fails, no
        blob is harmed. Writers (``put``, ``put_stream``) sweep the folder they
        write into, and garbage collection (``delete_unless_touched``) and
        ``verify(repair=True)`` the whole store, with the default age, at most
        every ten minutes per folder and instance; reads never sweep.
        """
        seconds = older_than.total_seconds()
        if not seconds >= 0:
            raise ValueError(f'older_than must not be negative, got {older_than!r}')
        self._check_open()
        return await asyncio.to_thread(self._sweep_temp_sync, seconds)

    def _sweep_temp_sync(self, older_than: float, *, quiet: bool = False, folder: Path | None = None) -> int:
        """``quiet``: a file that cannot be removed (read-only folder, another user's file) is skipped, so
        a writer's sweep never fails its write. ``folder``: only that folder's own files (``None``: the store)."""
        cutoff = time.time() - older_than
        removed = 0
        leftovers = self._temp_leftovers() if folder is None else iter(_temp_files_in(folder))
        while True:
            try:
                path = next(leftovers, None)
                if path is None:
                    return removed
                removed += self._sweep_one(path, cutoff)
            except OSError:
                if not quiet:
                    raise

    def _sweep_one(self, path: Path, cutoff: float) -> int:
        """Sweep one temporary file if it is old enough; 1 when it was removed."""
        try:
            info = path.lstat()
        except _NOT_THERE:
            return 0
        tomb = path.name.startswith(_TOMB_PREFIX)
        # A writer's file: its mtime (a live writer keeps it fresh). A tombstone keeps its blob's old
        # mtime, so its burial time is the ctime the rename set.
        changed = max(info.st_mtime, info.st_ctime) if tomb else info.st_mtime
        if not stat.S_ISREG(info.st_mode) or changed >= cutoff:
            return 0
        if tomb and self._unbury(path):
            return 0
        _unlink_quietly(path)
        return 1

    def _temp_leftovers(self) -> Iterator[Path]:
        """Temporary files in the folder (the root only for the default layout, the whole tree otherwise)."""
        if self._key_strategy is default_key_strategy:
            yield from _temp_files_in(self._root)
            return
        for dirpath, dirnames, filenames in self._walk():
            dirnames[:] = [name for name in dirnames if not name.startswith(_TMP_PREFIX)]
            for name in filenames:
                if name.startswith(_TMP_PREFIX):
                    yield Path(dirpath, name)

    async def _remove_namespace_storage(self) -> None:
        """Remove the emptied namespace's folders (and the namespaces folder once it holds no namespace).

        Only empty folders go: a file left in one (a writer's temporary file, a
        sidecar without its blob) keeps it and its parents.
        """
        await asyncio.to_thread(self._remove_empty_folders)

    def _remove_empty_folders(self) -> None:
        for dirpath, _dirnames, _filenames in list(os.walk(self._root, topdown=False)):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)
        with contextlib.suppress(OSError):
            os.rmdir(self._root.parent)  # the namespaces folder, when this was its last namespace

    def _walk(self) -> Iterator[tuple[str, list[str], list[str]]]:
        """``os.walk`` of the store's folder without the folder of namespaces, which belongs to no listing,
        collection or sweep of this store (each namespace walks its own folder). Every walk goes through here."""
        for dirpath, dirnames, filenames in os.walk(self._root):
            if dirpath == str(self._root):
                dirnames[:] = [name for name in dirnames if name != NAMESPACES_FOLDER]
            yield dirpath, dirnames, filenames

    def _unbury(self, tomb: Path) -> bool:
        """Put a crashed collection's tombstone back under its blob's name when that name is free."""
        try:
            digest = hashlib.sha256(_read_all(tomb)).hexdigest()
            path = self._path_for_key(self._key_for(digest, EMPTY_CONTEXT))
        except (OSError, UnsafeKeyError, NotARegularFileError):
            return False
        if path.parent != tomb.parent or os.path.lexists(path):
            return False
        with contextlib.suppress(FileNotFoundError):
            os.rename(tomb, path)
        return True

    def _scan_files(self) -> Generator[tuple[str, str], None, None]:
        """``(digest, path)`` of every blob file, each digest once."""
        if self._key_strategy is default_key_strategy:
            yield from _blob_files_in(self._root)
            return
        seen: set[str] = set()
        for dirpath, _dirnames, filenames in self._walk():
            for name in filenames:
                if name.startswith(_TMP_PREFIX) or name.endswith((SIDECAR_SUFFIX, MEDIA_TYPE_SUFFIX)):
                    continue
                match = EMBEDDED_DIGEST_PATTERN.search(name)
                if match is not None and match.group() not in seen:
                    seen.add(match.group())
                    yield match.group(), os.path.join(dirpath, name)

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        """The digests whose file exists; files with an mtime before ``touch_before`` get it set to now."""
        keys = {digest: self._key_for(digest, EMPTY_CONTEXT) for digest in digests}
        return await asyncio.to_thread(self._touch_sync, keys, touch_before)

    def _touch_sync(self, keys: dict[str, str], touch_before: float) -> set[str]:
        present: set[str] = set()
        for digest, key in keys.items():
            path = self._path_for_key(key)
            try:
                info = path.stat()
            except _NOT_THERE:
                continue
            if stat.S_ISREG(info.st_mode) and (info.st_mtime >= touch_before or _touch_file(path)):
                present.add(digest)
        return present

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        """Delete each blob whose file's mtime is still before ``written_before``, with its sidecar.

        Each file is first renamed to a unique tombstone in its folder (atomic),
        so a writer can no longer touch it; the tombstone's mtime then decides:
        still old, it is unlinked; touched meanwhile, it is renamed back (unless
        a writer already stored the blob again, as it does when it finds the
        file gone: same bytes).
        """
        keys = [(digest, self._key_for(digest, EMPTY_CONTEXT)) for digest in digests]
        await asyncio.to_thread(self._sweep_now_and_then)
        return await asyncio.to_thread(self._sweep_sync, keys, written_before)

    def _sweep_sync(self, keys: list[tuple[str, str]], written_before: float) -> list[str]:
        deleted: list[str] = []
        folders: set[Path] = set()
        for digest, key in keys:
            path = self._path_for_key(key)
            tomb = self._bury(path)
            if tomb is not None and self._settle(path, tomb, written_before):
                deleted.append(digest)
                folders.add(path.parent)
        if self._fsync:
            for folder in folders:
                _fsync_directory(folder)
        return deleted

    @staticmethod
    def _bury(path: Path) -> Path | None:
        """Rename the blob file to a fresh tombstone next to it; ``None`` when there is no such file."""
        if not path.is_file():
            return None
        tomb = path.with_name(f'{_TOMB_PREFIX}{uuid.uuid4().hex}')
        try:
            os.rename(path, tomb)
        except _NOT_THERE:
            return None
        return tomb

    @staticmethod
    def _settle(path: Path, tomb: Path, written_before: float) -> bool:
        """Unlink a buried blob that is still older than ``written_before`` (and its sidecar); put back
        one touched meanwhile. True when it was deleted."""
        try:
            info = tomb.stat()
        except _NOT_THERE:
            return False
        if info.st_mtime < written_before:
            _unlink_quietly(tomb)
            if not os.path.lexists(path):  # no writer stored the blob again meanwhile: its sidecars go too
                _unlink_quietly(_sidecar_path(path))
                _unlink_quietly(_media_type_path(path))
            return True
        if os.path.lexists(path):
            _unlink_quietly(tomb)  # a writer already stored the same bytes again
        else:
            os.replace(tomb, path)
        return False

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        """Remove the blob and its sidecar; ``False`` when it was not stored."""
        key = self._key_for(digest, context)
        return await asyncio.to_thread(self._delete_sync, key)

    def _delete_sync(self, key: str) -> bool:
        path = self._path_for_key(key)
        _unlink_quietly(_sidecar_path(path))
        _unlink_quietly(_media_type_path(path))
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            return False
        if self._fsync:
            _fsync_directory(path.parent)
        return True

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        """Write the pieces to a temporary file in the store's folder, then rename it to the digest's key.

        The key is only known once the whole stream is hashed. The temporary
        file is removed on any failure or cancellation.
        """
        media_type = self._recordable_media_type(context)  # refused before anything is written
        if self._namespace_name is not None:
            await asyncio.to_thread(self._root.mkdir, parents=True, exist_ok=True)
        temp = self._temp_path(self._root)
        try:
            async with aiofiles.open(temp, 'xb') as file:
                async for piece in ingest:
                    await file.write(piece)
                if self._fsync:
                    await file.flush()
                    await asyncio.to_thread(os.fsync, file.fileno())
            key = self._key_for(ingest.digest, context)
            await asyncio.to_thread(self._commit_temp, temp, key, ingest.size, context, media_type)
        except BaseException:
            _unlink_quietly(temp)
            raise

    def _commit_temp(
        self, temp: Path, key: str, size: int, context: MediaContextLike, media_type: bytes | None
    ) -> None:
        """Move a fully written temp file to ``key`` (or drop it when the blob is already there)."""
        path = self._path_for_key(key)
        self._ensure_parent(path)
        self._sweep_now_and_then(path.parent)
        if path.parent != self._root:
            self._sweep_now_and_then(self._root)  # where streamed writes keep their temporary files
        fresh = not self._confirm_blob(path, key, size)
        if not fresh:
            _unlink_quietly(temp)
        else:
            try:
                os.replace(temp, path)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                # The key's folder is on another file system: copy next to it, then rename.
                near = self._temp_path(path.parent)
                try:
                    shutil.copyfile(temp, near)
                    os.replace(near, path)
                except BaseException:
                    _unlink_quietly(near)
                    raise
                _unlink_quietly(temp)
            if self._fsync:
                _fsync_directory(path.parent)
        self._update_sidecar(path, context)
        self._record_media_type(path, media_type, fresh=fresh)

    async def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        path = await asyncio.to_thread(self._path_for_key, self._key_for(digest, context))
        async with aclosing(self._file_chunks(digest, path, chunk_size)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _file_chunks(self, digest: str, path: Path, chunk_size: int) -> AsyncGenerator[bytes, None]:
        try:
            fd = await asyncio.to_thread(_open_regular, path, uri=media_uri(digest))
        except _NOT_THERE:
            raise self._not_found(digest) from None
        try:
            file = await aiofiles.open(fd, 'rb')
        except BaseException:
            os.close(fd)
            raise
        try:
            while chunk := await file.read(chunk_size):
                yield chunk
        finally:
            await file.close()


def _temp_files_in(folder: Path) -> list[Path]:
    """The temporary files directly inside ``folder`` (none when it is gone)."""
    try:
        with os.scandir(folder) as entries:
            return [Path(entry.path) for entry in entries if entry.name.startswith(_TMP_PREFIX)]
    except _NOT_THERE:
        return []


def _name_max(root: Path) -> int:
    """The longest file name (in bytes) the file system under ``root`` accepts."""
    try:
        value = os.pathconf(root, 'PC_NAME_MAX')
    except (AttributeError, ValueError, OSError):
        return _NAME_MAX_FALLBACK
    return value if value > 0 else _NAME_MAX_FALLBACK


def _digest_in(key: str) -> str | None:
    """The digest a key's file name carries (every listable strategy puts it there), or ``None``."""
    match = EMBEDDED_DIGEST_PATTERN.search(key.rsplit('/', 1)[-1])
    return None if match is None else match.group()


_FILE_KINDS = (
    (stat.S_ISDIR, 'directory'),
    (stat.S_ISFIFO, 'FIFO'),
    (stat.S_ISCHR, 'character device'),
    (stat.S_ISBLK, 'block device'),
    (stat.S_ISSOCK, 'socket'),
)


def _open_regular(path: Path, *, uri: str | None = None) -> int:
    """Open ``path`` for reading without blocking and return the descriptor; ``NotARegularFileError`` for a
    FIFO, device, socket or directory (``O_NONBLOCK`` makes opening a FIFO return at once; it is then refused)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0) | getattr(os, 'O_CLOEXEC', 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _FILE_KINDS if test(mode)), 'special file')
            raise NotARegularFileError(str(path), kind, uri=uri)
        if hasattr(os, 'set_blocking'):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_all(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (``NotARegularFileError`` otherwise)."""
    with open(_open_regular(path), 'rb') as file:
        return file.read()


def _sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _media_type_path(path: Path) -> Path:
    return path.with_name(path.name + MEDIA_TYPE_SUFFIX)


def _is_empty_file(path: Path) -> bool:
    """True for an empty regular file (a media type record a crash left before its write)."""
    try:
        info = path.lstat()
    except _NOT_THERE:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


def _stat_blobs(files: Iterator[tuple[str, str]]) -> Generator[BlobInfo, None, None]:
    """A ``BlobInfo`` (size and mtime) for each ``(digest, path)`` still a regular file."""
    for digest, path in files:
        try:
            info = os.stat(path)
        except _NOT_THERE:
            continue  # deleted since the folder was read
        if stat.S_ISREG(info.st_mode):
            yield BlobInfo(media_uri(digest), info.st_size, info.st_mtime)


def _subfolders(folder: Path) -> list[str]:
    """The names of the folders directly inside ``folder`` (none when it does not exist)."""
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
    except _NOT_THERE:
        return []


def _blob_files_in(
    folder: str | os.PathLike[str], digest_range: DigestRange | None = None, *, prefix: str = ''
) -> Generator[tuple[str, str], None, None]:
    """``(digest, path)`` of each ``<hex>.bin`` file right in ``folder`` whose name starts with ``prefix`` (and
    whose digest is in ``digest_range``), judged by name before any ``stat``; none when ``folder`` is missing
    (a namespace or shard folder nothing was written to yet)."""
    try:
        entries = os.scandir(folder)
    except _NOT_THERE:
        return
    with entries:
        for entry in entries:
            name = entry.name
            if (
                _is_default_blob_name(name)
                and name.startswith(prefix)
                and (digest_range is None or name[:64] in digest_range)
                and entry.is_file(follow_symlinks=False)
            ):
                yield name[:64], entry.path


def _is_default_blob_name(name: str) -> bool:
    """True for ``<hex>.bin``, the names the default key strategy gives."""
    return (
        len(name) == _DEFAULT_NAME_LENGTH
        and name.endswith(_DEFAULT_SUFFIX)
        and DIGEST_PATTERN.fullmatch(name, 0, 64) is not None
    )


def _parse_sidecar(raw: bytes, *, uri: str, where: str) -> dict[str, str]:
    """User metadata from a sidecar: the flat ``{str: str}`` object, or our earlier versioned document.

    The two cannot be confused: a flat sidecar only holds strings, the versioned
    one has an integer under ``mediastash_sidecar``, so the shared codec refuses
    it and only then is the versioned form tried.
    """
    try:
        return decode_metadata_json(raw, uri=uri, where=where)
    except CorruptMetadataError:
        document = _legacy_sidecar(raw)
        if document is None:
            raise
    version = document[_LEGACY_SIDECAR_KEY]
    if version != _LEGACY_SIDECAR_VERSION:
        raise CorruptMetadataError(uri, f'unsupported sidecar format version {version!r}', where=where)
    metadata = document.get('metadata')
    if not isinstance(metadata, dict):
        raise CorruptMetadataError(uri, "the sidecar's 'metadata' is not a JSON object", where=where)
    return metadata_object(metadata, uri=uri, where=where)


def _legacy_sidecar(raw: bytes) -> dict[str, object] | None:
    """The document when ``raw`` is our earlier versioned sidecar (an integer marker), else ``None``."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    version = document.get(_LEGACY_SIDECAR_KEY)
    if not isinstance(version, int) or isinstance(version, bool):
        return None
    return document


async def _in_batches(items: Generator[_T, None, None]) -> AsyncIterator[_T]:
    """Run a blocking generator in worker threads, ``_LIST_BATCH`` items per trip."""
    try:
        while batch := await asyncio.to_thread(_take, items, _LIST_BATCH):
            for item in batch:
                yield item
    finally:
        # A cancelled batch may still run in its thread; the generator is then closed by GC.
        with contextlib.suppress(ValueError):
            items.close()


def _take(iterator: Iterator[_T], count: int) -> list[_T]:
    batch: list[_T] = []
    for item in iterator:
        batch.append(item)
        if len(batch) >= count:
            break
    return batch


def _touch_file(path: Path) -> bool:
    """Set ``path``'s mtime to now; ``False`` when the file is gone (garbage collection took it).

    Where the folder cannot be written (read-only mount, another user's
    files) the blob is still reported stored: it cannot be collected through
    this folder either.
    """
    try:
        os.utime(path)
    except _NOT_THERE:
        return False
    except OSError as exc:
        if exc.errno not in _CANNOT_TOUCH:
            raise
    return True


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.unlink(path)


def _fsync_directory(directory: Path) -> None:
    """Persist a rename; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
