"""Conversation store benchmark: a durable pydantic-ai ConversationStore, plain and through OffloadingConversationStore.

Needs pydantic-ai 2.66+ (the latest stack). Run from the repository root::

    .venv-latest/bin/python benchmarks/conversations.py --runs 5
    .venv-latest/bin/python benchmarks/conversations.py --quick      # smoke run

A 50-turn conversation, each turn ``agent.run(prompt, conversation=...)`` on a
conversation loaded from the store and ``store.save(result)`` after it, with
pydantic-ai's real ``OpenAIChatModel`` and the OpenAI SDK against a local
chat-completions endpoint that records every request body
(``tests/provider_endpoint.py``). Every other turn's prompt carries a
100-300 KiB image; every fifth image is one sent before. The store is the
SQLite ``ConversationStore`` of ``tests/conversation_support.py`` (messages as
pydantic-ai JSON, a history read in one recursive query).

- plain: the SQLite store, the model gets every image as base64;
- wrapped: ``OffloadingConversationStore`` over the same kind of store with a
  ``DiskMediaStore``, and ``MediaUrls`` on that store with static URLs.

Measured per run: the database file's bytes (media folder apart), the time of
a whole-conversation ``load`` from new store objects, as a new process would
(the first load, then the median of 5 more with the operating system's file
cache warm; for the wrapper also with ``restore='references'``, which reads no
blob), checking that a load gives back every image, and the request bytes the
endpoint received over the 50 turns.
Variants alternate in order; the table shows medians and ranges over the runs.
See docs/benchmarks.md ("Conversation stores").
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationStore
from pydantic_ai.messages import BinaryContent, BinaryImage, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from mediastash import DiskMediaStore, make_static_public_url
from mediastash.integrations import MediaUrls, OffloadingConversationStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for the test helpers
from tests.conversation_support import SqliteConversationStore
from tests.provider_endpoint import ProviderEndpoint

KiB = 1 << 10
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
STATIC_BASE = 'https://media.example.com/blobs'
LOADS = 5

Variant = Literal['plain', 'wrapped']


def png_like(size: int, rng: random.Random) -> bytes:
    return PNG_SIGNATURE + rng.randbytes(size - len(PNG_SIGNATURE))


def make_images(turns: int, seed: int) -> list[bytes]:
    """One image per other turn, 100-300 KiB; every fifth is an earlier one again."""
    rng = random.Random(seed)
    images: list[bytes] = []
    for index in range((turns + 1) // 2):
        if index % 5 == 4:
            images.append(images[rng.randrange(len(images))])
        else:
            images.append(png_like(rng.randrange(100 * KiB, 300 * KiB), rng))
    return images


@dataclass
class RunResult:
    database_bytes: int
    media_bytes: int
    model_bytes: int
    conversation_seconds: float
    load_first: float
    load_warm: float
    load_references: float | None = None
    messages: int = 0


async def timed_loads(store: ConversationStore, conversation_id: str) -> tuple[float, float, Conversation]:
    """The first load's seconds, the median of ``LOADS`` more, and the conversation loaded."""
    started = time.perf_counter()
    first = await store.load(conversation_id)
    first_seconds = time.perf_counter() - started
    assert first is not None
    times = []
    for _ in range(LOADS):
        started = time.perf_counter()
        await store.load(conversation_id)
        times.append(time.perf_counter() - started)
    return first_seconds, statistics.median(times), first


