"""The sweep: replay every history as a step store saves it, once per threshold, and measure.

A step store saves a snapshot after every settled step, and each snapshot
repeats the whole history so far. ``step_snapshots`` gives those prefixes:
the history up to each ``ModelRequest`` that follows a ``ModelResponse``
(the tool returns or next prompt folded in, as pydantic-ai-harness's
``StepPersistence`` snapshots them), plus the whole history when it ends
otherwise (the run's final response). Each snapshot is a fresh copy whose
long strings are new objects, as a new ``dump_python`` call gives, so the
known-blob cache has to compare payloads as it would in a real saver.

For each threshold, in the run's scratch namespace of the store (empty at the start of each
threshold: ``mediastash.tuning._namespaces``), each snapshot
is externalized (known-blob cache on, structured payloads on: as
``OffloadingStepStore`` saves), serialized as
compact JSON and measured, then restored from the store
(``known_blobs=False``: every blob is really read) and checked against the
snapshot. The store is wrapped in a ``CountingMediaStore`` to count calls.
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mediastash._counting import CountingMediaStore
from mediastash._histories import step_snapshots
from mediastash._units import format_threshold
from mediastash.errors import MediaStashError
from mediastash.tuning._inputs import History
from mediastash.tuning._namespaces import Namespaces
from mediastash.tuning._results import DYNAMODB_ITEM_LIMIT, MONGODB_DOCUMENT_LIMIT, ThresholdRow
from mediastash.walker import externalize_media, restore_media
from mediastash.walker.internal import payload_sizes

__all__ = [
    'RoundTripMismatch',
    'count_snapshots',
    'history_payload_sizes',
    'persisted_size',
    'snapshots_of',
    'steps_by_history',
    'sweep',
]


class RoundTripMismatch(MediaStashError):
    """A restored snapshot differs from the snapshot saved (a bug: please report it)."""


def snapshots_of(history: History) -> Iterator[list[Any]]:
    """The snapshots a step store saves of ``history``, each a fresh copy (see the module docstring)."""
    return step_snapshots(history.messages, fresh=True)


def count_snapshots(histories: Sequence[History]) -> int:
    """How many snapshots one threshold replays."""
    return sum(1 for history in histories for _ in step_snapshots(history.messages, fresh=False))


def steps_by_history(histories: Sequence[History]) -> list[tuple[str, int]]:
    """Each history's name and how many snapshots (steps) a step store saves of it."""
    return [(history.name, sum(1 for _ in step_snapshots(history.messages, fresh=False))) for history in histories]


def history_payload_sizes(histories: Sequence[History]) -> list[int]:
    """Every payload the histories hold (each occurrence in each history), ascending, measured as the threshold is."""
    sizes: list[int] = []
    for history in histories:
        sizes.extend(payload_sizes(history.messages, structured=True))
    return sorted(sizes)


def persisted_size(lean: object) -> int:
    """Bytes of the compact UTF-8 JSON a saver writes for ``lean``."""
    text = json.dumps(lean, separators=(',', ':'), ensure_ascii=False)
    return len(text.encode('utf-8', 'surrogatepass'))


async def sweep(
    histories: Sequence[History],
    thresholds: Sequence[int],
    namespaces: Namespaces,
    *,
    advance: Callable[[int], None] | None = None,
) -> list[ThresholdRow]:
    """Measure every threshold (ascending, each once) on every history; ``advance(1)`` after each snapshot."""
    if not histories:
        raise ValueError('sweep() needs at least one history')
    rows: list[ThresholdRow] = []
    for threshold in sorted(set(thresholds)):
        async with namespaces.namespace(str(threshold)) as store:
            rows.append(await _measure(histories, threshold, CountingMediaStore(store), advance))
        gc.collect()  # drop this namespace's known-blob cache before the next one fills
    return rows


async def _measure(
    histories: Sequence[History],
    threshold: int,
    store: CountingMediaStore,
    advance: Callable[[int], None] | None,
) -> ThresholdRow:
    sizes: list[int] = []
    saves: list[float] = []
    restores: list[float] = []
    for history in histories:
        for index, snapshot in enumerate(snapshots_of(history)):
            started = time.perf_counter()
            lean = await externalize_media(snapshot, media_store=store, threshold_bytes=threshold, structured=True)
            saved = time.perf_counter()
            restored = await restore_media(lean, media_store=store, known_blobs=False, structured=True)
            restores.append(time.perf_counter() - saved)
            saves.append(saved - started)
            if restored != snapshot:
                raise RoundTripMismatch(
                    f'snapshot {index + 1} of {history.name} did not restore to itself at threshold '
                    f'{format_threshold(threshold)}'
                )
            sizes.append(persisted_size(lean))
            del lean, restored, snapshot
            if advance is not None:
                advance(1)
    calls = store.calls
    largest = max(sizes)
    return ThresholdRow(
        threshold_bytes=threshold,
        snapshots=len(sizes),
        persisted_bytes_total=sum(sizes),
        persisted_bytes_p95=_nearest_rank(sizes, 0.95),
        persisted_bytes_max=largest,
        blobs=len(store.put_sizes),
        media_bytes=sum(store.put_sizes.values()),
        puts=calls['put'] + calls['put_stream'],
        gets=calls['get'] + calls['get_stream'],
        store_calls=store.total_calls,
        externalize_seconds_median=statistics.median(saves),
        restore_seconds_median=statistics.median(restores),
        fits_mongodb=largest <= MONGODB_DOCUMENT_LIMIT,
        fits_dynamodb=largest <= DYNAMODB_ITEM_LIMIT,
    )


def _nearest_rank(values: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile: the smallest value with at least ``fraction`` of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
