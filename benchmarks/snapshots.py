"""Step-snapshot benchmark: a long agent run saving its whole history after every step.

Compares pydantic-ai-harness's FileStepStore (built-in disk media), OffloadingStepStore over
FileStepStore(media_store=None), KVStepStore(InMemoryAsyncKV()) alone and over OffloadingKV, and
OffloadingStepStore over KVStepStore. Reports median wall time, bytes written to the inner store,
bytes and puts sent to the media store. Rows run in rounds (each row once per round) so that a
noisy machine slows all of them alike. Run: ``python benchmarks/snapshots.py [--steps 50] [--repeats 3]``.

``--memory MIB`` measures memory instead (Linux): peak RSS above baseline of
``OffloadingStepStore.latest_snapshot`` for a snapshot holding one payload of
that size (URL-safe stamped, as pydantic-ai's ``BinaryContent`` usually is),
next to a plain ``get`` of the same blob. Target: at most about 1.2x the payload.

``--structured`` runs the structured-output history instead: a 50-step run whose
tool returns 300-800 KB lists of dicts (search hits), saved by the harness's
FileStepStore alone and by OffloadingStepStore with structured payloads off and
on (the default). Targets: at least 10x fewer persisted bytes with them on, and
a save time no worse than with them off.

``--own-cost`` measures the wrapper's own cost on a save: the time
``OffloadingStepStore.save_snapshot`` spends outside the inner FileStepStore's
own ``save_snapshot``, on both 50-step series, against that inner time and
against the harness's FileStepStore (with its DiskMediaStore) saving the same
history alone (issue 32 target: at most 0.2x).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import marshal
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pydantic_core
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.media import DiskMediaStore as HarnessDiskMediaStore
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore
from pydantic_ai_persistence import InMemoryAsyncKV, KVStepStore

from mediastash import DiskMediaStore, MediaStore, WalkOptions
from mediastash.integrations import OffloadingKV, OffloadingStepStore
from mediastash.testing import CountingMediaStore


class CountingKV(InMemoryAsyncKV):
    """InMemoryAsyncKV that counts the characters written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    async def put(self, pk: str, sk: str, data: str) -> None:
        self.written += len(data)
        await super().put(pk, sk, data)


def build_steps(steps: int, image_mib: float, seed: int = 7) -> list[list[ModelMessage]]:
    """Messages each step adds: a tool call, its return (a big one every fifth step), and a new image."""
    rng = random.Random(seed)
    per_image = int(image_mib * (1 << 20) / steps)
    out: list[list[ModelMessage]] = [[ModelRequest(parts=[UserPromptPart('Review these screenshots.')])]]
    for step in range(steps):
        call = ToolCallPart(tool_name='screenshot', args={'step': step}, tool_call_id=f'call-{step}')
        output = f'log line {step}\n' * (20_000 if step % 5 == 4 else 10)
        image = BinaryImage(data=rng.randbytes(per_image), media_type='image/png')
        out.append(
            [
                ModelResponse(parts=[TextPart(f'step {step}'), call]),
                ModelRequest(
                    parts=[
                        ToolReturnPart(tool_name='screenshot', content=output, tool_call_id=f'call-{step}'),
                        UserPromptPart(content=[f'screenshot {step}', image]),
                    ]
                ),
            ]
        )
    return out


def build_structured_steps(steps: int, seed: int = 11) -> list[list[ModelMessage]]:
    """Messages each step adds: a search call and its result, a list of 300-800 KB of hit dicts."""
    rng = random.Random(seed)
    words = ['mediastash', 'payload', 'snapshot', 'store', 'agent', 'history', 'blob', 'marker', 'json', 'tool']
    out: list[list[ModelMessage]] = [[ModelRequest(parts=[UserPromptPart('Research the topic.')])]]
    hit = 0
    for step in range(steps):
        target = rng.randint(300_000, 800_000)
        rows: list[dict[str, Any]] = []
        size = 0
        while size < target:
            hit += 1
            row = {
                'id': hit,
                'title': ' '.join(rng.choices(words, k=6)),
                'url': f'https://example.org/doc/{hit}',
                'score': rng.random(),
                'snippet': ' '.join(rng.choices(words, k=18)),
                'tags': rng.sample(words, 3),
            }
            rows.append(row)
            size += len(json.dumps(row, separators=(',', ':'))) + 1
        call = ToolCallPart(tool_name='search', args={'query': f'q{step}'}, tool_call_id=f'call-{step}')
        out.append(
            [
                ModelResponse(parts=[TextPart(f'searching {step}'), call]),
                ModelRequest(parts=[ToolReturnPart(tool_name='search', content=rows, tool_call_id=f'call-{step}')]),
            ]
        )
    return out


