"""``MediaUrls`` with pydantic-ai's real model classes and SDKs, presigned URLs from SeaweedFS.

The models (``OpenAIChatModel``, ``AnthropicModel``) send real HTTP requests
through the OpenAI / Anthropic SDKs to a local endpoint that records every
request body (``tests/provider_endpoint.py``). The store is ``S3MediaStore``
on SeaweedFS, which checks SigV4 signatures and expiry, so the URL a provider
would receive is fetched here exactly as the provider would fetch it.
"""

from __future__ import annotations

import asyncio
import base64
import random
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import aiohttp
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, BinaryImage, ImageUrl, ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from mediastash import media_uri_for
from mediastash.integrations import MediaUrls
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from tests.provider_endpoint import CapturedRequest, ProviderEndpoint
from tests.s3_servers import S3Endpoint, seaweedfs, unique_bucket
from tests.test_store_s3 import RawBucket

pytestmark = pytest.mark.pydantic_ai

__all__ = ['seaweedfs']  # the session fixture, imported so pytest finds it here

MiB = 1 << 20
EXPIRES_IN = 900
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def png_like(size: int, seed: int) -> bytes:
    """``size`` incompressible bytes behind a PNG signature."""
    return PNG_SIGNATURE + random.Random(seed).randbytes(size - len(PNG_SIGNATURE))


def base64_slices(data: bytes) -> tuple[bytes, bytes]:
    """4,000 characters of ``data``'s base64 in the standard and the URL-safe alphabet.

    The slice starts at a byte offset divisible by 3, so it is also a slice of the whole payload's encoding.
    """
    chunk = data[300_000:303_000]
    standard, url_safe = base64.b64encode(chunk), base64.urlsafe_b64encode(chunk)
    assert standard != url_safe  # the chunk has '+' or '/', so both alphabets are really checked
    return standard, url_safe


def assert_no_base64(body: bytes, data: bytes) -> None:
    standard, url_safe = base64_slices(data)
    assert standard not in body
    assert url_safe not in body


def assert_presigned_for(url: str, store: S3MediaStore, endpoint: S3Endpoint, bucket: str, data: bytes) -> None:
    """``url`` is a SigV4 presigned GET of ``data``'s object, with the type and inline disposition overrides."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    assert f'{parts.scheme}://{parts.netloc}' == endpoint.url
    assert unquote(parts.path) == f'/{bucket}/{store.key_for(media_uri_for(data))}'
    assert query['X-Amz-Algorithm'] == 'AWS4-HMAC-SHA256'
    assert query['X-Amz-Expires'] == str(EXPIRES_IN)
    assert store.public_url_lifetime == EXPIRES_IN
    assert query['X-Amz-Credential'].startswith(f'{endpoint.access_key_id}/')
    assert re.fullmatch(r'[0-9a-f]{64}', query['X-Amz-Signature'])
    assert query['response-content-type'] == 'image/png'
    assert query['response-content-disposition'].startswith('inline')
    assert endpoint.secret_access_key not in url


def cached_url(capability: MediaUrls, data: bytes) -> str:
    """The URL the capability's swapper remembers for ``data`` as image/png."""
    issued = capability.swapper.issued_url(media_uri_for(data), 'image/png')
    assert issued is not None
    return issued


async def fetch(url: str) -> tuple[int, bytes, str | None, str | None]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        body = await response.read()
        return response.status, body, response.headers.get('Content-Type'), response.headers.get('Content-Disposition')


