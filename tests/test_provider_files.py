"""``MediaUrls(provider_files=...)``: media a model would get as bytes go as provider file ids instead.

pydantic-ai's real model classes and SDKs (OpenAI Responses, Anthropic, Bedrock
Converse through boto3) talk to a local endpoint (``tests/provider_endpoint.py``)
that implements the Files upload routes and the message routes and records
every request; S3 is moto. Nothing is patched.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import sqlite3
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aiobotocore.session import get_session
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import BinaryContent, DocumentUrl, ModelMessage, ModelRequest, UploadedFile, UserPromptPart
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.bedrock import BedrockConverseModel
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.bedrock import BedrockProvider
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.providers.openai import OpenAIProvider

from mediastash import DiskMediaStore, MemoryMediaStore, S3AddressableMediaStore, media_uri_for
from mediastash.errors import InvalidArgumentError, InvalidStoreConfiguration
from mediastash.integrations import MediaUrls, MediaUrlSwapper
from mediastash.integrations.provider_files import (
    KVUploadRegistry,
    MemoryUploadRegistry,
    ProviderFiles,
    UploadRecord,
    UploadRegistryError,
)
from mediastash.reference_keys import process_reference_key
from mediastash.stores.s3 import S3MediaStore
from mediastash.testing import CountingMediaStore
from tests.provider_endpoint import CapturedRequest, ProviderEndpoint, file_references
from tests.s3_servers import S3Endpoint, moto_server, unique_bucket

pytestmark = pytest.mark.pydantic_ai

__all__ = ['moto_server']  # the session fixture, imported so pytest finds it here

KiB = 1 << 10
API_KEY = 'sk-test-provider-files-secret'


def pdf(size: int, seed: int) -> bytes:
    return b'%PDF-1.7\n' + random.Random(seed).randbytes(size - 9)


def png(size: int, seed: int) -> bytes:
    return b'\x89PNG\r\n\x1a\n' + random.Random(seed).randbytes(size - 8)


def text_document(size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    return ' '.join(f'word{rng.randrange(10**6)}' for _ in range(size // 8)).encode()[:size]


def assert_no_base64(body: bytes, data: bytes) -> None:
    chunk = data[3000:6000]
    assert base64.b64encode(chunk) not in body
    assert base64.urlsafe_b64encode(chunk) not in body


def file_ids_in(request: CapturedRequest) -> list[str]:
    """Every file reference of a message request, in order."""
    return file_references(request.json)


class SqliteKV:
    """A small ``AsyncKV`` in a SQLite file, so a second process sees what the first one wrote."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute('CREATE TABLE IF NOT EXISTS kv (pk TEXT, sk TEXT, data TEXT, PRIMARY KEY (pk, sk))')
        self.db.commit()

    async def put(self, pk: str, sk: str, data: str) -> None:
        self.db.execute('INSERT OR REPLACE INTO kv VALUES (?, ?, ?)', (pk, sk, data))
        self.db.commit()

    async def get(self, pk: str, sk: str) -> str | None:
        row = self.db.execute('SELECT data FROM kv WHERE pk = ? AND sk = ?', (pk, sk)).fetchone()
        return None if row is None else str(row[0])

    async def query(self, pk: str, sk_prefix: str | None = None) -> list[tuple[str, str]]:
        rows = self.db.execute('SELECT sk, data FROM kv WHERE pk = ? ORDER BY sk', (pk,)).fetchall()
        return [(sk, data) for sk, data in rows if sk_prefix is None or sk.startswith(sk_prefix)]

    async def delete(self, pk: str, sk: str) -> None:
        self.db.execute('DELETE FROM kv WHERE pk = ? AND sk = ?', (pk, sk))
        self.db.commit()


@pytest.fixture
async def endpoint() -> AsyncIterator[ProviderEndpoint]:
    async with ProviderEndpoint() as server:
        yield server


def responses_model(endpoint: ProviderEndpoint) -> OpenAIResponsesModel:
    return OpenAIResponsesModel('gpt-5', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key=API_KEY))


def anthropic_model(endpoint: ProviderEndpoint) -> AnthropicModel:
    provider = AnthropicProvider(base_url=endpoint.anthropic_base_url, api_key=API_KEY)
    return AnthropicModel('claude-sonnet-4-5', provider=provider)


def gemini_model(endpoint: ProviderEndpoint) -> GoogleModel:
    """The Gemini API (google-genai's client), which takes no URL but its own Files API's."""
    return GoogleModel('gemini-2.5-flash', provider=GoogleProvider(api_key=API_KEY, base_url=endpoint.root_url))


