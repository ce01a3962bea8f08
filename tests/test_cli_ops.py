"""``mediastash stats / verify / ls / externalize / restore`` run as a user runs them, against real stores.

Each command runs in a subprocess (``python -m mediastash``). Every backend
gets the same store of four blobs of different sizes and media types; a blob
is then corrupted behind the store's back (file, row, object, manifest) for
``verify`` to find. Subprocesses cost about a second each, so each test
groups several assertions per run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mediastash import DiskMediaStore, MediaContext, MediaStashError, MemoryMediaStore, SqliteMediaStore
from mediastash.cli._ops import SIZE_BUCKETS, verify_blobs
from mediastash.stores.base import BaseMediaStore
from tests.mongo_support import TEST_DATABASE, RawCollections, mongo_uri, raw_client, unique_name
from tests.s3_servers import S3Endpoint, free_port, moto_server, unique_bucket

__all__ = ['mongo_uri', 'moto_server']  # the session fixtures, imported so pytest finds them here

SECRET = 'SECRET-cli-ops-7f3a9c'
"""Set as AWS_SECRET_ACCESS_KEY (and put in URLs) in every run; it must never be printed."""

BLOBS: list[tuple[int, str | None]] = [
    (10, 'text/plain'),
    (5000, 'image/png'),
    (200_000, 'image/png'),
    (1_300_000, None),
]
"""Sizes and media types of the seeded blobs: four histogram buckets, two types and one without."""

ABSENT = 'media+sha256://' + '0' * 64


def run(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m mediastash ARGS`` with a recognizable secret in the environment; text output."""
    full_env = {**os.environ, 'AWS_SECRET_ACCESS_KEY': SECRET, 'AWS_ACCESS_KEY_ID': 'cli-test-key', **(env or {})}
    full_env.pop('COLUMNS', None)
    result = subprocess.run(
        [sys.executable, '-m', 'mediastash', *args],
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=120,
        check=False,
    )
    stdout, stderr = result.stdout.decode(errors='replace'), result.stderr.decode(errors='replace')
    assert SECRET not in stdout and SECRET not in stderr, (stdout, stderr)
    return subprocess.CompletedProcess(result.args, result.returncode, stdout, stderr)


def assert_user_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit code 1, exactly one line on stderr naming what went wrong, no traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert 'Traceback' not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith('mediastash: error: '), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def parsed(result: subprocess.CompletedProcess[str], code: int = 0) -> Any:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert 'Traceback' not in result.stderr
    return json.loads(result.stdout)


# -- seeded stores, one per backend --------------------------------------------------------------


@dataclass
class Seeded:
    """A store holding ``BLOBS``: its URL, environment, and a way to corrupt a blob behind its back."""

    url: str
    uris: list[str]
    corrupt: Callable[[str], Awaitable[None]]
    env: dict[str, str] = field(default_factory=dict)
    records_media_types: bool = True


async def seed(store: BaseMediaStore) -> list[str]:
    uris = []
    async with store:
        for number, (size, media_type) in enumerate(BLOBS):
            data = hashlib.shake_256(f'blob {number}'.encode()).digest(size)
            uris.append(await store.put(data, context=MediaContext(media_type=media_type)))
    return uris


def s3_url(bucket: str, endpoint: str, prefix: str = 'cli/') -> str:
    return f's3://{bucket}/{prefix}?endpoint_url={endpoint}'


def s3_env(endpoint: S3Endpoint) -> dict[str, str]:
    return {
        'AWS_ACCESS_KEY_ID': endpoint.access_key_id,
        'AWS_SECRET_ACCESS_KEY': endpoint.secret_access_key,
        'AWS_DEFAULT_REGION': endpoint.region_name,
    }


async def s3_client_call(endpoint: S3Endpoint, method: str, **arguments: Any) -> Any:
    """One call through a plain aiobotocore client (not the store)."""
    from aiobotocore.session import get_session

    async with get_session().create_client('s3', **endpoint.client_options()) as client:
        return await getattr(client, method)(**arguments)


