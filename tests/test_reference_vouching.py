"""Only vouched references resolve (issue 27, item 1).

A ``media+sha256://`` reference part is resolved by ``MediaUrls`` (bytes,
presigned URL, provider file) only when a mediastash restore sealed it under
the reference key for the store's namespace. Forged, altered, unsigned and
replayed-into-another-namespace references are refused before any store call,
upload or model request (real pydantic-ai models against the local provider
endpoint, S3 on moto). Vouching survives what happens to messages between
restore and request (copies, history processors, a JSON round trip through
another process with the application's key), and the seal never reaches
storage.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import random
import re
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
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
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, InMemoryStepStore
from pydantic_ai_persistence import InMemoryAsyncKV

from mediastash import (
    DiskMediaStore,
    InvalidArgumentError,
    MediaStore,
    MemoryMediaStore,
    NamespaceUnsupportedError,
    ReferenceKey,
    UnvouchedReferenceError,
    media_uri_for,
)
from mediastash.integrations import MediaUrls, MediaUrlSwapper, OffloadingKV, OffloadingStepStore
from mediastash.integrations.provider_files import ProviderFiles
from mediastash.stores.s3 import PresignedUrls, S3MediaStore
from mediastash.testing import CountingMediaStore
from mediastash.walker import WalkOptions
from tests.provider_endpoint import ProviderEndpoint, file_references
from tests.s3_servers import S3Endpoint, moto_server, unique_bucket
from tests.test_store_s3 import RawBucket

__all__ = ['moto_server']  # the session fixture, imported so pytest finds it here

THRESHOLD = 1024
PNG = b'\x89PNG\r\n\x1a\n'


def png(size: int, seed: int) -> bytes:
    return PNG + random.Random(seed).randbytes(size - len(PNG))


def pdf(size: int, seed: int) -> bytes:
    return b'%PDF-1.7\n' + random.Random(seed).randbytes(size - 9)


def prompt(*content: Any) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(content=['Look.', *content])])]


def snapshot(messages: list[ModelMessage], step: int = 1) -> ContinuableSnapshot:
    return ContinuableSnapshot(run_id='run-1', step_index=step, messages=messages, state='complete')  # type: ignore[arg-type]


class TenantView(CountingMediaStore):
    """A counting store that reports a namespace without being confined to it (see ``tenant``)."""

    def __init__(self, inner: MediaStore, name: str | None) -> None:
        super().__init__(inner)
        self._tenant = name

    @property
    def namespace_name(self) -> str | None:
        return self._tenant


def tenant(base: MediaStore, name: str) -> CountingMediaStore:
    """A counting view of namespace ``name``: the store's own ``namespace(name)`` view where the backend has
    namespaces; for a backend that has none yet (S3 until its namespaces land), a wrapper reporting the name,
    which is all the seal reads (``namespace_name``)."""
    try:
        return CountingMediaStore(base.namespace(name))  # type: ignore[attr-defined]
    except NamespaceUnsupportedError:
        return TenantView(base, name)


def steps_over(media: MediaStore, **options: Any) -> OffloadingStepStore:
    walk = {key: options.pop(key) for key in ('known_blobs', 'max_concurrency') if key in options}
    return OffloadingStepStore(
        InMemoryStepStore(), media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD, **walk), **options
    )


async def restored(media: MediaStore, messages: list[ModelMessage], **options: Any) -> list[ModelMessage]:
    """``messages`` saved through ``OffloadingStepStore`` and restored with ``restore='references'``."""
    steps = steps_over(media, restore='references', **options)
    await steps.save_snapshot(snapshot(messages))
    latest = await steps.latest_snapshot(run_id='run-1')
    assert latest is not None
    return list(latest.messages)


def reference_of(messages: list[ModelMessage]) -> Any:
    """The media part of ``prompt(...)``'s only content item after 'Look.'."""
    part = messages[0].parts[0]
    assert isinstance(part, UserPromptPart) and not isinstance(part.content, str)
    return part.content[1]


def with_url(part: Any, url: str) -> Any:
    return type(part)(url=url, media_type=part.media_type, identifier=part.identifier, force_download=True)


# -- the key ---------------------------------------------------------------------------------


