"""``mediastash gc``: collect blobs no root references (dry run by default)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any, Final

from mediastash.cli._args import add_grace, add_namespace, add_shard, positive_int
from mediastash.cli._ui import Step, Ui
from mediastash.roots import root_kinds_help
from mediastash.stores.registry import help_forms

__all__ = ['register']

_PHASES: Final = {'mark': 'reading roots', 'list': 'listing blobs', 'delete': 'deleting'}
_ROOT_HELP = (
    'what keeps blobs alive: {kinds}, or any folder: every file below it is read as the root it is, and a file of '
    'no known kind stops the collection; without a KIND: prefix the kind is recognised from the path'
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add the ``gc`` command."""
    gc = commands.add_parser(
        'gc',
        parents=[common],
        help='delete blobs no root references and nobody wrote for the grace period (dry run unless --delete)',
        description='Mark every blob the roots reference, then list the store and report (or, with --delete, '
        'delete) each blob that no root references and that was neither written nor touched during the grace '
        'period. Blobs of unknown age are kept unless --include-unknown-age. See docs/gc.md.',
    )
    gc.add_argument(
        '--store',
        required=True,
        metavar='URL',
        help=f'the store: {help_forms()}',
    )
    add_namespace(gc, what='collect')
    gc.add_argument(
        '--roots', required=True, nargs='+', metavar='ROOT', help=_ROOT_HELP.format(kinds=root_kinds_help())
    )
    add_grace(
        gc,
        help="keep blobs written or touched this recently (default: 24h); shorter than the writers' cache "
        'trust age plus 1h is safe only when nothing writes to the store meanwhile',
    )
    gc.add_argument('--delete', action='store_true', help='delete (without it: a dry run that deletes nothing)')
    gc.add_argument(
        '--include-unknown-age',
        action='store_true',
        help='also delete unreferenced blobs whose age the store does not know (rows pydantic-ai-harness '
        'wrote); no age check protects them from a concurrent writer',
    )
    gc.add_argument(
        '--batch-size', type=positive_int, default=1000, metavar='N', help='blobs per delete call (default: 1000)'
    )
    add_shard(
        gc,
        verb='collect',
        note='; run N of these, one per K, as N jobs or on N machines, to collect the whole store in parallel '
        '(see docs/gc.md)',
    )
    gc.add_argument(
        '--uris-file',
        metavar='FILE',
        help="write one line per blob judged deletable to FILE: 'deletable URI' in a dry run, 'deleted URI' or "
        "'kept URI' with --delete (the report itself holds counts only)",
    )
    gc.set_defaults(handler=_gc)


async def _gc(args: argparse.Namespace, ui: Ui) -> int:
    from mediastash.cli._ops import _opened
    from mediastash.gc import collect_garbage, root_from_spec

    roots = [root_from_spec(spec) for spec in args.roots]
    async with _opened(args.store, create=False, namespace=args.namespace) as store:
        with _phase_bars(ui) as progress:
            report = await collect_garbage(
                store,
                roots,
                grace=args.grace,
                dry_run=not args.delete,
                include_unknown_age=args.include_unknown_age,
                batch_size=args.batch_size,
                progress=progress,
                shard=args.shard,
                uris_file=args.uris_file,
            )
        described = repr(store)
    title = f'Garbage collection of {described}'
    if report.shard is not None:
        title += f', shard {report.shard[0]}/{report.shard[1]}'
    title += ' (dry run)' if report.dry_run else ''
    rows: list[list[object]] = [
        ['blobs listed', report.scanned, _size(report.scanned_bytes)],
        ['referenced by the roots', report.referenced, ''],
        ['too young (within the grace period)', report.skipped_young, ''],
        ['unknown age, kept', report.skipped_unknown_age, ''],
        ['deletable', report.deletable, _size(report.deletable_bytes)],
    ]
    if not report.dry_run:
        rows.append(['deleted', report.deleted, _size(report.bytes_freed)])
    ui.table(title, ['', 'blobs', 'bytes'], rows)
    ui.line(
        f'{_count(report.references, "URI")} referenced by {_count(report.root_items, "item")} '
        f'read from {_count(report.roots, "root")}.'
    )
    if report.dry_run:
        if report.deletable:
            ui.line(
                f'Dry run: nothing was deleted. Run again with --delete to delete {_count(report.deletable, "blob")}.'
            )
        else:
            ui.line('Dry run: nothing to delete.')
    elif report.deleted < report.deletable:
        ui.line(
            f'{_count(report.deletable - report.deleted, "deletable blob")} kept: written, touched or removed '
            'by someone else after the listing.'
        )
    document: dict[str, Any] = {'store': described, 'root_names': [root.describe() for root in roots]}
    document.update(report.as_dict())
    ui.json(document)
    return 0


@contextlib.contextmanager
def _phase_bars(ui: Ui) -> Iterator[Any]:
    """A ``collect_garbage`` progress callback drawing one bar per phase (nothing when quiet or not a terminal)."""
    stack = contextlib.ExitStack()
    state: dict[str, Any] = {'phase': None, 'step': None, 'done': 0}

    def progress(phase: str, done: int, total: int | None) -> None:
        if phase != state['phase']:
            stack.close()
            state.update(phase=phase, done=0, step=stack.enter_context(ui.progress(_PHASES.get(phase, phase), total)))
        step: Step = state['step']
        step.advance(done - state['done'])
        state['done'] = done

    try:
        yield progress
    finally:
        stack.close()


def _count(number: int, noun: str) -> str:
    return f'{number:,} {noun}' + ('' if number == 1 else 's')


def _size(size: int) -> str:
    value = float(size)
    for unit in ('B', 'KiB', 'MiB', 'GiB'):
        if value < 1024 or unit == 'GiB':
            return f'{size:,} B' if unit == 'B' else f'{value:,.1f} {unit}'
        value /= 1024
    raise AssertionError('unreachable')
