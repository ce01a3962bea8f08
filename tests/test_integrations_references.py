"""Zero-download resume: ``OffloadingStepStore(restore='references')`` with ``MediaUrls`` (issue 20, part 1).

The headline test saves a real agent run (8 x 1 MiB images and a PDF) through
``OffloadingStepStore(FileStepStore, S3 on moto with presigned URLs)``, then
resumes it in a fresh Python process with ``restore='references'`` and
``MediaUrls`` on pydantic-ai's ``OpenAIChatModel`` pointed at a local
recording endpoint, counting every store call with ``CountingMediaStore``.
The other tests check the reference parts themselves: what a restore gives,
what a save writes (byte for byte the markers of the original bytes), the
``OffloadingKV`` route, lazy reads, and the loud failure without ``MediaUrls``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    FileStepStore,
    InMemoryStepStore,
    StepPersistence,
)
from pydantic_ai_persistence import InMemoryAsyncKV

from mediastash import (
    InvalidArgumentError,
    KnownBlobCache,
    MediaNotFoundError,
    MemoryMediaStore,
    StoreUnavailableError,
    media_uri_for,
)
from mediastash.integrations import MediaUrls, OffloadingKV, OffloadingStepStore
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.testing import CountingMediaStore
from mediastash.urls import make_static_public_url
from mediastash.walker import WalkOptions
from tests.provider_endpoint import CapturedRequest, ProviderEndpoint
from tests.s3_servers import S3Endpoint, unique_bucket
from tests.test_store_s3 import RawBucket

MiB = 1 << 20
THRESHOLD = 1024
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def png_like(size: int, seed: int) -> bytes:
    return PNG_SIGNATURE + random.Random(seed).randbytes(size - len(PNG_SIGNATURE))


def pdf_like(size: int, seed: int) -> bytes:
    return b'%PDF-1.7\n' + random.Random(seed).randbytes(size - 9)


def base64_slices(data: bytes) -> tuple[bytes, bytes]:
    """A slice of ``data``'s base64 in both alphabets (the slice starts at a byte offset divisible by 3)."""
    chunk = data[3000:6000]
    return base64.b64encode(chunk), base64.urlsafe_b64encode(chunk)


def carries(body: bytes, data: bytes) -> bool:
    standard, url_safe = base64_slices(data)
    return standard in body or url_safe in body


def openai_user_items(request: CapturedRequest) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in request.json['messages']:
        content = message.get('content')
        if message['role'] == 'user' and isinstance(content, list):
            items.extend(content)
    return items


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart('noted')])


def contents(messages: list[ModelMessage]) -> list[Any]:
    """Every item of every user prompt's content list, and every tool return's content."""
    out: list[Any] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                    out.extend(part.content)
                elif isinstance(part, ToolReturnPart):
                    out.append(part.content)
    return out


def snapshot(messages: list[ModelMessage], step: int, run_id: str = 'run-1') -> ContinuableSnapshot:
    return ContinuableSnapshot(run_id=run_id, step_index=step, messages=messages, state='complete')  # type: ignore[arg-type]


def mixed_history() -> list[ModelMessage]:
    """User prompt and tool return media of every kind, an explicit identifier, vendor metadata and big text.

    Validated once from JSON, so each ``BinaryContent`` has the class pydantic-ai narrows it to on a restore.
    """
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                UserPromptPart(
                    content=[
                        'look at these',
                        BinaryContent(
                            data=png_like(5000, 1), media_type='image/png', vendor_metadata={'detail': 'low'}
                        ),
                        BinaryContent(data=pdf_like(6000, 2), media_type='application/pdf', identifier='report-7'),
                        BinaryContent(data=random.Random(4).randbytes(4000), media_type='audio/wav'),
                        BinaryContent(data=b'\x00' * 3000, media_type='video/mp4'),
                        BinaryContent(
                            data=random.Random(5).randbytes(100), media_type='image/png'
                        ),  # below the threshold
                    ]
                )
            ]
        ),
        ModelResponse(
            parts=[TextPart('calling the tool'), ToolCallPart(tool_name='chart', args={}, tool_call_id='c1')]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name='chart',
                    content=BinaryContent(data=png_like(7000, 3), media_type='image/png'),
                    tool_call_id='c1',
                ),
                UserPromptPart(content='t' * 5000),
            ]
        ),
    ]
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))


