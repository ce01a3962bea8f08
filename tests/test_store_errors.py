"""The store base maps driver errors for every backend (issue 17, item 11): one rule, tested on small backends.

A backend classifies its driver's exceptions (``_classify_error``); the base's
public methods raise the ``StoreOperationError`` it names, with the original as
``__cause__``. Errors the backend does not classify, a missing blob, errors of
the caller's own stream and cancellation pass through unchanged. The real
drivers are tested in each store's module (S3 through a fault proxy, SQLite on
locked and read-only files, MongoDB through pymongo).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mediastash import (
    DiskMediaStore,
    MediaContextLike,
    MediaNotFoundError,
    MediaStashError,
    MemoryMediaStore,
    StoreOperationError,
    StorePermissionError,
    StoreUnavailableError,
    media_uri_for,
    parse_media_uri,
)
from mediastash.stores import DriverError

URI = media_uri_for(b'some bytes')


class Failing(MemoryMediaStore):
    """A memory store whose reads and listings raise ``error`` (a stand-in for a driver that fails)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        raise self.error

    async def _list_digests(self) -> AsyncIterator[str]:
        yield 'a' * 64
        raise self.error


class Driver(Exception):
    """A driver's own exception class, whose message quotes a URL with a password."""


class Classifying(Failing):
    def _classify_error(self, exc: Exception) -> DriverError | None:
        if isinstance(exc, Driver):
            return DriverError(StoreOperationError, 'Boom', 500)
        return super()._classify_error(exc)


@pytest.mark.parametrize(
    ('error', 'kind', 'reason'),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, 'refused'), StoreUnavailableError, 'ECONNREFUSED'),
        (TimeoutError(), StoreUnavailableError, 'TimeoutError'),
        (PermissionError(errno.EACCES, 'denied'), StorePermissionError, 'EACCES'),
    ],
)
async def test_the_default_hook_maps_connection_timeout_and_permission_errors(
    error: Exception, kind: type[StoreOperationError], reason: str
) -> None:
    store = Failing(error)
    with pytest.raises(StoreOperationError) as caught:
        await store.exists(URI)
    assert type(caught.value) is kind
    assert isinstance(caught.value, RuntimeError)
    assert isinstance(caught.value, MediaStashError)
    assert caught.value.__cause__ is error
    assert (caught.value.operation, caught.value.reason, caught.value.status) == ('exists', reason, None)
    assert str(caught.value).startswith('Failing: exists ')


async def test_a_backend_hook_names_the_reason_and_status_never_the_message() -> None:
    error = Driver('GET https://user:hunter2@example.com/b failed')
    store = Classifying(error)
    with pytest.raises(StoreOperationError) as caught:
        await store.exists(URI)
    assert caught.value.__cause__ is error
    assert str(caught.value) == 'Classifying: exists failed (Boom, status 500)'
    assert 'hunter2' not in str(caught.value)


async def test_an_async_generator_method_is_mapped_too() -> None:
    store = Failing(ConnectionResetError(errno.ECONNRESET, 'reset'))
    seen: list[str] = []

    async def read_all() -> None:
        async for uri in store.iter_uris():
            seen.append(uri)

    with pytest.raises(StoreUnavailableError) as caught:
        await read_all()
    assert seen == ['media+sha256://' + 'a' * 64]
    assert caught.value.operation == 'iter_uris'


async def test_a_backends_own_public_method_is_mapped_without_a_decorator() -> None:
    class WithExtra(MemoryMediaStore):
        async def compact(self) -> None:
            raise ConnectionResetError(errno.ECONNRESET, 'reset')

    with pytest.raises(StoreUnavailableError) as caught:
        await WithExtra().compact()
    assert caught.value.operation == 'compact'
    assert isinstance(caught.value.__cause__, ConnectionResetError)


