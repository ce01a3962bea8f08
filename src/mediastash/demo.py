"""``mediastash demo``: externalize a realistic agent history into a disk store and back.

It shows, on synthetic but realistically shaped data, what the library is for:
how much smaller a persisted history gets, what the walk costs, that restore
gives back exactly the original tree, and how re-saving every step snapshot (as
a step store does) costs no store writes once the known-blob cache holds the
media.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mediastash._counting import CountingMediaStore
from mediastash._histories import MiB, agent_history, describe_history, json_size, step_snapshots
from mediastash._units import format_bytes, format_seconds
from mediastash.known_blobs import KnownBlobCache
from mediastash.markers import URI_KEY
from mediastash.open_store import open_store
from mediastash.walker import DEFAULT_THRESHOLD_BYTES, externalize_media, restore_media

__all__ = ['DemoOptions', 'format_bytes', 'format_seconds', 'run_demo']

IMAGE_BYTES_PER_STEP = 4 * MiB // 5
"""Default image volume: 0.8 MiB of distinct images per step (40 MiB for 50 steps)."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``mediastash demo`` was asked to do."""

    directory: Path | None = None
    threshold: int = DEFAULT_THRESHOLD_BYTES
    steps: int = 20
    seed: int = 0
    image_bytes: int | None = None
    """Total bytes of distinct images; ``None`` means ``IMAGE_BYTES_PER_STEP * steps``."""


class _Console:
    """Prints result lines, and transient progress when the output is a terminal."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        isatty = getattr(out, 'isatty', None)
        self.live = bool(isatty and isatty())
        self._transient = False

    def line(self, text: str = '') -> None:
        self._clear()
        print(text, file=self.out, flush=True)

    def progress(self, text: str) -> None:
        if self.live:
            self._clear()
            self.out.write(text)
            self.out.flush()
            self._transient = True

    def _clear(self) -> None:
        if self._transient:
            self.out.write('\r\x1b[2K')
            self._transient = False


@contextmanager
def _work_directory(directory: Path | None) -> Iterator[Path]:
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        yield directory
        return
    with tempfile.TemporaryDirectory(prefix='mediastash-demo-') as temp:
        yield Path(temp)


def _example_marker(tree: object) -> dict[str, Any] | None:
    """The first marker in ``tree`` that replaced an image, for display."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if URI_KEY in node and node.get('kind') == 'binary':
                return node
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return None


def _canonical(tree: object) -> str:
    return json.dumps(tree, sort_keys=True, ensure_ascii=False, separators=(',', ':'))


