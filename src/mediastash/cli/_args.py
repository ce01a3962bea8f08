"""What the commands share to declare their arguments: byte sizes, positive integers, a subcommand."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    'add_command',
    'add_namespace',
    'add_threshold',
    'image_bytes',
    'integer',
    'namespace_name',
    'parse_shard',
    'parse_size',
    'positive_int',
]

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


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (``0/4`` .. ``3/4``): shard K, counted from 0, of N equal parts of the digest space."""
    match = re.fullmatch(r'\s*(\d+)\s*/\s*(\d+)\s*', text)
    if match is None:
        raise argparse.ArgumentTypeError(f'expected K/N such as 0/4 (shard K, from 0, of N), got {text!r}')
    index, count = int(match[1]), int(match[2])
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f'the shard K/N needs 0 <= K < N, got {text!r}')
    return index, count


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {value}')
    return value


def image_bytes(text: str) -> int:
    value = parse_size(text)
    if 0 < value < _MIN_IMAGE_BYTES:
        raise argparse.ArgumentTypeError(f'expected 0 (no images) or at least 50KiB, got {value:,} bytes')
    return value


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected an integer, got {text!r}') from None


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    name: str,
    handler: Callable[..., Any],
    *,
    help: str,
    description: str,
) -> argparse.ArgumentParser:
    """A subcommand taking the options every command takes (``common``), run by ``handler``."""
    parser = commands.add_parser(name, parents=[common], help=help, description=description)
    parser.set_defaults(handler=handler)
    return parser


def namespace_name(text: str) -> str:
    """A namespace name for ``--namespace``; refused without repeating it (it may name a tenant)."""
    from mediastash.errors import InvalidNamespaceError
    from mediastash.stores._namespaces import check_namespace_name

    try:
        return check_namespace_name(text, parameter='--namespace')
    except InvalidNamespaceError:
        raise argparse.ArgumentTypeError(
            'expected a namespace name: 1 to 64 of A-Z a-z 0-9 . _ - and not only dots (the value is not shown)'
        ) from None


def add_namespace(parser: argparse.ArgumentParser, *, required: bool = False, what: str = 'work in') -> None:
    """``--namespace NAME``: the tenant namespace of the store the command should ``what`` (see docs/stores.md)."""
    parser.add_argument(
        '--namespace',
        type=namespace_name,
        required=required,
        metavar='NAME',
        help=f'the namespace of the store to {what}'
        + ('' if required else " (default: the store itself; a URL's ?namespace=NAME works too)"),
    )


def add_threshold(parser: argparse.ArgumentParser, *, default: int, verb: str) -> None:
    """``--threshold BYTES``: the payload size from which a command ``verb``s payloads (``default`` in KiB)."""
    parser.add_argument(
        '--threshold',
        type=parse_size,
        default=default,
        metavar='BYTES',
        help=f'{verb} payloads of at least this many bytes (default: {default >> 10}KiB)',
    )
