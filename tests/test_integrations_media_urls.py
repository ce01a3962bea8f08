"""MediaUrls: what the model receives, what the run keeps, URL stability, model-aware kinds."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiobotocore.session import get_session
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    BinaryImage,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider

from mediastash import (
    DiskMediaStore,
    InvalidArgumentError,
    InvalidStoreConfiguration,
    KnownBlobCache,
    MemoryMediaStore,
    StoreClosedError,
    UnsafeKeyError,
    WrapperMediaStore,
    make_static_public_url,
    media_uri_for,
)
from mediastash.integrations import MediaUrls, MediaUrlSwapper
from mediastash.integrations.pydantic_ai._model_kinds import fetches_by_url
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.testing import CountingMediaStore
from mediastash.walker import WalkOptions
from tests.s3_servers import S3Endpoint, free_port, unique_bucket

pytestmark = pytest.mark.pydantic_ai

CDN = 'https://cdn.example/media'


def static_store() -> MemoryMediaStore:
    return MemoryMediaStore(public_url=make_static_public_url(CDN))


def url_of(data: bytes) -> str:
    return f'{CDN}/{media_uri_for(data)[-64:]}.bin'


class Recorder:
    """A FunctionModel body that records every request's messages, calls ``tool`` once if asked, then answers."""

    def __init__(self, *, tool_calls: int = 0) -> None:
        self.requests: list[list[ModelMessage]] = []
        self.tool_calls = tool_calls

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        made = sum(isinstance(part, ToolCallPart) for message in messages for part in message.parts)
        if made < self.tool_calls:
            return ModelResponse(parts=[ToolCallPart(tool_name='screenshot', args={}, tool_call_id=f'c{made}')])
        return ModelResponse(parts=[TextPart('ok')])


def contents(messages: list[ModelMessage]) -> list[Any]:
    """Every item of every user prompt and tool return, flattened."""
    out: list[Any] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                content = getattr(part, 'content', None)
                out.extend(content if isinstance(content, list) else [content])
    return out


def agent_with(recorder: Recorder, *capabilities: Any, shot: bytes | None = None) -> Agent[None, str]:
    """An agent on ``recorder``; with ``shot``, a ``screenshot`` tool returns those bytes as an image."""
    agent: Agent[None, str] = Agent(FunctionModel(recorder), capabilities=list(capabilities))
    if shot is not None:
        image = BinaryImage(data=shot, media_type='image/png', identifier='shot-1')

        @agent.tool_plain
        def screenshot() -> BinaryImage:
            return image

    return agent


async def test_large_media_reach_the_model_as_urls_and_the_run_keeps_bytes() -> None:
    big, small = os.urandom(200_000), os.urandom(1000)
    image = BinaryImage(data=big, media_type='image/png', vendor_metadata={'detail': 'high'})
    store = CountingMediaStore(static_store())
    recorder = Recorder()
    result = await agent_with(recorder, MediaUrls(store)).run(
        ['look', image, BinaryImage(small, media_type='image/png')]
    )

    sent = contents(recorder.requests[0])
    assert [type(item).__name__ for item in sent] == ['str', 'ImageUrl', 'BinaryImage']
    url_part = sent[1]
    assert isinstance(url_part, ImageUrl)
    assert url_part.url == url_of(big)
    assert url_part.media_type == 'image/png'
    assert url_part.identifier == image.identifier
    assert url_part.vendor_metadata == {'detail': 'high'}
    assert sent[2].data == small  # below the threshold: bytes

    kept = contents(result.all_messages())
    assert isinstance(kept[1], BinaryContent)
    assert kept[1].data == big
    assert store.calls['put'] == 1
    assert await store.get(media_uri_for(big)) == big


async def test_tool_returns_are_swapped_and_known_payloads_cost_no_put() -> None:
    shot = os.urandom(150_000)
    store = CountingMediaStore(static_store())
    recorder = Recorder(tool_calls=2)
    await agent_with(recorder, MediaUrls(store), shot=shot).run('take screenshots')

    assert len(recorder.requests) == 3
    last = contents(recorder.requests[-1])
    urls = [item for item in last if isinstance(item, ImageUrl)]
    assert [item.url for item in urls] == [url_of(shot), url_of(shot)]
    assert all(item.identifier == 'shot-1' for item in urls)
    assert not any(isinstance(item, BinaryContent) and len(item.data) >= 65536 for item in last)
    assert store.calls['put'] == 1  # the same bytes, stored once across three requests