def tampered_signature(url: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    signature = query['X-Amz-Signature']
    query['X-Amz-Signature'] = signature[:-1] + ('0' if signature[-1] != '0' else '1')
    return urlunsplit(parts._replace(query=urlencode(query)))


def openai_images(request: CapturedRequest) -> list[str]:
    """Every ``image_url.url`` of the user messages of one chat-completions request."""
    assert request.api == 'openai'
    urls: list[str] = []
    for message in request.json['messages']:
        content = message.get('content')
        if message['role'] == 'user' and isinstance(content, list):
            urls.extend(part['image_url']['url'] for part in content if part.get('type') == 'image_url')
    return urls


def anthropic_images(request: CapturedRequest) -> list[dict[str, Any]]:
    """Every image block's ``source`` in the user messages of one messages request."""
    assert request.api == 'anthropic'
    sources: list[dict[str, Any]] = []
    for message in request.json['messages']:
        content = message.get('content')
        if message['role'] == 'user' and isinstance(content, list):
            sources.extend(block['source'] for block in content if block.get('type') == 'image')
    return sources


def history_contents(messages: list[ModelMessage]) -> Iterator[object]:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                    yield from part.content


def openai_model(endpoint: ProviderEndpoint) -> OpenAIChatModel:
    return OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key='test'))


def anthropic_model(endpoint: ProviderEndpoint) -> AnthropicModel:
    return AnthropicModel(
        'claude-sonnet-4-5', provider=AnthropicProvider(base_url=endpoint.anthropic_base_url, api_key='test')
    )


@pytest.fixture
async def endpoint() -> AsyncIterator[ProviderEndpoint]:
    async with ProviderEndpoint() as opened:
        yield opened


@pytest.fixture
async def raw(seaweedfs: S3Endpoint) -> AsyncIterator[RawBucket]:
    bucket = await RawBucket(seaweedfs, unique_bucket('urls')).open()
    await bucket.create()
    yield bucket
    await bucket.close()


def presigned_store(seaweedfs: S3Endpoint, raw: RawBucket, expires_in: int = EXPIRES_IN) -> S3MediaStore:
    return S3MediaStore(
        bucket=raw.bucket,
        public_url=PresignedUrls(expires_in=expires_in, response_content_type=True, response_content_disposition=True),
        **seaweedfs.client_options(),
    )


@pytest.fixture
async def store(seaweedfs: S3Endpoint, raw: RawBucket) -> AsyncIterator[S3MediaStore]:
    async with presigned_store(seaweedfs, raw) as opened:
        yield opened


async def run_with_image(model: Model, capability: MediaUrls | None, data: bytes) -> list[ModelMessage]:
    agent = Agent(model, capabilities=[capability] if capability is not None else [])
    result = await agent.run(['What is in this picture?', BinaryImage(data=data, media_type='image/png')])
    return result.all_messages()


# -- OpenAI chat completions ------------------------------------------------------------


async def test_openai_request_carries_the_presigned_url_and_no_base64(
    endpoint: ProviderEndpoint, store: S3MediaStore, seaweedfs: S3Endpoint, raw: RawBucket
) -> None:
    data = png_like(int(1.5 * MiB), seed=1)
    capability = MediaUrls(store)
    messages = await run_with_image(openai_model(endpoint), capability, data)

    [request] = endpoint.requests
    [url] = openai_images(request)
    assert_presigned_for(url, store, seaweedfs, raw.bucket, data)
    assert url == cached_url(capability, data)
    assert capability.swapper.urls_issued == 1
    assert_no_base64(request.body, data)
    assert len(request.body) < 10_000

    # What a provider does with the URL: a plain GET, no credentials.
    status, body, content_type, disposition = await fetch(url)
    assert (status, body, content_type) == (200, data, 'image/png')
    assert disposition is not None
    assert disposition.startswith('inline')

    # The run's history keeps the bytes, never the URL.
    contents = list(history_contents(messages))
    assert any(isinstance(item, BinaryContent) and item.data == data for item in contents)
    assert not any(isinstance(item, ImageUrl) for item in contents)


async def test_openai_next_turn_resends_the_same_url(endpoint: ProviderEndpoint, store: S3MediaStore) -> None:
    data = png_like(1 * MiB, seed=2)
    capability = MediaUrls(store)
    agent = Agent(openai_model(endpoint), capabilities=[capability])
    first = await agent.run(['Look.', BinaryImage(data=data, media_type='image/png')])
    second = await agent.run('And now?', message_history=first.all_messages())

    urls = [openai_images(request) for request in endpoint.requests]
    assert len(urls) == 2
    assert urls[0] == urls[1] == [cached_url(capability, data)]
    assert capability.swapper.urls_issued == 1
    for request in endpoint.requests:
        assert_no_base64(request.body, data)
    assert any(isinstance(item, BinaryContent) for item in history_contents(second.all_messages()))


