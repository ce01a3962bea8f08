"""``mediastash sync`` (copy the blobs a destination lacks) and ``mediastash diff`` (compare two stores)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from mediastash._units import format_bytes, format_seconds
from mediastash.cli._args import add_command, add_grace, add_jobs, add_shard
from mediastash.cli._ui import EXIT_FAILED, Ui, UserError
from mediastash.errors import EmptySourceError
from mediastash.stores.registry import help_forms
from mediastash.sync import SyncReport, compare_stores, sync_stores

__all__ = ['register']

_SHOWN_FAILURES = 20


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``sync`` and ``diff``."""
    url_help = help_forms()
    sync = add_command(
        commands,
        common,
        'sync',
        _sync,
        help='copy every blob the destination store lacks (resumable; exit code 1 on any failure)',
        description='Copy every blob of SRC that DST lacks, streamed, with its metadata and media type where the '
        'stores record them. A rerun copies only what is still missing. See docs/cli.md.',
    )
    sync.add_argument('source', metavar='SRC_URL', help=f'the store to copy from: {url_help}')
    sync.add_argument('destination', metavar='DST_URL', help=f'the store to copy to (created if needed): {url_help}')
    add_jobs(sync, default=4, what='blobs copied')
    add_shard(sync, verb='sync', note=' (N jobs sync a store together)')
    sync.add_argument(
        '--verify', action='store_true', help='read each copied blob back from DST to its end and check its sha256'
    )
    sync.add_argument(
        '--list-destination',
        action='store_true',
        help='list DST once to learn what it holds instead of checking each blob (fewer requests on S3 when DST '
        'holds not many more blobs than SRC)',
    )
    sync.add_argument(
        '--delete',
        action='store_true',
        help='also delete from DST the blobs SRC lacks, unless written or touched in DST within --grace',
    )
    add_grace(sync, help='with --delete: keep DST blobs written or touched this recently (default: 24h)')
    sync.add_argument(
        '--allow-empty-source',
        action='store_true',
        help='with --delete: go ahead when SRC holds no blob at all (refused otherwise: that would empty DST, and '
        'an empty SRC is more often a wrong path)',
    )

    diff = add_command(
        commands,
        common,
        'diff',
        _diff,
        help='list the blobs present in only one of two stores (exit code 1 when they differ)',
        description='List both stores (no blob is read) and print the URIs each holds that the other lacks. '
        'The exit code is 0 when both hold the same blobs, 1 otherwise.',
    )
    diff.add_argument('source', metavar='SRC_URL', help=url_help)
    diff.add_argument('destination', metavar='DST_URL', help=url_help)


async def _sync(args: argparse.Namespace, ui: Ui) -> int:
    from mediastash.open_store import open_store

    cutoff = time.time() - args.grace.total_seconds() if args.delete else None
    async with open_store(args.source, create=False) as source, open_store(args.destination) as destination:
        ui.info(f'syncing {source!r} (listed as the copy goes)')
        with ui.progress('syncing') as step:
            try:
                report = await sync_stores(
                    source,
                    destination,
                    jobs=args.jobs,
                    verify=args.verify,
                    delete_written_before=cutoff,
                    allow_empty_source=args.allow_empty_source,
                    list_destination=args.list_destination,
                    on_progress=step.advance,
                    shard=args.shard,
                )
            except EmptySourceError:
                raise UserError(
                    f'SRC {source!r} holds no blob at all, so --delete would empty DST; check SRC_URL (a wrong '
                    'path or prefix?), or pass --allow-empty-source to delete anyway. Nothing was deleted.'
                ) from None
    rows: list[list[Any]] = [
        ['copied', report.copied, format_bytes(report.copied_bytes)],
        ['skipped (already there)', report.skipped, format_bytes(report.skipped_bytes)],
        ['failed', report.failed, ''],
    ]
    if args.verify:
        rows.append(['verified', report.verified, ''])
    if args.delete:
        rows.append(['deleted from DST', report.deleted, ''])
        rows.append(['kept (written within --grace)', report.kept_young, ''])
    ui.table('sync', ['blobs', 'count', 'bytes'], rows)
    ui.line(_summary(report, deleting=args.delete))
    for failure in report.failures[:_SHOWN_FAILURES]:
        ui.line(f'failed: {failure.uri}: {failure.error}')
    if report.failed > _SHOWN_FAILURES:
        ui.line(f'... and {report.failed - _SHOWN_FAILURES} more failures')
    ui.json(
        {
            'source': report.source,
            'destination': report.destination,
            'seconds': report.seconds,
            'bytes_per_second': report.bytes_per_second,
            'copied': report.copied,
            'copied_bytes': report.copied_bytes,
            'skipped': report.skipped,
            'skipped_bytes': report.skipped_bytes,
            'failed': report.failed,
            'verified': report.verified,
            'deleted': report.deleted,
            'kept_young': report.kept_young,
            'failures': [{'uri': failure.uri, 'error': failure.error} for failure in report.failures],
        }
    )
    return EXIT_FAILED if report.failures else 0


def _summary(report: SyncReport, *, deleting: bool) -> str:
    """One line: which stores, what was copied, how fast (the stores named by their secret-free ``repr``)."""
    line = (
        f'synced {report.source} -> {report.destination}: {report.copied:,} copied '
        f'({format_bytes(report.copied_bytes)}) in {format_seconds(report.seconds)}, '
        f'{format_bytes(report.bytes_per_second)}/s; {report.skipped:,} already there '
        f'({format_bytes(report.skipped_bytes)}); {report.failed:,} failed'
    )
    if deleting:
        line += f'; {report.deleted:,} deleted from DST, {report.kept_young:,} kept (within --grace)'
    return line


async def _diff(args: argparse.Namespace, ui: Ui) -> int:
    from mediastash.open_store import open_store

    counts: list[int] = []
    async with (
        open_store(args.source, create=False) as source,
        open_store(args.destination, create=False) as dest,
        compare_stores(source, dest) as comparison,
    ):
        with ui.json_stream() as write:
            sides = (
                ('only_in_source', '<', comparison.only_in_source()),
                ('only_in_destination', '>', comparison.only_in_destination()),
            )
            for index, (name, mark, uris) in enumerate(sides):
                if write is not None:
                    write(f'{{\n  "{name}": [' if index == 0 else f',\n  "{name}": [')
                count = 0
                async for uri in uris:  # written as they come: the lists may be larger than memory
                    ui.line(f'{mark} {uri}')
                    if write is not None:
                        write(f'{"," if count else ""}\n    {json.dumps(uri)}')
                    count += 1
                if write is not None:
                    write('\n  ]' if count else ']')
                counts.append(count)
            if write is not None:
                write('\n}\n')
    if not any(counts):
        ui.info('the stores hold the same blobs')
        return 0
    ui.info(f'{counts[0]} only in SRC (<), {counts[1]} only in DST (>)')
    return EXIT_FAILED