async def inner_json(inner: InMemoryStepStore, run_id: str = 'run-1') -> list[str]:
    """The JSON text of each message the inner store holds for the run's latest snapshot (envelopes included)."""
    latest = await inner.latest_snapshot(run_id=run_id)
    assert latest is not None
    return [json.dumps(item) for item in ModelMessagesTypeAdapter.dump_python(list(latest.messages), mode='json')]


def steps_over(inner: InMemoryStepStore, media: Any, **options: Any) -> OffloadingStepStore:
    walk = {key: options.pop(key) for key in ('known_blobs', 'max_concurrency') if key in options}
    return OffloadingStepStore(
        inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD, **walk), **options
    )


async def saved(media: Any) -> tuple[InMemoryStepStore, list[ModelMessage], list[str]]:
    """``mixed_history()`` saved with its bytes: the inner store, the history, the JSON of what was stored."""
    inner = InMemoryStepStore()
    history = mixed_history()
    await steps_over(inner, media).save_snapshot(snapshot(history, 1))
    return inner, history, await inner_json(inner)


async def restored_messages(steps: OffloadingStepStore) -> list[ModelMessage]:
    latest = await steps.latest_snapshot(run_id='run-1')
    assert latest is not None
    return list(latest.messages)


# -- reference parts: restore, save, bytes again --------------------------------------------


async def test_references_restore_reads_no_blob_and_a_save_writes_the_same_markers() -> None:
    media = CountingMediaStore(MemoryMediaStore())
    inner, history, original = await saved(media)

    # A fresh known-blob cache: this process knows nothing of the save, as a fresh worker would not.
    steps = steps_over(inner, media, known_blobs=KnownBlobCache(), restore='references')
    media.reset()
    restored = await steps.latest_snapshot(run_id='run-1')
    assert restored is not None
    assert media.calls['get'] == 1  # only the big text payload: text is part of the prompt, so it is read
    assert media.calls['get_stream'] == 0

    image, pdf, audio, video, small = restored.messages[0].parts[0].content[1:]  # type: ignore[union-attr]
    originals = history[0].parts[0].content[1:]  # type: ignore[union-attr]
    assert [type(part) for part in (image, pdf, audio, video)] == [ImageUrl, DocumentUrl, AudioUrl, type(video)]
    assert type(video).__name__ == 'VideoUrl'
    for part, content in zip((image, pdf, audio, video), originals, strict=False):
        uri, seal = part.url.split('#')
        assert uri == media_uri_for(content.data) and seal.startswith('ms1.')  # vouched: sealed by the restore
        assert part.media_type == content.media_type
        assert part.identifier == content.identifier
        assert part.vendor_metadata == content.vendor_metadata
    assert pdf.identifier == 'report-7'
    assert image.vendor_metadata == {'detail': 'low'}
    assert small == originals[4]  # below the threshold: never stored, still bytes
    tool_return = restored.messages[2].parts[0]
    assert isinstance(tool_return.content, ImageUrl)
    assert tool_return.content.url.startswith(media_uri_for(history[2].parts[0].content.data) + '#ms1.')  # type: ignore[union-attr]
    assert restored.messages[2].parts[1].content == 't' * 5000

    # Saving the reference history writes exactly what the bytes wrote: every message's JSON, byte for byte.
    media.reset()
    await steps.save_snapshot(snapshot(list(restored.messages), 2))
    assert media.calls['get'] == 0 and media.calls['put'] == 0
    assert await inner_json(inner) == original

    # And a 'bytes' restore of that save gives the original history back.
    assert await restored_messages(steps_over(inner, media)) == history