@pytest.fixture(params=['disk', 'sqlite', 's3', 'mongo'])
async def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Seeded]:
    if request.param == 'disk':
        folder = tmp_path / 'blobs'
        disk = DiskMediaStore(folder)
        uris = await seed(disk)

        async def corrupt_file(uri: str) -> None:
            disk.path_for(uri).write_bytes(b'not the bytes this name promises')

        yield Seeded(str(folder), uris, corrupt_file)
    elif request.param == 'sqlite':
        database = tmp_path / 'blobs.db'
        uris = await seed(SqliteMediaStore(database=database))

        async def corrupt_row(uri: str) -> None:
            with sqlite3.connect(database) as connection:
                connection.execute(
                    'UPDATE media SET bytes = ? WHERE sha256 = ?', (b'other bytes', uri.removeprefix('media+sha256://'))
                )
            connection.close()

        yield Seeded(f'sqlite:///{database}', uris, corrupt_row)
    elif request.param == 's3':
        endpoint: S3Endpoint = request.getfixturevalue('moto_server')
        from mediastash.stores.s3 import S3MediaStore

        bucket = unique_bucket('cli')
        await s3_client_call(endpoint, 'create_bucket', Bucket=bucket)
        uris = await seed(S3MediaStore(bucket=bucket, key_prefix='cli/', **endpoint.client_options()))

        async def corrupt_object(uri: str) -> None:
            key = 'cli/' + uri.removeprefix('media+sha256://') + '.bin'
            await s3_client_call(endpoint, 'put_object', Bucket=bucket, Key=key, Body=b'other bytes')

        yield Seeded(s3_url(bucket, endpoint.url), uris, corrupt_object, env=s3_env(endpoint))
    else:
        server: str = request.getfixturevalue('mongo_uri')
        from mediastash.stores.mongo import MongoMediaStore

        collection = unique_name('cli')
        uris = await seed(MongoMediaStore(db_url=server, database=TEST_DATABASE, collection=collection))
        client = raw_client(server)
        raw = RawCollections(client, TEST_DATABASE, collection)
        try:
            yield Seeded(mongo_store_url(server, TEST_DATABASE, collection), uris, raw_overwrite(raw))
        finally:
            await raw.drop()
            await client.close()


def raw_overwrite(raw: RawCollections) -> Callable[[str], Awaitable[None]]:
    async def corrupt_manifest(uri: str) -> None:
        await raw.overwrite(uri, b'other bytes')

    return corrupt_manifest


def mongo_store_url(server: str, database: str, collection: str) -> str:
    """``mongodb://host:port/<database>?collection=<collection>`` from the test server's URI."""
    from urllib.parse import urlsplit

    parts = urlsplit(server)
    options = f'&{parts.query}' if parts.query else ''
    return f'{parts.scheme}://{parts.netloc}/{database}?collection={collection}{options}'


# -- ls, stats, verify on every backend ------------------------------------------------------------


def expected_histogram() -> list[int]:
    counts = [0] * (len(SIZE_BUCKETS) + 1)
    for size, _ in BLOBS:
        counts[sum(size >= bound for bound in SIZE_BUCKETS)] += 1
    return counts