async def test_resolver_without_url_keeps_the_bytes() -> None:
    big = os.urandom(100_000)
    store = MemoryMediaStore(public_url=lambda uri, context: None)
    recorder = Recorder()
    await agent_with(recorder, MediaUrls(store)).run(['look', BinaryImage(big, media_type='image/png')])
    sent = contents(recorder.requests[0])
    assert isinstance(sent[1], BinaryContent)
    assert sent[1].data == big
    assert await store.exists(media_uri_for(big))  # stored all the same, ready for the next request


async def test_store_without_resolver_keeps_the_bytes() -> None:
    recorder = Recorder()
    await agent_with(recorder, MediaUrls(MemoryMediaStore())).run(
        ['x', BinaryImage(os.urandom(70_000), media_type='image/png')]
    )
    assert isinstance(contents(recorder.requests[0])[1], BinaryContent)


async def test_kinds_choose_what_is_swapped() -> None:
    audio = BinaryContent(os.urandom(90_000), media_type='audio/wav')
    pdf = BinaryContent(os.urandom(90_000), media_type='application/pdf')
    image = BinaryImage(os.urandom(90_000), media_type='image/png')
    recorder = Recorder()
    await agent_with(recorder, MediaUrls(static_store(), kinds=['image'])).run(['x', audio, pdf, image])
    sent = contents(recorder.requests[0])
    assert [type(item) for item in sent[1:]] == [BinaryContent, BinaryContent, ImageUrl]

    recorder = Recorder()
    await agent_with(recorder, MediaUrls(static_store())).run(['x', audio, pdf, image])
    sent = contents(recorder.requests[0])
    assert [type(item) for item in sent[1:]] == [AudioUrl, DocumentUrl, ImageUrl]  # FunctionModel never downloads

    with pytest.raises(ValueError, match='kinds'):
        MediaUrls(static_store(), kinds=['pictures'])  # type: ignore[list-item]
    with pytest.raises(ValueError, match='kinds'):
        MediaUrls(static_store(), kinds='image')  # type: ignore[arg-type]


@pytest.mark.harness
async def test_step_persistence_saves_bytes_never_urls(tmp_path: Path) -> None:
    from pydantic_ai_harness.step_persistence import InMemoryStepStore, StepPersistence

    big = os.urandom(120_000)
    steps = InMemoryStepStore()
    recorder = Recorder()
    agent = agent_with(recorder, StepPersistence(store=steps), MediaUrls(static_store()))
    await agent.run(['look', BinaryImage(big, media_type='image/png')])
    assert isinstance(contents(recorder.requests[0])[1], ImageUrl)
    runs = await steps.list_runs()
    snapshot = await steps.latest_snapshot(run_id=runs[-1].run_id)
    assert snapshot is not None
    saved = contents(list(snapshot.messages))
    assert not any(isinstance(item, ImageUrl) for item in saved)
    assert any(isinstance(item, BinaryContent) and item.data == big for item in saved)


@pytest.mark.harness
async def test_a_run_continued_from_lean_snapshots_reuses_stored_blobs(tmp_path: Path) -> None:
    from pydantic_ai_harness.step_persistence import FileStepStore, StepPersistence, continue_run

    from mediastash.integrations import OffloadingStepStore

    big = os.urandom(300_000)

    def media() -> DiskMediaStore:
        return DiskMediaStore(tmp_path / 'media', public_url=make_static_public_url(CDN))

    def steps(cache: KnownBlobCache) -> Any:
        inner = FileStepStore(tmp_path / 'steps', media_store=None)
        return OffloadingStepStore(inner, media_store=media(), options=WalkOptions(known_blobs=cache))

    saving = steps(KnownBlobCache())
    first = await agent_with(Recorder(), StepPersistence(store=saving)).run(
        ['look', BinaryImage(big, media_type='image/png')]
    )
    run_id = (await saving.list_runs())[-1].run_id

    # As a new process would: fresh store objects and a fresh cache, shared by the restore and MediaUrls.
    cache = KnownBlobCache()
    history = await continue_run(steps(cache), run_id=run_id)
    assert history == first.all_messages()
    counted = CountingMediaStore(media())
    recorder = Recorder()
    await agent_with(recorder, MediaUrls(counted, options=WalkOptions(known_blobs=cache))).run(
        'and now?', message_history=history
    )
    assert url_of(big) in [item.url for item in contents(recorder.requests[0]) if isinstance(item, ImageUrl)]
    assert counted.calls['put'] == 0  # restored from this storage moments ago: known, not stored again
    # A blob known only from a read is re-confirmed once (and marked in use for garbage collection).
    assert counted.calls['touch_many'] == 1
    assert counted.calls['exists_many'] == 0