async def one_run(variant: Variant, endpoint: ProviderEndpoint, images: list[bytes], turns: int) -> RunResult:
    with tempfile.TemporaryDirectory() as folder:
        inner = SqliteConversationStore(Path(folder) / 'conversations.db')
        media = DiskMediaStore(Path(folder) / 'media', public_url=make_static_public_url(STATIC_BASE))
        store: ConversationStore = inner
        capabilities: list[Any] = []
        if variant == 'wrapped':
            store = OffloadingConversationStore(inner, media_store=media)
            capabilities = [MediaUrls(media)]
        model = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key='bench'))
        agent = Agent(model, capabilities=capabilities)
        endpoint.clear()
        gc.collect()
        started = time.perf_counter()
        for turn in range(turns):
            conversation = await store.load('bench') or Conversation(conversation_id='bench')
            prompt: list[Any] = [f'Turn {turn + 1}: what do you see now?']
            if turn % 2 == 0:
                prompt.append(BinaryImage(data=images[turn // 2], media_type='image/png'))
            await store.save(await agent.run(prompt, conversation=conversation))
        seconds = time.perf_counter() - started
        model_bytes = endpoint.bytes_received
        database_bytes = inner.path.stat().st_size
        media_bytes = sum(path.stat().st_size for path in (Path(folder) / 'media').rglob('*') if path.is_file())

        if variant == 'wrapped':
            # As a new process would: a fresh wrapper (its known-blob cache empty) on the same storage.
            reader: ConversationStore = OffloadingConversationStore(
                SqliteConversationStore(inner.path), media_store=DiskMediaStore(Path(folder) / 'media')
            )
        else:
            reader = SqliteConversationStore(inner.path)
        first, warm, loaded = await timed_loads(reader, 'bench')
        sent = [images[turn // 2] for turn in range(0, turns, 2)]
        assert images_in(loaded) == sent, 'a load did not give back every image'
        result = RunResult(
            database_bytes, media_bytes, model_bytes, seconds, first, warm, messages=len(loaded.messages)
        )
        if variant == 'wrapped':
            lazy = OffloadingConversationStore(
                SqliteConversationStore(inner.path),
                media_store=DiskMediaStore(Path(folder) / 'media'),
                restore='references',
            )
            result.load_references = (await timed_loads(lazy, 'bench'))[1]
        await media.aclose()
        return result


def images_in(conversation: Conversation) -> list[bytes]:
    """The bytes of every ``BinaryContent`` of the conversation's user prompts, in order."""
    return [
        item.data
        for message in conversation.messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content
        if isinstance(item, BinaryContent)
    ]


def fmt_bytes(size: float) -> str:
    for unit, scale in (('MiB', 1 << 20), ('KiB', 1 << 10)):
        if size >= scale:
            return f'{size / scale:.1f} {unit}'
    return f'{size:.0f} B'


def fmt_ms(seconds: float) -> str:
    return f'{seconds * 1000:.1f} ms'


def median_range(values: list[float], fmt: Any) -> str:
    if len(values) == 1:
        return fmt(values[0])
    return f'{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})'


def render(results: dict[Variant, list[RunResult]], turns: int, images: list[bytes]) -> str:
    plain, wrapped = results['plain'], results['wrapped']

    def med(rows: list[RunResult], field: str) -> float:
        return statistics.median(getattr(row, field) for row in rows)

    lines = [
        f'{turns} turns, {len(images)} images ({len({*images})} distinct, '
        f'{fmt_bytes(sum(len(i) for i in images))} sent), {plain[0].messages} messages; '
        f'{len(plain)} runs per variant, interleaved; median (min-max)',
        '',
        '| | plain SQLite store | OffloadingConversationStore + MediaUrls | ratio |',
        '| --- | --- | --- | --- |',
    ]

    def row(name: str, field: str, fmt: Any, better: str) -> None:
        a, b = med(plain, field), med(wrapped, field)
        ratio = f'{a / b:.1f}x {better}' if b else '-'
        lines.append(
            f'| {name} | {median_range([getattr(r, field) for r in plain], fmt)} '
            f'| {median_range([getattr(r, field) for r in wrapped], fmt)} | {ratio} |'
        )

    row('database file', 'database_bytes', fmt_bytes, 'smaller')
    lines.append(f'| media store (disk) | - | {median_range([r.media_bytes for r in wrapped], fmt_bytes)} | - |')
    row(f'bytes sent to the model, {turns} turns', 'model_bytes', fmt_bytes, 'fewer')
    row('load, first (new store objects)', 'load_first', fmt_ms, 'faster')
    row('load, warm (median of 5)', 'load_warm', fmt_ms, 'faster')
    references = [r.load_references for r in wrapped if r.load_references is not None]
    lines.append(
        f"| load, warm, restore='references' | - | {median_range(references, fmt_ms)} "
        f'| {med(plain, "load_warm") / statistics.median(references):.1f}x faster |'
    )
    row(f'{turns} turns: load, run, save', 'conversation_seconds', lambda s: f'{s:.2f} s', 'faster')
    fewer = 1 - med(wrapped, 'model_bytes') / med(plain, 'model_bytes')
    lines += ['', f'Model bytes: {fewer:.1%} fewer with MediaUrls.']
    return '\n'.join(lines)


def versions() -> str:
    names = ('pydantic-ai-slim', 'openai', 'mediastash')
    found = ', '.join(f'{name} {metadata.version(name)}' for name in names)
    return f'Python {platform.python_version()}, {found}, {platform.machine()}'


async def measure(runs: int, turns: int, seed: int) -> tuple[dict[Variant, list[RunResult]], list[bytes]]:
    images = make_images(turns, seed)
    results: dict[Variant, list[RunResult]] = {'plain': [], 'wrapped': []}
    async with ProviderEndpoint() as endpoint:
        for run in range(runs):
            order: list[Variant] = ['plain', 'wrapped'] if run % 2 == 0 else ['wrapped', 'plain']
            for variant in order:
                result = await one_run(variant, endpoint, images, turns)
                results[variant].append(result)
                print(f'run {run + 1} {variant}: {result}', file=sys.stderr)
    return results, images


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--runs', type=int, default=3, help='runs per variant (default 3)')
    parser.add_argument('--turns', type=int, default=50, help='turns per conversation (default 50)')
    parser.add_argument('--seed', type=int, default=29)
    parser.add_argument('--quick', action='store_true', help='one run of 10 turns')
    args = parser.parse_args(argv)
    runs, turns = (1, 10) if args.quick else (args.runs, args.turns)
    results, images = asyncio.run(measure(runs, turns, args.seed))
    print(versions())
    print(render(results, turns, images))
    return 0


if __name__ == '__main__':
    sys.exit(main())