async def test_ls_stats_verify(seeded: Seeded) -> None:
    url, env = seeded.url, seeded.env
    by_uri = dict(zip(seeded.uris, BLOBS, strict=True))

    listing = run('ls', url, env=env)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.splitlines() == sorted(seeded.uris)

    long = parsed(run('ls', '--long', url, '--json', env=env))
    assert [entry['uri'] for entry in long] == sorted(seeded.uris)
    for entry in long:
        size, media_type = by_uri[entry['uri']]
        assert entry['size'] == size
        assert entry['media_type'] == (media_type if seeded.records_media_types else None)

    stats = parsed(run('stats', url, '--json', env=env))
    assert stats['blobs'] == len(BLOBS)
    assert stats['bytes'] == sum(size for size, _ in BLOBS)
    assert [row['blobs'] for row in stats['histogram']] == expected_histogram()
    assert sum(row['bytes'] for row in stats['histogram']) == stats['bytes']
    types = {row['media_type']: row['blobs'] for row in stats['media_types']}
    assert types == ({'image/png': 2, 'text/plain': 1, None: 1} if seeded.records_media_types else {None: 4})
    assert SECRET not in json.dumps(stats)

    clean = parsed(run('verify', url, '--json', env=env))
    assert clean == {
        'checked': 4,
        'ok': 4,
        'corrupt': [],
        'missing': [],
        'repaired': [],
        'damaged_copies': [],
        'healed': [],
        'bytes': stats['bytes'],
    }

    victim = seeded.uris[1]
    await seeded.corrupt(victim)
    found = run('verify', url, '--jobs', '2', env=env)
    assert found.returncode == 1, found.stderr
    assert f'corrupt  {victim}' in found.stdout
    assert 'checked 4 blob(s), 3 ok' in found.stdout
    assert 'Traceback' not in found.stderr

    named = parsed(run('verify', url, seeded.uris[0], ABSENT, victim, '--json', env=env), code=1)
    assert named == {
        'checked': 3,
        'ok': 1,
        'corrupt': [victim],
        'missing': [ABSENT],
        'repaired': [],
        'damaged_copies': [],
        'healed': [],
        'bytes': BLOBS[0][0],
    }

    repaired = run('verify', url, '--repair', '--json', env=env)
    assert repaired.returncode == 1, repaired.stderr  # problems were found, even if the corrupt copy is gone now
    assert json.loads(repaired.stdout)['repaired'] == [victim]
    assert 'put the original bytes again' in repaired.stderr
    table = run('verify', url, victim, '--repair', env=env)
    assert table.returncode == 1 and f'missing  {victim}' in table.stdout
    assert 'missing, 0 corrupt deleted' in table.stdout
    after = parsed(run('verify', url, '--json', env=env))
    assert (after['checked'], after['ok'], after['corrupt']) == (3, 3, [])
    assert victim not in run('ls', url, env=env).stdout


