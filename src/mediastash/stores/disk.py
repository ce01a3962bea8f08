"""``DiskMediaStore``: one file per blob in a local directory.

The default layout is ``<directory>/<hex>.bin`` with user metadata in a flat
JSON sidecar ``<hex>.bin.meta.json``, the files pydantic-ai-harness's
``DiskMediaStore`` writes and reads, so either library can use the other's
folder. Every file is written to a unique temporary name in the same directory
and renamed into place (``os.replace``), so a reader never sees a partial file
under its final name.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shutil
import stat
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from contextlib import aclosing
from pathlib import Path, PurePosixPath, PureWindowsPath

import aiofiles

from mediastash.context import EMPTY_CONTEXT, MediaContextLike, context_metadata
from mediastash.errors import CorruptMetadataError, UnsafeKeyError
from mediastash.keys import KeyStrategy, default_key_strategy
from mediastash.stores._metadata import decode_metadata_json, encode_metadata_json, metadata_object
from mediastash.stores.base import BaseMediaStore, Ingest
from mediastash.uri import DIGEST_PATTERN, EMBEDDED_DIGEST_PATTERN, media_uri, parse_media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['SIDECAR_SUFFIX', 'DiskMediaStore']

SIDECAR_SUFFIX = '.meta.json'
"""Appended to a blob's file name to name its metadata sidecar (``<key>.meta.json``)."""

_LEGACY_SIDECAR_KEY = 'mediastash_sidecar'
_LEGACY_SIDECAR_VERSION = 1
"""Marks our earlier, versioned sidecar (``{"mediastash_sidecar": 1, "metadata": {...}}``): read, never written."""
_TMP_PREFIX = '.mediastash-tmp-'
_DEFAULT_SUFFIX = '.bin'
_DEFAULT_NAME_LENGTH = 64 + len(_DEFAULT_SUFFIX)
_LIST_BATCH = 1024