class SigningResolver:
    """A resolver that signs a new URL on every call and says how long URLs live."""

    def __init__(self, expires_in: float) -> None:
        self.expires_in = expires_in
        self.calls = 0

    def __call__(self, uri: str, context: Any) -> str:
        self.calls += 1
        return f'https://signed.example/{uri[-64:]}?sig={self.calls}'


def swap_clock() -> tuple[list[float], Callable[[], float]]:
    now = [1000.0]
    return now, lambda: now[0]


def history_with(*images: bytes) -> list[ModelMessage]:
    return [
        ModelRequest(
            parts=[UserPromptPart(content=['x', *(BinaryImage(data, media_type='image/png') for data in images)])]
        )
    ]


async def test_urls_stay_the_same_within_their_lifetime() -> None:
    resolver = SigningResolver(expires_in=3600)
    now, clock = swap_clock()
    swapper = MediaUrlSwapper(MemoryMediaStore(public_url=resolver), min_validity=600, clock=clock)
    one, two = os.urandom(80_000), os.urandom(90_000)
    messages = history_with(one, two)
    seen: set[str] = set()
    for _ in range(20):
        swapped = await swapper.swap(messages)
        seen.update(item.url for item in contents(swapped) if isinstance(item, ImageUrl))
        now[0] += 60
    assert len(seen) == 2  # one URL per blob over 20 requests
    assert resolver.calls == 2
    assert swapper.url_lifetime == 3600


async def test_a_url_is_renewed_once_below_min_validity_not_before() -> None:
    resolver = SigningResolver(expires_in=100)
    now, clock = swap_clock()
    swapper = MediaUrlSwapper(MemoryMediaStore(public_url=resolver), min_validity=30, clock=clock)
    messages = history_with(os.urandom(70_000))

    async def url() -> str:
        (item,) = [item for item in contents(await swapper.swap(messages)) if isinstance(item, ImageUrl)]
        return item.url

    first = await url()
    now[0] += 70  # 30 s left: still enough
    assert await url() == first
    now[0] += 1  # 29 s left: renew
    second = await url()
    assert second != first
    now[0] += 70
    assert await url() == second
    assert resolver.calls == 2


async def test_static_urls_never_expire_and_min_validity_must_fit_the_lifetime() -> None:
    now, clock = swap_clock()
    swapper = MediaUrlSwapper(static_store(), clock=clock)
    messages = history_with(os.urandom(70_000))
    await swapper.swap(messages)
    now[0] += 10**9
    await swapper.swap(messages)
    assert swapper.urls_issued == 1
    assert swapper.url_lifetime is None

    short = MediaUrlSwapper(MemoryMediaStore(public_url=SigningResolver(expires_in=60)), min_validity=60)
    with pytest.raises(InvalidStoreConfiguration, match='min_validity'):
        await short.swap(messages)
    with pytest.raises(ValueError, match='min_validity'):
        MediaUrlSwapper(static_store(), min_validity=-1)


async def test_swap_leaves_its_input_alone() -> None:
    data = os.urandom(70_000)
    messages = history_with(data)
    before = repr(messages)
    swapped = await MediaUrlSwapper(static_store()).swap(messages)
    assert repr(messages) == before
    assert swapped is not messages
    assert swapped[0] is not messages[0]
    untouched = [ModelRequest(parts=[UserPromptPart(content='only text')])]
    assert await MediaUrlSwapper(static_store()).swap(untouched) is untouched