def api_of(model: Model) -> str:
    return {OpenAIResponsesModel: 'openai-responses', AnthropicModel: 'anthropic', GoogleModel: 'gemini'}[type(model)]


MODELS = pytest.mark.parametrize(
    'model_of', [responses_model, anthropic_model, gemini_model], ids=['openai-responses', 'anthropic', 'gemini']
)


async def three_turns(agent: Agent[None, str], first: list[Any]) -> list[ModelMessage]:
    result = await agent.run(first)
    for prompt in ('and now?', 'once more'):
        result = await agent.run(prompt, message_history=result.all_messages())
    return result.all_messages()


def prompt_contents(history: list[ModelMessage]) -> list[Any]:
    first = history[0].parts[0]
    content = getattr(first, 'content', None)
    assert isinstance(content, list)
    return content


@MODELS
async def test_each_blob_is_uploaded_once_across_three_turns(
    endpoint: ProviderEndpoint, tmp_path: Path, model_of: Any
) -> None:
    model: Model = model_of(endpoint)
    api = api_of(model)
    blobs = [pdf(300 * KiB, 1), pdf(200 * KiB, 2), png(150 * KiB, 3)]
    media_types = ['application/pdf', 'application/pdf', 'image/png']
    if api != 'openai-responses':  # a kind these never take by URL (the pass before the URL swap)
        blobs.append(text_document(120 * KiB, 4))
        media_types.append('text/plain')
    # A store without public URLs: every part would go inline without provider files.
    capability = MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=True)
    agent = Agent(model, capabilities=[capability])
    prompt = ['Read these.', *(BinaryContent(data, media_type=t) for data, t in zip(blobs, media_types, strict=True))]

    history = await three_turns(agent, prompt)

    assert sorted(upload.data for upload in endpoint.uploads) == sorted(blobs)
    assert {u.media_type for u in endpoint.uploads} == set(media_types)
    by_data = {upload.data: upload.file_id for upload in endpoint.uploads}
    expected_ids = [by_data[data] for data in blobs]
    requests = endpoint.model_requests(api)
    assert len(requests) == 3
    for request in requests:
        assert file_ids_in(request) == expected_ids
        for data in blobs:
            assert_no_base64(request.body, data)
    assert capability.provider_files is not None and capability.provider_files.uploads == len(blobs)
    # The run's history keeps the bytes: file ids are for requests only.
    assert [c.data for c in prompt_contents(history)[1:]] == blobs
    if api == 'openai-responses':
        assert {u.purpose for u in endpoint.uploads} == {'user_data', 'vision'}
        image_part = [p for p in requests[0].json['input'][0]['content'] if p['type'] == 'input_image']
        assert image_part == [{'type': 'input_image', 'file_id': by_data[blobs[2]], 'detail': 'auto'}]
    if api == 'gemini':
        parts = requests[0].json['contents'][0]['parts'][1:]
        assert parts == [
            {'fileData': {'file_uri': i, 'mime_type': t}} for i, t in zip(expected_ids, media_types, strict=True)
        ]


@MODELS
async def test_a_lost_file_is_uploaded_once_more_and_the_request_retried(
    endpoint: ProviderEndpoint, tmp_path: Path, caplog: pytest.LogCaptureFixture, model_of: Any
) -> None:
    """OpenAI and Anthropic answer 404 for a file they do not have, the Gemini API 403."""
    blobs = [pdf(200 * KiB, 11), png(100 * KiB, 12)]
    capability = MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=True)
    model = model_of(endpoint)
    agent = Agent(model, capabilities=[capability])
    prompt = [
        'Read.',
        BinaryContent(blobs[0], media_type='application/pdf'),
        BinaryContent(blobs[1], media_type='image/png'),
    ]
    result = await agent.run(prompt)
    assert len(endpoint.uploads) == 2
    lost, kept = sorted(endpoint.uploads, key=lambda upload: upload.data != blobs[0])
    endpoint.lose_file(lost.file_id)  # the provider dropped it (expiry, deletion by someone else)

    with caplog.at_level(logging.DEBUG, logger='mediastash'):
        result = await agent.run('again', message_history=result.all_messages())

    assert result.output == 'Noted.'
    assert len(endpoint.uploads) == 3 and endpoint.uploads[2].data == lost.data  # exactly one re-upload
    requests = endpoint.model_requests(api_of(model))
    assert requests[-2].path == requests[-1].path and file_ids_in(requests[-2])[0] == lost.file_id  # the refused one
    assert file_ids_in(requests[-1]) == [endpoint.uploads[2].file_id, kept.file_id]
    files = capability.provider_files
    assert files is not None and files.reuploads == 1
    # The registry now names the new id: the next turn uploads nothing.
    await agent.run('third', message_history=result.all_messages())
    assert len(endpoint.uploads) == 3
    assert file_ids_in(endpoint.model_requests(api_of(model))[-1]) == file_ids_in(requests[-1])
    # One WARNING; no log record holds a file id or the API key.
    assert [r.levelno for r in caplog.records if r.levelno >= logging.WARNING] == [logging.WARNING]
    for record in caplog.records:
        text = record.getMessage()
        assert API_KEY not in text
        assert all(upload.file_id not in text for upload in endpoint.uploads)