class DiskMediaStore(BaseMediaStore):
    """Content-addressed blobs as files under ``directory`` (created if missing; ``~`` is expanded).

    ``key_strategy`` maps a URI to a relative path; the result is refused with
    ``UnsafeKeyError`` when it could escape the directory. User metadata lives
    in a ``<key>.meta.json`` sidecar holding a flat JSON object, written only
    when a ``put`` carries metadata; as in pydantic-ai-harness, a later ``put``
    that carries metadata replaces it and one without leaves it alone. Media
    type and filename are not persisted. ``fsync=True`` flushes each file and
    its directory before a write returns, for durability across power loss.

    Capabilities: listing, deleting, streaming. Listing finds files named
    ``<hex>.bin`` (default strategy) or, for a custom strategy, any file whose
    name contains a 64-hex digest; a strategy that keeps the digest out of the
    file name cannot be listed. Two instances on the same folder (after
    resolving symlinks) share one ``storage_key``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        key_strategy: KeyStrategy = default_key_strategy,
        public_url: PublicUrlResolver | None = None,
        fsync: bool = False,
    ) -> None:
        super().__init__(public_url=public_url)
        self._root = Path(directory).expanduser()
        self._root.mkdir(parents=True, exist_ok=True)
        self._real_root = self._root.resolve()
        self._identity = ('disk', os.path.realpath(self._root))
        self._key_strategy = key_strategy
        self._fsync = fsync

    @property
    def directory(self) -> Path:
        """The folder the store writes to, as given (a leading ``~`` expanded to the home folder)."""
        return self._root

    def _describe(self) -> str:
        return f'DiskMediaStore({str(self._root)!r})'

    def _storage_identity(self) -> tuple[str, str]:
        return self._identity

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
        if '..' in parts:
            raise UnsafeKeyError(key, "the key contains a '..' segment")
        if any(part in ('', '.') for part in parts):
            raise UnsafeKeyError(key, "the key has an empty or '.' segment")
        name = parts[-1]
        if name.startswith(_TMP_PREFIX) or name.endswith(SIDECAR_SUFFIX):
            raise UnsafeKeyError(key, 'the file name collides with temporary or sidecar files')
        return key

    def _path_for_key(self, key: str) -> Path:
        """``directory/key``, after checking that symlinks do not lead it outside the directory."""
        path = self._root / key
        real = path.resolve()
        if real == self._real_root or not real.is_relative_to(self._real_root):
            raise UnsafeKeyError(key, f'the path resolves to {str(real)!r}, outside {str(self._real_root)!r}')
        return path

    def path_for(self, uri: str, context: MediaContextLike = EMPTY_CONTEXT) -> Path:
        """The file that holds (or would hold) ``uri``; raises ``UnsafeKeyError`` for an unsafe key."""
        return self._path_for_key(self._key_for(parse_media_uri(uri), context))

    # -- primitives --------------------------------------------------------------------

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        key = self._key_for(digest, context)
        await asyncio.to_thread(self._write_sync, key, data, context)

    def _write_sync(self, key: str, data: bytes, context: MediaContextLike) -> None:
        path = self._path_for_key(key)
        self._ensure_parent(path)
        if not self._has_blob_of_size(path, len(data)):
            self._atomic_write(path, data)
        self._update_sidecar(path, context)

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        key = self._key_for(digest, context)
        data = await asyncio.to_thread(self._read_sync, key)
        if data is None:
            raise self._not_found(digest)
        return data

    def _read_sync(self, key: str) -> bytes | None:
        try:
            return self._path_for_key(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

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
        sidecar = _sidecar_path(path)
        try:
            raw = sidecar.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return {} if path.is_file() else None
        if not path.is_file():
            return None
        return _parse_sidecar(raw, uri=uri, where=f'{self._describe()} sidecar {str(sidecar)!r}')

    # -- file helpers (run in worker threads) ------------------------------------------

    def _ensure_parent(self, path: Path) -> None:
        if path.parent != self._root:
            path.parent.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _has_blob_of_size(path: Path, size: int) -> bool:
        try:
            info = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size == size

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

    def _update_sidecar(self, path: Path, context: MediaContextLike) -> None:
        """(Re)write the sidecar when the put carries metadata; leave it alone otherwise.

        The content is the shared metadata codec's JSON, the bytes
        pydantic-ai-harness writes for the same put.
        """
        if context_metadata(context):
            self._atomic_write(_sidecar_path(path), encode_metadata_json(context).encode())

    # -- optional capabilities ---------------------------------------------------------

    async def _list_digests(self) -> AsyncIterator[str]:
        """Every stored digest (see the class docstring for what custom strategies can list)."""
        digests = self._scan_digests()
        try:
            while batch := await asyncio.to_thread(_take, digests, _LIST_BATCH):
                for digest in batch:
                    yield digest
        finally:
            # A cancelled batch may still run in its thread; the generator is then closed by GC.
            with contextlib.suppress(ValueError):
                digests.close()

    def _scan_digests(self) -> Generator[str, None, None]:
        if self._key_strategy is default_key_strategy:
            with os.scandir(self._root) as entries:
                for entry in entries:
                    if _is_default_blob_name(entry.name) and entry.is_file(follow_symlinks=False):
                        yield entry.name[:64]
            return
        seen: set[str] = set()
        for _dirpath, _dirnames, filenames in os.walk(self._root):
            for name in filenames:
                if name.startswith(_TMP_PREFIX) or name.endswith(SIDECAR_SUFFIX):
                    continue
                match = EMBEDDED_DIGEST_PATTERN.search(name)
                if match is not None and match.group() not in seen:
                    seen.add(match.group())
                    yield match.group()

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        """Remove the blob and its sidecar; ``False`` when it was not stored."""
        key = self._key_for(digest, context)
        return await asyncio.to_thread(self._delete_sync, key)

    def _delete_sync(self, key: str) -> bool:
        path = self._path_for_key(key)
        _unlink_quietly(_sidecar_path(path))
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
        temp = self._temp_path(self._root)
        try:
            async with aiofiles.open(temp, 'xb') as file:
                async for piece in ingest:
                    await file.write(piece)
                if self._fsync:
                    await file.flush()
                    await asyncio.to_thread(os.fsync, file.fileno())
            key = self._key_for(ingest.digest, context)
            await asyncio.to_thread(self._commit_temp, temp, key, ingest.size, context)
        except BaseException:
            _unlink_quietly(temp)
            raise

    def _commit_temp(self, temp: Path, key: str, size: int, context: MediaContextLike) -> None:
        """Move a fully written temp file to ``key`` (or drop it when the blob is already there)."""
        path = self._path_for_key(key)
        self._ensure_parent(path)
        if self._has_blob_of_size(path, size):
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

    async def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        path = await asyncio.to_thread(self._path_for_key, self._key_for(digest, context))
        async with aclosing(self._file_chunks(digest, path, chunk_size)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _file_chunks(self, digest: str, path: Path, chunk_size: int) -> AsyncGenerator[bytes, None]:
        try:
            file = await aiofiles.open(path, 'rb')
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(digest) from None
        try:
            while chunk := await file.read(chunk_size):
                yield chunk
        finally:
            await file.close()


def _sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


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


def _take(iterator: Iterator[str], count: int) -> list[str]:
    batch: list[str] = []
    for item in iterator:
        batch.append(item)
        if len(batch) >= count:
            break
    return batch


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
