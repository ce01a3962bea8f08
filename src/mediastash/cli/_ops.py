"""Store operations: ``stats``, ``verify``, ``ls``, ``externalize``, ``restore``.

Every command opens its store from a URL (``open_store``), closes it at the
end, and names it in output only through the store's own secret-free
``repr``, never through the URL (which may carry credentials). Read-only
commands open with ``create=False``, so a mistyped path creates nothing, and
change nothing in the store (not even a crash leftover).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mediastash._tasks import for_each
from mediastash._units import format_bytes, format_threshold
from mediastash.cli._args import add_command, add_jobs, add_namespace, add_shard, add_threshold
from mediastash.cli._output import check_output, write_output
from mediastash.cli._ui import EXIT_FAILED, Ui, UserError
from mediastash.errors import MediaNotFoundError
from mediastash.stores.base import BaseMediaStore
from mediastash.stores.capabilities import require_storage, sweep_temp_files, unknown_media_type_reason_of
from mediastash.stores.protocols import (
    BlobStat,
    CollectableMediaStore,
    DeletableMediaStore,
    ListableMediaStore,
    MediaStore,
    StatableMediaStore,
)
from mediastash.stores.registry import help_forms
from mediastash.stores.verify import VerifyReport, verify_store
from mediastash.uri import parse_media_uri
from mediastash.walker import DEFAULT_THRESHOLD_BYTES

__all__ = ['SIZE_BUCKETS', 'VerifyReport', 'register', 'size_histogram', 'verify_blobs']

KiB = 1 << 10
MiB = 1 << 20

SIZE_BUCKETS: tuple[int, ...] = (KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB)
"""Upper bounds (exclusive) of the ``stats`` size histogram: powers of 4 from 1 KiB; the last bucket is open."""

_LOOKUP_JOBS = 16
"""``stat`` calls in flight for ``stats`` and ``ls --long``."""
_DEFAULT_VERIFY_JOBS = 4


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add ``stats``, ``verify``, ``ls``, ``externalize`` and ``restore``."""
    url_help = f'the store: {help_forms()}'

    add_command(
        commands,
        common,
        'stats',
        _stats,
        help='count the blobs of a store, with a size histogram and media types',
        description='Count the blobs of a store and their bytes, with a size histogram and the media types '
        "the store recorded ('unknown' where it recorded none, with the reason).",
        store_url=True,
    )

    verify = add_command(
        commands,
        common,
        'verify',
        _verify,
        help='re-read and re-hash every blob; exit code 1 when one is corrupt or missing',
        description='Read every blob the store lists (or only the URIs given) and check it against its sha256. '
        'Lists corrupt and missing blobs; the exit code is 1 when there is any, 0 otherwise.',
        store_url=True,
    )
    verify.add_argument(
        'uris', nargs='*', metavar='URI', help='check only these media+sha256:// URIs (default: every listed blob)'
    )
    add_jobs(verify, default=_DEFAULT_VERIFY_JOBS, what='blobs read')
    add_shard(verify, verb='check', note=' (N jobs verify a store together)')
    verify.add_argument(
        '--repair',
        action='store_true',
        help='delete each corrupt blob, so the next put of its right bytes stores them fresh '
        '(repair removes, it cannot recover bytes; the exit code is still 1)',
    )

    ls = add_command(
        commands,
        common,
        'ls',
        _ls,
        help='list the URIs of every blob',
        description='Print the media+sha256:// URI of every blob, one per line, sorted.',
        store_url=True,
    )
    ls.add_argument('-l', '--long', action='store_true', help="add each blob's size and media type")

    externalize = add_command(
        commands,
        common,
        'externalize',
        _externalize,
        help='move the large payloads of a JSON message history into a store',
        description='Read a JSON message history (a list of messages as pydantic-ai writes it, or any JSON), '
        "store its large binary and text payloads (and tool returns' large JSON content), and write the lean "
        'JSON with markers in their place. '
        "IN and OUT may be '-' for stdin and stdout.",
    )
    externalize.add_argument('input', metavar='IN', help='the JSON history to read')
    externalize.add_argument('output', metavar='OUT', help='where to write the lean JSON (replaced atomically)')
    externalize.add_argument('--store', required=True, metavar='URL', help=url_help + ' (created when missing)')
    add_namespace(externalize)
    add_threshold(externalize, default=DEFAULT_THRESHOLD_BYTES, verb='store')
    externalize.add_argument(
        '--no-structured',
        dest='structured',
        action='store_false',
        help="keep tool returns' JSON (non-string) content inline: the markers pydantic-ai-harness reads",
    )

    restore = add_command(
        commands,
        common,
        'restore',
        _restore,
        help='put the payloads of a lean JSON history back from a store',
        description='Read JSON written by externalize (or by pydantic-ai-harness), replace every marker by '
        "its payload from the store, and write the full JSON. IN and OUT may be '-' for stdin and stdout. "
        'OUT is left untouched when a blob is missing or corrupt.',
    )
    restore.add_argument('input', metavar='IN', help='the lean JSON to read')
    restore.add_argument('output', metavar='OUT', help='where to write the restored JSON (replaced atomically)')
    restore.add_argument('--store', required=True, metavar='URL', help=url_help)
    add_namespace(restore)