async def test_a_file_lost_again_after_the_reupload_fails_that_request(
    endpoint: ProviderEndpoint, tmp_path: Path
) -> None:
    """The retry happens once: a provider that refuses the new file too gets its error through, no loop."""
    blob = pdf(100 * KiB, 21)
    capability = MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=True)
    model = responses_model(endpoint)
    agent = Agent(model, capabilities=[capability])
    result = await agent.run(['x', BinaryContent(blob, media_type='application/pdf')])
    endpoint.lose_file(endpoint.uploads[0].file_id)
    endpoint.lose_every_upload = True
    with pytest.raises(ModelHTTPError) as raised:
        await agent.run('again', message_history=result.all_messages())
    assert raised.value.status_code == 404
    assert len(endpoint.uploads) == 2  # one re-upload, not more


async def test_an_upload_close_to_expiry_is_uploaded_again(endpoint: ProviderEndpoint, tmp_path: Path) -> None:
    blob = pdf(100 * KiB, 31)
    model = responses_model(endpoint)
    registry = MemoryUploadRegistry()
    now = [1_000_000.0]
    files = ProviderFiles(DiskMediaStore(tmp_path / 'media'), registry=registry, clock=lambda: now[0])
    messages: list[ModelMessage] = [
        *(await Agent(TestModel()).run(['x', BinaryContent(blob, media_type='application/pdf')])).all_messages()
    ]
    first = await files.apply(messages, model=model)
    (record,) = await registry.records('openai', next(iter(registry._records))[1])
    # As if the provider had said the file lives two more hours.
    expiring = UploadRecord(
        record.provider,
        record.account,
        record.uri,
        record.file_id,
        record.media_type,
        record.uploaded_at,
        now[0] + 7200,
    )
    await registry.put(expiring)
    again = await files.apply(messages, model=model)
    assert len(endpoint.uploads) == 1 and uploaded_ids(again) == uploaded_ids(first)
    now[0] += 7200 - 600  # ten minutes left, less than min_validity (an hour)
    renewed = await files.apply(messages, model=model)
    assert len(endpoint.uploads) == 2 and files.reuploads == 1
    assert uploaded_ids(renewed) == [endpoint.uploads[1].file_id]


def uploaded_ids(messages: list[ModelMessage]) -> list[str]:
    return [
        item.file_id
        for message in messages
        for part in message.parts
        for item in (getattr(part, 'content', None) if isinstance(getattr(part, 'content', None), list) else [])
        if isinstance(item, UploadedFile)
    ]