def test_stats_tables(tmp_path: Path) -> None:
    folder = tmp_path / 'blobs'
    asyncio.run(seed(SqliteMediaStore(database=tmp_path / 'b.db')))
    asyncio.run(seed(DiskMediaStore(folder)))
    result = run('stats', f'sqlite:///{tmp_path / "b.db"}', '--json-file', str(tmp_path / 'stats.json'))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert 'blobs: 4, 1.4 MiB (1,505,010 bytes)' in out
    assert '64 KiB - 256 KiB' in out and '>= 64 MiB' in out and 'image/png' in out and 'unknown' in out
    assert json.loads((tmp_path / 'stats.json').read_text())['blobs'] == 4
    quiet = run('ls', '-l', str(folder), '--quiet')
    assert quiet.returncode == 0 and quiet.stderr == ''
    rows = [line.split()[:2] for line in quiet.stdout.splitlines()]
    assert sorted(rows) == [
        ['1,300,000', 'unknown'],
        ['10', 'text/plain'],
        ['200,000', 'image/png'],
        ['5,000', 'image/png'],
    ]


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` (and ``root`` itself) with its mtime in ns, size and mode."""
    state = {}
    for path in [root, *root.rglob('*')]:
        info = path.lstat()
        state[str(path.relative_to(root))] = (info.st_mtime_ns, info.st_size, info.st_mode)
    return state


def test_disk_media_types_survive_sync_and_unknown_ones_are_explained(tmp_path: Path) -> None:
    """A disk store records media types, so sync to SQLite keeps them; stats and ls say why one is unknown."""
    from pydantic_ai_harness import media as harness_media

    folder, database = tmp_path / 'blobs', tmp_path / 'copy.db'
    uris = asyncio.run(seed(DiskMediaStore(folder)))
    legacy = asyncio.run(
        harness_media.DiskMediaStore(folder).put(
            b'written by pydantic-ai-harness', context=harness_media.MediaContext(media_type='image/gif')
        )
    )
    synced = run('sync', str(folder), f'sqlite:///{database}', '--quiet')
    assert synced.returncode == 0, synced.stderr
    copy = SqliteMediaStore(database=database)
    recorded = {uri: asyncio.run(copy.media_type_of(uri)) for uri in [*uris, legacy]}
    assert recorded == {**{uri: media_type for uri, (_, media_type) in zip(uris, BLOBS, strict=True)}, legacy: None}

    stats = parsed(run('stats', str(folder), '--json'))
    types = {row['media_type']: row['blobs'] for row in stats['media_types']}
    assert types == {'image/png': 2, 'text/plain': 1, None: 2}
    reason = stats['unknown_media_type_reason']
    assert 'put without one' in reason and 'pydantic-ai-harness' in reason
    table = run('stats', str(folder))
    assert f'unknown: {reason}' in table.stdout
    listing = run('ls', '--long', str(folder))
    assert listing.returncode == 0 and 'unknown media type (2 blob(s)): no media type was recorded' in listing.stderr
    sqlite_stats = parsed(run('stats', f'sqlite:///{database}', '--json'))
    assert sqlite_stats['unknown_media_type_reason'] == 'they were put without a media type'


def test_sync_copies_the_media_types_every_source_recorded(seeded: Seeded, tmp_path: Path) -> None:
    """sync asks the source's public stat for the media type: an S3 object's Content-Type reaches the copy too
    (sync left it out while it looked for a media_type_of method, which S3 has not)."""
    database = tmp_path / 'copy.db'
    synced = run('sync', seeded.url, f'sqlite:///{database}', '--quiet', env=seeded.env)
    assert synced.returncode == 0, synced.stderr
    copy = SqliteMediaStore(database=database)
    recorded = {uri: asyncio.run(copy.media_type_of(uri)) for uri in seeded.uris}
    assert recorded == {uri: media_type for uri, (_, media_type) in zip(seeded.uris, BLOBS, strict=True)}


def test_the_cli_names_no_store_class_and_reaches_no_private_store_attribute() -> None:
    """cli/ asks stores only through public capabilities (stat, iter_uris, require_storage, ...)."""
    import ast

    import mediastash.cli

    backends = {'disk', 'sqlite', 's3', 'mongo', 'memory', 'postgres'}
    classes = {'DiskMediaStore', 'SqliteMediaStore', 'S3MediaStore', 'MongoMediaStore', 'MemoryMediaStore'}
    for path in sorted(Path(mediastash.cli.__file__).parent.glob('*.py')):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                parts = node.module.split('.')
                assert parts[:2] != ['mediastash', 'stores'] or not backends & set(parts), (path.name, node.module)
                assert not classes & {alias.name for alias in node.names}, (path.name, node.module)
            named = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            assert named not in classes, (path.name, named)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == 'store':
                assert not node.attr.startswith('_'), (path.name, node.attr)
            if isinstance(node, ast.Call) and getattr(node.func, 'id', None) == 'getattr' and len(node.args) >= 2:
                name = node.args[1]
                assert not (isinstance(name, ast.Constant) and str(name.value).startswith('_')), path.name


def test_read_only_commands_leave_a_disk_store_untouched(tmp_path: Path) -> None:
    """ls, stats, verify and diff keep an old crash leftover; verify --repair sweeps it (issue 17, item 7)."""
    folder, other = tmp_path / 'blobs', tmp_path / 'other'
    uris = asyncio.run(seed(DiskMediaStore(folder)))
    asyncio.run(seed(DiskMediaStore(other)))
    old = os.path.getmtime(folder) - 2 * 3600
    leftovers = [
        folder / '.mediastash-tmp-0123456789abcdef0123456789abcdef',
        folder / ('.mediastash-tmp-gc-' + 'f' * 32),
    ]
    for path in leftovers:
        path.write_bytes(b'half a blob')
        os.utime(path, (old, old))
    before = tree_state(folder), tree_state(other)

    for command in (['ls'], ['ls', '--long'], ['stats'], ['verify'], ['verify', str(folder), uris[0]]):
        result = run(*command, *([] if len(command) > 2 else [str(folder)]), '--quiet')
        assert result.returncode == 0, (command, result.stderr)
    assert run('diff', str(folder), str(other), '--quiet').returncode == 0
    assert run('diff', str(other), str(folder), '--quiet').returncode == 0
    assert (tree_state(folder), tree_state(other)) == before

    repaired = run('verify', str(folder), '--repair', '--quiet')
    assert repaired.returncode == 0, repaired.stderr
    assert not leftovers[0].exists()  # the tombstone is aged by its ctime (just now): kept
    typed = [uri for uri, (_, media_type) in zip(uris, BLOBS, strict=True) if media_type]
    expected = sorted(
        [leftovers[1].name, *(uri[-64:] + '.bin' for uri in uris), *(uri[-64:] + '.bin.mediatype' for uri in typed)]
    )
    assert sorted(path.name for path in folder.iterdir()) == expected


async def test_verify_reports_a_listed_blob_that_vanished() -> None:
    """A blob listed but gone when read (deleted meanwhile) is 'missing', not an error."""

    class Vanishing(MemoryMediaStore):
        async def _list_digests(self) -> AsyncIterator[str]:
            async for digest in super()._list_digests():
                yield digest
            yield ABSENT.removeprefix('media+sha256://')

    async with Vanishing() as store:
        kept = await store.put(b'kept')
        uris = [uri async for uri in store.iter_uris()]
        report = await verify_blobs(store, uris, jobs=3)
    assert report.as_json() == {
        'checked': 2,
        'ok': 1,
        'corrupt': [],
        'missing': [ABSENT],
        'repaired': [],
        'damaged_copies': [],
        'healed': [],
        'bytes': 4,
    }
    assert kept in uris


async def test_verify_raises_store_errors_as_they_are() -> None:
    """A failing read (not a corrupt or missing blob) stops verify with that error, not an ExceptionGroup
    (the driver's error itself, or the store's typed error carrying it as its cause)."""

    class Broken(MemoryMediaStore):
        async def _raw_chunks(self, digest: str, context: Any, chunk_size: int) -> AsyncIterator[bytes]:
            raise ConnectionResetError('peer went away')
            yield b''

    async with Broken() as store:
        uris = [await store.put(bytes([n])) for n in range(5)]
        with pytest.raises((ConnectionResetError, MediaStashError)) as caught:
            await verify_blobs(store, uris, jobs=2)
    assert not isinstance(caught.value, BaseExceptionGroup)
    error = caught.value if isinstance(caught.value, ConnectionResetError) else caught.value.__cause__
    assert isinstance(error, ConnectionResetError) and str(error) == 'peer went away'


# -- externalize and restore ---------------------------------------------------------------------


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[Any]]:
    """A pydantic-ai history with a 300 kB ``BinaryImage``, as ``ModelMessagesTypeAdapter.dump_json`` writes it."""
    from pydantic_ai.messages import (
        BinaryImage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )

    image = hashlib.shake_256(b'image').digest(300_000)
    messages = [
        ModelRequest(
            parts=[
                UserPromptPart(content=['What is in this picture? ü', BinaryImage(data=image, media_type='image/png')])
            ]
        ),
        ModelResponse(parts=[TextPart('A cat on a mat.')]),
    ]
    path = tmp_path / 'history.json'
    path.write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    return path, messages


def test_externalize_restore_round_trip(tmp_path: Path, history: tuple[Path, list[Any]]) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    source, messages = history
    lean, restored, store = tmp_path / 'lean.json', tmp_path / 'restored.json', tmp_path / 'store'
    summary_file = tmp_path / 'summary.json'

    out = run('externalize', str(source), str(lean), '--store', str(store), '--json-file', str(summary_file))
    assert out.returncode == 0, out.stderr
    summary = json.loads(summary_file.read_text())
    assert summary['input_bytes'] == source.stat().st_size
    assert summary['output_bytes'] == lean.stat().st_size < 2000
    assert (summary['blobs'], summary['blob_bytes'], summary['threshold_bytes']) == (1, 300_000, 64 * 1024)
    assert 'stored  1 blob(s), 293.0 KiB (300,000 bytes)' in out.stdout
    assert len(list(store.glob('*.bin'))) == 1

    back = parsed(run('restore', str(lean), str(restored), '--store', str(store), '--json'))
    assert back['blobs'] == 1 and back['output_bytes'] == source.stat().st_size
    # The same JSON (restore puts 'data' back as the binary part's last key) and the same messages.
    assert json.loads(restored.read_bytes()) == json.loads(source.read_bytes())
    assert ModelMessagesTypeAdapter.validate_json(restored.read_bytes()) == messages

    # stdin to stdout, into SQLite; the summary goes to stderr then
    database = tmp_path / 'blobs.db'
    piped = run(
        'externalize', '-', '-', '--store', f'sqlite:///{database}', '--threshold', '1KiB', stdin=source.read_bytes()
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout) == json.loads(lean.read_text())
    assert 'stored  1 blob(s)' in piped.stderr
    again = run('restore', '-', '-', '--store', f'sqlite:///{database}', '--quiet', stdin=piped.stdout.encode())
    assert again.returncode == 0 and again.stderr == ''
    assert again.stdout.encode() == restored.read_bytes()


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run the block (and the subprocesses it starts) under ``mask``."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize('command', ['externalize', 'restore'])
def test_output_files_follow_the_umask_keep_their_mode_and_write_through_symlinks(
    tmp_path: Path, history: tuple[Path, list[Any]], command: str
) -> None:
    """OUT (and a JSON summary file) as a shell redirection would leave it, replaced atomically (item 8)."""
    source, _ = history
    store, lean = tmp_path / 'store', tmp_path / 'lean.json'
    assert run('externalize', str(source), str(lean), '--store', str(store), '-q').returncode == 0
    given = source if command == 'externalize' else lean
    expected = json.loads(lean.read_bytes() if command == 'externalize' else source.read_bytes())
    outputs = tmp_path / 'outputs'
    outputs.mkdir()

    def write(out: Path, *extra: str) -> None:
        result = run(command, str(given), str(out), '--store', str(store), '-q', *extra)
        assert result.returncode == 0, result.stderr
        assert json.loads(Path(os.path.realpath(out)).read_bytes()) == expected

    for mask, wanted in ((0o022, 0o644), (0o027, 0o640), (0o077, 0o600)):
        with umask(mask):
            fresh = outputs / f'new-{mask:o}.json'
            summary = outputs / f'summary-{mask:o}.json'
            write(fresh, '--json-file', str(summary))
        assert (mode(fresh), mode(summary)) == (wanted, wanted), f'umask {mask:o}'

    kept, summary = outputs / 'shared.json', outputs / 'shared-summary.json'
    for path in (kept, summary):
        path.write_text('previous content')
        path.chmod(0o640)
    before = kept.stat().st_ino
    with umask(0o077):
        write(kept, '--json-file', str(summary))
    assert (mode(kept), mode(summary)) == (0o640, 0o640)
    assert kept.stat().st_ino != before, 'replaced atomically (a new file renamed over it), not rewritten in place'
    assert json.loads(summary.read_text())['store'].startswith('DiskMediaStore(')

    target, link = outputs / 'target.json', outputs / 'link.json'
    target.write_text('previous content')
    target.chmod(0o640)
    link.symlink_to(target.name)
    write(link)
    assert link.is_symlink() and os.readlink(link) == target.name
    assert mode(target) == 0o640
    dangling, absent = outputs / 'dangling.json', outputs / 'created-through-a-link.json'
    dangling.symlink_to(absent.name)
    with umask(0o022):
        write(dangling)
    assert dangling.is_symlink() and mode(absent) == 0o644

    assert not [path.name for path in outputs.iterdir() if path.name.endswith('.tmp')]
    loop = outputs / 'loop.json'
    loop.symlink_to(loop.name)
    assert_user_error(run(command, str(given), str(loop), '--store', str(store)), 'symlink')


def test_restore_with_a_missing_blob_writes_nothing(tmp_path: Path, history: tuple[Path, list[Any]]) -> None:
    source, _ = history
    lean, store = tmp_path / 'lean.json', tmp_path / 'store'
    assert run('externalize', str(source), str(lean), '--store', str(store), '-q').returncode == 0
    (blob,) = store.glob('*.bin')
    blob.unlink()
    target = tmp_path / 'restored.json'
    target.write_text('previous content')
    line = assert_user_error(
        run('restore', str(lean), str(target), '--store', str(store)), f'media+sha256://{blob.name[:64]}'
    )
    assert 'no media stored' in line
    assert target.read_text() == 'previous content'
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ['history.json', 'lean.json', 'restored.json', 'store']
    )

    blob.write_bytes(b'tampered')
    assert_user_error(run('restore', str(lean), str(target), '--store', str(store)), 'corrupt')
    assert target.read_text() == 'previous content'


# -- user errors ------------------------------------------------------------------------------------


def test_user_errors_are_one_line_and_create_nothing(tmp_path: Path) -> None:
    missing = tmp_path / 'nothing-here'
    for command in (['stats'], ['ls'], ['verify'], ['ls', '--long']):
        assert_user_error(run(*command, str(missing)), 'nothing-here')
    assert_user_error(run('stats', f'sqlite:///{tmp_path / "none.db"}'), 'none.db')
    history = tmp_path / 'h.json'
    history.write_text('[]')
    assert_user_error(run('restore', str(history), str(tmp_path / 'out.json'), '--store', str(missing)))
    assert list(tmp_path.iterdir()) == [history]

    assert_user_error(run('stats', 'ftp://example.com/blobs'))
    assert_user_error(
        run('externalize', str(tmp_path / 'absent.json'), 'o.json', '--store', str(missing)), 'absent.json'
    )
    history.write_text('[{"parts": ')
    assert_user_error(
        run('externalize', str(history), str(tmp_path / 'o.json'), '--store', str(missing)), 'not valid JSON'
    )
    assert_user_error(
        run('externalize', str(history), str(tmp_path / 'no' / 'o.json'), '--store', str(missing)), 'does not exist'
    )
    assert_user_error(run('verify', str(tmp_path), 'media+sha256://nothex'), 'invalid media URI')
    assert list(tmp_path.iterdir()) == [history]

    # A file that is no database, and a database without the store's table (which is not created).
    assert_user_error(run('ls', f'sqlite:///{history}'), 'SqliteMediaStore(', 'file is not a database')
    other = tmp_path / 'other.db'
    with contextlib.closing(sqlite3.connect(other)) as connection:
        connection.execute('CREATE TABLE notes (text)')
        connection.commit()
    assert_user_error(
        run('stats', f'sqlite:///{other}?table=blobs'), "SQLite table 'blobs' does not exist", 'nothing was created'
    )
    with contextlib.closing(sqlite3.connect(other)) as connection:
        assert connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == [('notes',)]


def test_remote_errors(moto_server: S3Endpoint) -> None:
    """Stopped servers and a missing bucket: one line naming the service, nothing created, no secret."""
    port = free_port()
    stopped = s3_url('bucket', f'http://127.0.0.1:{port}') + '&max_attempts=1'
    assert_user_error(run('stats', stopped), 'reach', 'S3')  # the CLI's own line, or the store's typed error
    bucket = unique_bucket('absent')
    assert_user_error(run('ls', s3_url(bucket, moto_server.url), env=s3_env(moto_server)), 'does not exist')
    buckets = asyncio.run(s3_client_call(moto_server, 'list_buckets'))['Buckets']
    assert bucket not in [entry['Name'] for entry in buckets]
    assert_user_error(
        run('verify', f'mongodb://user:{SECRET}@127.0.0.1:{port}/db?serverSelectionTimeoutMS=300'),
        'reach',
        'Mongo',
    )