async def test_a_copied_reference_history_saves_the_same_lean_json() -> None:
    """A run copies the messages it is given: the save still writes the original envelopes, sizes included."""
    media = MemoryMediaStore()
    inner, _, original = await saved(media)
    steps = steps_over(inner, media, restore='references')
    restored = await restored_messages(steps)
    copied = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(restored))
    assert copied[0] is not restored[0]
    await steps.save_snapshot(snapshot(copied, 2))
    assert await inner_json(inner) == original
    assert 'KiB stored as media+sha256://' in original[0]  # the stand-ins keep the payload sizes


async def test_an_unchanged_message_is_not_searched_for_references_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: every save repeats the history; a message the walker meets unchanged (its exact state check) is
    not searched for reference parts again, its answer is kept with its state. One changed in place to hold a
    reference part is searched and saved with its marker: what a wrapper saving it for the first time writes."""
    from mediastash.integrations.pydantic_ai import _typed

    searched: list[int] = []
    original_search = _typed.has_reference_parts

    def counting(message: ModelMessage) -> bool:
        searched.append(id(message))
        return original_search(message)

    monkeypatch.setattr(_typed, 'has_reference_parts', counting)
    media = MemoryMediaStore()
    inner, _, _ = await saved(media)
    steps = steps_over(inner, media, restore='references')
    restored = await restored_messages(steps)
    plain = ModelRequest(parts=[UserPromptPart(content=['nothing stored here'])])
    history = [*restored, plain]
    holding = [id(m) for m in history if _typed.has_reference_parts(m)]
    assert len(holding) == 2 and id(plain) not in holding

    await steps.save_snapshot(snapshot(history, 2))
    before = await inner_json(inner)
    searched.clear()
    await steps.save_snapshot(snapshot(history, 3))
    assert searched == []  # every message unchanged: the answers of the first save hold
    assert await inner_json(inner) == before  # and its reference parts are still written as markers

    reference = restored[0].parts[0].content[1]  # type: ignore[union-attr,index]
    assert isinstance(reference, ImageUrl)
    plain.parts[0].content.append(reference)  # type: ignore[union-attr]
    searched.clear()
    await steps.save_snapshot(snapshot(history, 4))
    assert searched == [id(plain)]
    written = await inner_json(inner)
    assert written[:-1] == before[:-1] and written[-1] != before[-1]
    fresh = InMemoryStepStore()  # a wrapper saving the changed message first (the others' sizes it cannot know)
    await steps_over(fresh, media, restore='references').save_snapshot(snapshot(history, 4))
    assert written[-1] == (await inner_json(fresh))[-1]
    assert reference.url.split('#')[0] in written[-1]  # the new message is an envelope naming the image's blob


async def test_a_save_without_the_url_safe_stamp_in_memory_reads_the_blob_once() -> None:
    """The one field a URL part cannot hold, the URL-safe stamp, is read from the blob if this process never saw it."""
    media = CountingMediaStore(MemoryMediaStore())
    inner, _, original = await saved(media)
    restored = await restored_messages(steps_over(inner, media, restore='references'))

    # Hand-made references (no restore in this process told the stamp) for a store with an empty cache.
    from mediastash.integrations.pydantic_ai import _references

    _references._urlsafe_by_uri.clear()
    fresh = steps_over(InMemoryStepStore(), media, known_blobs=False)
    media.reset()
    await fresh.save_snapshot(snapshot(restored, 1))
    assert media.calls['get'] == 5  # each referenced blob once: 4 prompt media and the tool's chart
    assert [json.loads(text)['metadata'] for text in await inner_json(fresh.inner)] == [
        json.loads(text)['metadata'] for text in original
    ]


async def test_a_bytes_restore_then_save_keeps_the_url_safe_stamp() -> None:
    """Restoring bytes in a process that did not store them and saving again writes the same markers."""
    media = MemoryMediaStore()
    inner, _, original = await saved(media)
    assert '__harness_external_urlsafe__' in original[0]
    steps = steps_over(inner, media, known_blobs=KnownBlobCache())
    await steps.save_snapshot(snapshot(await restored_messages(steps), 2))
    assert await inner_json(inner) == original


async def test_offloading_kv_writes_the_markers_of_reference_parts() -> None:
    media = CountingMediaStore(MemoryMediaStore())
    inner, history, _ = await saved(media)
    kv = OffloadingKV(InMemoryAsyncKV(), media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD))
    await kv.put('runs', 'bytes', ModelMessagesTypeAdapter.dump_json(history).decode())
    lean_of_bytes = await kv.inner.get('runs', 'bytes')

    restored = await restored_messages(steps_over(inner, media, restore='references'))
    media.reset()
    await kv.put('runs', 'references', ModelMessagesTypeAdapter.dump_json(restored).decode())
    assert media.calls['get'] == 0
    assert await kv.inner.get('runs', 'references') == lean_of_bytes

    # The wrapper hands its own writes back as written; another reader gets the bytes.
    assert await kv.get('runs', 'references') == ModelMessagesTypeAdapter.dump_json(restored).decode()
    read = await OffloadingKV(kv.inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD)).get(
        'runs', 'references'
    )
    assert read is not None
    assert ModelMessagesTypeAdapter.validate_json(read) == history


async def test_restore_mode_is_checked() -> None:
    with pytest.raises(InvalidArgumentError, match="restore must be 'bytes' or 'references'") as caught:
        OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore(), restore='urls')  # type: ignore[arg-type]
    assert 'urls' not in str(caught.value)
    steps = OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore(), restore='references')
    assert steps.restore_mode == 'references'
    assert "restore='references'" in repr(steps)


# -- MediaUrls with reference parts ----------------------------------------------------------


async def reference_history(media: Any) -> list[ModelMessage]:
    inner, _, _ = await saved(media)
    return await restored_messages(steps_over(inner, media, known_blobs=KnownBlobCache(), restore='references'))


async def test_media_urls_reads_a_reference_only_when_it_cannot_go_by_url() -> None:
    """Images by URL; every other kind read lazily, once per blob however many requests send it."""
    media = CountingMediaStore(MemoryMediaStore(public_url=make_static_public_url('https://cdn.example/media')))
    history = await reference_history(media)
    seen: list[list[Any]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(contents(messages))
        return ModelResponse(parts=[TextPart('ok')])

    # A threshold above every blob: it is for bytes in hand; a reference part is always resolved.
    capability = MediaUrls(
        media, kinds=['image'], options=WalkOptions(threshold_bytes=1 << 30, known_blobs=KnownBlobCache())
    )
    agent = Agent(FunctionModel(model), capabilities=[capability])
    media.reset()
    first = await agent.run('again?', message_history=history)
    await agent.run('and again?', message_history=first.all_messages())

    assert len(seen) == 2, seen
    originals = contents(mixed_history())
    for sent in seen:
        image, pdf, audio, video, small, chart = sent[1:7]
        assert isinstance(image, ImageUrl) and image.url.startswith('https://cdn.example/media/')
        assert image.vendor_metadata == {'detail': 'low'} and image.identifier == originals[1].identifier
        assert isinstance(chart, ImageUrl) and chart.url.startswith('https://cdn.example/media/')
        for got, want in ((pdf, originals[2]), (audio, originals[3]), (video, originals[4])):
            assert isinstance(got, BinaryContent)
            assert (got.data, got.media_type, got.identifier) == (want.data, want.media_type, want.identifier)
        assert small == originals[5]
    assert media.calls['get'] == 3  # pdf, audio, video: once each over both requests
    assert media.calls['public_url'] == 2  # the two images, once each
    # The run's history keeps the reference parts.
    assert isinstance(contents(first.all_messages())[2], DocumentUrl)


@pytest.mark.parametrize('cache', ['fresh', 'shared'])
async def test_a_store_without_urls_inlines_every_reference(cache: str) -> None:
    """No URL to give: every reference is inlined, read once, or not at all when the known-blob cache holds it."""
    media = CountingMediaStore(MemoryMediaStore())
    history = await reference_history(media)  # this process saved the blobs: the store's shared cache holds them
    sent: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.extend(contents(messages))
        return ModelResponse(parts=[TextPart('ok')])

    known = KnownBlobCache() if cache == 'fresh' else True
    media.reset()
    await Agent(
        FunctionModel(model),
        capabilities=[MediaUrls(media, options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=known))],
    ).run('go', message_history=history)
    originals = contents(mixed_history())
    assert [item.data for item in sent[1:6]] == [item.data for item in originals[1:6]]
    assert sent[6].data == originals[6].data
    assert media.calls['get'] == (5 if cache == 'fresh' else 0)


def provider_model(api: str, endpoint: ProviderEndpoint) -> Model:
    if api == 'openai':
        return OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key='test'))
    provider = AnthropicProvider(base_url=endpoint.anthropic_base_url, api_key='test')
    return AnthropicModel('claude-sonnet-4-5', provider=provider)


@pytest.mark.parametrize('api', ['openai', 'anthropic'])
async def test_a_reference_part_without_media_urls_fails_before_any_request(api: str) -> None:
    media = MemoryMediaStore()
    history = await reference_history(media)
    async with ProviderEndpoint() as endpoint:
        with pytest.raises(ValueError, match='URL protocol "media\\+sha256" is not allowed'):
            await Agent(provider_model(api, endpoint)).run('go', message_history=history)
        assert endpoint.requests == []


# -- the headline: a fresh process resumes a run without downloading ------------------------

CHILD = r"""
import asyncio, json, sys
from pathlib import Path
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai_harness.step_persistence import FileStepStore, StepPersistence, continue_run
from mediastash.integrations import MediaUrls, OffloadingStepStore
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.testing import CountingMediaStore
from mediastash.urls import make_static_public_url

