"""``mediastash erase``: delete every blob of one tenant namespace (a dry run unless ``--yes``)."""

from __future__ import annotations

import argparse

from mediastash._units import format_bytes
from mediastash.cli._args import add_command, add_namespace
from mediastash.cli._ui import Ui, UserError
from mediastash.stores.protocols import CollectableMediaStore
from mediastash.stores.registry import help_forms

__all__ = ['register']


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``erase``."""
    erase = add_command(
        commands,
        common,
        'erase',
        _erase,
        help='delete every blob of one namespace of a store (a dry run unless --yes)',
        description='Count (dry run, the default) or, with --yes, delete every blob of the namespace NAME of the '
        "store; the store's own blobs and other namespaces are untouched. An interrupted erase is finished by "
        'running it again. See docs/cli.md.',
    )
    erase.add_argument('--store', required=True, metavar='URL', help=f'the store: {help_forms()}')
    add_namespace(erase, required=True, what='erase')
    erase.add_argument('--yes', action='store_true', help='delete (without it: a dry run that deletes nothing)')


async def _erase(args: argparse.Namespace, ui: Ui) -> int:
    from mediastash.cli._ops import _opened

    async with _opened(args.store, create=False, namespace=args.namespace) as store:
        if not isinstance(store, CollectableMediaStore):
            raise UserError(f'{store!r} cannot list its blobs with their sizes, so it cannot erase')
        described = repr(store)
        if args.yes:
            with ui.progress('erasing') as step:
                done = 0

                def advance(count: int, size: int) -> None:
                    nonlocal done
                    step.advance(count - done)
                    done = count

                report = await store.erase(progress=advance)
            count, size = report.count, report.bytes
        else:
            count = size = 0
            with ui.progress('listing') as step:
                async for info in store.iter_blobs():
                    count += 1
                    size += info.size
                    step.advance()
    amount = f'{count:,} blob{"" if count == 1 else "s"}, {format_bytes(size)} ({size:,} bytes)'
    if args.yes:
        ui.line(f'Erased {amount} of namespace {args.namespace!r} from {described}.')
    elif count:
        ui.line(
            f'Dry run: namespace {args.namespace!r} of {described} holds {amount}; nothing was deleted. '
            'Run again with --yes to erase them.'
        )
    else:
        ui.line(f'Dry run: namespace {args.namespace!r} of {described} is empty; nothing to erase.')
    ui.json({'store': described, 'namespace': args.namespace, 'dry_run': not args.yes, 'blobs': count, 'bytes': size})
    return 0