@pytest.mark.parametrize(
    ('module', 'name', 'method'),
    [
        ('mediastash.stores.sqlite', 'SqliteMediaStore', 'media_type_of'),
        ('mediastash.stores.sqlite', 'SqliteMediaStore', 'require_storage'),
        ('mediastash.stores.mongo', 'MongoMediaStore', 'media_type_of'),
        ('mediastash.stores.mongo', 'MongoMediaStore', 'sweep_orphan_chunks'),
        ('mediastash.stores.s3', 'S3MediaStore', 'presigned_url'),
        ('mediastash.stores.disk', 'DiskMediaStore', 'sweep_temp_files'),
    ],
)
def test_the_backends_extras_are_mapped_by_the_base(module: str, name: str, method: str) -> None:
    import importlib

    from mediastash.stores.base import _MAPPED_MARK

    store_class = getattr(importlib.import_module(module), name)
    assert getattr(getattr(store_class, method), _MAPPED_MARK, False), f'{name}.{method}'


@pytest.mark.parametrize(
    'error',
    [Driver('not classified by the default hook'), KeyError('x'), FileNotFoundError('gone'), ValueError('bad')],
    ids=['driver', 'key', 'not-found', 'value'],
)
async def test_errors_no_hook_classifies_pass_through(error: Exception) -> None:
    with pytest.raises(type(error)) as caught:
        await Failing(error).exists(URI)
    assert caught.value is error


class ClassifiesEverything(Failing):
    """A careless hook that claims every error: the base still exempts what must keep its meaning."""

    def _classify_error(self, exc: Exception) -> DriverError | None:
        return DriverError(StoreOperationError, type(exc).__name__)


@pytest.mark.parametrize(
    'error',
    [asyncio.CancelledError(), FileNotFoundError('gone'), MediaNotFoundError(URI), KeyboardInterrupt()],
    ids=['cancelled', 'not-found', 'media-not-found', 'interrupt'],
)
async def test_cancellation_a_missing_blob_and_our_own_errors_are_never_mapped(error: BaseException) -> None:
    with pytest.raises(type(error)) as caught:
        await ClassifiesEverything(error).exists(URI)
    assert caught.value is error


async def test_the_callers_own_stream_error_is_not_the_stores() -> None:
    """``put_stream`` raises the caller's iterator's error as it is, even a ``ConnectionError``."""
    failure = ConnectionResetError(errno.ECONNRESET, 'the caller lost its upstream')

    async def chunks() -> AsyncIterator[bytes]:
        yield b'partial'
        raise failure

    store = MemoryMediaStore()
    with pytest.raises(ConnectionResetError) as caught:
        await store.put_stream(chunks())
    assert caught.value is failure
    assert [uri async for uri in store.iter_uris()] == []


async def test_the_stores_own_stream_error_is_mapped() -> None:
    class BrokenWriter(MemoryMediaStore):
        async def _write_stream(self, ingest: Any, context: MediaContextLike) -> None:
            await ingest.read_all()
            raise BrokenPipeError(errno.EPIPE, 'the backend connection broke')

    async def chunks() -> AsyncIterator[bytes]:
        yield b'whole'

    with pytest.raises(StoreUnavailableError) as caught:
        await BrokenWriter().put_stream(chunks())
    assert (caught.value.operation, caught.value.reason) == ('put_stream', 'EPIPE')


async def test_a_disk_store_reports_file_system_errors_as_store_errors(tmp_path: Path) -> None:
    """A real ``OSError`` (here a file where the key strategy needs a folder) used to reach callers raw."""
    (tmp_path / 'a').write_text('a file, not a folder')
    store = DiskMediaStore(tmp_path, key_strategy=lambda uri, context: f'a/{parse_media_uri(uri)}.bin')
    with pytest.raises(StoreOperationError) as caught:
        await store.put(b'cannot be written')
    assert type(caught.value) is StoreOperationError
    assert isinstance(caught.value.__cause__, OSError)
    assert (caught.value.operation, caught.value.reason) == ('put', 'EEXIST')
    assert str(caught.value).startswith(f'DiskMediaStore({str(tmp_path)!r}): put failed')
    with pytest.raises(MediaNotFoundError):  # a missing blob is still "not stored"
        await store.get(media_uri_for(b'cannot be written'))