def test_a_seal_binds_digest_namespace_and_key() -> None:
    key = ReferenceKey.generate()
    digest, other = 'a' * 64, 'b' * 64
    seal = key.seal(digest, 'tenant-a')
    assert re.fullmatch(r'ms1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}', seal)
    assert key.check(digest, 'tenant-a', seal) == 'vouched'
    assert key.check(digest, 'tenant-b', seal) == 'other-namespace'
    assert key.check(digest, None, seal) == 'other-namespace'
    assert key.check(other, 'tenant-a', seal) == 'invalid'
    assert ReferenceKey.generate().check(digest, 'tenant-a', seal) == 'invalid'
    assert key.check(digest, 'tenant-a', None) == 'unsigned'
    assert key.check(digest, None, key.seal(digest, None)) == 'vouched'
    flipped = seal[:-1] + ('A' if seal[-1] != 'A' else 'B')
    for bad in (flipped, seal + 'x', 'ms2' + seal[3:], seal.replace('.', '', 1), '', 'ms1..', seal + '='):
        assert key.check(digest, 'tenant-a', bad) == 'invalid', bad


def test_rotation_seals_with_the_first_key_and_accepts_the_others() -> None:
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    digest = 'c' * 64
    sealed_old = ReferenceKey(old).seal(digest, None)
    rotated = ReferenceKey(new, old)
    assert rotated.check(digest, None, sealed_old) == 'vouched'
    assert rotated.seal(digest, None) == ReferenceKey(new).seal(digest, None) != sealed_old
    assert ReferenceKey(new).check(digest, None, sealed_old) == 'invalid'  # the old key dropped: refused


@pytest.mark.parametrize('bad', [b'short', 'a str key of enough length, 32+ chars', 12345, b''])
def test_a_bad_reference_key_is_refused_without_echoing_it(bad: object) -> None:
    for make in (
        lambda: MediaUrls(MemoryMediaStore(), reference_key=bad),  # type: ignore[arg-type]
        lambda: OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore(), reference_key=bad),  # type: ignore[arg-type]
        lambda: OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore(), reference_key=bad),  # type: ignore[arg-type]
        lambda: ReferenceKey(secrets.token_bytes(32), bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgumentError, match='reference_key') as caught:
            make()
        assert str(bad) not in str(caught.value) and repr(bad) not in str(caught.value)
    with pytest.raises(InvalidArgumentError, match='trust_references'):
        MediaUrls(MemoryMediaStore(), trust_references='yes')  # type: ignore[arg-type]
    key = secrets.token_bytes(32)
    assert key.hex() not in repr(ReferenceKey(key)) and str(key) not in repr(ReferenceKey(key))


# -- refused on every model path, nothing read, uploaded or sent ------------------------------

PATHS = ['bytes', 'presigned-url', 'provider-file']
CASES = ['unsigned', 'forged', 'tampered', 'other-namespace']


@pytest.fixture
async def endpoint() -> AsyncIterator[ProviderEndpoint]:
    async with ProviderEndpoint() as server:
        yield server


@pytest.fixture
async def s3_store(moto_server: S3Endpoint) -> AsyncIterator[S3MediaStore]:
    raw = await RawBucket(moto_server, unique_bucket('vouch')).open()
    await raw.create()
    store = S3MediaStore(bucket=raw.bucket, public_url=PresignedUrls(expires_in=900), **moto_server.client_options())
    async with store:
        yield store
    await raw.close()


class PathSetup:
    """One model path: the store under it, the model, the capability options and the media it takes there."""

    def __init__(self, path: str, endpoint: ProviderEndpoint, s3: S3MediaStore | None) -> None:
        self.path = path
        self.endpoint = endpoint
        self.base: MediaStore = s3 if s3 is not None else MemoryMediaStore()
        openai = OpenAIChatModel('gpt-4o', provider=OpenAIProvider(base_url=endpoint.openai_base_url, api_key='k'))
        if path == 'provider-file':
            self.model: Model = GoogleModel(
                'gemini-2.5-flash', provider=GoogleProvider(api_key='k', base_url=endpoint.root_url)
            )
        else:
            self.model = openai
        # The image goes by presigned URL to OpenAI; the PDF goes as bytes (chat) or as an uploaded file (Gemini).
        if path == 'presigned-url':
            self.data, self.media_type = png(40_000, 1), 'image/png'
        else:
            self.data, self.media_type = pdf(40_000, 2), 'application/pdf'
        self.other = pdf(30_000, 3) if self.media_type == 'application/pdf' else png(30_000, 4)

    def capability(self, media: MediaStore, **options: Any) -> MediaUrls:
        return MediaUrls(media, provider_files=self.path == 'provider-file', **options)

    def received(self) -> bool:
        """Whether the model (or the provider's file API) got this path's blob in some form."""
        if self.path == 'provider-file':
            return [upload.data for upload in self.endpoint.uploads] == [self.data] and bool(
                file_references(self.endpoint.requests[-1].json)
            )
        [request] = self.endpoint.model_requests('openai')
        if self.path == 'presigned-url':
            return b'X-Amz-Signature=' in request.body
        return b'JVBERi0xLjcK' in request.body  # base64 of the PDF header: the bytes went inline