SECOND_PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from mediastash import DiskMediaStore
    from mediastash.integrations import MediaUrls
    from mediastash.integrations.provider_files import KVUploadRegistry
    from tests.test_provider_files import SqliteKV

    async def main():
        base_url, api_key, media, kv_path, history_path = sys.argv[1:]
        history = ModelMessagesTypeAdapter.validate_json(open(history_path, 'rb').read())
        capability = MediaUrls(DiskMediaStore(media), provider_files=KVUploadRegistry(SqliteKV(kv_path)))
        model = OpenAIResponsesModel('gpt-5', provider=OpenAIProvider(base_url=base_url, api_key=api_key))
        result = await Agent(model, capabilities=[capability]).run('continue', message_history=history)
        print(json.dumps({'output': result.output, 'uploads': capability.provider_files.uploads}))

    asyncio.run(main())
    """
)


async def test_a_second_process_with_the_persistent_registry_uploads_nothing(
    endpoint: ProviderEndpoint, tmp_path: Path
) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    blobs = [pdf(250 * KiB, 41), png(120 * KiB, 42)]
    kv_path, media = tmp_path / 'registry.sqlite', tmp_path / 'media'
    capability = MediaUrls(DiskMediaStore(media), provider_files=KVUploadRegistry(SqliteKV(kv_path)))
    agent = Agent(responses_model(endpoint), capabilities=[capability])
    result = await agent.run(
        [
            'Read.',
            BinaryContent(blobs[0], media_type='application/pdf'),
            BinaryContent(blobs[1], media_type='image/png'),
        ]
    )
    first_ids = file_ids_in(endpoint.model_requests('openai-responses')[0])
    assert len(endpoint.uploads) == 2 and len(first_ids) == 2
    history_path = tmp_path / 'history.json'
    history_path.write_bytes(ModelMessagesTypeAdapter.dump_json(result.all_messages()))

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        '-c',
        SECOND_PROCESS,
        endpoint.openai_base_url,
        API_KEY,
        str(media),
        str(kv_path),
        str(history_path),
        cwd=Path(__file__).parent.parent,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()[-2000:]
    assert json.loads(out) == {'output': 'Noted.', 'uploads': 0}
    assert len(endpoint.uploads) == 2
    second = endpoint.model_requests('openai-responses')[-1]
    assert file_ids_in(second) == first_ids
    for data in blobs:
        assert_no_base64(second.body, data)
    # The registry holds no credential.
    rows = sqlite3.connect(kv_path).execute('SELECT sk, data FROM kv').fetchall()
    assert len(rows) == 2 and all(API_KEY not in sk + data for sk, data in rows)


async def test_delete_uploads_removes_them_at_the_provider_and_from_the_registry(
    endpoint: ProviderEndpoint, tmp_path: Path
) -> None:
    capability = MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=True)
    model = anthropic_model(endpoint)
    agent = Agent(model, capabilities=[capability])
    await agent.run(
        [
            'x',
            BinaryContent(pdf(90 * KiB, 51), media_type='application/pdf'),
            BinaryContent(png(90 * KiB, 52), media_type='image/png'),
        ]
    )
    files = capability.provider_files
    assert files is not None
    ids = {upload.file_id for upload in endpoint.uploads}
    endpoint.lose_file(sorted(ids)[0])  # already gone at the provider: still counts as deleted
    assert await files.delete_uploads(model) == 2
    assert set(endpoint.deleted) == ids - {sorted(ids)[0]} and endpoint.files == {}
    assert await files.delete_uploads(model) == 0


def bedrock_model(endpoint: ProviderEndpoint) -> BedrockConverseModel:
    """pydantic-ai's Bedrock Converse model on a real boto3 client pointed at the local endpoint."""
    runtime = boto3.client(
        'bedrock-runtime',
        endpoint_url=endpoint.root_url,
        region_name='us-east-1',
        aws_access_key_id='bedrock-test',
        aws_secret_access_key='bedrock-test-secret',
    )
    return BedrockConverseModel('us.amazon.nova-pro-v1:0', provider=BedrockProvider(bedrock_client=runtime))


async def test_bedrock_reads_an_s3_stored_blob_by_its_s3_uri_without_upload(
    endpoint: ProviderEndpoint, moto_server: S3Endpoint
) -> None:
    bucket = unique_bucket('pf')
    async with get_session().create_client('s3', **moto_server.client_options()) as client:
        await client.create_bucket(Bucket=bucket)
    store = S3MediaStore(bucket=bucket, key_prefix='media/', **moto_server.client_options())
    model = bedrock_model(endpoint)
    document, image = pdf(200 * KiB, 61), png(150 * KiB, 62)
    counting = CountingMediaStore(store)  # a wrapper: its blobs live in the S3 store it wraps
    capability = MediaUrls(counting, provider_files=True)
    agent = Agent(model, capabilities=[capability])
    result = await agent.run(
        ['Read.', BinaryContent(document, media_type='application/pdf'), BinaryContent(image, media_type='image/png')]
    )
    await agent.run('again', message_history=result.all_messages())

    requests = endpoint.model_requests('bedrock')
    assert len(requests) == 2 and endpoint.uploads == []
    assert counting.calls['put'] == 2 and counting.calls['get'] + counting.calls['get_stream'] == 0
    keys = [store.key_for(media_uri_for(data)) for data in (document, image)]
    assert isinstance(store, S3AddressableMediaStore)
    assert store.s3_uri(media_uri_for(document)) == f's3://{bucket}/{keys[0]}'
    for request in requests:
        content = request.json['messages'][0]['content']
        assert content[1]['document']['source'] == {'s3Location': {'uri': f's3://{bucket}/{keys[0]}'}}
        assert content[1]['document']['format'] == 'pdf'
        assert content[2]['image'] == {'format': 'png', 'source': {'s3Location': {'uri': f's3://{bucket}/{keys[1]}'}}}
        assert_no_base64(request.body, document)
        assert_no_base64(request.body, image)
    # The objects Bedrock is sent to are there, with the right bytes.
    async with get_session().create_client('s3', **moto_server.client_options()) as client:
        for key, data in zip(keys, (document, image), strict=True):
            obj = await client.get_object(Bucket=bucket, Key=key)
            assert await obj['Body'].read() == data
    await store.aclose()


