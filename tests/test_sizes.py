"""Sizes are read one way everywhere (issue 28 item 7c): ``KB`` is 1,000 bytes and ``KiB`` 1,024, in every
command-line option and store URL parameter that takes a size, and a unit split from its number is refused."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mediastash import open_store
from mediastash._units import SizeSyntaxError, parse_size
from mediastash.cli import build_parser, main
from mediastash.cli._args import SIZE_OPTIONS
from mediastash.errors import InvalidStoreConfiguration


@pytest.mark.parametrize(
    ('text', 'size'),
    [
        ('0', 0),
        ('65536', 65536),
        ('1KB', 1000),
        ('1KiB', 1024),
        ('1MB', 1_000_000),
        ('1MiB', 1_048_576),
        ('1GB', 1_000_000_000),
        ('1GiB', 1_073_741_824),
        ('400kb', 400_000),
        ('64k', 65536),  # a bare K, M or G is binary, as in coreutils
        ('2M', 2 << 20),
        ('1.5MiB', 1_572_864),
        ('1.1MB', 1_100_000),  # exact: no float rounding
        ('0.5KB', 500),
        ('4 KiB', 4096),
        (' 7B ', 7),
    ],
)
def test_decimal_and_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    'text', ['', '-1', '1.5B', '0.1KiB', '4 parsecs', 'KiB', '1e6', '4KiB4', '\u0664KiB', '12 quatloos']
)
def test_what_is_not_a_size_is_refused_without_echoing_it(text: str) -> None:
    with pytest.raises(SizeSyntaxError) as raised:
        parse_size(text)
    message = str(raised.value)
    assert message.startswith('expected a non-negative byte count such as 65536, 64KiB (65,536 bytes)')
    for echoed in ('parsecs', 'quatloos', '\u0664', '1e6', '0.1', '1.5', '-1'):
        assert echoed not in message


def size_actions() -> list[tuple[str, argparse.Action]]:
    """Every option of every subcommand whose value is a size (its metavar says BYTES or SIZES)."""
    (commands,) = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    found = []
    for name, parser in commands.choices.items():
        for action in parser._actions:
            if action.option_strings and action.metavar and any(w in str(action.metavar) for w in ('BYTES', 'SIZES')):
                found.append((name, action))
    return found


def bytes_of(value: Any) -> int:
    """A parsed size option's value as bytes: an int, a list of thresholds, or a ``Limit``."""
    if isinstance(value, list):
        (value,) = value
    return value if isinstance(value, int) else int(value.bytes)


def test_every_size_option_reads_sizes_the_same_way() -> None:
    actions = size_actions()
    assert {(name, action.option_strings[-1]) for name, action in actions} >= {
        ('demo', '--threshold'),
        ('demo', '--image-bytes'),
        ('externalize', '--threshold'),
        ('tune', '--thresholds'),
        ('tune', '--limit'),
        ('tune', '--read-cost'),
    }
    for name, action in actions:
        assert action.option_strings[-1] in SIZE_OPTIONS, (name, action.option_strings)
        assert action.type is not None
        assert bytes_of(action.type('1MB')) == 1_000_000, (name, action.option_strings)
        assert bytes_of(action.type('1MiB')) == 1_048_576, (name, action.option_strings)
        with pytest.raises(argparse.ArgumentTypeError):
            action.type('1 parsec')


def tune_json(tmp_path: Path, *args: str) -> dict[str, Any]:
    """``mediastash tune --json`` on a small history (a 300 KB image, two steps), as a user runs it."""
    from pydantic_ai.messages import (
        BinaryContent,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )

    image = BinaryContent(b'\x89PNG' * 75_000, media_type='image/png')
    messages = [
        ModelRequest(parts=[UserPromptPart(content=['look', image])]),
        ModelResponse(parts=[TextPart('seen')]),
        ModelRequest(parts=[UserPromptPart(content='more')]),
        ModelResponse(parts=[TextPart('done')]),
    ]
    (tmp_path / 'h.json').write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    result = subprocess.run(
        [sys.executable, '-m', 'mediastash', 'tune', 'h.json', '--store', 'memory://', '--json', *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_tune_takes_decimal_megabytes_as_a_million_bytes(tmp_path: Path) -> None:
    report = tune_json(tmp_path, '--thresholds', '1MB,1MiB', '--limit', '400KB')
    assert [row['threshold_bytes'] for row in report['rows']] == [1_000_000, 1_048_576]
    assert report['limit'] == {'name': 'a limit of 400,000 bytes', 'bytes': 400_000}


@pytest.mark.parametrize(
    'argv',
    [
        ['tune', 'h.json', '--store', 'memory://', '--thresholds', '4', 'KiB'],
        ['tune', 'h.json', '--store', 'memory://', '--thresholds', '4KiB,16', 'KiB'],
        ['tune', 'h.json', '--store', 'memory://', '--thresholds=4', 'KiB,16KiB'],
        ['tune', '--limit', '400', 'KB', 'h.json', '--store', 'memory://'],
        ['tune', 'h.json', '--store', 'memory://', '--read-cost', '16', 'kib'],
        ['demo', '--threshold', '64', 'KiB'],
        ['externalize', 'in.json', 'out.json', '--store', 'media', '--threshold', '1', 'MB'],
    ],
)
def test_a_unit_split_from_its_number_is_refused_naming_the_form(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    error = capsys.readouterr().err
    option = next(word.partition('=')[0] for word in argv if word.partition('=')[0] in SIZE_OPTIONS)
    assert f'error: argument {option}: write each size without a space, such as 4KiB or 400KB' in error
    assert list(tmp_path.iterdir()) == []  # refused before any work


def test_a_quoted_size_with_a_space_parses(tmp_path: Path) -> None:
    report = tune_json(tmp_path, '--thresholds', '64 KiB, 1 MB', '--read-cost', '16 KiB')
    assert [row['threshold_bytes'] for row in report['rows']] == [65_536, 1_000_000]
    assert report['read_cost_bytes'] == 16_384


@pytest.mark.parametrize(
    ('url', 'expected'),
    [
        (
            's3://bucket?part_size=8MiB&multipart_threshold=16MB',
            {'part_size': 8 << 20, 'multipart_threshold': 16 * 10**6},
        ),
        ('s3://bucket?part_size=8388608', {'part_size': 8 << 20}),
        ('postgresql://127.0.0.1/db?chunk_size_bytes=256KB', {'chunk_size_bytes': 256_000}),
        ('mongodb://127.0.0.1/db?chunk_size_bytes=255KiB', {'chunk_size_bytes': 255 << 10}),
    ],
)
def test_store_url_sizes_read_units_the_same_way(url: str, expected: dict[str, int]) -> None:
    """Each backend's options read a URL's sizes through the one mapper (nothing is opened or contacted)."""
    from mediastash.stores.mongo import MongoOptions
    from mediastash.stores.postgres import PostgresOptions
    from mediastash.stores.s3 import S3Options

    kind = {'s3': S3Options, 'postgresql': PostgresOptions, 'mongodb': MongoOptions}[url.partition(':')[0]]
    options = kind.from_url(url)
    assert {name: getattr(options, name) for name in expected} == expected


@pytest.mark.parametrize(
    'url',
    ['s3://bucket?part_size=8parsecs', 's3://bucket?multipart_threshold=-1', 'mongodb://h/db?chunk_size_bytes=1.5B'],
)
def test_a_bad_store_url_size_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(InvalidStoreConfiguration, match=r'URL parameter \w+= must be a byte count') as raised:
        open_store(url)
    value = url.rpartition('=')[2]
    assert value not in str(raised.value)