def unique_payload_bytes(steps: list[list[ModelMessage]], threshold: int) -> int:
    seen: dict[bytes, int] = {}
    for added in steps:
        for message in added:
            for part in message.parts:
                content = getattr(part, 'content', None)
                items = content if isinstance(content, list) else [content]
                for item in items:
                    if isinstance(item, BinaryImage) and len(item.data) >= threshold:
                        seen[item.data] = len(item.data)
                    elif isinstance(item, str) and len(item.encode()) >= threshold:
                        seen[item.encode()] = len(item.encode())
    return sum(seen.values())


@dataclass
class Result:
    seconds: float
    inner_bytes: int
    media_bytes: int
    media_puts: int


Setup = Callable[[Path], tuple[Any, Callable[[], int], CountingMediaStore | None]]


def dir_bytes(path: Path, skip: str | None = None) -> int:
    return sum(
        f.stat().st_size
        for f in path.rglob('*')
        if f.is_file() and (skip is None or skip not in f.relative_to(path).parts)
    )


def harness_file(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    media = CountingMediaStore(cast(MediaStore, HarnessDiskMediaStore(tmp / 'media')))  # their context type is narrower
    return FileStepStore(tmp / 'steps', media_store=media), lambda: dir_bytes(tmp / 'steps'), media


def offload_file(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    media = CountingMediaStore(DiskMediaStore(tmp / 'media'))
    store = OffloadingStepStore(FileStepStore(tmp / 'steps', media_store=None), media_store=media)
    return store, lambda: dir_bytes(tmp / 'steps'), media


def kv_plain(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    kv = CountingKV()
    return KVStepStore(kv), lambda: kv.written, None


def kv_offloading(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    kv = CountingKV()
    media = CountingMediaStore(DiskMediaStore(tmp / 'media'))
    return KVStepStore(OffloadingKV(kv, media_store=media)), lambda: kv.written, media


def kv_offloading_big_memory(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    kv = CountingKV()
    media = CountingMediaStore(DiskMediaStore(tmp / 'media'))
    return KVStepStore(OffloadingKV(kv, media_store=media, recent_bytes=4 << 30)), lambda: kv.written, media


def kv_offloading_half_memory(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    kv = CountingKV()
    media = CountingMediaStore(DiskMediaStore(tmp / 'media'))
    return KVStepStore(OffloadingKV(kv, media_store=media, recent_bytes=512 << 20)), lambda: kv.written, media


def offload_kv_step_store(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    kv = CountingKV()
    media = CountingMediaStore(DiskMediaStore(tmp / 'media'))
    return OffloadingStepStore(KVStepStore(kv), media_store=media), lambda: kv.written, media


def offload_file_unstructured(tmp: Path) -> tuple[Any, Callable[[], int], CountingMediaStore | None]:
    media = CountingMediaStore(DiskMediaStore(tmp / 'media'))
    inner = FileStepStore(tmp / 'steps', media_store=None)
    store = OffloadingStepStore(inner, media_store=media, options=WalkOptions(structured=False))
    return store, lambda: dir_bytes(tmp / 'steps'), media


STRUCTURED_SETUPS: Mapping[str, Setup] = {
    '(S1) harness FileStepStore + its DiskMediaStore': harness_file,
    '(S2) OffloadingStepStore(FileStepStore), structured payloads off': offload_file_unstructured,
    '(S3) OffloadingStepStore(FileStepStore), structured payloads on (default)': offload_file,
}


SETUPS: Mapping[str, Setup] = {
    '(1) harness FileStepStore + its DiskMediaStore': harness_file,
    '(2) OffloadingStepStore(FileStepStore(media_store=None))': offload_file,
    '(3) KVStepStore(InMemoryAsyncKV())': kv_plain,
    '(4) KVStepStore(OffloadingKV(InMemoryAsyncKV()))': kv_offloading,
    '(4b) KVStepStore(OffloadingKV(InMemoryAsyncKV(), recent_bytes=4 GiB))': kv_offloading_big_memory,
    '(4c) KVStepStore(OffloadingKV(InMemoryAsyncKV(), recent_bytes=512 MiB))': kv_offloading_half_memory,
    '(5) OffloadingStepStore(KVStepStore(InMemoryAsyncKV()))': offload_kv_step_store,
}


async def run_once(setup: Setup, steps: list[list[ModelMessage]]) -> Result:
    tmp = Path(tempfile.mkdtemp(prefix='mediastash-bench-'))
    try:
        store, inner_bytes, media = setup(tmp)
        history: list[ModelMessage] = []
        start = time.perf_counter()
        for index, added in enumerate(steps):
            history = [*history, *added]
            await store.save_snapshot(ContinuableSnapshot(run_id='bench', step_index=index, messages=history))
        elapsed = time.perf_counter() - start
        latest = await store.latest_snapshot(run_id='bench')
        assert latest is not None and len(latest.messages) == len(history)
        return Result(elapsed, inner_bytes(), media.bytes_put if media else 0, media.calls['put'] if media else 0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rss(field: str) -> int:
    """``VmRSS`` / ``VmHWM`` of this process in bytes."""
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f'no {field} in /proc/self/status')


def _reset_high_water_mark() -> None:
    with open('/proc/self/clear_refs', 'w') as clear:
        clear.write('5')  # resets VmHWM to the current RSS


async def _peak_above_baseline(call: Callable[[], Any]) -> tuple[int, Any]:
    """Peak RSS above the RSS before ``await call()`` (the high-water mark is reset first), and its result."""
    gc.collect()
    _reset_high_water_mark()
    baseline = _rss('VmRSS')
    result = await call()
    return _rss('VmHWM') - baseline, result


async def memory_case(payload_mib: int) -> None:
    """Typed restore of one large payload: peak RSS above baseline, against a plain ``get``."""
    size = payload_mib << 20
    tmp = Path(tempfile.mkdtemp(prefix='mediastash-bench-'))
    try:
        media = DiskMediaStore(tmp / 'media')
        steps = OffloadingStepStore(
            FileStepStore(tmp / 'steps', media_store=None), media_store=media, options=WalkOptions(known_blobs=False)
        )
        payload = bytes(range(256)) * (size // 256)  # URL-safe base64 uses '-' and '_': the marker is stamped
        message = ModelRequest(
            parts=[UserPromptPart(content=['look', BinaryImage(data=payload, media_type='image/png')])]
        )
        await steps.save_snapshot(ContinuableSnapshot(run_id='mem', step_index=0, messages=[message]))
        del payload, message
        typed, latest = await _peak_above_baseline(lambda: steps.latest_snapshot(run_id='mem'))
        assert latest is not None and len(latest.messages[0].parts[0].content[1].data) == size
        del latest
        uris = [uri async for uri in media.iter_uris()]
        plain, data = await _peak_above_baseline(lambda: media.get(uris[0]))
        assert len(data) == size
        del data
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f'payload {payload_mib} MiB; peak RSS above baseline (target: typed restore <= 1.2x the payload)')
    print('| call | peak above baseline | x payload |')
    print('|---|---:|---:|')
    print(f'| OffloadingStepStore.latest_snapshot | {mib(typed)} | {typed / size:.2f}x |')
    print(f'| DiskMediaStore.get (reference) | {mib(plain)} | {plain / size:.2f}x |')


def mib(n: int) -> str:
    return f'{n / (1 << 20):,.1f} MiB'


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--steps', type=int, default=50)
    parser.add_argument('--image-mib', type=float, default=40.0)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--only', default='', help='comma-separated row labels, e.g. 2,4b')
    parser.add_argument('--memory', type=int, metavar='MIB', help='measure typed-restore memory for one MIB payload')
    parser.add_argument('--structured', action='store_true', help='run the structured-output history (rows S1-S3)')
    parser.add_argument(
        '--own-cost', action='store_true', help="the wrapper's own share of a save (OffloadingStepStore(FileStepStore))"
    )
    parser.add_argument('--no-anchor', action='store_true', help='--own-cost without the harness-alone runs')
    parser.add_argument(
        '--profile', action='store_true', help='--own-cost: cProfile one run of the structured series instead'
    )
    args = parser.parse_args(argv)
    if args.own_cost and args.profile:
        await own_cost_profile(args.steps)
        return
    if args.own_cost:
        await own_cost_case(args.steps, args.repeats, args.image_mib, anchor=not args.no_anchor)
        return
    if args.memory:
        await memory_case(args.memory)
        return
    if args.structured:
        await structured_case(args.steps, args.repeats)
        return
    steps = build_steps(args.steps, args.image_mib)
    wanted = {f'({n})' for n in args.only.split(',') if n}
    print(
        f'{args.steps} steps, {args.image_mib:g} MiB of images, unique payload bytes: '
        f'{mib(unique_payload_bytes(steps, 64 * 1024))}; median of {args.repeats}'
    )
    print('| store | time (s) | inner store bytes | bytes sent to media put | media puts |')
    print('|---|---:|---:|---:|---:|')
    rows = {name: setup for name, setup in SETUPS.items() if not wanted or name.split()[0] in wanted}
    # Rounds: every row once per round, so load changes on a shared machine hit all rows alike.
    results: dict[str, list[Result]] = {name: [] for name in rows}
    for round_index in range(args.repeats):
        for name, setup in rows.items():
            results[name].append(await run_once(setup, steps))
            print(f'  round {round_index + 1}: {name}: {results[name][-1].seconds:.2f} s', file=sys.stderr, flush=True)
    for name, runs in results.items():
        seconds = statistics.median(r.seconds for r in runs)
        last = runs[-1]
        print(f'| {name} | {seconds:.2f} | {mib(last.inner_bytes)} | {mib(last.media_bytes)} | {last.media_puts} |')


async def structured_case(steps_count: int, repeats: int) -> None:
    """Rows S1-S3 on the structured-output history, in rounds; medians and the two target ratios."""
    steps = build_structured_steps(steps_count)
    outputs = [len(json.dumps(added[1].parts[0].content, separators=(',', ':'))) for added in steps[1:]]
    print(
        f'{steps_count} steps, tool outputs {min(outputs) / 1e3:,.0f}-{max(outputs) / 1e3:,.0f} KB '
        f'({sum(outputs) / (1 << 20):,.1f} MiB in all); median of {repeats}'
    )
    print('| store | save time (s) | persisted bytes (step store) | bytes sent to media put | media puts |')
    print('|---|---:|---:|---:|---:|')
    results: dict[str, list[Result]] = {name: [] for name in STRUCTURED_SETUPS}
    for round_index in range(repeats):
        for name, setup in STRUCTURED_SETUPS.items():
            results[name].append(await run_once(setup, steps))
            print(f'  round {round_index + 1}: {name}: {results[name][-1].seconds:.2f} s', file=sys.stderr, flush=True)
    medians = {name: statistics.median(r.seconds for r in runs) for name, runs in results.items()}
    for name, runs in results.items():
        last = runs[-1]
        print(
            f'| {name} | {medians[name]:.2f} | {mib(last.inner_bytes)} | {mib(last.media_bytes)} | {last.media_puts} |'
        )
    s1, s2, s3 = (results[name][-1].inner_bytes for name in STRUCTURED_SETUPS)
    t1, t2, t3 = medians.values()
    print(
        f'persisted bytes: {s1 / s3:,.0f}x fewer than (S1), {s2 / s3:,.0f}x fewer than (S2); '
        f'save time (S3)/(S2): {t3 / t2:.2f}, (S3)/(S1): {t3 / t1:.2f}'
    )


class TimedFileStepStore(FileStepStore):
    """The harness's FileStepStore, adding up the time its own ``save_snapshot`` takes."""

    seconds = 0.0

    async def save_snapshot(self, snapshot: ContinuableSnapshot) -> None:
        start = time.perf_counter()
        try:
            await super().save_snapshot(snapshot)
        finally:
            self.seconds += time.perf_counter() - start


class TimedDiskMediaStore(DiskMediaStore):
    """mediastash's DiskMediaStore, adding up the time its ``put`` takes (hash, write: what storing a payload costs)."""

    seconds = 0.0

    async def put(self, data: bytes, *, context: Any = None) -> str:
        start = time.perf_counter()
        try:
            return await (super().put(data) if context is None else super().put(data, context=context))
        finally:
            self.seconds += time.perf_counter() - start


async def own_cost_once(steps: list[list[ModelMessage]]) -> tuple[float, float, float]:
    """One run of ``OffloadingStepStore(FileStepStore)`` on disk media: total save time, the inner store's part
    and the media store's ``put`` part."""
    tmp = Path(tempfile.mkdtemp(prefix='mediastash-bench-'))
    try:
        inner = TimedFileStepStore(tmp / 'steps', media_store=None)
        media = TimedDiskMediaStore(tmp / 'media')
        store = OffloadingStepStore(inner, media_store=media)
        history: list[ModelMessage] = []
        gc.collect()
        start = time.perf_counter()
        for index, added in enumerate(steps):
            history = [*history, *added]
            await store.save_snapshot(ContinuableSnapshot(run_id='bench', step_index=index, messages=history))
        return time.perf_counter() - start, inner.seconds, media.seconds
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def own_cost_profile(steps_count: int) -> None:
    """cProfile of one ``own_cost_once`` run of the structured series (after a 3-step warm-up that builds
    pydantic's schemas): the wrapper's own time and the functions that take it."""
    import cProfile
    import pstats

    steps = build_structured_steps(steps_count)
    await own_cost_once(steps[:3])
    profile = cProfile.Profile()
    profile.enable()
    total, inner, put = await own_cost_once(steps)
    profile.disable()
    print(f'{steps_count} steps: wrapper own {total - inner:.2f} s, inner store {inner:.2f} s, media put {put:.2f} s')
    pstats.Stats(profile, stream=sys.stdout).sort_stats('tottime').print_stats(15)


def own_cost_floor(steps: list[list[ModelMessage]], threshold: int = 64 * 1024) -> tuple[float, float]:
    """What any exact offloading wrapper pays on the series beyond the media store's ``put``, timed here alone.

    Per new payload: the compact JSON of a structured tool output (the payload's bytes), or pydantic-ai's
    ``identifier`` of a ``BinaryContent`` (a sha1 of its bytes, which its JSON holds). At every save: one exact
    reading (``marshal``, the fastest measured) of every output in the history, to know none was changed in
    place. Returns both sums in seconds.
    """
    outputs: list[list[Any] | dict[str, Any]] = []
    new_seconds = read_seconds = 0.0
    for added in steps:
        start = time.perf_counter()
        for message in added:
            for part in message.parts:
                content = part.content if isinstance(part, ToolReturnPart | UserPromptPart) else None
                if isinstance(part, ToolReturnPart) and type(content) in (list, dict):
                    pydantic_core.to_json(content)
                    outputs.append(content)
                for item in content if isinstance(content, list) else [content]:
                    if isinstance(item, BinaryContent) and len(item.data) >= threshold:
                        item.identifier  # noqa: B018 (computed from the bytes at every access)
        new_seconds += time.perf_counter() - start
        start = time.perf_counter()
        for output in outputs:  # the new ones too: the state the next save compares with
            marshal.dumps(output, 4)
        read_seconds += time.perf_counter() - start
    return new_seconds, read_seconds


async def own_cost_case(steps_count: int, repeats: int, image_mib: float, anchor: bool) -> None:
    """The wrapper's own cost on a save: ``OffloadingStepStore.save_snapshot`` time outside the inner store's,
    against the inner store's time in the wrapper, against the floor any exact wrapper pays (the media store's
    ``put`` and ``own_cost_floor``, timed in the same round) and (``anchor``) against the harness's FileStepStore
    with its own DiskMediaStore saving the same history alone (row (S1) / (1))."""
    series = {
        'structured outputs (S3)': build_structured_steps(steps_count),
        'images and logs (2)': build_steps(steps_count, image_mib),
    }
    print(f'{steps_count} steps per series; median of {repeats} rounds (each series once per round)')
    print(
        '| series | total save time (s) | inner store (s) | wrapper own (s) | own / inner '
        "| of which media put (s) | floor: new payloads' JSON or identifier (s) | floor: exact re-read of outputs (s) "
        '| floor / inner | own beyond floor / inner | harness FileStepStore alone (s) | own / harness alone |'
    )
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    runs: dict[str, list[tuple[float, ...]]] = {name: [] for name in series}
    for round_index in range(repeats):
        for name, steps in series.items():
            total, inner, put = await own_cost_once(steps)
            json_seconds, read_seconds = own_cost_floor(steps)
            alone = (await run_once(harness_file, steps)).seconds if anchor else float('nan')
            runs[name].append((total, inner, put, json_seconds, read_seconds, alone))
            print(
                f'  round {round_index + 1}: {name}: {total:.2f} s, inner {inner:.2f} s, media put {put:.2f} s, '
                f'floor new payloads {json_seconds:.2f} s, floor re-read {read_seconds:.2f} s, '
                f'harness alone {alone:.2f} s',
                file=sys.stderr,
                flush=True,
            )
    for name, measured in runs.items():
        total, inner, put, json_seconds, read_seconds, alone = (
            statistics.median(run[i] for run in measured) for i in range(6)
        )
        own_inner = statistics.median((t - i) / i for t, i, *_ in measured)
        floor_inner = statistics.median((p + j + r) / i for _, i, p, j, r, _ in measured)
        beyond = statistics.median((t - i - p - j - r) / i for t, i, p, j, r, _ in measured)
        own_alone = statistics.median((t - i) / a for t, i, *_, a in measured)
        print(
            f'| {name} | {total:.2f} | {inner:.2f} | {total - inner:.2f} | {own_inner:.2f}x '
            f'| {put:.2f} | {json_seconds:.2f} | {read_seconds:.2f} | {floor_inner:.2f}x | {beyond:.2f}x '
            f'| {alone:.2f} | {own_alone:.2f}x |'
        )


if __name__ == '__main__':
    asyncio.run(main())