# -- opening stores --------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _opened(url: str, *, create: bool, namespace: str | None = None) -> AsyncIterator[BaseMediaStore]:
    """The store behind ``url`` (or its ``namespace``), closed when the block ends; with ``create=False`` its
    storage must exist."""
    from mediastash.open_store import open_store

    async with open_store(url, create=create, namespace=namespace) as store:
        if not create:
            await require_storage(store)  # e.g. a SQLite file without the store's table: refused, nothing created
        yield store


def _listable(store: MediaStore) -> ListableMediaStore:
    if not isinstance(store, ListableMediaStore):
        raise UserError(f'{store!r} cannot list its blobs')
    return store


async def _list_uris(store: MediaStore, ui: Ui) -> list[str]:
    """Every URI the store lists, sorted."""
    listable = _listable(store)
    uris: list[str] = []
    with ui.progress('listing') as step:
        async for uri in listable.iter_uris():
            uris.append(uri)
            step.advance()
    uris.sort()
    return uris


# -- sizes and media types -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Measured:
    """``stat`` of every listed blob that was still there, the URIs that vanished, and why a type may be unknown."""

    found: dict[str, BlobStat]
    vanished: list[str]
    unknown_reason: str

    @property
    def unknown_types(self) -> int:
        return sum(facts.media_type is None for facts in self.found.values())


async def _stat_all(store: MediaStore, uris: list[str], ui: Ui) -> _Measured:
    """The store's ``stat`` of every URI (in the order given), and the URIs that vanished since they were listed."""
    if not isinstance(store, StatableMediaStore):
        raise UserError(f'{store!r} cannot tell the size and media type of a blob (it has no stat)')
    found: dict[str, BlobStat] = {}
    vanished: list[str] = []
    with ui.progress('reading sizes', total=len(uris)) as step:

        async def one(uri: str) -> None:
            try:
                found[uri] = await store.stat(uri)
            except MediaNotFoundError:
                vanished.append(uri)
            step.advance()

        await for_each(uris, _LOOKUP_JOBS, one)
    in_order = {uri: found[uri] for uri in uris if uri in found}
    return _Measured(in_order, sorted(vanished), unknown_media_type_reason_of(store))


# -- stats -----------------------------------------------------------------------------------