config = json.loads(sys.argv[1])

async def main():
    s3 = S3MediaStore(bucket=config['bucket'], public_url=PresignedUrls(expires_in=900), **config['s3'])
    async with s3:
        media = CountingMediaStore(s3)
        steps = OffloadingStepStore(FileStepStore(Path(config['steps']), media_store=None), media_store=media,
                                    restore='references')
        history = await continue_run(steps, run_id=config['run_id'])
        kinds = [type(item).__name__ for item in history[0].parts[0].content]
        model = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=config['base_url'], api_key='test'))
        agent = Agent(model, capabilities=[MediaUrls(media), StepPersistence(store=steps)])
        first = await agent.run('What changed?', message_history=history)
        await agent.run('And now?', message_history=first.all_messages())
        print(json.dumps({'calls': dict(media.calls), 'kinds': kinds}))

asyncio.run(main())
"""


@pytest.fixture
async def bucket(moto_server: S3Endpoint) -> AsyncIterator[RawBucket]:
    raw = await RawBucket(moto_server, unique_bucket('refs')).open()
    await raw.create()
    yield raw
    await raw.close()


def snapshot_files(steps: Path, run_id: str) -> list[Path]:
    return sorted((steps / run_id).rglob('*.json'), key=lambda path: int(path.stem) if path.stem.isdigit() else -1)


async def test_a_fresh_process_resumes_with_no_blob_download(
    tmp_path: Path, moto_server: S3Endpoint, bucket: RawBucket
) -> None:
    images = [png_like(MiB, seed) for seed in range(8)]
    pdf = pdf_like(300_000, 99)
    prompt: list[Any] = ['Compare these.', *(BinaryContent(data=data, media_type='image/png') for data in images)]
    prompt.append(BinaryContent(data=pdf, media_type='application/pdf', identifier='spec'))
    s3 = S3MediaStore(bucket=bucket.bucket, public_url=PresignedUrls(expires_in=900), **moto_server.client_options())
    async with s3:
        steps = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=s3)
        await Agent(FunctionModel(reply), capabilities=[StepPersistence(store=steps)]).run(prompt)
        [first_run] = [record.run_id for record in await steps.list_runs()]

        async with ProviderEndpoint() as endpoint:
            config = {
                'bucket': bucket.bucket,
                's3': moto_server.client_options(),
                'steps': str(tmp_path / 'steps'),
                'run_id': first_run,
                'base_url': endpoint.openai_base_url,
            }
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                '-c',
                CHILD,
                json.dumps(config),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(child.communicate(), timeout=120)
            assert child.returncode == 0, err.decode()[-3000:]
            report = json.loads(out.decode().strip().splitlines()[-1])
            requests = endpoint.model_requests('openai')

        # The resumed process restored references and read no image: one get, for the PDF the model needs as bytes.
        assert report['kinds'] == ['str', *['ImageUrl'] * 8, 'DocumentUrl']
        assert report['calls'].get('get', 0) == 1
        assert report['calls'].get('get_stream', 0) == 0
        assert report['calls'].get('put', 0) == 0

        # Each request carries 8 presigned URLs, one per image, and no image bytes; the PDF goes inline.
        assert len(requests) == 2
        sent_urls: list[list[str]] = []
        for request in requests:
            urls = [item['image_url']['url'] for item in openai_user_items(request) if item.get('type') == 'image_url']
            sent_urls.append(urls)
            assert len(urls) == 8
            for url, data in zip(urls, images, strict=True):
                parts = urlsplit(url)
                assert f'{parts.scheme}://{parts.netloc}' == moto_server.url
                assert unquote(parts.path) == f'/{bucket.bucket}/{s3.key_for(media_uri_for(data))}'
                assert 'X-Amz-Signature=' in parts.query
                assert await bucket.read(s3.key_for(media_uri_for(data))) == data
                assert not carries(request.body, data)
            assert carries(request.body, pdf)
        assert sent_urls[0] == sent_urls[1]  # stable URLs: the second request repeats the first one's

        # The snapshots the resumed runs saved restore ('bytes') to the exact original bytes, and their first
        # message is byte for byte the envelope the original run wrote.
        runs = [record.run_id for record in await steps.list_runs()]
        assert len(runs) == 3
        last = await steps.latest_snapshot(run_id=runs[-1])
        assert last is not None
        restored = last.messages[0].parts[0].content  # type: ignore[union-attr]
        assert [item.data for item in restored[1:]] == [*images, pdf]  # type: ignore[union-attr]
        assert restored[-1].identifier == 'spec'  # type: ignore[union-attr]
        original = json.loads(snapshot_files(tmp_path / 'steps', first_run)[-1].read_text())['messages'][0]
        for run_id in runs[1:]:
            resumed = json.loads(snapshot_files(tmp_path / 'steps', run_id)[-1].read_text())['messages'][0]
            assert json.dumps(resumed) == json.dumps(original)


def failing_urls(uri: str, context: object) -> str:
    raise ConnectionError('the URL service is down')


async def test_a_failing_url_service_sends_references_inline_or_raises(caplog: pytest.LogCaptureFixture) -> None:
    """on_store_error='inline': the request goes out with the referenced bytes read; 'raise': the run fails."""
    media = CountingMediaStore(MemoryMediaStore(public_url=failing_urls))
    history = await reference_history(media)
    sent: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.extend(contents(messages))
        return ModelResponse(parts=[TextPart('ok')])

    capability = MediaUrls(media, options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=KnownBlobCache()))
    await Agent(FunctionModel(model), capabilities=[capability]).run('go', message_history=history)
    originals = contents(mixed_history())
    assert [item.data for item in sent[1:6]] == [item.data for item in originals[1:6]]
    assert capability.swapper.store_failures == 1
    assert 'failed during public_url (StoreUnavailableError)' in caplog.text
    assert 'the URL service is down' not in caplog.text

    strict = MediaUrls(media, options=WalkOptions(threshold_bytes=THRESHOLD), on_store_error='raise')
    with pytest.raises(StoreUnavailableError):
        await Agent(FunctionModel(model), capabilities=[strict]).run('go', message_history=history)


async def test_a_reference_to_a_missing_blob_fails_the_request() -> None:
    media = MemoryMediaStore()
    history = await reference_history(media)
    pdf = contents(history)[2]
    assert isinstance(pdf, DocumentUrl)
    await media.delete(pdf.url.split('#')[0])
    capability = MediaUrls(media, options=WalkOptions(threshold_bytes=THRESHOLD, known_blobs=KnownBlobCache()))
    with pytest.raises(MediaNotFoundError):
        await Agent(FunctionModel(reply), capabilities=[capability]).run('go', message_history=history)