async def test_history_processor_form() -> None:
    data = os.urandom(70_000)
    recorder = Recorder()
    swapper = MediaUrlSwapper(static_store())
    agent: Agent[None, str] = Agent(FunctionModel(recorder), capabilities=[ProcessHistory(swapper)])
    result = await agent.run(['look', BinaryImage(data, media_type='image/png')])
    assert isinstance(contents(recorder.requests[0])[1], ImageUrl)
    # ProcessHistory writes its result back into the run: with a static URL the history holds the URL part.
    assert isinstance(contents(result.all_messages())[1], ImageUrl)

    expiring = MediaUrlSwapper(MemoryMediaStore(public_url=SigningResolver(expires_in=3600)))
    agent = Agent(FunctionModel(Recorder()), capabilities=[ProcessHistory(expiring)])
    with pytest.raises(InvalidStoreConfiguration, match='MediaUrls capability'):
        await agent.run(['look', BinaryImage(data, media_type='image/png')])


def test_model_kinds_follow_what_pydantic_ai_downloads() -> None:
    chat = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url='http://127.0.0.1:9/v1', api_key='test'))
    assert fetches_by_url(chat, 'image', 'image/png')
    assert not fetches_by_url(chat, 'audio', 'audio/wav')  # pydantic-ai downloads AudioUrl for chat completions
    assert not fetches_by_url(chat, 'document', 'application/pdf')
    responses = OpenAIResponsesModel('gpt-4o', provider=OpenAIProvider(base_url='http://127.0.0.1:9/v1', api_key='t'))
    assert fetches_by_url(responses, 'document', 'application/pdf')
    assert not fetches_by_url(responses, 'video', 'video/mp4')
    assert fetches_by_url(FunctionModel(Recorder()), 'audio', 'audio/wav')
    assert fetches_by_url(TestModel(), 'video', 'video/mp4')
    assert not fetches_by_url(FallbackModel(TestModel(), chat), 'audio', 'audio/wav')
    assert fetches_by_url(FallbackModel(TestModel(), chat), 'image', 'image/png')
    assert fetches_by_url(None, 'image', 'image/png')
    assert not fetches_by_url(None, 'document', 'application/pdf')


async def test_remembered_fingerprints_follow_changed_bytes() -> None:
    """The per-object fingerprint memo never serves the URL of bytes the object no longer holds."""
    first, second = os.urandom(70_000), os.urandom(70_000)
    messages = history_with(first)
    swapper = MediaUrlSwapper(static_store())
    (part,) = [item for item in contents(await swapper.swap(messages)) if isinstance(item, ImageUrl)]
    assert part.url == url_of(first)
    (again,) = [item for item in contents(await swapper.swap(messages)) if isinstance(item, ImageUrl)]
    assert again is part  # nothing changed: the URL part itself is reused
    (content,) = [item for item in contents(messages) if isinstance(item, BinaryContent)]
    content.data = second
    (changed,) = [item for item in contents(await swapper.swap(messages)) if isinstance(item, ImageUrl)]
    assert changed.url == url_of(second)
    content.vendor_metadata = {'detail': 'low'}
    (detailed,) = [item for item in contents(await swapper.swap(messages)) if isinstance(item, ImageUrl)]
    assert detailed.vendor_metadata == {'detail': 'low'}
    assert detailed.url == url_of(second)


# -- a failing store degrades to inline bytes (issue 17, item 11) ---------------------------

FAKE_KEY_ID = 'AKIAMEDIAURLSTESTKEY1'
FAKE_SECRET = 'media-urls-secret-never-logged-0123456789'


def store_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.split('.')[0] == 'mediastash']


def assert_secret_free(record: logging.LogRecord, *forbidden: str) -> None:
    """A warning names the operation and the error type only: no URL, endpoint, bucket, secret or traceback."""
    text = record.getMessage()
    assert record.exc_info is None and record.stack_info is None
    assert 'http' not in text and '127.0.0.1' not in text
    for word in (FAKE_KEY_ID, FAKE_SECRET, *forbidden):
        assert word not in text