async def run_demo(options: DemoOptions, out: TextIO | None = None) -> int:
    """Run the demo, printing to ``out`` (stdout by default); returns the process exit code."""
    console = _Console(out if out is not None else sys.stdout)
    image_bytes = options.image_bytes if options.image_bytes is not None else IMAGE_BYTES_PER_STEP * options.steps
    large_outputs = min(options.steps, max(2, options.steps // 10))
    threshold = options.threshold

    console.line(
        f'mediastash demo: {options.steps} steps, {format_bytes(image_bytes)} of images, '
        f'threshold {format_bytes(threshold)} ({threshold:,} bytes), seed {options.seed}'
    )
    console.progress('Building a synthetic agent history ...')
    started = time.perf_counter()
    history = agent_history(
        steps=options.steps,
        image_bytes_total=image_bytes,
        reused_images=max(1, options.steps // 10),
        large_tool_outputs=large_outputs,
        seed=options.seed,
    )
    stats = describe_history(history, threshold=threshold)
    console.line(f'Built the history in {format_seconds(time.perf_counter() - started)}:')
    console.line(f'  {stats.messages} messages, {stats.parts} parts')
    console.line(
        f'  {stats.large_binary_parts} image parts at or above the threshold '
        f'({stats.distinct_large_binaries} distinct, {format_bytes(stats.large_binary_bytes)} decoded)'
    )
    console.line(f'  {stats.large_texts} text parts at or above the threshold ({format_bytes(stats.large_text_bytes)})')

    with _work_directory(options.directory) as directory:
        store = CountingMediaStore(open_store(directory))  # a Path always opens the disk store
        cache = KnownBlobCache()
        console.line()
        console.line(f'Externalizing into the disk store at {directory} ...')
        started = time.perf_counter()
        lean = await externalize_media(history, media_store=store, threshold_bytes=threshold, known_blobs=cache)
        took = time.perf_counter() - started
        before, after = stats.json_bytes, json_size(lean)
        stored_bytes = sum(store.put_sizes.values())
        put_calls = store.calls['put']
        console.line(f'  externalize took      {format_seconds(took)}')
        console.line(f'  JSON before           {format_bytes(before)} ({before:,} bytes)')
        ratio = f'{before / after:,.1f}x smaller' if after else 'n/a'
        console.line(f'  JSON after            {format_bytes(after)} ({after:,} bytes), {ratio}')
        console.line(
            f'  blobs stored          {len(store.put_sizes)} ({format_bytes(stored_bytes)}) in {put_calls} put calls'
        )
        marker = _example_marker(lean)
        if marker is not None:
            console.line(f'  an image part now is  {json.dumps(marker)}')

        console.line()
        console.line(
            'Restoring (known-blob cache off: every blob is read from disk and checked against its sha256) ...'
        )
        started = time.perf_counter()
        restored = await restore_media(lean, media_store=store, known_blobs=False)
        took = time.perf_counter() - started
        get_calls = store.calls['get']
        console.line(f'  restore took          {format_seconds(took)} ({get_calls} get calls)')
        same_tree = restored == history
        same_json = _canonical(restored) == _canonical(history)
        same_order = json.dumps(restored) == json.dumps(history)
        if not (same_tree and same_json):
            console.line(
                f'ERROR: the restored history differs from the original '
                f'(tree equal: {same_tree}, canonical JSON equal: {same_json})'
            )
            return 1
        order = 'key order preserved too' if same_order else 'key order differs'
        console.line(f'  round trip            identical (tree equality and sorted-key JSON; {order})')

        return await _resave_steps(console, history, store, cache, threshold)


async def _resave_steps(
    console: _Console, history: list[dict[str, Any]], store: CountingMediaStore, cache: KnownBlobCache, threshold: int
) -> int:
    """Re-externalize every growing step snapshot with and without the known-blob cache."""
    message_sizes = [json_size(message) for message in history]
    snapshots = sum(1 for _ in step_snapshots(history, fresh=False))
    console.line()
    console.line(
        f'Re-saving all {snapshots} step snapshots (each holds the whole history so far), as a step store does:'
    )
    inline_total = 0
    results: list[tuple[float, int, int]] = []
    lean_by_mode: list[list[object]] = []
    for label, known_blobs in (('with cache', cache), ('no cache', False)):
        seconds = 0.0
        puts_before = store.calls['put']
        lean_total = 0
        leans: list[object] = []
        for index, snapshot in enumerate(step_snapshots(history), start=1):
            console.progress(f'  {label}: snapshot {index}/{snapshots} ...')
            if not lean_by_mode:
                inline_total += sum(message_sizes[: len(snapshot)]) + len(snapshot) + 1
            started = time.perf_counter()
            lean = await externalize_media(
                snapshot, media_store=store, threshold_bytes=threshold, known_blobs=known_blobs
            )
            seconds += time.perf_counter() - started
            lean_total += json_size(lean)
            leans.append(lean)
        results.append((seconds, store.calls['put'] - puts_before, lean_total))
        lean_by_mode.append(leans)
    (cached_s, cached_puts, lean_total), (uncached_s, uncached_puts, _) = results
    console.line(f'  inline, these snapshots would be     {format_bytes(inline_total)} of JSON')
    console.line(f'  externalized, they are               {format_bytes(lean_total)} of JSON')
    console.line(f'  with the known-blob cache            {format_seconds(cached_s)}, {cached_puts} store.put calls')
    console.line(
        f'  without it (known_blobs=False)       {format_seconds(uncached_s)}, {uncached_puts} store.put calls'
    )
    if lean_by_mode[0] != lean_by_mode[1]:
        console.line('ERROR: snapshots externalized with and without the cache differ')
        return 1
    console.line('  both ways give identical lean snapshots')
    return 0
