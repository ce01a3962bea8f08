"""The ``mediastash`` command line (``python -m mediastash`` works too).

Each command lives in its own module with a ``register(commands, common)``
function that adds its subparser (with ``common`` as a parent, for
``--quiet``, ``--json`` and ``--json-file``) and sets ``handler``: a function
``(args, ui) -> int`` or a coroutine function of the same shape. ``main``
turns user errors into one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path

from mediastash import __version__
from mediastash.cli import _erase, _gc, _ops, _sync, _tune
from mediastash.cli._args import add_threshold, image_bytes, integer, parse_size, positive_int, split_size_problem
from mediastash.cli._output import check_output
from mediastash.cli._ui import EXIT_FAILED, Ui, UserError, describe_error

__all__ = ['build_parser', 'main', 'parse_size']


def common_options() -> argparse.ArgumentParser:
    """Options every command takes: ``--quiet``, ``--json`` and ``--json-file FILE``.

    ``--json`` is a plain flag: an optional value would swallow the positional
    argument after it (``ls --json DIR``), so a file is named by its own option.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument('-q', '--quiet', action='store_true', help='no progress output')
    common.add_argument('--json', action='store_true', help='print the result as JSON on stdout instead of tables')
    common.add_argument(
        '--json-file',
        default=None,
        metavar='FILE',
        help='also write the result as JSON to FILE (replaced atomically; tables still print unless --json)',
    )
    return common


def _register_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    add_threshold(demo, default=64 * 1024, verb='externalize')
    demo.add_argument('--steps', type=positive_int, default=20, metavar='N', help='model round trips (default: 20)')
    demo.add_argument('--seed', type=integer, default=0, metavar='S', help='random seed of the history (default: 0)')
    demo.add_argument(
        '--image-bytes',
        type=image_bytes,
        default=None,
        metavar='BYTES',
        help='total size of the distinct images (default: 0.8MiB per step); 0 for none, else at least 50KiB',
    )
    demo.set_defaults(handler=_run_demo)


async def _run_demo(args: argparse.Namespace, ui: Ui) -> int:
    from mediastash.demo import DemoOptions, run_demo

    options = DemoOptions(
        directory=args.directory,
        threshold=args.threshold,
        steps=args.steps,
        seed=args.seed,
        image_bytes=args.image_bytes,
    )
    return await run_demo(options)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog='mediastash',
        description='Keep large payloads out of persisted AI-agent message histories.',
    )
    parser.add_argument('--version', action='version', version=f'mediastash {__version__}')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND', required=True)
    _register_demo(commands)
    common = common_options()
    for module in (_ops, _tune, _gc, _erase, _sync):
        module.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for bad arguments, as argparse does; 1 for user errors)."""
    parser = build_parser()
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        problem = split_size_problem(words)
        if problem is not None:
            parser.error(problem)
        args = parser.parse_args(words)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    json_file = getattr(args, 'json_file', None)
    as_json = bool(getattr(args, 'json', False)) or json_file == '-'
    json_file = None if json_file == '-' else json_file  # '-' is stdout, as for IN and OUT
    ui = Ui(quiet=bool(getattr(args, 'quiet', False)), as_json=as_json, json_file=json_file)
    try:
        if json_file is not None:
            check_output(json_file)  # before the work, not after it
        outcome = args.handler(args, ui)
        if inspect.isawaitable(outcome):
            outcome = asyncio.run(_awaited(outcome))
        return int(outcome)
    except KeyboardInterrupt:
        return 130
    except UserError as error:
        ui.error(str(error))
        return EXIT_FAILED
    except Exception as error:
        message = describe_error(error)
        if message is None:
            raise
        ui.error(message)
        return EXIT_FAILED


async def _awaited(outcome: object) -> object:
    assert inspect.isawaitable(outcome)
    return await outcome
