"""``mediastash demo`` end to end, through ``main`` and ``python -m mediastash``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mediastash.cli import main, parse_size


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