async def attack(setup: PathSetup, case: str) -> tuple[list[ModelMessage], CountingMediaStore, str]:
    """A history holding a reference the capability must refuse, the view it is presented over, and its URL."""
    tenant_a = tenant(setup.base, 'tenant-a')
    target = await tenant_a.put(setup.data)  # the blob is there: a resolve would succeed
    digest = target.removeprefix('media+sha256://')
    mine = reference_of(await restored(tenant_a, prompt(BinaryContent(setup.other, media_type=setup.media_type))))
    part_class = DocumentUrl if setup.media_type == 'application/pdf' else ImageUrl
    if case == 'unsigned':
        url = target
    elif case == 'forged':
        url = f'{target}#{ReferenceKey.generate().seal(digest, "tenant-a")}'  # an attacker's own key
    elif case == 'tampered':
        url = target + mine.url[len(target) :]  # a vouched seal moved onto another digest
    else:
        url = reference_of(await restored(tenant_a, prompt(BinaryContent(setup.data, media_type=setup.media_type)))).url
    part = part_class(url=url, media_type=setup.media_type, force_download=True)
    viewer = tenant(setup.base, 'tenant-b') if case == 'other-namespace' else tenant_a
    await viewer.put(setup.data)  # tenant B holds the same bytes: only the seal's namespace refuses it
    return prompt(part), viewer, url


@pytest.mark.parametrize('case', CASES)
@pytest.mark.parametrize('path', PATHS)
async def test_an_unvouched_reference_is_refused_before_anything_leaves(
    path: str, case: str, endpoint: ProviderEndpoint, s3_store: S3MediaStore
) -> None:
    setup = PathSetup(path, endpoint, s3_store if path == 'presigned-url' else None)
    messages, viewer, url = await attack(setup, case)
    viewer.reset()
    with pytest.raises(UnvouchedReferenceError) as caught:
        await Agent(setup.model, capabilities=[setup.capability(viewer)]).run('go', message_history=messages)
    error = caught.value
    assert (error.message_index, error.part_index, error.item_index) == (0, 0, 1)
    expected = {'forged': 'invalid', 'tampered': 'invalid'}
    assert error.reason == expected.get(case, case)
    assert 'message 0, part 0, content item 1' in str(error)
    digest = url[len('media+sha256://') :][:64]
    assert digest not in str(error) and digest[:16] not in str(error)
    if '#' in url:
        seal = url.split('#', 1)[1]
        assert seal not in str(error) and seal.split('.')[-1] not in str(error)
    assert sum(viewer.calls.values()) == 0  # no store call: nothing read, presigned or uploaded
    assert endpoint.requests == []  # no upload, no model request


@pytest.mark.parametrize('path', PATHS)
async def test_a_vouched_reference_resolves_on_every_path(
    path: str, endpoint: ProviderEndpoint, s3_store: S3MediaStore
) -> None:
    """The control for the refusals: the same setup with a reference the restore sealed gets its blob through."""
    setup = PathSetup(path, endpoint, s3_store if path == 'presigned-url' else None)
    view = tenant(setup.base, 'tenant-a')
    messages = await restored(view, prompt(BinaryContent(setup.data, media_type=setup.media_type)))
    await Agent(setup.model, capabilities=[setup.capability(view)]).run('go', message_history=messages)
    assert setup.received()


@pytest.mark.parametrize('path', PATHS)
async def test_trust_references_resolves_an_unsigned_reference(
    path: str, endpoint: ProviderEndpoint, s3_store: S3MediaStore
) -> None:
    setup = PathSetup(path, endpoint, s3_store if path == 'presigned-url' else None)
    messages, viewer, _ = await attack(setup, 'unsigned')
    await Agent(setup.model, capabilities=[setup.capability(viewer, trust_references=True)]).run(
        'go', message_history=messages
    )
    assert setup.received()


