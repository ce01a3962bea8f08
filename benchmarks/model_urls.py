"""Model URLs benchmark: what ``MediaUrls`` saves a multi-turn agent run, and what it costs per request.

Run from the repository root with the project venv active::

    python benchmarks/model_urls.py --runs 5     # about 2 minutes with SeaweedFS
    python benchmarks/model_urls.py --quick      # smoke run
    python benchmarks/model_urls.py --s3 none    # without the S3 presigned-URL row
    python benchmarks/model_urls.py --resume     # part (a): zero-download resume, 'bytes' vs 'references'
    python benchmarks/model_urls.py --provider-files  # part (b): documents by provider file id vs inline

A 20-turn agent run with pydantic-ai's real ``OpenAIChatModel`` and the OpenAI
SDK, against a local chat-completions endpoint (``tests/provider_endpoint.py``)
that records every request body; one new 1-2 MiB image enters the user prompt
every other turn and stays in the history, as in a real conversation. The run
is made without the capability, with ``MediaUrls`` on a ``MemoryMediaStore``
with a static URL resolver, and (``--s3``) with ``MediaUrls`` on an
``S3MediaStore`` handing out presigned URLs (a fresh bucket per run). Stores
are wrapped in ``CountingMediaStore``. Separately, ``MediaUrlSwapper.swap`` is
timed on a history of 100 image parts whose URLs are already cached. Every
variant runs ``--runs`` times, alternating the order, in one process and on
one event loop; the table shows medians and ranges.
See docs/benchmarks.md ("Model URLs") for results.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryImage, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from _servers import Server, ServerName, latency_proxy, s3_server
from mediastash import media_uri_for
from mediastash.integrations import MediaUrls
from mediastash.integrations.pydantic_ai.media_urls import MediaUrlSwapper
from mediastash.stores.memory import MemoryMediaStore
from mediastash.stores.protocols import MediaStore
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.testing import CountingMediaStore
from mediastash.urls import make_static_public_url
from mediastash.walker import WalkOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for the test endpoint
from tests.provider_endpoint import CapturedRequest, ProviderEndpoint
from tests.s3_servers import FaultProxy

MiB = 1 << 20
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
STATIC_BASE = 'https://media.example.com/blobs'
EXPIRES_IN = 3600
REGION = 'us-east-1'

Variant = Literal['without', 'static', 's3']
LABELS: dict[Variant, str] = {
    'without': 'without MediaUrls',
    'static': 'MediaUrls, static URLs (MemoryMediaStore)',
    's3': 'MediaUrls, S3 presigned URLs',
}


def png_like(size: int, rng: random.Random) -> bytes:
    """``size`` incompressible bytes behind a PNG signature."""
    return PNG_SIGNATURE + rng.randbytes(size - len(PNG_SIGNATURE))


def make_images(count: int, low_mib: float, high_mib: float, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [png_like(int(rng.uniform(low_mib, high_mib) * MiB), rng) for _ in range(count)]


def image_urls(request: CapturedRequest) -> list[str]:
    """Every ``image_url.url`` of the user messages of one chat-completions request, in order."""
    urls: list[str] = []
    for message in request.json['messages']:
        content = message.get('content')
        if message['role'] == 'user' and isinstance(content, list):
            urls.extend(part['image_url']['url'] for part in content if part.get('type') == 'image_url')
    return urls


def base64_probe(data: bytes) -> tuple[bytes, bytes]:
    """A 4,000-character slice of ``data``'s base64, standard and URL-safe alphabets."""
    chunk = data[300_000:303_000]
    return base64.b64encode(chunk), base64.urlsafe_b64encode(chunk)


@dataclass
class RunResult:
    """One 20-turn run of one variant."""

    seconds: float
    requests: int
    body_bytes: int
    puts: int = 0
    urls_issued: int = 0
    distinct_urls: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Sample:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Sample:
        return cls(statistics.median(values), min(values), max(values))


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f'{seconds * 1e6:.0f} µs'
    if seconds < 1:
        return f'{seconds * 1e3:.1f} ms'
    return f'{seconds:.2f} s'


def fmt_bytes(size: float) -> str:
    if size >= MiB:
        return f'{size / MiB:.1f} MiB'
    return f'{size / 1024:.1f} KiB'


def fmt_sample(sample: Sample, fmt: Callable[[float], str]) -> str:
    if sample.low == sample.high:
        return fmt(sample.median)
    return f'{fmt(sample.median)} ({fmt(sample.low)}-{fmt(sample.high)})'


