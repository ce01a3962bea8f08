"""``mediastash tune`` as a user runs it (subprocesses), on real step stores, history files and stores; and the rule."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.step_persistence import FileStepStore, SqliteStepStore, StepPersistence

from mediastash import DiskMediaStore, SqliteMediaStore
from mediastash.tuning import (
    KNOWN_LIMITS,
    Limit,
    ThresholdRow,
    advice,
    history_payload_sizes,
    load_history_file,
    recommend,
    rule_text,
    size_histogram,
    steps_by_history,
)
from tests.s3_servers import S3Endpoint, unique_bucket
from tests.terminal_support import stderr_on_a_terminal

KiB = 1 << 10
MiB = 1 << 20
REPORT = 'r' * MiB
IMAGE_SIZES = (400_000, 300_000)
THRESHOLDS = '4KiB,16KiB,64KiB,256KiB,1MiB'
ROW_FIELDS = {
    'threshold_bytes': int,
    'snapshots': int,
    'persisted_bytes_total': int,
    'persisted_bytes_p95': int,
    'persisted_bytes_max': int,
    'blobs': int,
    'media_bytes': int,
    'puts': int,
    'gets': int,
    'store_calls': int,
    'externalize_seconds_median': float,
    'restore_seconds_median': float,
    'fits_mongodb': bool,
    'fits_dynamodb': bool,
}


def tune(*args: object, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m mediastash tune ARGS`` in ``cwd``, as a user runs it (in a terminal 200 columns wide)."""
    env = {**(os.environ if env is None else env), 'COLUMNS': '200'}
    return subprocess.run(
        [sys.executable, '-m', 'mediastash', 'tune', *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
        check=False,
    )


def succeeded(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f'exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}'
    assert 'Traceback' not in result.stderr
    return result


def tree_of(folder: Path) -> set[str]:
    """Every file and folder under ``folder``, relative."""
    return {str(path.relative_to(folder)) for path in folder.rglob('*')}


# -- inputs: a real agent run in harness step stores, and history files -----------------------


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the tool twice (it returns the same 1 MiB report), then answer."""
    calls = sum(isinstance(part, ToolCallPart) for message in messages for part in message.parts)
    if calls < 2:
        return ModelResponse(
            parts=[ToolCallPart(tool_name='fetch_report', args={'n': calls}, tool_call_id=f'c{calls}')]
        )
    return ModelResponse(parts=[TextPart('done')])


def images() -> list[Any]:
    return [
        'compare these',
        BinaryImage(data=os.urandom(IMAGE_SIZES[0]), media_type='image/png'),
        BinaryImage(data=os.urandom(IMAGE_SIZES[1]), media_type='image/jpeg'),
    ]


async def agent_run(store: Any) -> list[ModelMessage]:
    agent: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=[StepPersistence(store=store)])

    @agent.tool_plain
    def fetch_report(n: int) -> str:
        return REPORT

    result = await agent.run(images())
    return result.all_messages()


@pytest.fixture(scope='module')
def file_step_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A harness FileStepStore folder (its default media store inside) written by one agent run."""
    folder = tmp_path_factory.mktemp('file-steps') / 'steps'
    asyncio.run(agent_run(FileStepStore(folder)))
    return folder


@pytest.fixture(scope='module')
def sqlite_step_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A harness SqliteStepStore database written by two agent runs."""
    database = tmp_path_factory.mktemp('sqlite-steps') / 'steps.db'

    async def two_runs() -> None:
        store = SqliteStepStore(database=database)
        await agent_run(store)
        await agent_run(store)

    asyncio.run(two_runs())
    return database


def known_answer_messages() -> list[ModelMessage]:
    """A history whose recommendation at 4/16/64/256 KiB is known without measuring.

    The first request holds 300 KB of small text parts (below every threshold)
    and images of 8, 32 and 128 KiB; four short steps follow, so each of the
    four snapshots repeats all of it. Relative to the smallest total (4 KiB:
    everything moved), 16 KiB keeps the 8 KiB image inline (+10.9 KB of
    base64 per snapshot, about 3.6%), 64 KiB also the 32 KiB one (about 18%),
    256 KiB all three (about 60%).
    """
    filler = [UserPromptPart(content=f'{index:03d} ' + 'lorem ipsum ' * 250) for index in range(100)]
    pictures = UserPromptPart(
        content=[
            'three pictures',
            BinaryContent(data=os.urandom(8 * KiB), media_type='image/png'),
            BinaryContent(data=os.urandom(32 * KiB), media_type='image/png'),
            BinaryContent(data=os.urandom(128 * KiB), media_type='image/png'),
        ]
    )
    messages: list[ModelMessage] = [ModelRequest(parts=[*filler, pictures])]
    for step in range(4):
        messages.append(ModelResponse(parts=[TextPart(f'answer {step}')]))
        messages.append(ModelRequest(parts=[UserPromptPart(content=f'next {step}')]))
    return messages


@pytest.fixture
def known_answer_file(tmp_path: Path) -> Path:
    path = tmp_path / 'known.json'
    path.write_bytes(ModelMessagesTypeAdapter.dump_json(known_answer_messages()))
    return path


def rows_by_threshold(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {row['threshold_bytes']: row for row in report['rows']}


# -- tune on a harness FileStepStore -----------------------------------------------------------


def test_tune_on_a_file_step_store(file_step_store: Path, tmp_path: Path) -> None:
    media = tmp_path / 'media'
    existing = asyncio.run(_put_one(DiskMediaStore(media)))
    before = tree_of(media)
    out = tmp_path / 'out.json'
    result = succeeded(
        tune(file_step_store, '--store', media, '--thresholds', THRESHOLDS, '--json-file', out, cwd=tmp_path)
    )

    for label in ('4 KiB', '16 KiB', '64 KiB', '256 KiB', '1 MiB'):
        assert label in result.stdout
    assert 'Recommended threshold:' in result.stdout
    assert 'Rule: Weigh each threshold as its total persisted snapshot bytes plus 16 KiB' in result.stdout
    assert 'among all thresholds, take the largest' in result.stdout

    report = json.loads(out.read_text())
    assert [history['name'].split('#')[0] for history in report['histories']] == [str(file_step_store)]
    rows = rows_by_threshold(report)
    assert sorted(rows) == [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB]
    for row in report['rows']:
        assert set(row) == set(ROW_FIELDS)
        for name, kind in ROW_FIELDS.items():
            assert type(row[name]) is kind, (name, row[name])
        # request(prompt) response(call) request(return) response(call) request(return) response(done):
        # snapshots after each tool return, and the finished run.
        assert row['snapshots'] == 3
    # Measured: two images and one report (returned twice, stored once) move at 4 KiB to 256 KiB.
    for threshold in (4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB):
        row = rows[threshold]
        assert (row['blobs'], row['puts'], row['media_bytes']) == (3, 3, sum(IMAGE_SIZES) + len(REPORT))
        assert row['gets'] == 9  # each snapshot restored from the store: 3 distinct blobs each
        assert row['persisted_bytes_max'] < 64 * KiB
    # At 1 MiB only the 1 MiB report moves; the images stay inline in all three snapshots.
    assert (rows[MiB]['blobs'], rows[MiB]['media_bytes'], rows[MiB]['gets']) == (1, len(REPORT), 3)
    assert rows[MiB]['persisted_bytes_max'] > sum(IMAGE_SIZES) * 4 // 3
    assert rows[MiB]['persisted_bytes_total'] > 3 * sum(IMAGE_SIZES) * 4 // 3
    assert rows[MiB]['fits_mongodb'] and not rows[MiB]['fits_dynamodb']
    assert report['recommendation']['threshold_bytes'] in rows
    assert 'within 10%' in report['recommendation']['rule']

    # Cleaned up: the store folder holds exactly what it held before (no blobs, no sub-folders left).
    assert tree_of(media) == before
    assert asyncio.run(DiskMediaStore(media).exists(existing))


async def _put_one(store: Any) -> str:
    async with store:
        return str(await store.put(b'a blob that was here before the sweep'))


def test_tune_on_a_sqlite_step_store_reads_every_run(sqlite_step_store: Path, tmp_path: Path) -> None:
    result = succeeded(tune(sqlite_step_store, '--store', 'memory://', '--thresholds', '64KiB', '--json', cwd=tmp_path))
    report = json.loads(result.stdout)  # bare --json: JSON only on stdout
    assert len(report['histories']) == 2
    assert all(history['name'].startswith(f'{sqlite_step_store}#') for history in report['histories'])
    (row,) = report['rows']
    assert row['snapshots'] == 6
    assert row['blobs'] == 5  # two runs with their own random images, one shared report
    assert report['recommendation']['threshold_bytes'] == 64 * KiB


# -- tune on history files: the known answer, exact sizes, plots -------------------------------


def test_recommendation_follows_the_rule_on_a_known_case(known_answer_file: Path, tmp_path: Path) -> None:
    def recommended(*extra: object) -> dict[str, Any]:
        result = tune(
            known_answer_file,
            '--store',
            'memory://',
            '--thresholds',
            '4KiB,16KiB,64KiB,256KiB',
            '--read-cost',
            '0',
            '--json',
            *extra,
            cwd=tmp_path,
        )
        return json.loads(succeeded(result).stdout)  # type: ignore[no-any-return]

    report = recommended()
    rows = rows_by_threshold(report)
    assert [rows[t]['blobs'] for t in (4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB)] == [3, 2, 1, 0]
    floor = rows[4 * KiB]['persisted_bytes_total']
    assert min(row['persisted_bytes_total'] for row in rows.values()) == floor
    assert 0.02 < rows[16 * KiB]['persisted_bytes_total'] / floor - 1 < 0.05
    assert 0.15 < rows[64 * KiB]['persisted_bytes_total'] / floor - 1 < 0.25
    assert report['recommendation']['threshold_bytes'] == 16 * KiB  # the largest within 10%
    assert recommended('--margin', '25%')['recommendation']['threshold_bytes'] == 64 * KiB
    assert recommended('--margin', '0')['recommendation']['threshold_bytes'] == 4 * KiB
    nothing_fits = recommended('--limit', '1000')['recommendation']
    assert nothing_fits['threshold_bytes'] is None
    assert 'no threshold keeps the largest snapshot within a limit of 1,000 bytes' in nothing_fits['reason']

    # Printed as well: the pick, why, and the rule.
    thresholds = ('--thresholds', '4KiB,16KiB,64KiB', '--read-cost', '0')
    text = succeeded(tune(known_answer_file, '--store', 'memory://', *thresholds, cwd=tmp_path))
    assert 'Recommended threshold: 16 KiB (16,384 bytes)' in text.stdout
    assert (
        'Rule: Among all thresholds, take the largest whose total persisted snapshot bytes are within 10%'
        in text.stdout
    )


def test_persisted_bytes_are_the_exact_snapshot_json(known_answer_file: Path, tmp_path: Path) -> None:
    """At 256 KiB nothing moves, so each persisted snapshot is the compact JSON of a history prefix."""
    result = succeeded(
        tune(known_answer_file, '--store', 'memory://', '--thresholds', '256KiB', '--json', cwd=tmp_path)
    )
    (row,) = json.loads(result.stdout)['rows']
    history = json.loads(known_answer_file.read_bytes())
    sizes = [len(json.dumps(history[:end], separators=(',', ':'), ensure_ascii=False).encode()) for end in (3, 5, 7, 9)]
    assert row['snapshots'] == 4
    assert row['persisted_bytes_total'] == sum(sizes)
    assert row['persisted_bytes_max'] == row['persisted_bytes_p95'] == max(sizes)
    assert (row['blobs'], row['puts'], row['gets'], row['media_bytes']) == (0, 0, 0, 0)


def test_several_history_files_share_each_namespace(known_answer_file: Path, tmp_path: Path) -> None:
    second = tmp_path / 'second.json'
    second.write_bytes(known_answer_file.read_bytes())
    result = succeeded(
        tune(known_answer_file, second, '--store', tmp_path / 'store', '--thresholds', '4KiB', '--json', cwd=tmp_path)
    )
    report = json.loads(result.stdout)
    assert [history['name'] for history in report['histories']] == [str(known_answer_file), str(second)]
    (row,) = report['rows']
    assert row['snapshots'] == 8
    assert row['blobs'] == row['puts'] == 3  # the second file's payloads were already stored
    assert not (tmp_path / 'store').exists()  # created for the sweep, removed after it


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b'\x89PNG\r\n\x1a\n'
    assert data[12:16] == b'IHDR'
    width, height = struct.unpack('>II', data[16:24])
    return width, height


def test_plot_png_and_svg(known_answer_file: Path, tmp_path: Path) -> None:
    import matplotlib.image

    png = tmp_path / 'tune.png'
    svg = tmp_path / 'tune.svg'
    for target in (png, svg):
        succeeded(
            tune(
                known_answer_file,
                '--store',
                'memory://',
                '--thresholds',
                '4KiB,16KiB,64KiB',
                '--plot',
                target,
                '-q',
                cwd=tmp_path,
            )
        )
    width, height = png_size(png.read_bytes())
    assert (width, height) == (880, 1045)  # 8 x 9.5 inches at 110 dpi
    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (height, width)
    assert pixels.std() > 0.05  # drawn, not blank
    root = ElementTree.fromstring(svg.read_text())
    assert root.tag.endswith('svg')
    text = svg.read_text()
    assert 'recommended: 64 KiB' in text  # weighed with the default read cost (16 KiB by bytes alone)
    assert 'weight: total + 16 KiB per blob read' in text and 'smallest weight + 10%' in text
    # The caps are drawn once, on the single-snapshot panel; the payloads have a panel of their own.
    assert text.count("MongoDB's 16 MiB document cap") == 1 and text.count("DynamoDB's 400 KB item cap") == 1
    assert 'one snapshot (MiB)' in text and 'all snapshots (MiB)' in text and 'payloads' in text


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='pseudo-terminals as on Linux')
def test_progress_only_on_a_terminal_and_not_with_quiet(known_answer_file: Path, tmp_path: Path) -> None:
    arguments = (known_answer_file, '--store', 'memory://', '--thresholds', '4KiB,64KiB')
    shown = stderr_on_a_terminal('tune', *arguments, cwd=tmp_path)
    assert 'replaying snapshots' in shown
    assert '8/8' in shown  # two thresholds x four snapshots
    assert 'replaying snapshots' not in stderr_on_a_terminal('tune', *arguments, '-q', cwd=tmp_path)
    piped = succeeded(tune(*arguments, cwd=tmp_path))
    assert piped.stderr == ''


def test_plot_without_matplotlib_is_a_user_error(known_answer_file: Path, tmp_path: Path) -> None:
    """As on an install without the plot extra: the import fails, before any work."""
    shadow = tmp_path / 'no-plot-extra' / 'matplotlib'
    shadow.mkdir(parents=True)
    (shadow / '__init__.py').write_text("raise ImportError('No module named matplotlib')\n")
    env = {
        **os.environ,
        'PYTHONPATH': os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get('PYTHONPATH')])),
    }
    result = tune(
        known_answer_file, '--store', tmp_path / 'store', '--plot', tmp_path / 'tune.png', cwd=tmp_path, env=env
    )
    assert 'plotting needs matplotlib: pip install "mediastash[plot]"' in bad(result)
    assert not (tmp_path / 'tune.png').exists()
    assert not (tmp_path / 'store').exists()


# -- other stores: SQLite, S3 on moto, MongoDB -------------------------------------------------


def test_tune_on_sqlite_leaves_only_the_existing_table(known_answer_file: Path, tmp_path: Path) -> None:
    database = tmp_path / 'media.db'
    asyncio.run(_put_one(SqliteMediaStore(database=database)))
    result = succeeded(
        tune(
            known_answer_file, '--store', f'sqlite:///{database}', '--thresholds', '4KiB,64KiB', '--json', cwd=tmp_path
        )
    )
    rows = rows_by_threshold(json.loads(result.stdout))
    assert (rows[4 * KiB]['blobs'], rows[64 * KiB]['blobs']) == (3, 1)
    with sqlite3.connect(database) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables == ['media']
        assert connection.execute('SELECT count(*) FROM media').fetchone() == (1,)
    # A database the sweep had to create is removed again.
    fresh = tmp_path / 'fresh.db'
    succeeded(tune(known_answer_file, '--store', f'sqlite:///{fresh}', '--thresholds', '4KiB', '-q', cwd=tmp_path))
    assert not fresh.exists()


@pytest.fixture
def s3_bucket(moto_server: S3Endpoint) -> str:
    import boto3

    client = boto3.client('s3', **moto_server.client_options())
    bucket = unique_bucket('tune')
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key='keep/existing.txt', Body=b'user data')
    return bucket


def test_tune_on_s3_deletes_every_key_it_wrote(
    known_answer_file: Path, tmp_path: Path, moto_server: S3Endpoint, s3_bucket: str
) -> None:
    import boto3

    env = {
        **os.environ,
        'AWS_ACCESS_KEY_ID': moto_server.access_key_id,
        'AWS_SECRET_ACCESS_KEY': moto_server.secret_access_key,
        'AWS_DEFAULT_REGION': moto_server.region_name,
    }
    url = f's3://{s3_bucket}/media?endpoint_url={moto_server.url}&region={moto_server.region_name}'
    result = succeeded(
        tune(known_answer_file, '--store', url, '--thresholds', '4KiB,64KiB', '--json', cwd=tmp_path, env=env)
    )
    rows = rows_by_threshold(json.loads(result.stdout))
    assert (rows[4 * KiB]['blobs'], rows[64 * KiB]['blobs']) == (3, 1)
    assert moto_server.secret_access_key not in result.stdout + result.stderr
    client = boto3.client('s3', **moto_server.client_options())
    keys = [item['Key'] for item in client.list_objects_v2(Bucket=s3_bucket).get('Contents', [])]
    assert keys == ['keep/existing.txt']

    missing = f's3://no-such-bucket-here/media?endpoint_url={moto_server.url}'
    assert "S3 bucket 'no-such-bucket-here' does not exist" in bad(
        tune(known_answer_file, '--store', missing, cwd=tmp_path, env=env)
    )
    stopped = 's3://bucket/media?endpoint_url=http://127.0.0.1:1&max_attempts=1'
    line = bad(tune(known_answer_file, '--store', stopped, cwd=tmp_path, env=env))
    assert re.search('cannot reach the S3 endpoint|could not be reached', line), line  # the base maps driver errors


def test_tune_on_mongodb_drops_its_collections(known_answer_file: Path, tmp_path: Path, mongo_uri: str) -> None:
    from pymongo import MongoClient

    database = 'mediastash_tune_tests'
    base, _, query = mongo_uri.partition('?')
    url = f'{base.rstrip("/")}/{database}?collection=media' + (f'&{query}' if query else '')
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_uri)
    try:
        client[database]['media'].insert_one({'_id': 'user-document'})
        result = succeeded(
            tune(known_answer_file, '--store', url, '--thresholds', '4KiB,64KiB', '--json', cwd=tmp_path)
        )
        rows = rows_by_threshold(json.loads(result.stdout))
        assert (rows[4 * KiB]['blobs'], rows[64 * KiB]['blobs']) == (3, 1)
        names = set(client[database].list_collection_names())
        assert not any('tune' in name for name in names), names
        assert client[database]['media'].count_documents({}) == 1
    finally:
        client.drop_database(database)
        client.close()


# -- bad inputs --------------------------------------------------------------------------------


def bad(result: subprocess.CompletedProcess[str]) -> str:
    """The error line of a failed run: exit code != 0, no traceback, one line naming the problem."""
    assert result.returncode != 0, result.stdout
    assert 'Traceback' not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if 'error:' in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_bad_inputs_give_one_line_errors(known_answer_file: Path, tmp_path: Path) -> None:
    store = ('--store', 'memory://')
    assert 'no such file or folder' in bad(tune(tmp_path / 'missing.json', *store, cwd=tmp_path))
    not_history = tmp_path / 'object.json'
    not_history.write_text('{"messages": 3}')
    assert 'not a pydantic-ai message history' in bad(tune(not_history, *store, cwd=tmp_path))
    not_json = tmp_path / 'notes.txt'
    not_json.write_text('hello')
    assert 'is not JSON' in bad(tune(not_json, *store, cwd=tmp_path))
    no_runs = tmp_path / 'folder'
    no_runs.mkdir()
    assert 'not a pydantic-ai-harness FileStepStore' in bad(tune(no_runs, *store, cwd=tmp_path))
    other_db = tmp_path / 'other.db'
    with sqlite3.connect(other_db) as connection:
        connection.execute('CREATE TABLE t (x)')
    assert 'not a pydantic-ai-harness SqliteStepStore' in bad(tune(other_db, *store, cwd=tmp_path))
    assert 'nothing to replay' in bad(tune(*store, cwd=tmp_path))

    for thresholds in ('4KiB,,64KiB', 'lots', '0,4KiB', ''):
        result = tune(known_answer_file, *store, '--thresholds', thresholds, cwd=tmp_path)
        assert result.returncode == 2
        assert '--thresholds' in bad(result)
    assert '--limit' in bad(tune(known_answer_file, *store, '--limit', 'cassandra', cwd=tmp_path))
    assert '--margin' in bad(tune(known_answer_file, *store, '--margin', 'some', cwd=tmp_path))
    assert '.png or .svg' in bad(tune(known_answer_file, *store, '--plot', tmp_path / 'x.jpg', cwd=tmp_path))

    assert "unknown store URL scheme 'ftp'" in bad(tune(known_answer_file, '--store', 'ftp://host/x', cwd=tmp_path))
    assert 'sqlite://' in bad(tune(known_answer_file, '--store', 'sqlite://host/x.db', cwd=tmp_path))
    stopped = 'mongodb://user:hunter2@127.0.0.1:1/db?serverSelectionTimeoutMS=300'
    result = tune(known_answer_file, '--store', stopped, cwd=tmp_path)
    assert re.search('cannot reach the MongoDB server|could not be reached', bad(result))
    assert 'hunter2' not in result.stderr + result.stdout
    secret = 'mongodb://user:hunter2@127.0.0.1:1/db?bogusOption=1'
    result = tune(known_answer_file, '--store', secret, cwd=tmp_path)
    assert 'hunter2' not in bad(result) and 'hunter2' not in result.stdout
    assert list(tmp_path.glob('mediastash-tune-*')) == []


def test_a_store_folder_created_for_a_failed_run_is_removed(tmp_path: Path) -> None:
    store = tmp_path / 'new-store'
    assert 'no such file or folder' in bad(tune(tmp_path / 'missing.json', '--store', store, cwd=tmp_path))
    assert not store.exists()


# -- the rule, at library level -----------------------------------------------------------------


def row(threshold: int, total: int, *, largest: int = 1000, blobs: int = 1, seconds: float = 0.01) -> ThresholdRow:
    return ThresholdRow(
        threshold_bytes=threshold,
        snapshots=10,
        persisted_bytes_total=total,
        persisted_bytes_p95=largest,
        persisted_bytes_max=largest,
        blobs=blobs,
        media_bytes=0,
        puts=blobs,
        gets=blobs,
        store_calls=2 * blobs,
        externalize_seconds_median=seconds / 2,
        restore_seconds_median=seconds / 2,
        fits_mongodb=True,
        fits_dynamodb=largest <= 409_600,
    )


# These weigh persisted bytes alone (read_cost=0); tests/test_tune_weighing.py weighs the reads too.


def test_rule_largest_threshold_within_the_margin() -> None:
    rows = [row(4096, 1000, blobs=9), row(16384, 1090, blobs=5), row(65536, 1110, blobs=2), row(1 << 20, 5000, blobs=0)]
    assert recommend(rows, read_cost=0).threshold_bytes == 16384
    assert recommend(rows, margin=0.11, read_cost=0).threshold_bytes == 65536
    assert recommend(rows, margin=0, read_cost=0).threshold_bytes == 4096
    assert recommend(rows, margin=10, read_cost=0).threshold_bytes == 1 << 20


def test_rule_names_equivalent_thresholds_and_ignores_noise_in_times() -> None:
    rows = [
        row(4096, 1000, blobs=3, seconds=0.02),
        row(16384, 1000, blobs=3, seconds=0.01),
        row(65536, 1000, blobs=3, seconds=0.03),
        row(1 << 20, 9000, blobs=1, seconds=0.001),
    ]
    chosen = recommend(rows, read_cost=0)
    assert chosen.threshold_bytes == 65536  # the largest of three that store the same, whatever their times
    assert chosen.equivalent_thresholds == (4096, 16384)
    assert '4 KiB, 16 KiB store exactly the same on these histories' in chosen.reason
    assert recommend([row(4096, 1000, blobs=3), row(65536, 1000, blobs=1)], read_cost=0).equivalent_thresholds == ()


def test_rule_respects_the_limit() -> None:
    dynamo = KNOWN_LIMITS['dynamodb']
    rows = [row(4096, 1000, largest=300_000), row(16384, 1050, largest=500_000), row(65536, 1060, largest=600_000)]
    assert recommend(rows, read_cost=0).threshold_bytes == 65536
    chosen = recommend(rows, limit=dynamo, read_cost=0)
    assert chosen.threshold_bytes == 4096
    assert "fits DynamoDB's 400 KB item cap" in chosen.reason
    assert 'whose largest snapshot fits DynamoDB' in chosen.rule
    nothing = recommend(rows, limit=Limit('a limit of 10 bytes', 10), read_cost=0)
    assert nothing.threshold_bytes is None
    assert nothing.line().startswith('No recommendation: no threshold keeps the largest snapshot within')
    assert nothing.as_json()['threshold_bytes'] is None


DOCS = Path(__file__).resolve().parent.parent / 'docs' / 'tuning.md'


def test_rule_text_is_what_the_docs_state() -> None:
    page = DOCS.read_text().replace('\n', ' ')
    assert rule_text(0.10, None) in page  # the default read cost: 16 KiB
    assert rule_text(0.10, None, gaps=True) in page
    assert rule_text(0.10, None, read_cost=0) in page


def test_docs_python_example_agrees_with_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's program (run and output-checked by tests/test_docs_examples.py) measures what the CLI measures
    on the history it writes, recommends what the CLI recommends, and leaves no scratch folder behind."""
    (example,) = re.findall(r'```python\n(.*?)```', DOCS.read_text(), re.DOTALL)
    monkeypatch.chdir(tmp_path)
    exec(example, {'__name__': 'example'})
    printed = capsys.readouterr().out.splitlines()
    assert not (tmp_path / 'media').exists()
    result = succeeded(
        tune('history.json', '--store', 'memory://', '--thresholds', '16KiB,64KiB,256KiB', '--json', cwd=tmp_path)
    )
    report = json.loads(result.stdout)
    expected = [f'{row["threshold_bytes"]} {row["persisted_bytes_total"]} {row["blobs"]}' for row in report['rows']]
    assert printed[:3] == expected
    assert printed[3].startswith(f'Recommended threshold: {report["recommendation"]["threshold_bytes"] // 1024} KiB')


def test_a_deeply_nested_json_input_is_a_one_line_error(tmp_path: Path) -> None:
    """200,000 nested brackets: json's parser runs out of stack; tune says so in one line (issue 17 item 10)."""
    deep = tmp_path / 'deep.json'
    deep.write_text('[' * 200_000 + ']' * 200_000)
    line = bad(tune(deep, '--store', tmp_path / 'store', cwd=tmp_path))
    assert 'deep.json is JSON nested too deeply to read' in line
    assert 'RecursionError' not in line
    assert not (tmp_path / 'store').exists()


# -- step stores whose media live in another store (issue 17 item 12) ----------------------------


@pytest.fixture(scope='module')
def wrapped_step_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The layout of docs/integrations.md: OffloadingStepStore(FileStepStore('runs', media_store=None), media)."""
    from mediastash.integrations import OffloadingStepStore

    folder = tmp_path_factory.mktemp('wrapped')
    store = OffloadingStepStore(
        FileStepStore(folder / 'runs', media_store=None), media_store=DiskMediaStore(folder / 'media')
    )
    messages = asyncio.run(agent_run(store))
    return folder, ModelMessagesTypeAdapter.dump_python(messages, mode='json')


def test_tune_reads_a_wrapped_step_store_with_media(wrapped_step_store: tuple[Path, list[dict[str, Any]]]) -> None:
    folder, _ = wrapped_step_store
    before = tree_of(folder)
    line = bad(tune('runs', '--store', 'memory://', cwd=folder))
    assert 'pass --media URL' in line and 'OffloadingStepStore' in line

    result = succeeded(
        tune('runs', '--store', 'memory://', '--media', 'media', '--thresholds', '4KiB,1MiB', '--json', cwd=folder)
    )
    rows = rows_by_threshold(json.loads(result.stdout))
    assert (rows[4 * KiB]['blobs'], rows[4 * KiB]['media_bytes']) == (3, sum(IMAGE_SIZES) + len(REPORT))
    assert rows[4 * KiB]['snapshots'] == 3

    (folder / 'empty-media').mkdir()
    assert 'does not hold' in bad(tune('runs', '--store', 'memory://', '--media', 'empty-media', cwd=folder))
    assert 'does not exist' in bad(tune('runs', '--store', 'memory://', '--media', 'nowhere', cwd=folder))
    assert tree_of(folder) == before | {'empty-media'}  # inputs and media only read; nothing created


async def test_wrapped_and_harness_written_histories_come_back_exactly(
    wrapped_step_store: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    from mediastash.tuning import HistoryInputError, load_inputs

    folder, expected = wrapped_step_store
    (history,) = await load_inputs([folder / 'runs'], media_store=DiskMediaStore(folder / 'media'))
    assert history.messages == expected

    # A harness store that externalized into a mediastash store of its own (no envelopes, the harness's markers).
    media = DiskMediaStore(tmp_path / 'elsewhere')
    messages = await agent_run(FileStepStore(tmp_path / 'steps', media_store=media))
    (history,) = await load_inputs([tmp_path / 'steps'], media_store=media)
    assert history.messages == ModelMessagesTypeAdapter.dump_python(messages, mode='json')
    with pytest.raises(HistoryInputError, match='pass --media URL'):
        await load_inputs([tmp_path / 'steps'])

    # A lean history file, as mediastash externalize writes it.
    from mediastash import externalize_media

    lean = await externalize_media(expected, media_store=media, threshold_bytes=4 * KiB)
    (tmp_path / 'lean.json').write_text(json.dumps(lean))
    (history,) = await load_inputs([tmp_path / 'lean.json'], media_store=media)
    assert history.messages == expected
    with pytest.raises(HistoryInputError, match='lean history'):
        await load_inputs([tmp_path / 'lean.json'])


# -- scratch folders (issue 17 item 14) ----------------------------------------------------------


@pytest.mark.parametrize('form', ['folder', 'sqlite'])
def test_tune_removes_the_folders_it_created_parents_included(
    known_answer_file: Path, tmp_path: Path, form: str
) -> None:
    kept = tmp_path / 'kept'
    kept.mkdir()  # existed (and empty) before tune: never removed
    url = 'kept/new/deeper/store' if form == 'folder' else 'sqlite:///kept/new/deeper/media.db'
    before = tree_of(tmp_path)
    succeeded(tune(known_answer_file, '--store', url, '--thresholds', '16KiB,64KiB', cwd=tmp_path))
    assert tree_of(tmp_path) == before
    assert kept.is_dir()

    failed = tune(tmp_path / 'missing.json', '--store', url, cwd=tmp_path)  # fails after the store was opened
    assert 'no such file or folder' in bad(failed)
    assert tree_of(tmp_path) == before


def test_tune_leaves_what_another_writer_put_in_a_folder_it_created(tmp_path: Path) -> None:
    from mediastash.tuning import UrlNamespaces

    async def sweep_while_someone_writes() -> None:
        async with UrlNamespaces(str(tmp_path / 'new' / 'store')) as namespaces:
            (tmp_path / 'new' / 'theirs.txt').write_text('written by someone else meanwhile')
            async with namespaces.namespace('1') as store:
                await store.put(b'scratch')

    asyncio.run(sweep_while_someone_writes())
    assert tree_of(tmp_path) == {'new', 'new/theirs.txt'}


async def test_a_wrapped_sqlite_step_store_with_media_in_another_database(tmp_path: Path) -> None:
    from pydantic_ai_harness.step_persistence import ContinuableSnapshot, RunRecord

    from mediastash.integrations import OffloadingStepStore
    from mediastash.tuning import HistoryInputError, load_inputs

    media = SqliteMediaStore(database=tmp_path / 'media.db')
    store = OffloadingStepStore(SqliteStepStore(database=tmp_path / 'steps.db', media_store=None), media_store=media)
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[UserPromptPart(content=['look', BinaryContent(data=os.urandom(200_000), media_type='image/png')])]
        ),
        ModelResponse(parts=[TextPart('seen')]),
    ]
    await store.register_run(RunRecord(run_id='r'))
    await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=1, messages=messages))
    with pytest.raises(HistoryInputError, match='pass --media URL'):
        await load_inputs([tmp_path / 'steps.db'])
    (history,) = await load_inputs([tmp_path / 'steps.db'], media_store=media)
    assert history.messages == ModelMessagesTypeAdapter.dump_python(messages, mode='json')
    await media.aclose()


# -- payload sizes, the gap rule and the warnings -------------------------------------------------


def search_rows(count: int) -> list[dict[str, Any]]:
    return [{'id': i, 'title': f'result {i}', 'score': i / 3, 'tags': ['x', 'y']} for i in range(count)]


def tool_output_history(outputs: list[Any], *, steps_after: int = 0) -> list[ModelMessage]:
    """A run whose tools return ``outputs`` (one step each), then ``steps_after`` short steps."""
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(content='go')])]
    for index, output in enumerate(outputs):
        messages.append(ModelResponse(parts=[ToolCallPart('search', {'q': index}, f'c{index}')]))
        messages.append(ModelRequest(parts=[ToolReturnPart('search', output, f'c{index}')]))
    for step in range(steps_after):
        messages.append(ModelResponse(parts=[TextPart(f'thinking {step}')]))
        messages.append(ModelRequest(parts=[UserPromptPart(content=f'go on {step}')]))
    messages.append(ModelResponse(parts=[TextPart('done')]))
    return messages


def write_history(path: Path, messages: list[ModelMessage]) -> Path:
    path.write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    return path


def test_three_structured_outputs_are_swept_and_warned_about(tmp_path: Path) -> None:
    """The issue's case: three list-of-dict outputs of about 380, 400 and 700 KB."""
    outputs = [search_rows(5400), search_rows(5700), search_rows(10_000)]
    path = write_history(tmp_path / 'three.json', tool_output_history(outputs))
    report = json.loads(succeeded(tune(path, '--store', 'memory://', '--json', cwd=tmp_path)).stdout)
    sizes = [len(json.dumps(output, separators=(',', ':'))) for output in outputs]
    assert sorted(sizes) == [size for size in report['payload_sizes'] if size > 1000]
    assert report['payload_sizes'] == sorted(report['payload_sizes'])
    assert sum(bucket['count'] for bucket in report['payload_size_histogram']) == len(report['payload_sizes'])
    rows = rows_by_threshold(report)
    assert rows[256 * KiB]['blobs'] == 3 and rows[MiB]['blobs'] == 0  # the structured outputs are swept
    assert report['recommendation']['threshold_bytes'] == 64 * KiB  # the middle of the gap, not 256 KiB
    assert 'middle of its gap' in report['recommendation']['reason']
    (few,) = [w for w in report['warnings'] if 'fewer than 20' in w]
    assert 'rests on 5 payloads' in few

    text = succeeded(tune(path, '--store', 'memory://', cwd=tmp_path)).stdout
    assert 'Payloads: 5 (smallest 2 B' in text
    assert f'Warning: {few}' in text.replace('\n', ' ') or 'Warning: The recommendation rests on 5 payloads' in text


def spread_sizes() -> list[int]:
    """200 sizes from 100 B to about 650 KB, log-spaced (4.5% apart): no cluster, no gap."""
    return [int(100 * 1.045**index) for index in range(200)]


def test_many_spread_payloads_over_several_steps_give_no_warning(tmp_path: Path) -> None:
    texts = [UserPromptPart(content='t' * size) for size in spread_sizes()]
    messages: list[ModelMessage] = [ModelRequest(parts=texts)]
    for step in range(3):
        messages.append(ModelResponse(parts=[TextPart(f'answer {step}')]))
        messages.append(ModelRequest(parts=[UserPromptPart(content=f'next {step}')]))
    path = write_history(tmp_path / 'spread.json', messages)
    report = json.loads(succeeded(tune(path, '--store', 'memory://', '--json', cwd=tmp_path)).stdout)
    assert len(report['payload_sizes']) == 200 + 6  # the six short prompts and answers count too
    assert report['recommendation']['threshold_bytes'] is not None
    assert report['warnings'] == []


def test_advice_on_crafted_sizes() -> None:
    rows = [row(t, 1000, blobs=3) for t in (4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB)] + [row(MiB, 9000, blobs=0)]
    three = [383_000, 400_000, 700_000]
    chosen = recommend(rows, payload_sizes=three, read_cost=0)
    assert chosen.threshold_bytes == 64 * KiB  # the log middle of 4 KiB .. 383 KB is about 39 KB: nearest 64 KiB
    assert recommend(rows, read_cost=0).threshold_bytes == 256 * KiB  # without sizes: the largest, as before
    warned = advice(chosen, three, [('h', 5)])
    assert len(warned) == 1 and 'rests on 3 payloads' in warned[0]

    cluster = [300_000, 320_000, 700_000]  # 256 KiB is 87% of 300 KB
    close = recommend([row(256 * KiB, 1000, blobs=3), row(MiB, 9000, blobs=0)], payload_sizes=cluster, read_cost=0)
    assert close.threshold_bytes == 256 * KiB
    spread = sorted(cluster + [1000 * i for i in range(1, 40)])
    (headroom,) = advice(close, spread, [('h', 5)])
    assert 'within 25% below the smallest payload it moves (293.0 KiB), and no payload lies just below' in headroom
    assert advice(close, [*spread, 250_000], [('h', 5)]) == []  # a payload just below: inside a continuum

    (short,) = advice(chosen, spread_sizes(), [('a', 2), ('b', 9)])
    assert '1 history has fewer than 3 steps (a)' in short
    assert advice(chosen, [], [('h', 5)])[0].startswith('The histories hold no payload')
    assert size_histogram([1, 3, 4, 5, 1024]) == [(1, 2, 1), (2, 4, 1), (4, 8, 2), (1024, 2048, 1)]


def test_payload_sizes_are_measured_as_the_threshold_is(tmp_path: Path) -> None:
    image = os.urandom(5000)
    messages = tool_output_history([search_rows(10), 'é' * 10])
    messages.append(
        ModelRequest(parts=[UserPromptPart(content=['look', BinaryContent(image, media_type='image/png')])])
    )
    history = load_history_file(write_history(tmp_path / 'h.json', messages))
    sizes = history_payload_sizes([history])
    assert sorted(sizes) == sorted(
        [len('go'), len(json.dumps(search_rows(10), separators=(',', ':'))), 20, len('done'), 5000]  # 'look' is no dict
    )
    assert steps_by_history([history]) == [(history.name, 3)]
