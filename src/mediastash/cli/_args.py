"""What the commands share to declare their arguments: sizes, durations, positive integers, a subcommand."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Final

from mediastash import _units

__all__ = [
    'SIZE_OPTIONS',
    'add_command',
    'add_grace',
    'add_jobs',
    'add_namespace',
    'add_shard',
    'add_threshold',
    'image_bytes',
    'integer',
    'namespace_name',
    'parse_duration',
    'parse_shard',
    'parse_size',
    'positive_int',
    'split_size_problem',
]

_MIN_IMAGE_BYTES = 50 << 10

SIZE_OPTIONS: Final = frozenset({'--threshold', '--thresholds', '--limit', '--image-bytes', '--read-cost'})
"""The options whose values are sizes (``split_size_problem`` looks for a unit split from their number)."""
_SPLIT_UNIT = re.compile(r'([A-Za-z]+)(?:,.*)?', re.DOTALL)
_DURATION_PART: Final = re.compile(r'(\d+(?:\.\d+)?)\s*(d|h|m|s)', re.IGNORECASE)
_DURATION: Final = re.compile(r'\s*(?:\d+(?:\.\d+)?\s*[dhms]\s*)+', re.IGNORECASE)
_UNIT_SECONDS: Final = {'d': 86400.0, 'h': 3600.0, 'm': 60.0, 's': 1.0}


def parse_size(text: str) -> int:
    """A byte count as ``mediastash._units.parse_size`` reads it (``64KiB`` = 65,536, ``64KB`` = 64,000).

    For ``type=`` of an option: a bad size raises ``argparse.ArgumentTypeError`` saying what is accepted.
    """
    try:
        return _units.parse_size(text)
    except _units.SizeSyntaxError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def split_size_problem(argv: Sequence[str]) -> str | None:
    """Why ``argv`` cannot mean what it says when a size option's unit stands apart (``--thresholds 4 KiB``).

    The shell splits ``4 KiB`` into two words, so the option would get ``4``
    bytes and ``KiB`` would become a positional argument: refused, naming
    the form that works. ``None`` when there is no such split.
    """
    for index, word in enumerate(argv):
        option, equals, value = word.partition('=')
        if option not in SIZE_OPTIONS:
            continue
        if not equals:
            if index + 1 >= len(argv):
                continue
            value = argv[index + 1]
        following = argv[index + (1 if equals else 2) :][:1]
        split = _SPLIT_UNIT.fullmatch(following[0]) if following else None
        if value[-1:].isdigit() and split is not None and split.group(1).lower() in _units.UNIT_WORDS:
            return (
                f'argument {option}: write each size without a space, such as 4KiB or 400KB (the unit was '
                "given as a separate word; a path that is only a unit's name is written ./NAME)"
            )
    return None


def parse_duration(text: str) -> timedelta:
    """``24h``, ``90m``, ``1h30m``, ``2d``, ``45s`` or plain seconds (``0``, ``3600``)."""
    stripped = text.strip()
    if re.fullmatch(r'-?\d+(?:\.\d+)?', stripped):
        seconds = float(stripped)
    elif _DURATION.fullmatch(stripped):
        seconds = sum(float(number) * _UNIT_SECONDS[unit.lower()] for number, unit in _DURATION_PART.findall(stripped))
    else:
        raise argparse.ArgumentTypeError(
            f'expected a duration such as 24h, 90m, 1h30m, 2d or 3600 (seconds), got {text!r}'
        )
    if seconds < 0:
        raise argparse.ArgumentTypeError(f'a duration cannot be negative, got {text!r}')
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise argparse.ArgumentTypeError(f'the duration {text!r} is too long') from None


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
    store_url: bool = False,
) -> argparse.ArgumentParser:
    """A subcommand taking the options every command takes (``common``), run by ``handler``.

    ``store_url``: the command works on one store, given as its first argument ``URL``, with ``--namespace``.
    """
    parser = commands.add_parser(name, parents=[common], help=help, description=description)
    parser.set_defaults(handler=handler)
    if store_url:
        from mediastash.stores.registry import help_forms

        parser.add_argument('url', metavar='URL', help=f'the store: {help_forms()}')
        add_namespace(parser)
    return parser


def add_shard(parser: argparse.ArgumentParser, *, verb: str, note: str) -> None:
    """``--shard K/N``: the command ``verb``s one shard of the digest space only; ``note`` says how N runs combine."""
    parser.add_argument(
        '--shard',
        type=parse_shard,
        metavar='K/N',
        help=f'{verb} only shard K (from 0) of N equal parts of the digest space{note}',
    )


def add_jobs(parser: argparse.ArgumentParser, *, default: int, what: str) -> None:
    """``--jobs N``: how many ``what`` (say ``blobs copied``) the command has in flight at once."""
    parser.add_argument(
        '--jobs', type=positive_int, default=default, metavar='N', help=f'{what} at once (default: {default})'
    )


def add_grace(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--grace DURATION`` (default 24h): blobs written or touched more recently than this are never deleted."""
    parser.add_argument('--grace', type=parse_duration, default=timedelta(hours=24), metavar='DURATION', help=help)


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