class LooksLikeS3(MemoryMediaStore):
    """A store with a bucket name and ``key_for`` that does not declare ``S3AddressableMediaStore``."""

    bucket = 'not-a-bucket'

    def key_for(self, uri: str, context: object = None) -> str:
        return uri.rsplit('/', 1)[-1]


async def test_bedrock_gets_s3_addresses_only_from_a_store_that_declares_them(endpoint: ProviderEndpoint) -> None:
    """Being S3 is a declared capability (``s3_uri``), never guessed from a store's attribute names."""
    assert not isinstance(LooksLikeS3(), S3AddressableMediaStore)
    model = bedrock_model(endpoint)
    document = pdf(120 * KiB, 63)
    agent = Agent(model, capabilities=[MediaUrls(LooksLikeS3(), provider_files=True)])
    await agent.run(['Read.', BinaryContent(document, media_type='application/pdf')])
    (request,) = endpoint.model_requests('bedrock')
    source = request.json['messages'][0]['content'][1]['document']['source']
    assert 's3Location' not in source and 'bytes' in source
    assert endpoint.uploads == []


async def test_models_without_file_references_keep_their_bytes(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart('ok')])

    blob = pdf(100 * KiB, 71)
    capability = MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=True, kinds=[])
    await Agent(FunctionModel(reply), capabilities=[capability]).run(
        ['x', BinaryContent(blob, media_type='application/pdf')]
    )
    assert prompt_contents(seen[0])[1].data == blob
    assert capability.provider_files is not None and capability.provider_files.uploads == 0


def test_provider_files_takes_true_false_or_a_registry(tmp_path: Path) -> None:
    store = DiskMediaStore(tmp_path / 'media')
    assert MediaUrls(store).provider_files is None
    assert isinstance(
        MediaUrls(store, provider_files=KVUploadRegistry(SqliteKV(tmp_path / 'kv'))).provider_files, ProviderFiles
    )
    with pytest.raises(InvalidStoreConfiguration, match='provider_files must be'):
        MediaUrls(store, provider_files='yes')  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match='kv must be an AsyncKV'):
        KVUploadRegistry(object())


async def test_a_registry_record_it_cannot_read_is_refused(tmp_path: Path) -> None:
    kv = SqliteKV(tmp_path / 'kv')
    registry = KVUploadRegistry(kv)
    uri = media_uri_for(b'x')
    record = UploadRecord('openai', 'http://h/v1#abc', uri, 'file-1', 'application/pdf', 1.0)
    await registry.put(record)
    assert await registry.get('openai', 'http://h/v1#abc', uri) == record
    ((sk, _),) = await kv.query(registry.partition)
    await kv.put(registry.partition, sk, json.dumps({'v': 99, 'file_id': 'file-1'}))
    with pytest.raises(UploadRegistryError, match='version 1'):
        await registry.get('openai', 'http://h/v1#abc', uri)
    await kv.put(registry.partition, sk, 'not json')
    with pytest.raises(UploadRegistryError, match='not JSON'):
        await registry.records('openai', 'http://h/v1#abc')


def vouched(uri: str) -> str:
    """The URL a restore in this process would give a reference to ``uri`` (sealed under the process key)."""
    return f'{uri}#{process_reference_key().seal(uri.removeprefix("media+sha256://"), None)}'