def size_histogram(sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Blob counts and bytes per ``SIZE_BUCKETS`` bucket (every bucket, empty ones too)."""
    lows = (0, *SIZE_BUCKETS)
    highs: tuple[int | None, ...] = (*SIZE_BUCKETS, None)
    rows: list[dict[str, Any]] = []
    for low, high in zip(lows, highs, strict=True):
        if low == 0:
            label = f'< {format_threshold(SIZE_BUCKETS[0])}'
        elif high is None:
            label = f'>= {format_threshold(low)}'
        else:
            label = f'{format_threshold(low)} - {format_threshold(high)}'
        inside = [size for size in sizes if size >= low and (high is None or size < high)]
        rows.append({'range': label, 'min_bytes': low, 'max_bytes': high, 'blobs': len(inside), 'bytes': sum(inside)})
    return rows


async def _stats(args: argparse.Namespace, ui: Ui) -> int:

    async with _opened(args.url, create=False, namespace=args.namespace) as store:
        measured = await _stat_all(store, await _list_uris(store, ui), ui)
        label = repr(store)
    found, vanished = measured.found, measured.vanished
    unknown_reason = measured.unknown_reason if measured.unknown_types else None
    sizes = [facts.size for facts in found.values()]
    total = sum(sizes)
    histogram = size_histogram(sizes)
    by_type: dict[str | None, list[int]] = {}
    for facts in found.values():
        by_type.setdefault(facts.media_type, []).append(facts.size)
    types = sorted(by_type.items(), key=lambda item: (-len(item[1]), item[0] is None, item[0] or ''))
    ui.line(f'store: {label}')
    ui.line(f'blobs: {len(found):,}, {format_bytes(total)} ({total:,} bytes)')
    if vanished:
        ui.line(f'{len(vanished):,} listed blob(s) vanished before they could be measured')
    ui.table('Sizes', ['size', 'blobs', 'bytes'], [[row['range'], row['blobs'], row['bytes']] for row in histogram])
    ui.table(
        'Media types',
        ['media type', 'blobs', 'bytes'],
        [[media_type or 'unknown', len(group), sum(group)] for media_type, group in types],
    )
    if unknown_reason is not None:
        ui.line(f'unknown: {unknown_reason}')
    ui.json(
        {
            'store': label,
            'blobs': len(found),
            'bytes': total,
            'histogram': histogram,
            'media_types': [
                {'media_type': media_type, 'blobs': len(group), 'bytes': sum(group)} for media_type, group in types
            ],
            'unknown_media_type_reason': unknown_reason,
            'vanished': vanished,
        }
    )
    return 0


# -- verify ----------------------------------------------------------------------------------


async def verify_blobs(
    store: MediaStore,
    uris: Sequence[str] | None,
    *,
    jobs: int,
    ui: Ui | None = None,
    repair: bool = False,
    shard: tuple[int, int] | None = None,
) -> VerifyReport:
    """Read every blob in ``uris`` (``None``: every blob the store lists, as it lists them) (streamed when the
    store can), ``jobs`` at a time, checking its sha256; with ``repair`` delete the corrupt ones (see
    ``mediastash.stores.verify``)."""
    total = None if uris is None else len(uris)
    progress = ui.progress('verifying', total=total) if ui is not None else contextlib.nullcontext(None)
    with progress as step:
        return await verify_store(
            store,
            uris,
            repair=repair,
            max_concurrency=jobs,
            on_checked=None if step is None else lambda _uri: step.advance(),
            shard=shard,
        )


async def _verify(args: argparse.Namespace, ui: Ui) -> int:

    given = list(dict.fromkeys(args.uris))
    for uri in given:
        parse_media_uri(uri)  # a bad URI is a user error before the store is opened
    async with _opened(args.url, create=False, namespace=args.namespace) as store:
        if args.repair and not isinstance(store, DeletableMediaStore):
            raise UserError(f'{store!r} cannot delete blobs, so verify --repair cannot repair it')
        if args.repair:
            await _sweep_leftovers(store)
        if not given and not isinstance(store, CollectableMediaStore):
            _listable(store)  # a store that cannot list its blobs is a user error
        uris = sorted(given) if given else None
        report = await verify_blobs(store, uris, jobs=args.jobs, ui=ui, repair=args.repair, shard=args.shard)
        label = repr(store)
    result = report.as_json()
    for uri in result['corrupt']:
        ui.line(f'corrupt  {uri}')
    for uri in result['missing']:
        ui.line(f'missing  {uri}')
    for uri in result['damaged_copies']:
        ui.line(f'damaged copy  {uri}')
    for uri in result['repaired']:
        ui.line(f'deleted  {uri}')
    for uri in result['healed']:
        ui.line(f'damaged copy removed  {uri}')
    problems = len(result['corrupt']) + len(result['missing']) + len(result['damaged_copies'])
    repaired = f', {len(result["repaired"]):,} corrupt deleted' if args.repair else ''
    if args.repair and result['damaged_copies']:
        repaired += f', {len(result["healed"]):,} damaged {"copy" if len(result["healed"]) == 1 else "copies"} removed'
    damaged = f' ({len(result["damaged_copies"]):,} with a damaged copy)' if result['damaged_copies'] else ''
    ui.line(
        f'{label}: checked {report.checked:,} blob(s), {report.ok:,} ok{damaged} ({format_bytes(report.bytes)}), '
        f'{len(result["corrupt"]):,} corrupt, {len(result["missing"]):,} missing{repaired}'
    )
    if result['repaired']:
        ui.info('put the original bytes again to restore the deleted blobs: repair only removes corrupt copies')
    if result['damaged_copies'] and not args.repair:
        ui.info('a blob with a damaged copy reads from its sound copy; --repair removes the damaged one')
    ui.json(result)
    return EXIT_FAILED if problems else 0


async def _sweep_leftovers(store: MediaStore) -> None:
    """Remove a store's crash leftovers where it has them (a disk store's old temporary files).

    Only ``verify --repair`` does this among the store commands: the read-only
    ones (``ls``, ``stats``, ``verify``) change nothing.
    """
    await sweep_temp_files(store)


# -- ls --------------------------------------------------------------------------------------


async def _ls(args: argparse.Namespace, ui: Ui) -> int:
    async with _opened(args.url, create=False, namespace=args.namespace) as store:
        if not args.long:
            uris = await _list_uris(store, ui)
            for uri in uris:
                ui.line(uri)
            ui.json([{'uri': uri} for uri in uris])
            return 0
        measured = await _stat_all(store, await _list_uris(store, ui), ui)
    rows = list(measured.found.items())
    width = max((len(f'{facts.size:,}') for _, facts in rows), default=1)
    type_width = max((len(facts.media_type or 'unknown') for _, facts in rows), default=7)
    for uri, facts in rows:
        ui.line(f'{facts.size:>{width},}  {facts.media_type or "unknown":<{type_width}}  {uri}')
    ui.json([{'uri': uri, 'size': facts.size, 'media_type': facts.media_type} for uri, facts in rows])
    if measured.unknown_types:
        ui.info(f'unknown media type ({measured.unknown_types:,} blob(s)): {measured.unknown_reason}')
    return 0


# -- externalize and restore -------------------------------------------------------------------


def _read_json(source: str) -> tuple[Any, int]:
    """The JSON document in the file ``source`` (``-``: stdin) and its size in bytes."""
    raw = sys.stdin.buffer.read() if source == '-' else Path(source).read_bytes()
    name = 'stdin' if source == '-' else source
    try:
        return json.loads(raw), len(raw)
    except UnicodeDecodeError:
        raise UserError(f'{name} is not UTF-8 JSON') from None
    except json.JSONDecodeError as error:
        raise UserError(f'{name} is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})') from None
    except RecursionError:
        raise UserError(f'{name} is nested too deeply to read') from None


def _check_target(target: str, ui: Ui) -> None:
    """Fail before any work when ``target`` cannot be written, or would mix with JSON on stdout."""
    if target == '-':
        if ui.as_json:
            raise UserError("OUT '-' and --json would both write to stdout; use --json-file FILE instead")
        return
    check_output(target)


def _write_json(target: str, document: Any) -> int:
    """Write ``document`` as compact UTF-8 JSON (as pydantic writes histories); returns its bytes.

    A file is replaced atomically, keeping its mode, or created with the
    umask's mode; a symlink's target is written (see ``cli._output``).
    """
    data = json.dumps(document, ensure_ascii=False, separators=(',', ':')).encode()
    if target == '-':
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return len(data)
    write_output(target, data)
    return len(data)


def _say(ui: Ui, target: str, text: str) -> None:
    """A result line: on stdout, or on stderr when stdout carries the JSON document."""
    if target == '-':
        ui.info(text)
    else:
        ui.line(text)


async def _externalize(args: argparse.Namespace, ui: Ui) -> int:

    from mediastash._counting import CountingMediaStore
    from mediastash.walker import externalize_media

    _check_target(args.output, ui)
    tree, input_bytes = _read_json(args.input)
    async with _opened(args.store, create=True, namespace=args.namespace) as store:
        counting = CountingMediaStore(store)
        lean = await externalize_media(
            tree, media_store=counting, threshold_bytes=args.threshold, structured=args.structured
        )
        label = repr(store)
    output_bytes = _write_json(args.output, lean)
    blobs, blob_bytes = len(counting.put_sizes), sum(counting.put_sizes.values())
    ratio = f', {input_bytes / output_bytes:,.1f}x smaller' if output_bytes else ''
    _say(ui, args.output, f'input   {format_bytes(input_bytes)} ({input_bytes:,} bytes)')
    _say(ui, args.output, f'output  {format_bytes(output_bytes)} ({output_bytes:,} bytes){ratio}')
    _say(ui, args.output, f'stored  {blobs:,} blob(s), {format_bytes(blob_bytes)} ({blob_bytes:,} bytes) in {label}')
    ui.json(
        {
            'store': label,
            'input_bytes': input_bytes,
            'output_bytes': output_bytes,
            'blobs': blobs,
            'blob_bytes': blob_bytes,
            'threshold_bytes': args.threshold,
            'structured': args.structured,
        }
    )
    return 0


async def _restore(args: argparse.Namespace, ui: Ui) -> int:

    from mediastash._counting import CountingMediaStore
    from mediastash.walker import restore_media

    _check_target(args.output, ui)
    tree, input_bytes = _read_json(args.input)
    async with _opened(args.store, create=False, namespace=args.namespace) as store:
        counting = CountingMediaStore(store)
        full = await restore_media(tree, media_store=counting, structured=True)
        label = repr(store)
    output_bytes = _write_json(args.output, full)
    blobs = counting.calls['get']
    _say(ui, args.output, f'input   {format_bytes(input_bytes)} ({input_bytes:,} bytes)')
    _say(ui, args.output, f'output  {format_bytes(output_bytes)} ({output_bytes:,} bytes)')
    _say(ui, args.output, f'read    {blobs:,} blob(s) from {label}')
    ui.json({'store': label, 'input_bytes': input_bytes, 'output_bytes': output_bytes, 'blobs': blobs})
    return 0