async def test_the_first_unvouched_part_is_named_among_vouched_ones(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    history = await restored(media, prompt(BinaryContent(pdf(5000, 5), media_type='application/pdf')))
    typed = DocumentUrl(url=await media.put(pdf(5000, 6)), media_type='application/pdf')
    history.append(ModelResponse(parts=[ToolCallPart(tool_name='fetch', args={}, tool_call_id='c1')]))
    history.append(
        ModelRequest(
            parts=[UserPromptPart(content='next'), ToolReturnPart(tool_name='fetch', content=typed, tool_call_id='c1')]
        )
    )
    with pytest.raises(UnvouchedReferenceError, match='message 2, part 1: ') as caught:
        await MediaUrlSwapper(media).swap(history)
    assert caught.value.item_index is None and caught.value.reason == 'unsigned'


# -- vouching survives what happens between restore and request -------------------------------


def received_pdfs(seen: list[bytes]) -> Any:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                        seen.extend(item.data for item in part.content if isinstance(item, BinaryContent))
        return ModelResponse(parts=[TextPart('ok')])

    return model


async def test_copies_and_history_processors_keep_vouching(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    data = pdf(8000, 7)
    history = await restored(media, prompt(BinaryContent(data, media_type='application/pdf')))

    def through_json(messages: list[ModelMessage]) -> list[ModelMessage]:
        return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))

    def replaced_parts(messages: list[ModelMessage]) -> list[ModelMessage]:
        """Each request rebuilt with ``dataclasses.replace`` and copied parts, as a history processor may."""
        return [
            dataclasses.replace(m, parts=[dataclasses.replace(p) for p in m.parts])
            if isinstance(m, ModelRequest)
            else m
            for m in messages
        ]

    for processor in (through_json, replaced_parts, copy.deepcopy):
        seen: list[bytes] = []
        agent = Agent(FunctionModel(received_pdfs(seen)), capabilities=[ProcessHistory(processor), MediaUrls(media)])
        result = await agent.run('again', message_history=copy.deepcopy(history))
        await agent.run('and again', message_history=result.all_messages())
        assert seen == [data, data], processor


CHILD = r"""
import asyncio, json, sys
from pydantic_ai.messages import ModelMessagesTypeAdapter
from mediastash import DiskMediaStore, UnvouchedReferenceError
from mediastash.integrations import MediaUrlSwapper

config = json.loads(sys.argv[1])

async def main():
    history = ModelMessagesTypeAdapter.validate_json(open(config['history']).read())
    media = DiskMediaStore(config['media'])
    sent = await MediaUrlSwapper(media, reference_key=bytes.fromhex(config['key'])).swap(history)
    data = sent[0].parts[0].content[1].data
    try:
        await MediaUrlSwapper(media).swap(history)  # this process's own random key
        default = 'resolved'
    except UnvouchedReferenceError as error:
        default = error.reason
    print(json.dumps({'data': data.hex(), 'default': default}))

asyncio.run(main())
"""


async def test_a_history_round_tripped_through_json_resolves_in_another_process_with_the_app_key(
    tmp_path: Path,
) -> None:
    """An application sends the restored history to its client and gets it back; another worker resolves it."""
    key = secrets.token_bytes(32)
    media = DiskMediaStore(tmp_path / 'media')
    data = pdf(9000, 8)
    history = await restored(media, prompt(BinaryContent(data, media_type='application/pdf')), reference_key=key)
    (tmp_path / 'history.json').write_bytes(ModelMessagesTypeAdapter.dump_json(history))
    config = {'history': str(tmp_path / 'history.json'), 'media': str(tmp_path / 'media'), 'key': key.hex()}
    child = await asyncio.create_subprocess_exec(
        sys.executable, '-c', CHILD, json.dumps(config), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(child.communicate(), timeout=120)
    assert child.returncode == 0, err.decode()[-3000:]
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert bytes.fromhex(report['data']) == data
    assert report['default'] == 'invalid'  # without the application key, another process refuses it


async def test_a_rotated_key_still_resolves_references_sealed_before_the_rotation(tmp_path: Path) -> None:
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    media = DiskMediaStore(tmp_path / 'media')
    data = pdf(7000, 9)
    history = await restored(media, prompt(BinaryContent(data, media_type='application/pdf')), reference_key=old)
    sent = await MediaUrlSwapper(media, reference_key=ReferenceKey(new, old)).swap(history)
    assert reference_of(sent).data == data
    with pytest.raises(UnvouchedReferenceError) as caught:
        await MediaUrlSwapper(media, reference_key=new).swap(history)
    assert caught.value.reason == 'invalid'


# -- the seal never reaches storage; a save vouches for nothing new ------------------------------


async def test_saving_vouched_references_with_an_app_key_writes_the_lean_json_of_the_bytes(tmp_path: Path) -> None:
    key = ReferenceKey(secrets.token_bytes(32))
    media = DiskMediaStore(tmp_path / 'media')
    original = prompt(BinaryContent(pdf(6000, 10), media_type='application/pdf', vendor_metadata={'a': 1}))
    kv = OffloadingKV(
        InMemoryAsyncKV(), media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD), reference_key=key
    )
    await kv.put('runs', 'bytes', ModelMessagesTypeAdapter.dump_json(original).decode())
    history = await restored(media, original, reference_key=key)
    assert '#ms1.' in reference_of(history).url
    await kv.put('runs', 'references', ModelMessagesTypeAdapter.dump_json(history).decode())
    lean = await kv.inner.get('runs', 'references')
    assert lean == await kv.inner.get('runs', 'bytes')
    assert '#ms1.' not in lean and 'ms1.' not in lean