async def test_a_reference_part_reads_its_blob_only_when_it_must_be_uploaded(
    endpoint: ProviderEndpoint, tmp_path: Path
) -> None:
    """``restore='references'`` histories: a blob already uploaded is sent by id without a store read."""
    data = pdf(150 * KiB, 81)
    inner = DiskMediaStore(tmp_path / 'media')
    uri = await inner.put(data)
    model = gemini_model(endpoint)  # takes no URL: without provider files the blob would be read and inlined
    messages: list[ModelMessage] = [
        ModelRequest(
            parts=[
                UserPromptPart(
                    content=['Read.', DocumentUrl(url=vouched(uri), media_type='application/pdf', force_download=True)]
                )
            ]
        )
    ]
    registry = MemoryUploadRegistry()
    store = CountingMediaStore(inner)
    first = await MediaUrlSwapper(store, provider_files=registry).swap(messages, model=model)
    assert [u.data for u in endpoint.uploads] == [data]
    assert store.calls['get'] + store.calls['get_stream'] == 1
    assert uploaded_ids(first) == [endpoint.uploads[0].file_id]

    # Another worker with the same registry: no read, no upload, the same id.
    store = CountingMediaStore(inner)
    again = await MediaUrlSwapper(store, provider_files=registry).swap(messages, model=model)
    assert uploaded_ids(again) == uploaded_ids(first) and len(endpoint.uploads) == 1
    assert store.calls['get'] + store.calls['get_stream'] == 0
    request = await model.request(again, None, ModelRequestParameters())
    assert request.parts and file_ids_in(endpoint.model_requests('gemini')[-1]) == uploaded_ids(first)


async def test_the_history_processor_form_refuses_provider_files(tmp_path: Path) -> None:
    """A history processor's result is saved: provider file ids must never reach a snapshot."""
    swapper = MediaUrlSwapper(DiskMediaStore(tmp_path / 'media'), provider_files=True)
    agent = Agent(TestModel(), capabilities=[ProcessHistory(swapper)])
    with pytest.raises(InvalidStoreConfiguration, match='provider_files would put provider file ids'):
        await agent.run(['x', BinaryContent(pdf(100 * KiB, 91), media_type='application/pdf')])


async def test_openai_chat_takes_documents_by_file_id_and_images_stay_inline(
    endpoint: ProviderEndpoint, tmp_path: Path
) -> None:
    """Chat completions reference an uploaded file only as a document: the image keeps its bytes."""
    document, image = pdf(200 * KiB, 101), png(120 * KiB, 102)
    model = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key=API_KEY))
    capability = MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=True)
    agent = Agent(model, capabilities=[capability])
    result = await agent.run(
        ['Read.', BinaryContent(document, media_type='application/pdf'), BinaryContent(image, media_type='image/png')]
    )
    await agent.run('again', message_history=result.all_messages())
    assert [(u.data, u.purpose) for u in endpoint.uploads] == [(document, 'user_data')]
    for request in endpoint.model_requests('openai'):
        content = request.json['messages'][0]['content']
        assert content[1] == {'type': 'file', 'file': {'file_id': endpoint.uploads[0].file_id}}
        assert content[2]['image_url']['url'] == 'data:image/png;base64,' + base64.b64encode(image).decode()
        assert_no_base64(request.body, document)


@MODELS
async def test_a_streamed_run_checks_a_reused_file_once_and_replaces_a_lost_one(
    endpoint: ProviderEndpoint, tmp_path: Path, model_of: Any
) -> None:
    """pydantic-ai cannot recover a stream that began: a file id from the registry is checked before it is sent."""
    blob = pdf(120 * KiB, 111)
    registry = MemoryUploadRegistry()  # shared as a persistent registry would be between processes
    model = model_of(endpoint)
    first = Agent(model, capabilities=[MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=registry)])
    result = await first.run(['x', BinaryContent(blob, media_type='application/pdf')])
    endpoint.lose_file(endpoint.uploads[0].file_id)

    capability = MediaUrls(DiskMediaStore(tmp_path / 'media'), provider_files=registry)  # another worker
    agent = Agent(model, capabilities=[capability])
    for _ in range(2):
        async with agent.run_stream('go on', message_history=result.all_messages()) as stream:
            assert await stream.get_output() == 'Noted.'
    checks = [r for r in endpoint.requests if r.method == 'GET' and r.api in ('files', 'gemini-files')]
    assert len(checks) == 1  # the reused id once; the new upload is known to exist
    assert [u.data for u in endpoint.uploads] == [blob, blob]
    files = capability.provider_files
    assert files is not None and files.reuploads == 1
    assert file_ids_in(endpoint.model_requests(api_of(model))[-1]) == [endpoint.uploads[1].file_id]
