"""``mediastash demo`` end to end, through ``main`` and ``python -m mediastash``."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mediastash.cli import build_parser, main, parse_size


def test_demo_round_trips_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(['demo', '--directory', str(tmp_path), '--steps', '5', '--image-bytes', '1MiB', '--seed', '3'])
    out = capsys.readouterr().out
    assert code == 0, out
    assert 'mediastash demo: 5 steps, 1.0 MiB of images' in out
    assert re.search(r'externalize took\s+\d', out)
    assert re.search(r'JSON before\s+[\d.]+ [KM]iB \([\d,]+ bytes\)', out)
    assert re.search(r'JSON after\s+[\d.]+ [KM]iB \([\d,]+ bytes\), [\d,.]+x smaller', out)
    blobs = re.search(r'blobs stored\s+(\d+) \(', out)
    assert blobs is not None and int(blobs.group(1)) > 0
    assert 'round trip            identical' in out
    assert re.search(r'with the known-blob cache\s+.*, 0 store\.put calls', out)
    uncached = re.search(r'without it \(known_blobs=False\)\s+.*, (\d+) store\.put calls', out)
    assert uncached is not None and int(uncached.group(1)) > 0
    assert 'both ways give identical lean snapshots' in out
    assert list(tmp_path.glob('*.bin'))


def test_demo_threshold_changes_what_moves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(['demo', '--directory', str(tmp_path), '--steps', '3', '--image-bytes', '0', '--threshold', '16MiB'])
    out = capsys.readouterr().out
    assert code == 0, out
    assert 'blobs stored          0 (0 B) in 0 put calls' in out
    assert 'round trip            identical' in out


@pytest.mark.parametrize(
    ('argv', 'message'),
    [
        (['demo', '--threshold', '-1'], 'argument --threshold: expected a non-negative byte count'),
        (['demo', '--threshold', 'lots'], 'argument --threshold: expected a non-negative byte count'),
        (['demo', '--steps', '0'], 'argument --steps: expected a positive integer, got 0'),
        (['demo', '--image-bytes', '10KiB'], 'argument --image-bytes: expected 0 (no images) or at least 50KiB'),
        ([], 'required: COMMAND'),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ''


@pytest.mark.parametrize(
    ('text', 'size'), [('65536', 65536), ('64KiB', 65536), ('64k', 65536), ('1.5MiB', 1572864), ('1G', 1 << 30)]
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_python_dash_m(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            '-m',
            'mediastash',
            'demo',
            '--directory',
            str(tmp_path),
            '--steps',
            '2',
            '--image-bytes',
            '0',
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert 'round trip            identical' in result.stdout


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser, by name, as ``build_parser`` makes them."""
    (commands,) = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(commands.choices)


def argv_with_json_first(name: str, parser: argparse.ArgumentParser) -> tuple[list[str], dict[str, object]]:
    """``NAME --json`` then a value for every positional and required option; the values each ``dest`` should get."""
    argv, required = [name, '--json'], []
    expected: dict[str, object] = {}
    for action in parser._actions:
        if action.option_strings and not action.required:
            continue
        value = f'{action.dest}-value'
        converted = Path(value) if action.type is Path else value
        expected[action.dest] = [converted] if action.nargs in ('*', '+') else converted
        if action.option_strings:
            required += [action.option_strings[-1], value]
        else:
            argv.append(value)
    return argv + required, expected


JSON_COMMANDS = sorted(name for name, parser in subcommands().items() if '--json' in parser._option_string_actions)


@pytest.mark.parametrize('name', JSON_COMMANDS)
def test_json_is_a_flag_that_never_takes_the_next_argument(name: str) -> None:
    """``--json`` before a positional leaves it to the command (issue 17, item 13); every command takes both options."""
    parser = subcommands()[name]
    argv, expected = argv_with_json_first(name, parser)
    args = build_parser().parse_args(argv)
    assert args.json is True and args.json_file is None
    for dest, value in expected.items():
        assert getattr(args, dest) == value, (argv, dest)
    with_file = build_parser().parse_args([*argv[:2], '--json-file', 'out.json', *argv[2:]])
    assert with_file.json is True and with_file.json_file == 'out.json'
    assert build_parser().parse_args([argv[0], *argv[2:]]).json is False


def test_every_command_but_demo_has_json_options() -> None:
    parsers = subcommands()
    assert {name for name, parser in parsers.items() if '--json-file' in parser._option_string_actions} == (
        set(parsers) - {'demo'}
    )


async def test_ls_json_before_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mediastash import DiskMediaStore

    async with DiskMediaStore(tmp_path / 'media') as store:
        uri = await store.put(b'listed')
    summary = tmp_path / 'ls.json'
    code = await asyncio.to_thread(main, ['ls', '--json', '--json-file', str(summary), str(tmp_path / 'media')])
    out = capsys.readouterr().out
    assert code == 0
    assert json.loads(out) == json.loads(summary.read_text()) == [{'uri': uri}]
    assert main(['ls', '--json-file', str(tmp_path / 'no' / 'ls.json'), str(tmp_path / 'media')]) == 1
    assert 'does not exist' in capsys.readouterr().err
    assert await asyncio.to_thread(main, ['ls', '--json-file', '-', str(tmp_path / 'media')]) == 0
    assert json.loads(capsys.readouterr().out) == [{'uri': uri}]
    assert not (tmp_path / '-').exists()