@pytest.mark.parametrize('case', ['unsigned', 'forged', 'other-key'])
async def test_a_save_does_not_turn_an_unvouched_reference_into_a_marker(tmp_path: Path, case: str) -> None:
    """Else a later 'bytes' restore would read another user's blob into the history (laundering by saving)."""
    media = CountingMediaStore(DiskMediaStore(tmp_path / 'media'))
    secret = pdf(6000, 11)
    uri = await media.put(secret)
    if case == 'unsigned':
        url = uri
    elif case == 'forged':
        url = f'{uri}#ms1.{"A" * 16}.{"B" * 22}'
    else:
        url = reference_of(
            await restored(media, prompt(BinaryContent(secret, media_type='application/pdf')), reference_key=b'k' * 32)
        ).url
    typed = prompt(DocumentUrl(url=url, media_type='application/pdf', identifier='x', force_download=True))

    steps = steps_over(media)
    await steps.save_snapshot(snapshot(typed))
    media.reset()
    fresh = OffloadingStepStore(
        steps.inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD)
    )  # restores bytes
    back = await fresh.latest_snapshot(run_id='run-1')
    assert back is not None
    assert reference_of(list(back.messages)) == reference_of(typed)  # still the URL part, never the bytes
    assert media.calls['get'] == 0

    kv = OffloadingKV(InMemoryAsyncKV(), media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD))
    await kv.put('runs', 'r', ModelMessagesTypeAdapter.dump_json(typed).decode())
    read = await OffloadingKV(kv.inner, media_store=media, options=WalkOptions(threshold_bytes=THRESHOLD)).get(
        'runs', 'r'
    )
    assert read is not None
    assert reference_of(ModelMessagesTypeAdapter.validate_json(read)) == reference_of(typed)
    assert media_uri_for(secret) in read and '__harness_external' not in read


async def test_provider_files_on_their_own_refuse_an_unvouched_reference(
    endpoint: ProviderEndpoint, tmp_path: Path
) -> None:
    """``ProviderFiles`` is public: used without ``MediaUrls`` it checks references itself before any upload."""
    media = CountingMediaStore(DiskMediaStore(tmp_path / 'media'))
    data = pdf(40_000, 12)
    uri = await media.put(data)
    model = GoogleModel('gemini-2.5-flash', provider=GoogleProvider(api_key='k', base_url=endpoint.root_url))
    typed = prompt(DocumentUrl(url=uri, media_type='application/pdf', force_download=True))
    media.reset()
    with pytest.raises(UnvouchedReferenceError) as caught:
        await ProviderFiles(media).apply(typed, model=model)
    assert caught.value.reason == 'unsigned'
    assert sum(media.calls.values()) == 0 and endpoint.requests == []

    vouched = await restored(media, prompt(BinaryContent(data, media_type='application/pdf')))
    sent = await ProviderFiles(media).apply(vouched, model=model)
    assert [upload.data for upload in endpoint.uploads] == [data]
    assert type(reference_of(sent)).__name__ == 'UploadedFile'
    trusted = await ProviderFiles(media, trust_references=True).apply(typed, model=model)
    assert type(reference_of(trusted)).__name__ == 'UploadedFile'
