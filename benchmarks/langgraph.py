"""LangGraph benchmark: a ``StateGraph`` on ``AsyncSqliteSaver``, plain vs wrapped in ``OffloadingCheckpointSaver``.

Run from the repository root with the project venv active::

    python benchmarks/langgraph.py                 # 30 steps of 300 KiB images, 100 steps of 100 KiB, 3 runs each
    python benchmarks/langgraph.py --quick         # 10 and 30 steps of 100 KiB images, 1 run
    python benchmarks/langgraph.py --runs 5 --cases 30:300,100:300

The graph is ``tests/test_integrations_langgraph_graph.py``'s: one node run
once per super-step, each adding a user message with a fresh image (standard
base64 block, OpenAI ``image_url`` data URL and Anthropic ``source`` in turn)
and, every tenth step, an AI tool call with a 100 KiB tool result.
``add_messages`` keeps the whole history in the ``messages`` channel, which
``AsyncSqliteSaver`` writes again at every step. The wrapped run stores media
in a ``DiskMediaStore``. Plain and wrapped runs alternate (plain first in odd
runs, wrapped first in even ones), each on a fresh database in a temporary
folder; reported are medians of: database bytes (the SQLite file and its WAL
after the run), media-store bytes, total ``ainvoke`` time, ``aget_state`` time
and ``aget_state_history`` time (every checkpoint of the run), with the ratio
plain / wrapped for each. The wrapped reads are served by the known-blob cache
the run filled; the *cold* reads go through a second wrapper with
``known_blobs=False``, which reads and verifies every blob from the store (a
new process resuming); the plain saver just reads again.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This file's name is the package's: its folder must not shadow ``langgraph``; the repository root gives ``tests``.
sys.path[:] = [entry for entry in sys.path if Path(entry or '.').resolve() != HERE]
sys.path.insert(0, str(HERE.parent))
from tests.test_integrations_langgraph_graph import GraphRun, run_graph  # noqa: E402

from mediastash import __version__  # noqa: E402

KiB = 1 << 10
MiB = 1 << 20
TOOL_BYTES = 100 * KiB


@dataclass
class Samples:
    database: list[float] = field(default_factory=list)
    media: list[float] = field(default_factory=list)
    run: list[float] = field(default_factory=list)
    state: list[float] = field(default_factory=list)
    history: list[float] = field(default_factory=list)
    cold_state: list[float] = field(default_factory=list)
    cold_history: list[float] = field(default_factory=list)

    def add(self, run: GraphRun, media_bytes: int) -> None:
        self.database.append(run.database_bytes)
        self.media.append(media_bytes)
        self.run.append(run.seconds)
        self.state.append(run.state_seconds)
        self.history.append(run.history_seconds)
        self.cold_state.append(run.cold_state_seconds)
        self.cold_history.append(run.cold_history_seconds)


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob('*') if path.is_file())


async def one(wrapped: bool, steps: int, image_bytes: int, samples: Samples) -> None:
    folder = Path(tempfile.mkdtemp(prefix='mediastash-langgraph-'))
    try:
        media = folder / 'media' if wrapped else None
        run = await run_graph(folder / 'checkpoints.db', steps, image_bytes, TOOL_BYTES, media=media)
        samples.add(run, folder_bytes(media) if media is not None else 0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def case(steps: int, image_bytes: int, runs: int) -> tuple[Samples, Samples]:
    plain, wrapped = Samples(), Samples()
    for index in range(runs):
        order = (False, True) if index % 2 == 0 else (True, False)
        for is_wrapped in order:
            await one(is_wrapped, steps, image_bytes, wrapped if is_wrapped else plain)
            if hasattr(os, 'sync'):
                os.sync()
        print(f'  {steps} steps, run {index + 1}/{runs} done', file=sys.stderr)
    return plain, wrapped


def median(values: list[float]) -> float:
    return statistics.median(values)


def size(value: float) -> str:
    return f'{value / MiB:.1f} MiB' if value >= MiB else f'{value / KiB:.0f} KiB'


def ms(value: float) -> str:
    return f'{value * 1000:.0f} ms'


def table(results: list[tuple[int, int, Samples, Samples]]) -> str:
    lines = [
        '| steps, image | measure | plain | wrapped | plain / wrapped |',
        '|---|---|---:|---:|---:|',
    ]
    for steps, image_bytes, plain, wrapped in results:
        label = f'{steps}, {image_bytes // KiB} KiB'
        rows = [
            ('checkpoint database', plain.database, wrapped.database, size),
            ('media store', plain.media, wrapped.media, size),
            ('run (`ainvoke`)', plain.run, wrapped.run, ms),
            ('`aget_state`', plain.state, wrapped.state, ms),
            ('`aget_state_history`', plain.history, wrapped.history, ms),
            ('`aget_state`, cold', plain.cold_state, wrapped.cold_state, ms),
            ('`aget_state_history`, cold', plain.cold_history, wrapped.cold_history, ms),
        ]
        for name, ours, theirs, unit in rows:
            a, b = median(ours), median(theirs)
            ratio = f'{a / b:.1f}x' if a and b else '-'
            lines.append(f'| {label} | {name} | {unit(a)} | {unit(b)} | {ratio} |')
    return '\n'.join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=3, help='runs of each variant per case (default 3)')
    parser.add_argument(
        '--cases', default='30:300,100:100', help='STEPS:IMAGE_KIB pairs, comma-separated (default 30:300,100:100)'
    )
    parser.add_argument('--quick', action='store_true', help='10:100,30:100 with 1 run')
    args = parser.parse_args()
    spec = '10:100,30:100' if args.quick else args.cases
    runs = 1 if args.quick else args.runs
    cases = [tuple(int(part) for part in item.split(':')) for item in spec.split(',')]
    results: list[tuple[int, int, Samples, Samples]] = []
    for steps, image_kib in cases:
        plain, wrapped = asyncio.run(case(steps, image_kib * KiB, runs))
        results.append((steps, image_kib * KiB, plain, wrapped))
    print(
        f'mediastash {__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}, '
        f'{os.cpu_count()} CPUs; medians of {runs} interleaved runs; tool result {TOOL_BYTES // KiB} KiB every 10 steps'
    )
    print()
    print(table(results))


if __name__ == '__main__':
    main()
