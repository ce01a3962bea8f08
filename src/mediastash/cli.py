"""The ``mediastash`` command line (``mediastash demo``; ``python -m mediastash`` works too)."""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

from mediastash import __version__

__all__ = ['build_parser', 'main', 'parse_size']

_SIZE = re.compile(r'\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|k|mb|mib|m|gb|gib|g)?\s*', re.IGNORECASE)
_UNITS = {'b': 1, 'k': 1 << 10, 'kb': 1 << 10, 'kib': 1 << 10, 'm': 1 << 20, 'mb': 1 << 20, 'mib': 1 << 20}
_UNITS |= {'g': 1 << 30, 'gb': 1 << 30, 'gib': 1 << 30}
_MIN_IMAGE_BYTES = 50 << 10


def parse_size(text: str) -> int:
    """Parse a byte count: ``65536``, ``64KiB``, ``1.5MiB`` (K/M/G units are binary). Refuses negatives."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f'expected a non-negative byte count such as 65536, 64KiB or 2MiB, got {text!r}'
        )
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or 'b').lower()])


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {value}')
    return value


def _image_bytes(text: str) -> int:
    value = parse_size(text)
    if 0 < value < _MIN_IMAGE_BYTES:
        raise argparse.ArgumentTypeError(f'expected 0 (no images) or at least 50KiB, got {value:,} bytes')
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected an integer, got {text!r}') from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog='mediastash',
        description='Keep large payloads out of persisted AI-agent message histories.',
    )
    parser.add_argument('--version', action='version', version=f'mediastash {__version__}')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND', required=True)
    demo = commands.add_parser(
        'demo',
        help='externalize a realistic synthetic history into a disk store and restore it',
        description=(
            'Build a synthetic agent history (images, large tool outputs, many small parts), externalize it '
            'into a DiskMediaStore, restore it and check the round trip, then re-save every step snapshot '
            'with and without the known-blob cache.'
        ),
    )
    demo.add_argument(
        '--directory', type=Path, default=None, metavar='DIR', help='store blobs here (default: a temporary folder)'
    )
    demo.add_argument(
        '--threshold',
        type=parse_size,
        default=64 * 1024,
        metavar='BYTES',
        help='externalize payloads of at least this many bytes (default: 64KiB)',
    )
    demo.add_argument('--steps', type=_positive_int, default=20, metavar='N', help='model round trips (default: 20)')
    demo.add_argument('--seed', type=_int, default=0, metavar='S', help='random seed of the history (default: 0)')
    demo.add_argument(
        '--image-bytes',
        type=_image_bytes,
        default=None,
        metavar='BYTES',
        help='total size of the distinct images (default: 0.8MiB per step); 0 for none, else at least 50KiB',
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for bad arguments, as argparse does)."""
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    if args.command == 'demo':
        from mediastash.demo import DemoOptions, run_demo

        options = DemoOptions(
            directory=args.directory,
            threshold=args.threshold,
            steps=args.steps,
            seed=args.seed,
            image_bytes=args.image_bytes,
        )
        try:
            return asyncio.run(run_demo(options))
        except KeyboardInterrupt:
            return 130
    parser.error(f'unknown command {args.command!r}')
    return 2  # unreachable: parser.error exits