async def error_type_of(call: Any) -> str:
    """The class name of the error ``call()`` raises (what the warning must name)."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - whichever error the store raises
        await call()
    return type(caught.value).__name__


async def test_an_unreachable_s3_endpoint_sends_the_bytes_inline(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # nothing listens there
    big = os.urandom(100_000)
    async with S3MediaStore(
        bucket='media-urls',
        endpoint_url=f'http://127.0.0.1:{port}',
        region_name='us-east-1',
        aws_access_key_id=FAKE_KEY_ID,
        aws_secret_access_key=FAKE_SECRET,
        max_attempts=1,
        public_url=PresignedUrls(expires_in=3600),
    ) as store:
        expected = await error_type_of(lambda: store.put(big))
        recorder = Recorder()
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger='mediastash'):
            result = await agent_with(recorder, MediaUrls(store, options=WalkOptions(known_blobs=False))).run(
                ['look', BinaryImage(big, media_type='image/png')]
            )
    assert result.output == 'ok'
    sent = contents(recorder.requests[0])
    assert isinstance(sent[1], BinaryContent) and not isinstance(sent[1], ImageUrl)
    assert sent[1].data == big
    (warning,) = store_warnings(caplog)
    assert warning.levelno == logging.WARNING
    assert warning.name == 'mediastash.integrations.media_urls'
    assert expected in warning.getMessage() and 'put' in warning.getMessage()
    assert_secret_free(warning, str(port), 'media-urls')


async def test_a_missing_bucket_sends_bytes_inline_and_urls_once_it_exists(
    moto_server: S3Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = unique_bucket('urls')
    big = os.urandom(120_000)
    store = S3MediaStore(
        bucket=bucket, max_attempts=1, public_url=PresignedUrls(expires_in=3600), **moto_server.client_options()
    )
    async with store:
        expected = await error_type_of(lambda: store.put(big))
        capability = MediaUrls(store, options=WalkOptions(known_blobs=False))
        recorder = Recorder()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger='mediastash'):
            await agent_with(recorder, capability).run(['look', BinaryImage(big, media_type='image/png')])
        sent = contents(recorder.requests[0])
        assert isinstance(sent[1], BinaryContent) and sent[1].data == big
        (warning,) = store_warnings(caplog)
        assert expected in warning.getMessage()
        assert_secret_free(warning, bucket, moto_server.secret_access_key)
        assert capability.swapper.store_failures == 1

        async with get_session().create_client('s3', **moto_server.client_options()) as client:
            await client.create_bucket(Bucket=bucket)
        # Within the cool-down the store is not asked: bytes inline at once, no second warning.
        recorder = Recorder()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger='mediastash'):
            await agent_with(recorder, capability).run(['look again', BinaryImage(big, media_type='image/png')])
        sent = contents(recorder.requests[0])
        assert isinstance(sent[1], BinaryContent) and sent[1].data == big
        assert store_warnings(caplog) == []
        assert capability.swapper.store_skips == 1 and capability.swapper.store_down

        # After it, one request tries the store, gets its URL, and the recovery is logged once (INFO).
        later = capability.swapper.clock() + 31
        capability.swapper.clock = lambda: later
        recorder = Recorder()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger='mediastash'):
            await agent_with(recorder, capability).run(['and again', BinaryImage(big, media_type='image/png')])
        sent = contents(recorder.requests[0])
        assert isinstance(sent[1], ImageUrl)
        assert f'/{bucket}/' in sent[1].url and 'X-Amz-Signature=' in sent[1].url
        assert store_warnings(caplog) == []
        recovered = [r for r in caplog.records if r.levelno == logging.INFO and 'answers again' in r.getMessage()]
        assert len(recovered) == 1 and not capability.swapper.store_down
        assert await store.get(media_uri_for(big)) == big


class FlakyStore(WrapperMediaStore):
    """A store whose ``put`` or ``public_url`` raises ``error`` while ``failing`` names that operation."""

    def __init__(self, inner: Any, *, failing: str | None = 'put', error: BaseException | None = None) -> None:
        super().__init__(inner)
        self.failing = failing
        self.error = error if error is not None else ConnectionRefusedError(111, 'store down at https://s3.example/x')
        self.failures = 0

    def _fail(self, operation: str) -> None:
        if self.failing == operation:
            self.failures += 1
            raise self.error

    async def put(self, data: bytes, *, context: Any = None) -> str:
        self._fail('put')
        return await super().put(data, context=context) if context is not None else await super().put(data)

    async def public_url(self, uri: str, *, context: Any = None) -> str | None:
        self._fail('public_url')
        return await super().public_url(uri, context=context) if context is not None else await super().public_url(uri)


class Clock:
    """A monotonic clock the test moves by hand (``MediaUrlSwapper.clock``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize('operation', ['put', 'public_url'])
@pytest.mark.parametrize('wait', ['within the cool-down', 'after the cool-down'])
async def test_a_failing_store_is_skipped_for_the_cool_down_then_one_request_tries_again(
    operation: str, wait: str, caplog: pytest.LogCaptureFixture
) -> None:
    typed, shot = os.urandom(90_000), os.urandom(110_000)
    store = FlakyStore(static_store(), failing=operation)
    counted = CountingMediaStore(store)
    clock = Clock()

    class Recovering(Recorder):
        def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            store.failing = None  # the store comes back after the first request
            clock.now += 10 if wait == 'within the cool-down' else 31
            return super().__call__(messages, info)

    recorder = Recovering(tool_calls=1)
    capability = MediaUrls(counted, store_cooldown=30)
    capability.swapper.clock = clock
    with caplog.at_level(logging.INFO, logger='mediastash'):
        result = await agent_with(recorder, capability, shot=shot).run(
            ['look', BinaryImage(typed, media_type='image/png')]
        )
    assert result.output == 'ok'
    assert len(recorder.requests) == 2
    first = contents(recorder.requests[0])
    assert isinstance(first[1], BinaryContent) and first[1].data == typed
    second = [item for item in contents(recorder.requests[1]) if isinstance(item, ImageUrl | BinaryContent)]
    calls_after_first = 1 if operation == 'put' else 2  # a put failed; or a put then a public_url
    if wait == 'within the cool-down':
        assert [type(item) for item in second] == [BinaryImage, BinaryImage]  # inline at once
        assert sum(counted.calls.values()) == calls_after_first  # the second request made no store call
        assert capability.swapper.store_skips == 1 and capability.swapper.store_down
    else:
        assert [type(item) for item in second] == [ImageUrl, ImageUrl]
        assert [item.url for item in second] == [url_of(typed), url_of(shot)]
        assert capability.swapper.store_skips == 0 and not capability.swapper.store_down
        (info,) = [r for r in caplog.records if r.levelno == logging.INFO and r.name.startswith('mediastash')]
        assert 'answers again after 31.0 s' in info.getMessage()
    assert store.failures == 1
    (warning,) = store_warnings(caplog)
    message = warning.getMessage()
    assert operation in message and 'ConnectionRefusedError' in message and 'next 30 s' in message
    assert_secret_free(warning, 'store down', 's3.example')
    kept = contents(result.all_messages())
    assert isinstance(kept[1], BinaryContent) and kept[1].data == typed  # the history keeps bytes either way


async def test_an_unreachable_s3_store_costs_one_request_per_cool_down(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 28 item 5: with S3 down, only the first request of a cool-down waits for it; then one probe.

    Before, every request called the store again (and waited for the SDK's retries each time).
    """
    port = free_port()  # nothing listens there
    async with S3MediaStore(
        bucket='media-urls',
        endpoint_url=f'http://127.0.0.1:{port}',
        region_name='us-east-1',
        aws_access_key_id=FAKE_KEY_ID,
        aws_secret_access_key=FAKE_SECRET,
        max_attempts=1,
        public_url=PresignedUrls(expires_in=3600),
    ) as s3:
        store = CountingMediaStore(s3)
        clock = Clock()
        capability = MediaUrls(store, options=WalkOptions(known_blobs=False))
        capability.swapper.clock = clock
        agent = agent_with(Recorder(), capability)
        images = [os.urandom(100_000) for _ in range(4)]

        async def request(data: bytes) -> None:
            await agent.run(['look', BinaryImage(data, media_type='image/png')])

        with caplog.at_level(logging.DEBUG, logger='mediastash'):
            await request(images[0])
            first_calls = sum(store.calls.values())
            assert first_calls >= 1
            clock.now += 29  # within the default 30 s
            await request(images[1])
            assert sum(store.calls.values()) == first_calls  # no store call at all
            assert capability.swapper.store_skips == 1

            clock.now += 2  # the cool-down is over: two requests at once, only one of them probes
            await asyncio.gather(request(images[2]), request(images[3]))
            probes = sum(store.calls.values()) - first_calls
            assert probes == first_calls  # one request's store calls, not two
            assert capability.swapper.store_skips == 2 and capability.swapper.store_failures == 2
    warnings = store_warnings(caplog)
    assert len(warnings) == 1  # one WARNING for the outage, not one per request
    assert_secret_free(warnings[0], str(port), 'media-urls')
    assert any('still fails' in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)


@pytest.mark.parametrize('bad', [-1, float('nan'), float('inf'), '30', True, None])
def test_store_cooldown_is_checked_without_echoing_the_value(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match='store_cooldown must be a finite non-negative') as caught:
        MediaUrls(static_store(), store_cooldown=bad)  # type: ignore[arg-type]
    assert repr(bad) not in str(caught.value).split('(got')[0]
    assert MediaUrls(static_store(), store_cooldown=timedelta(minutes=2)).swapper._outage.cooldown == 120
    assert MediaUrls(static_store(), store_cooldown=0).swapper._outage.cooldown == 0


async def test_on_store_error_raise_keeps_the_failure(caplog: pytest.LogCaptureFixture) -> None:
    store = FlakyStore(static_store())
    with caplog.at_level(logging.WARNING, logger='mediastash'), pytest.raises(ConnectionRefusedError):
        await agent_with(Recorder(), MediaUrls(store, on_store_error='raise')).run(
            ['look', BinaryImage(os.urandom(80_000), media_type='image/png')]
        )
    assert store_warnings(caplog) == []
    store.failing = 'public_url'
    with pytest.raises(ConnectionRefusedError):
        await MediaUrlSwapper(store, on_store_error='raise').swap(history_with(os.urandom(80_000)))


@pytest.mark.parametrize(
    'error',
    [
        TypeError('a bug'),
        AttributeError('a bug'),
        KeyError('a bug'),
        AssertionError('a bug'),
        InvalidStoreConfiguration('misconfigured'),
        UnsafeKeyError('k', 'a bad key strategy'),
    ],
    ids=lambda error: type(error).__name__,
)
async def test_programming_and_configuration_errors_are_never_swallowed(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    for operation in ('put', 'public_url'):
        store = FlakyStore(static_store(), failing=operation, error=error)
        with caplog.at_level(logging.WARNING, logger='mediastash'), pytest.raises(type(error)):
            await MediaUrlSwapper(store).swap(history_with(os.urandom(80_000)))
    assert store_warnings(caplog) == []


class HangingStore(WrapperMediaStore):
    """A store whose ``put`` waits until cancelled (a slow network), saying when it started."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.entered = asyncio.Event()

    async def put(self, data: bytes, *, context: Any = None) -> str:
        self.entered.set()
        await asyncio.Event().wait()
        raise AssertionError('not reached')


async def test_cancellation_and_a_closed_store_are_never_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    store = HangingStore(static_store())
    with caplog.at_level(logging.WARNING, logger='mediastash'):
        task = asyncio.create_task(MediaUrlSwapper(store).swap(history_with(os.urandom(80_000))))
        await asyncio.wait_for(store.entered.wait(), timeout=10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()
    closed = static_store()
    await closed.aclose()
    with caplog.at_level(logging.WARNING, logger='mediastash'), pytest.raises(StoreClosedError):
        await MediaUrlSwapper(closed).swap(history_with(os.urandom(80_000)))
    assert store_warnings(caplog) == []


def test_on_store_error_is_checked_without_echoing_the_value() -> None:
    for bad in ('ignore', FAKE_SECRET, None, True):
        with pytest.raises(InvalidStoreConfiguration) as caught:
            MediaUrls(static_store(), on_store_error=bad)  # type: ignore[arg-type]
        assert 'on_store_error' in str(caught.value) and "'inline' or 'raise'" in str(caught.value)
        assert str(bad) not in str(caught.value)
    assert MediaUrls(static_store()).swapper.on_store_error == 'inline'