class Bench:
    """The endpoint, the model and (optionally) the S3 server shared by every run."""

    def __init__(self, endpoint: ProviderEndpoint, server: Server | None, images: list[bytes], turns: int) -> None:
        self.endpoint = endpoint
        self.server = server
        self.images = images
        self.turns = turns
        self.model = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key='x'))
        self._s3_client: Any = None

    def s3_options(self) -> dict[str, Any]:
        assert self.server is not None
        return {
            'endpoint_url': self.server.url,
            'region_name': REGION,
            'aws_access_key_id': self.server.access_key_id,
            'aws_secret_access_key': self.server.secret_access_key,
        }

    async def new_bucket(self) -> str:
        if self._s3_client is None:
            config = AioConfig(signature_version='s3v4', s3={'addressing_style': 'path'})
            self._s3_client = await get_session().create_client('s3', config=config, **self.s3_options()).__aenter__()
        bucket = f'bench-urls-{uuid.uuid4().hex[:16]}'
        await self._s3_client.create_bucket(Bucket=bucket)
        # SeaweedFS allocates a new bucket's volumes on its first write: do that outside the timing.
        await self._s3_client.put_object(Bucket=bucket, Key='warm-up', Body=b'.')
        return bucket

    async def close(self) -> None:
        if self._s3_client is not None:
            await self._s3_client.__aexit__(None, None, None)

    async def agent_run(self, variant: Variant) -> RunResult:
        """One conversation of ``turns`` turns, a new image every other turn; returns what the endpoint received."""
        store: CountingMediaStore | None = None
        inner: MediaStore | None = None
        if variant == 'static':
            inner = MemoryMediaStore(public_url=make_static_public_url(STATIC_BASE, extension='.png'))
        elif variant == 's3':
            inner = S3MediaStore(
                bucket=await self.new_bucket(),
                public_url=PresignedUrls(
                    expires_in=EXPIRES_IN, response_content_type=True, response_content_disposition=True
                ),
                **self.s3_options(),
            )
            await inner.exists(media_uri_for(b''))  # open the client outside the timing
        capability = None
        if inner is not None:
            store = CountingMediaStore(inner)
            capability = MediaUrls(store)
        agent = Agent(self.model, capabilities=[capability] if capability is not None else [])
        self.endpoint.clear()
        history: list[ModelMessage] = []
        gc.collect()
        started = time.perf_counter()
        for turn in range(self.turns):
            prompt: list[Any] = [f'Turn {turn + 1}: what do you see now?']
            if turn % 2 == 0 and turn // 2 < len(self.images):
                prompt.append(BinaryImage(data=self.images[turn // 2], media_type='image/png'))
            result = await agent.run(prompt, message_history=history)
            history = result.all_messages()
        seconds = time.perf_counter() - started
        outcome = RunResult(seconds, len(self.endpoint.requests), self.endpoint.bytes_received)
        if store is not None and capability is not None:
            outcome.puts = store.calls['put'] + store.calls['put_stream']
            outcome.urls_issued = capability.swapper.urls_issued
            outcome.distinct_urls = self.check_urls()
            await store.aclose()
        return outcome

    def check_urls(self) -> list[int]:
        """Outside the timing: distinct URLs per image over every request, and no request holds an image's base64."""
        seen: list[set[str]] = [set() for _ in self.images]
        for request in self.endpoint.requests:
            urls = image_urls(request)
            for index, url in enumerate(urls):
                digest = media_uri_for(self.images[index]).rsplit('/', 1)[1]
                assert digest in url, f'image {index} sent as {url[:120]}'
                seen[index].add(url)
            for data in self.images:
                standard, url_safe = base64_probe(data)
                assert standard not in request.body and url_safe not in request.body
        return [len(urls) for urls in seen]

    async def swap_timing(self, parts: int, part_bytes: int, calls: int) -> tuple[float, float, list[float]]:
        """``swap`` on a history of ``parts`` image parts: first call (stores, hashes, asks URLs), then cached calls.

        Returns the first call's seconds, base64-encoding those parts once (what the request costs
        without the capability), and the seconds of each cached call.
        """
        rng = random.Random(parts)
        images = [png_like(part_bytes, rng) for _ in range(parts)]
        messages: list[ModelMessage] = []
        for turn in range(0, parts, 2):
            content: list[Any] = [f'Turn {turn // 2 + 1}.']
            content.extend(BinaryImage(data=data, media_type='image/png') for data in images[turn : turn + 2])
            messages.append(ModelRequest(parts=[UserPromptPart(content=content)]))
            messages.append(ModelResponse(parts=[TextPart('Noted.')]))
        swapper = MediaUrlSwapper(MemoryMediaStore(public_url=make_static_public_url(STATIC_BASE)))
        gc.collect()
        started = time.perf_counter()
        swapped = await swapper.swap(messages, model=self.model)
        first = time.perf_counter() - started
        assert swapper.urls_issued == parts
        assert sum(isinstance(item, BinaryImage) for item in _contents(swapped)) == 0
        started = time.perf_counter()
        for data in images:
            base64.b64encode(data)
        encode = time.perf_counter() - started
        samples: list[float] = []
        gc.collect()
        for _ in range(calls):
            started = time.perf_counter()
            await swapper.swap(messages, model=self.model)
            samples.append(time.perf_counter() - started)
        assert swapper.urls_issued == parts
        return first, encode, samples


def _contents(messages: list[ModelMessage]) -> list[object]:
    found: list[object] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                    found.extend(part.content)
    return found


def versions() -> str:
    names = ('mediastash', 'pydantic-ai-slim', 'openai', 'aiohttp', 'aiobotocore')
    found = []
    for name in names:
        try:
            found.append(f'{name} {metadata.version(name)}')
        except metadata.PackageNotFoundError:
            found.append(f'{name} (not installed)')
    return ', '.join(found)


async def measure(
    bench: Bench, variants: list[Variant], runs: int, swap_parts: int, swap_bytes: int, swap_calls: int, verbose: bool
) -> tuple[dict[Variant, list[RunResult]], list[float], list[float], list[float]]:
    results: dict[Variant, list[RunResult]] = {variant: [] for variant in variants}
    print('warm-up run of each variant ...', file=sys.stderr, flush=True)
    for variant in variants:
        await bench.agent_run(variant)
    for run in range(runs):
        shift = run % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            outcome = await bench.agent_run(variant)
            results[variant].append(outcome)
            if verbose:
                print(
                    f'    {variant:8} {outcome.seconds:.2f} s, {outcome.requests} requests, '
                    f'{fmt_bytes(outcome.body_bytes)}, {outcome.puts} puts, {outcome.urls_issued} URLs',
                    file=sys.stderr,
                )
        print(f'  agent runs: {run + 1}/{runs} done', file=sys.stderr, flush=True)
    firsts: list[float] = []
    encodes: list[float] = []
    medians: list[float] = []
    for run in range(runs):
        first, encode, samples = await bench.swap_timing(swap_parts, swap_bytes, swap_calls)
        firsts.append(first)
        encodes.append(encode)
        medians.append(statistics.median(samples))
        if verbose:
            print(
                f'    swap: first {fmt_time(first)}, cached median {fmt_time(medians[-1])} '
                f'(p90 {fmt_time(sorted(samples)[int(0.9 * len(samples))])}), base64 {fmt_time(encode)}',
                file=sys.stderr,
            )
        print(f'  swap timing: {run + 1}/{runs} done', file=sys.stderr, flush=True)
    return results, firsts, encodes, medians


def render(
    results: dict[Variant, list[RunResult]],
    firsts: list[float],
    encodes: list[float],
    medians: list[float],
    swap_parts: int,
    swap_bytes: int,
    images: int,
) -> list[str]:
    lines = [
        '| case | without MediaUrls | with MediaUrls | change | target | result |',
        '|---|---:|---:|---:|---:|:---:|',
    ]
    without = results['without']
    base_bytes = Sample.of([float(r.body_bytes) for r in without])
    base_time = Sample.of([r.seconds for r in without])
    for variant in ('static', 's3'):
        if variant not in results:
            continue
        rows = results[variant]
        label = 'static URLs' if variant == 'static' else 'S3 presigned URLs'
        body = Sample.of([float(r.body_bytes) for r in rows])
        saved = 1 - body.median / base_bytes.median
        lines.append(
            f'| request-body bytes, whole run, {label} | {fmt_sample(base_bytes, fmt_bytes)} | '
            f'{fmt_sample(body, fmt_bytes)} | {saved:.2%} fewer | ≥ 95% fewer | {"PASS" if saved >= 0.95 else "MISS"} |'
        )
        seconds = Sample.of([r.seconds for r in rows])
        lines.append(
            f'| wall time of the run (SDK + local endpoint), {label} | {fmt_sample(base_time, fmt_time)} | '
            f'{fmt_sample(seconds, fmt_time)} | {base_time.median / seconds.median:.1f}x faster | (info) | |'
        )
        distinct = max(max(r.distinct_urls) for r in rows)
        lines.append(
            f'| distinct URLs per image over the run, {label} | | {distinct} (max over images and runs) | | 1 | '
            f'{"PASS" if distinct == 1 else "MISS"} |'
        )
        puts = max(r.puts for r in rows)
        issued = max(r.urls_issued for r in rows)
        lines.append(
            f'| store puts / URLs asked per run, {label} | 0 / 0 | {puts} / {issued} | | '
            f'{images} / {images} (one per image) | {"PASS" if puts == images and issued == images else "MISS"} |'
        )
    cached = Sample.of(medians)
    lines.append(
        f'| `swap` per request, {swap_parts} image parts with cached URLs | base64 of those parts: '
        f'{fmt_sample(Sample.of(encodes), fmt_time)} | {fmt_sample(cached, fmt_time)} | | ≤ 1 ms | '
        f'{"PASS" if cached.median <= 1e-3 else "MISS"} |'
    )
    lines.append(
        f'| `swap`, first request (puts and hashes {fmt_bytes(swap_parts * swap_bytes)}, asks {swap_parts} URLs) | '
        f'| {fmt_sample(Sample.of(firsts), fmt_time)} | | (info) | |'
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').split('\n\n')[0])
    parser.add_argument('--runs', type=int, default=5, help='runs per variant; the median is reported (default 5)')
    parser.add_argument('--quick', action='store_true', help='6 turns, 2 runs, small swap timing: a smoke test')
    parser.add_argument('--verbose', action='store_true', help='print every sample to stderr')
    parser.add_argument('--turns', type=int, default=20, help='turns of the agent run (default 20)')
    parser.add_argument('--images', type=int, default=10, help='images added, one every other turn (default 10)')
    parser.add_argument('--s3', choices=('seaweedfs', 'moto', 'none'), default='seaweedfs', help='presigned-URL row')
    parser.add_argument('--swap-parts', type=int, default=100, help='image parts in the swap timing (default 100)')
    parser.add_argument('--swap-kib', type=int, default=1024, help='KiB per image in the swap timing (default 1024)')
    parser.add_argument('--swap-calls', type=int, default=200, help='cached swap calls per run (default 200)')
    parser.add_argument(
        '--provider-files', action='store_true', help='part (b) only: documents by provider file id vs inline'
    )
    parser.add_argument('--resume', action='store_true', help="part (a) only: resume with 'bytes' vs 'references'")
    parser.add_argument('--resume-steps', type=int, default=50, help='steps of the resumed run (default 50)')
    parser.add_argument('--resume-mib', type=float, default=200, help='MiB of images in the run (default 200)')
    parser.add_argument('--latency-ms', type=float, default=20, help='delay per S3 request in part (a) (default 20)')
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.turns, args.images, args.swap_calls, args.swap_kib = 2, 6, 3, 50, 128
    if args.runs < 1 or args.turns < 1 or args.images < 1:
        parser.error('--runs, --turns and --images must be at least 1')
    if args.resume:
        return resume_main(args)
    if args.provider_files:
        return provider_files_main(args)
    images = min(args.images, (args.turns + 1) // 2)
    pictures = make_images(images, 1.0, 2.0, seed=0)
    variants: list[Variant] = ['without', 'static'] + ([] if args.s3 == 'none' else ['s3'])
    swap_bytes = args.swap_kib * 1024

    async def go(server: Server | None) -> tuple[dict[Variant, list[RunResult]], list[float], list[float], list[float]]:
        async with ProviderEndpoint() as endpoint:
            bench = Bench(endpoint, server, pictures, args.turns)
            try:
                return await measure(
                    bench, variants, args.runs, args.swap_parts, swap_bytes, args.swap_calls, args.verbose
                )
            finally:
                await bench.close()

    if args.s3 == 'none':
        results, firsts, encodes, medians = asyncio.run(go(None))
    else:
        with s3_server(args.s3) as server:
            results, firsts, encodes, medians = asyncio.run(go(server))

    sent = sum(min(turn // 2 + 1, images) for turn in range(args.turns))
    info = [
        f'- machine: {platform.platform()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}',
        f'- Python {platform.python_version()} ({platform.python_implementation()}); {versions()}',
        f'- agent run: {args.turns} turns (one `agent.run(..., message_history=...)` each, one model request each), '
        f'{images} distinct PNG-like images of 1-2 MiB ({fmt_bytes(sum(map(len, pictures)))} in all), a new one in '
        f'the user prompt every other turn, {sent} image parts sent over the run; `OpenAIChatModel` and the OpenAI '
        'SDK against a local chat-completions endpoint on 127.0.0.1 that records each request body',
        f'- MediaUrls defaults (threshold 64 KiB, min_validity 600 s); static URLs: `MemoryMediaStore` with '
        f'`make_static_public_url`; S3: {"none" if args.s3 == "none" else args.s3} on 127.0.0.1, '
        f'`PresignedUrls(expires_in={EXPIRES_IN}, response_content_type=True, response_content_disposition=True)`, '
        'a fresh bucket per run; stores wrapped in `CountingMediaStore`',
        f'- one untimed warm-up run per variant, then {args.runs} runs each, alternating order; '
        f'`swap` timing: {args.swap_parts} image parts of {fmt_bytes(swap_bytes)} in {args.swap_parts // 2} user '
        f'prompts, median of {args.swap_calls} cached calls per run, {args.runs} runs',
    ]
    command = 'python benchmarks/model_urls.py' + (' --quick' if args.quick else f' --runs {args.runs}')
    if args.s3 != 'seaweedfs':
        command += f' --s3 {args.s3}'
    table = render(results, firsts, encodes, medians, args.swap_parts, swap_bytes, images)
    print('\n'.join([*info, '', *table, '', f'Rerun: `{command}`']))
    return 0


# -- Part (b): provider file references ------------------------------------------------------------
#
# A 20-turn run whose user prompts bring PDF documents, on models that take no document by URL
# (``OpenAIChatModel``: documents only as bytes or by Files API id; the Gemini API: nothing by URL
# but its own Files API URIs), so ``MediaUrls`` alone leaves every document inline. Measured:
# model-request bytes without ``MediaUrls`` and with ``MediaUrls(provider_files=True)`` (a store
# without public URLs), upload bytes, uploads per blob, and the run's time.


def make_documents(count: int, low_mib: float, high_mib: float, seed: int) -> list[bytes]:
    """``count`` incompressible PDF-like documents of ``low_mib``-``high_mib`` MiB."""
    rng = random.Random(seed)
    return [b'%PDF-1.7\n' + rng.randbytes(int(rng.uniform(low_mib, high_mib) * MiB) - 9) for _ in range(count)]


@dataclass
class FilesRun:
    """One run of part (b): model-request and upload bytes, uploads per distinct blob, time."""

    seconds: float
    requests: int
    request_bytes: int
    upload_bytes: int
    uploads_per_blob: list[int]


async def files_agent_run(
    endpoint: ProviderEndpoint, provider: str, documents: list[bytes], turns: int, with_files: bool, folder: Path
) -> FilesRun:
    """One ``turns``-turn run: a new document in the user prompt every other turn, kept in the history."""
    from pydantic_ai.messages import BinaryContent
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    from mediastash import DiskMediaStore

    model: Any
    if provider == 'openai-chat':
        model = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key='x'))
        api = 'openai'
    else:
        model = GoogleModel('gemini-2.5-flash', provider=GoogleProvider(api_key='x', base_url=endpoint.root_url))
        api = 'gemini'
    capabilities = [MediaUrls(DiskMediaStore(folder / uuid.uuid4().hex), provider_files=True)] if with_files else []
    agent = Agent(model, capabilities=capabilities)
    endpoint.clear()
    endpoint.uploads.clear()
    history: list[ModelMessage] = []
    gc.collect()
    started = time.perf_counter()
    for turn in range(turns):
        prompt: list[Any] = [f'turn {turn}: what changed?']
        if turn % 2 == 0 and turn // 2 < len(documents):
            prompt.append(BinaryContent(documents[turn // 2], media_type='application/pdf'))
        result = await agent.run(prompt, message_history=history)
        history = result.all_messages()
    seconds = time.perf_counter() - started
    model_requests = endpoint.model_requests(api)
    uploads: dict[bytes, int] = {}
    for upload in endpoint.uploads:
        uploads[upload.data] = uploads.get(upload.data, 0) + 1
    upload_bytes = sum(len(r.body) for r in endpoint.requests if r.api in ('files', 'gemini-files'))
    return FilesRun(
        seconds, len(model_requests), sum(len(r.body) for r in model_requests), upload_bytes, list(uploads.values())
    )


async def measure_provider_files(
    documents: list[bytes], turns: int, runs: int, verbose: bool
) -> dict[tuple[str, bool], list[FilesRun]]:
    """Every (provider, with provider files) variant ``runs`` times, alternating the order, after a warm-up."""
    import tempfile

    variants = [(provider, with_files) for provider in ('openai-chat', 'gemini') for with_files in (False, True)]
    results: dict[tuple[str, bool], list[FilesRun]] = {variant: [] for variant in variants}
    with tempfile.TemporaryDirectory() as folder:
        async with ProviderEndpoint() as endpoint:
            print('warm-up run of each variant ...', file=sys.stderr, flush=True)
            for provider, with_files in variants:
                await files_agent_run(endpoint, provider, documents[:1], 2, with_files, Path(folder))
            for run in range(runs):
                shift = run % len(variants)
                for provider, with_files in variants[shift:] + variants[:shift]:
                    outcome = await files_agent_run(endpoint, provider, documents, turns, with_files, Path(folder))
                    results[(provider, with_files)].append(outcome)
                    if verbose:
                        print(f'    {provider} files={with_files}: {outcome}', file=sys.stderr)
                print(f'  provider-files runs: {run + 1}/{runs} done', file=sys.stderr, flush=True)
    return results


def render_provider_files(results: dict[tuple[str, bool], list[FilesRun]]) -> list[str]:
    lines = [
        '| model | variant | model-request bytes | vs without | upload bytes | uploads per blob | run time |',
        '|---|---|---|---|---|---|---|',
    ]
    for provider in ('openai-chat', 'gemini'):
        without = statistics.median(r.request_bytes for r in results[(provider, False)])
        for with_files in (False, True):
            runs = results[(provider, with_files)]
            sent = Sample.of([float(r.request_bytes) for r in runs])
            uploads = [count for r in runs for count in r.uploads_per_blob]
            per_blob = (
                '-'
                if not uploads
                else f'{min(uploads)}-{max(uploads)}'
                if min(uploads) != max(uploads)
                else str(uploads[0])
            )
            lines.append(
                f'| {provider} | {"MediaUrls(provider_files=True)" if with_files else "without MediaUrls"} '
                f'| {fmt_sample(sent, fmt_bytes)} | {100 * (1 - sent.median / without):.2f}% fewer '
                f'| {fmt_bytes(statistics.median(r.upload_bytes for r in runs))} | {per_blob} '
                f'| {fmt_sample(Sample.of([r.seconds for r in runs]), fmt_time)} |'
            )
    return lines


def provider_files_main(args: argparse.Namespace) -> int:
    """Part (b) alone (``--provider-files``)."""
    count = min(args.images, (args.turns + 1) // 2)
    documents = make_documents(count, 1.0, 2.0, seed=1)
    results = asyncio.run(measure_provider_files(documents, args.turns, args.runs, args.verbose))
    sent = sum(min(turn // 2 + 1, count) for turn in range(args.turns))
    info = [
        f'- machine: {platform.platform()}, {os.cpu_count()} CPUs; Python {platform.python_version()}; {versions()}',
        f'- agent run: {args.turns} turns, {count} distinct PDF-like documents of 1-2 MiB '
        f'({fmt_bytes(sum(map(len, documents)))} in all), a new one in the user prompt every other turn, '
        f'{sent} document parts sent over the run; `OpenAIChatModel` (OpenAI SDK) and `GoogleModel` on the Gemini '
        'API (google-genai) against a local endpoint on 127.0.0.1 that implements the Files upload routes and '
        'records every request body',
        '- with: `MediaUrls(DiskMediaStore(tmp), provider_files=True)` (no public URLs); model-request bytes are '
        'the message requests only, upload bytes the Files API requests',
        f'- one warm-up run per variant, then {args.runs} runs each, alternating order; medians (ranges)',
    ]
    command = 'python benchmarks/model_urls.py --provider-files' + (
        ' --quick' if args.quick else f' --runs {args.runs}'
    )
    print('\n'.join([*info, '', *render_provider_files(results), '', f'Rerun: `{command}`']))
    return 0


# -- Part (a): zero-download resume -------------------------------------------------------------------
#
# A worker resumes a 50-step run whose history holds 200 MiB of images (one 4 MiB image a step), from
# ``OffloadingStepStore(FileStepStore, S3MediaStore)`` with presigned URLs, and sends the next model
# request with ``MediaUrls`` (``OpenAIChatModel`` at the local endpoint). Each resume is a fresh worker:
# new store objects and a new known-blob cache, so nothing is served from memory. Measured: bytes read
# from the store and the time from the start of the resume to the first model request, with
# ``restore='bytes'`` and ``restore='references'``, S3 requests through a proxy that adds a fixed delay.
# The worker's S3 client is opened before the timing (a worker does that when it starts).


class ReadCountingStore(CountingMediaStore):
    """``CountingMediaStore`` that also sums the bytes ``get`` returned."""

    def __init__(self, inner: MediaStore) -> None:
        super().__init__(inner)
        self.bytes_read = 0

    async def get(self, uri: str, *, context: Any = None) -> bytes:
        data = await (super().get(uri) if context is None else super().get(uri, context=context))
        self.bytes_read += len(data)
        return data


@dataclass
class ResumeRun:
    """One resume: seconds to the first model request, bytes and calls the store served."""

    seconds: float
    bytes_read: int
    gets: int
    s3_requests: int
    urls_sent: int


def resume_history(images: list[bytes]) -> list[ModelMessage]:
    """One step per image: a user prompt bringing it, and the model's answer."""
    history: list[ModelMessage] = []
    for step, data in enumerate(images):
        history.append(
            ModelRequest(
                parts=[UserPromptPart(content=[f'step {step}', BinaryImage(data=data, media_type='image/png')])]
            )
        )
        history.append(ModelResponse(parts=[TextPart(f'noted {step}')]))
    return history


async def resume_once(
    mode: Literal['bytes', 'references'], folder: Path, run_id: str, bucket: str, proxy: FaultProxy, server: Server
) -> ResumeRun:
    """Resume ``run_id`` as a fresh worker and send one model request; time until the request leaves.

    The worker's S3 client is opened first, outside the timing, as a worker does when it starts.
    """
    import httpx
    from pydantic_ai_harness.step_persistence import FileStepStore, continue_run

    from mediastash import KnownBlobCache
    from mediastash.integrations import OffloadingStepStore

    sent_at: list[float] = []

    async def on_request(request: httpx.Request) -> None:
        sent_at.append(time.perf_counter())

    async with ProviderEndpoint() as endpoint, httpx.AsyncClient(event_hooks={'request': [on_request]}) as http:
        s3 = S3MediaStore(
            bucket=bucket,
            public_url=PresignedUrls(expires_in=EXPIRES_IN),
            endpoint_url=proxy.endpoint.url,
            region_name=REGION,
            aws_access_key_id=server.access_key_id,
            aws_secret_access_key=server.secret_access_key,
        )
        async with s3:
            await s3.exists(media_uri_for(b''))  # opens the client
            before = len(proxy.seen())
            media = ReadCountingStore(s3)
            model = OpenAIChatModel(
                'gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key='x', http_client=http)
            )
            cache = KnownBlobCache()  # a fresh worker remembers nothing
            steps = OffloadingStepStore(
                FileStepStore(folder, media_store=None),
                media_store=media,
                restore=mode,
                options=WalkOptions(known_blobs=cache),
            )
            agent = Agent(model, capabilities=[MediaUrls(media, options=WalkOptions(known_blobs=cache))])
            gc.collect()
            started = time.perf_counter()
            history = await continue_run(steps, run_id=run_id)
            await agent.run('What changed since the last step?', message_history=history)
            seconds = sent_at[0] - started
            [request] = endpoint.model_requests('openai')
            urls = len(image_urls(request))
            s3_requests = len(proxy.seen()) - before
    return ResumeRun(seconds, media.bytes_read, media.calls['get'], s3_requests, urls)


async def measure_resume(
    server: Server, steps: int, image_mib: float, delay: float, runs: int, verbose: bool
) -> tuple[dict[str, list[ResumeRun]], int]:
    from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore

    from mediastash.integrations import OffloadingStepStore

    rng = random.Random(7)
    images = [png_like(int(image_mib * MiB), rng) for _ in range(steps)]
    bucket = f'bench-resume-{uuid.uuid4().hex[:12]}'
    session = get_session()
    options = {
        'endpoint_url': server.url,
        'region_name': REGION,
        'aws_access_key_id': server.access_key_id,
        'aws_secret_access_key': server.secret_access_key,
    }
    async with session.create_client('s3', config=AioConfig(), **options) as client:
        await client.create_bucket(Bucket=bucket)
    with tempfile.TemporaryDirectory(prefix='bench-resume-') as tmp:
        folder = Path(tmp) / 'steps'
        async with S3MediaStore(bucket=bucket, public_url=PresignedUrls(expires_in=EXPIRES_IN), **options) as s3:
            saver = OffloadingStepStore(FileStepStore(folder, media_store=None), media_store=s3)
            snapshot = ContinuableSnapshot(run_id='resume', step_index=steps, messages=resume_history(images))
            await saver.save_snapshot(snapshot)
        print(f'saved a {steps}-step run with {fmt_bytes(sum(map(len, images)))} of images', file=sys.stderr)
        del images
        results: dict[str, list[ResumeRun]] = {'bytes': [], 'references': []}
        with latency_proxy(server, delay) as proxy:
            modes: list[Literal['bytes', 'references']] = ['bytes', 'references']
            for mode in modes:  # warm-up: imports, connection set-up
                await resume_once(mode, folder, 'resume', bucket, proxy, server)
            for run in range(runs):
                for mode in modes if run % 2 == 0 else modes[::-1]:
                    outcome = await resume_once(mode, folder, 'resume', bucket, proxy, server)
                    results[mode].append(outcome)
                    if verbose:
                        print(
                            f'    {mode:10} {fmt_time(outcome.seconds)}, {fmt_bytes(outcome.bytes_read)} read, '
                            f'{outcome.gets} gets, {outcome.s3_requests} S3 requests, {outcome.urls_sent} URLs',
                            file=sys.stderr,
                        )
                print(f'  resumes: {run + 1}/{runs} done', file=sys.stderr, flush=True)
    return results, steps


def render_resume(results: dict[str, list[ResumeRun]], steps: int) -> list[str]:
    plain, lean = results['bytes'], results['references']
    read_plain = Sample.of([float(r.bytes_read) for r in plain])
    read_lean = Sample.of([float(r.bytes_read) for r in lean])
    time_plain = Sample.of([r.seconds for r in plain])
    time_lean = Sample.of([r.seconds for r in lean])
    speedup = time_plain.median / time_lean.median
    urls_ok = all(r.urls_sent == steps for r in plain + lean)
    return [
        "| case | restore='bytes' | restore='references' | change | target | result |",
        '|---|---:|---:|---:|---:|:---:|',
        f'| bytes read from the media store | {fmt_sample(read_plain, fmt_bytes)} | {fmt_sample(read_lean, fmt_bytes)} '
        f'| | 0 | {"PASS" if read_lean.high == 0 else "MISS"} |',
        f'| store gets / S3 requests (median) | {statistics.median(r.gets for r in plain):g} / '
        f'{statistics.median(r.s3_requests for r in plain):g} | {statistics.median(r.gets for r in lean):g} / '
        f'{statistics.median(r.s3_requests for r in lean):g} | | (info) | |',
        f'| time from resume to first model request | {fmt_sample(time_plain, fmt_time)} | '
        f'{fmt_sample(time_lean, fmt_time)} | {speedup:.1f}x shorter | ≥ 10x | {"PASS" if speedup >= 10 else "MISS"} |',
        f'| image URLs in the request ({steps} expected) | {plain[0].urls_sent} | {lean[0].urls_sent} | | '
        f'{steps} | {"PASS" if urls_ok else "MISS"} |',
    ]


def resume_main(args: argparse.Namespace) -> int:
    """Part (a) alone (``--resume``)."""
    steps, image_mib = (10, 1.0) if args.quick else (args.resume_steps, args.resume_mib / args.resume_steps)
    server_name: ServerName = 'moto' if args.s3 == 'none' else args.s3
    with s3_server(server_name) as server:
        results, steps = asyncio.run(
            measure_resume(server, steps, image_mib, args.latency_ms / 1000, args.runs, args.verbose)
        )
    info = [
        f'- machine: {platform.platform()}, {os.cpu_count()} CPUs; Python {platform.python_version()}; {versions()}',
        f'- run: {steps} steps, one PNG-like image of {fmt_bytes(image_mib * MiB)} per step '
        f'({fmt_bytes(steps * image_mib * MiB)} in all), saved as one snapshot through '
        f'`OffloadingStepStore(FileStepStore, S3MediaStore)` ({server_name} on 127.0.0.1)',
        '- resume: a fresh worker each time (new store objects, their S3 client opened before the timing as a worker '
        'does at start-up, a new known-blob cache): `continue_run`, then one '
        '`agent.run` with `MediaUrls(S3MediaStore, PresignedUrls)` on `OpenAIChatModel` at a local endpoint; '
        f'every S3 request goes through a proxy adding {args.latency_ms:g} ms; the time ends when the model '
        'request leaves the HTTP client',
        f'- one warm-up resume per mode, then {args.runs} of each, alternating order; medians (ranges)',
    ]
    command = 'python benchmarks/model_urls.py --resume' + (' --quick' if args.quick else f' --runs {args.runs}')
    if args.s3 not in ('seaweedfs', 'none'):
        command += f' --s3 {args.s3}'
    print('\n'.join([*info, '', *render_resume(results, steps), '', f'Rerun: `{command}`']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