async def test_tampered_url_is_refused(endpoint: ProviderEndpoint, store: S3MediaStore) -> None:
    data = png_like(1 * MiB, seed=3)
    await run_with_image(openai_model(endpoint), MediaUrls(store), data)
    [url] = openai_images(endpoint.requests[0])
    assert (await fetch(url))[0] == 200
    status, body, _, _ = await fetch(tampered_signature(url))
    assert 400 <= status < 500
    assert PNG_SIGNATURE not in body


async def test_expired_url_is_refused_and_replaced(
    endpoint: ProviderEndpoint, seaweedfs: S3Endpoint, raw: RawBucket
) -> None:
    data = png_like(1 * MiB, seed=4)
    # 3 s, not 1: the fresh URL below must still be valid when it is fetched, however loaded the machine is.
    async with presigned_store(seaweedfs, raw, expires_in=3) as store:
        capability = MediaUrls(store, min_validity=0)
        agent = Agent(openai_model(endpoint), capabilities=[capability])
        first = await agent.run(['Look.', BinaryImage(data=data, media_type='image/png')])
        [url] = openai_images(endpoint.requests[0])
        assert dict(parse_qsl(urlsplit(url).query))['X-Amz-Expires'] == '3'
        await asyncio.sleep(4.2)
        status, body, _, _ = await fetch(url)
        assert 400 <= status < 500
        assert PNG_SIGNATURE not in body

        # The next request does not reuse the expired URL: it gets a fresh one that works.
        await agent.run('Again.', message_history=first.all_messages())
        [fresh] = openai_images(endpoint.requests[1])
        assert fresh != url
        assert capability.swapper.urls_issued == 2
        status, body, _, _ = await fetch(fresh)
        assert (status, body) == (200, data)


async def test_without_the_capability_the_request_holds_the_base64(endpoint: ProviderEndpoint) -> None:
    """The control: the endpoint really sees the bytes the other tests say are absent."""
    data = png_like(int(1.5 * MiB), seed=5)
    await run_with_image(openai_model(endpoint), None, data)
    [request] = endpoint.requests
    [url] = openai_images(request)
    assert url.startswith('data:image/png;base64,')
    assert base64.b64decode(url.split(',', 1)[1]) == data
    assert base64_slices(data)[0] in request.body
    assert len(request.body) > 4 * len(data) // 3


# -- Anthropic messages -----------------------------------------------------------------


async def test_anthropic_image_block_is_a_url_source(
    endpoint: ProviderEndpoint, store: S3MediaStore, seaweedfs: S3Endpoint, raw: RawBucket
) -> None:
    data = png_like(int(1.5 * MiB), seed=6)
    capability = MediaUrls(store)
    messages = await run_with_image(anthropic_model(endpoint), capability, data)

    [request] = endpoint.requests
    [source] = anthropic_images(request)
    url = cached_url(capability, data)
    assert source == {'type': 'url', 'url': url}
    assert_presigned_for(url, store, seaweedfs, raw.bucket, data)
    assert_no_base64(request.body, data)
    status, body, content_type, _ = await fetch(url)
    assert (status, body, content_type) == (200, data, 'image/png')
    assert any(isinstance(item, BinaryContent) and item.data == data for item in history_contents(messages))


async def test_anthropic_without_the_capability_sends_base64(endpoint: ProviderEndpoint) -> None:
    data = png_like(1 * MiB, seed=7)
    await run_with_image(anthropic_model(endpoint), None, data)
    [request] = endpoint.requests
    [source] = anthropic_images(request)
    assert source['type'] == 'base64'
    assert base64.b64decode(source['data']) == data
    assert base64_slices(data)[0] in request.body
