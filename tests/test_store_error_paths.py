"""Every path a driver error can take out of a store leaves as a typed store error, and the CLI words none itself.

The store base maps driver errors for each public call (issue 17); issue 18
adds the paths that escaped it (``aclose``, SQLite's ``require_storage``), a
credentials hint for S3, and takes the driver knowledge out of the CLI: its
error line is the store error's text. Servers here are real (a port nobody
listens on, moto); the SDK and the drivers are never patched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mediastash import (
    DiskMediaStore,
    MediaContext,
    MediaStashError,
    MemoryMediaStore,
    SqliteMediaStore,
    StoreOperationError,
    StoreUnavailableError,
)
from mediastash.cli._ui import describe_error
from tests.s3_servers import free_port
from tests.test_cli_ops import SECRET, assert_user_error, run


class ClosingFails(MemoryMediaStore):
    """A store whose connection breaks while it is closed (what a client's close can raise)."""

    async def _aclose(self) -> None:
        raise ConnectionResetError(104, 'Connection reset by peer')


async def test_aclose_maps_a_driver_error() -> None:
    store = ClosingFails()
    with pytest.raises(StoreUnavailableError) as caught:
        await store.aclose()
    assert (caught.value.operation, caught.value.reason) == ('aclose', 'ECONNRESET')
    assert isinstance(caught.value.__cause__, ConnectionResetError)
    assert store.closed
    await store.aclose()  # closed already: nothing left to fail


async def test_leaving_a_with_block_maps_a_driver_error_of_the_close() -> None:
    with pytest.raises(StoreUnavailableError, match='aclose'):
        async with ClosingFails() as store:
            await store.put(b'kept until the close failed')


async def test_sqlite_require_storage_maps_a_file_that_is_no_database(tmp_path: Path) -> None:
    path = tmp_path / 'history.json'
    path.write_text('[{"not": "a database"}]')
    async with SqliteMediaStore(database=str(path)) as store:
        with pytest.raises(StoreOperationError) as caught:
            await store.require_storage()
    assert caught.value.operation == 'require_storage'
    assert 'file is not a database' in str(caught.value)
    assert path.read_text() == '[{"not": "a database"}]'


def test_opening_a_disk_store_through_a_file_is_a_store_error(tmp_path: Path) -> None:
    """Construction is a path too: a folder that cannot be made is the store's typed error, not a raw OSError."""
    blocker = tmp_path / 'a-file'
    blocker.write_text('not a folder')
    with pytest.raises(StoreOperationError) as caught:
        DiskMediaStore(blocker / 'media')
    assert (caught.value.operation, caught.value.reason) == ('open', 'ENOTDIR')
    assert isinstance(caught.value.__cause__, NotADirectoryError)
    assert str(blocker / 'media') in str(caught.value)
    assert blocker.read_text() == 'not a folder'


def test_the_cli_words_store_errors_and_local_files_only() -> None:
    """A store error is its own line; a foreign exception is a bug and keeps its traceback (``None``)."""
    error = StoreUnavailableError('get', 'S3MediaStore(bucket=b)', 'EndpointConnectionError')
    assert describe_error(error) == str(error)
    assert (
        describe_error(FileNotFoundError(2, 'No such file or directory', '/x/y')) == 'No such file or directory: /x/y'
    )

    class EndpointConnectionError(Exception):  # the SDK's class name, not the SDK's class
        pass

    assert describe_error(EndpointConnectionError('http://127.0.0.1:1')) is None


def _no_credentials_env(tmp_path: Path) -> dict[str, str]:
    """No AWS credentials anywhere: empty variables, empty config and credentials files, no instance role."""
    config, credentials = tmp_path / 'aws-config', tmp_path / 'aws-credentials'
    config.write_text('')
    credentials.write_text('')
    return {
        'AWS_ACCESS_KEY_ID': '',
        'AWS_SECRET_ACCESS_KEY': '',
        'AWS_SESSION_TOKEN': '',
        'AWS_DEFAULT_REGION': 'us-east-1',
        'AWS_CONFIG_FILE': str(config),
        'AWS_SHARED_CREDENTIALS_FILE': str(credentials),
        'AWS_EC2_METADATA_DISABLED': 'true',
    }


@pytest.mark.parametrize('command', ['stats', 'ls', 'verify'])
def test_missing_s3_credentials_say_where_to_set_them(tmp_path: Path, command: str) -> None:
    url = f's3://bucket/cli/?endpoint_url=http://127.0.0.1:{free_port()}&max_attempts=1'
    line = assert_user_error(run(command, url, env=_no_credentials_env(tmp_path)), 'no permission')
    assert 'NoCredentialsError' in line
    assert 'AWS_ACCESS_KEY_ID' in line and 'AWS_SECRET_ACCESS_KEY' in line and 'profile' in line


@pytest.mark.parametrize('command', ['stats', 'ls', 'verify', 'diff'])
def test_an_unreachable_s3_endpoint_is_one_line(tmp_path: Path, command: str) -> None:
    url = f's3://bucket/cli/?endpoint_url=http://127.0.0.1:{free_port()}&max_attempts=1'
    arguments = [url, str(tmp_path)] if command == 'diff' else [url]
    line = assert_user_error(run(command, *arguments), 'could not be reached', 'S3MediaStore')
    assert SECRET not in line


@pytest.mark.parametrize('command', ['stats', 'ls', 'verify', 'sync'])
async def test_an_unreachable_mongo_server_is_one_line(tmp_path: Path, command: str) -> None:
    url = f'mongodb://user:{SECRET}@127.0.0.1:{free_port()}/db?serverSelectionTimeoutMS=300'
    arguments = [url]
    if command == 'sync':  # a source with a blob, so the destination is asked
        async with DiskMediaStore(tmp_path / 'source') as source:
            await source.put(b'one blob to copy')
        arguments = ['--quiet', str(tmp_path / 'source'), url]
    line = assert_user_error(run(command, *arguments), 'could not be reached', 'MongoMediaStore')
    assert 'ServerSelectionTimeoutError' in line


class WithExtras(MemoryMediaStore):
    """A backend with public async methods of its own, beyond the protocol: their driver errors are mapped too."""

    async def compact(self) -> None:
        raise ConnectionResetError(104, 'Connection reset by peer')

    async def scan(self) -> AsyncIterator[str]:
        yield 'first'
        raise ConnectionResetError(104, 'Connection reset by peer')


async def test_a_backends_own_public_methods_map_driver_errors() -> None:
    """The base wraps every public async method a backend defines, so an extra method cannot forget the rule."""
    async with WithExtras() as store:
        with pytest.raises(StoreUnavailableError) as caught:
            await store.compact()
        assert (caught.value.operation, caught.value.reason) == ('compact', 'ECONNRESET')
        seen: list[str] = []
        with pytest.raises(StoreUnavailableError) as streamed:
            await _collect(store.scan(), seen)
        assert seen == ['first']
        assert streamed.value.operation == 'scan'
        assert isinstance(streamed.value.__cause__, ConnectionResetError)


async def _collect(items: AsyncIterator[str], into: list[str]) -> None:
    async for item in items:
        into.append(item)


def _loop_at(path: Path) -> None:
    """Replace the file at ``path`` by a symlink loop (``path`` -> ``path.loop`` -> ``path``)."""
    path.unlink()
    path.symlink_to(path.name + '.loop')
    path.with_name(path.name + '.loop').symlink_to(path.name)


async def test_a_symlink_loop_in_a_disk_store_is_a_typed_error(tmp_path: Path) -> None:
    """A blob path or media-type record that is a symlink loop: a typed store error, never a raw RuntimeError."""
    async with DiskMediaStore(tmp_path) as store:
        uri = await store.put(b'looped' * 100, context=MediaContext(media_type='image/png'))
        _loop_at(Path(str(store.path_for(uri)) + '.mediatype'))
        with pytest.raises(MediaStashError, match='symlink loop'):
            await store.media_type_of(uri)
        _loop_at(store.path_for(uri))
        with pytest.raises(MediaStashError, match='symlink loop'):
            await store.get(uri)
        with pytest.raises(MediaStashError, match='symlink loop'):
            await store.put(b'looped' * 100)
