"""What a reader without mediastash sees of a run saved through OffloadingStepStore (envelope version 2).

Real pydantic-ai and pydantic-ai-harness objects throughout: the plain reader is
the harness's own FileStepStore / SqliteStepStore opened on the same folder or
database, and the agent continuing from it runs a FunctionModel.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    FilePart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SpeechPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    FileStepStore,
    RunRecord,
    SqliteStepStore,
    StepPersistence,
)

from mediastash import MemoryMediaStore, WalkOptions, externalize_media
from mediastash.gc import FileStepStoreRoot, SqliteStepStoreRoot, collect_garbage
from mediastash.integrations import ENVELOPE_KEY, EnvelopeError, OffloadingStepStore
from mediastash.integrations.pydantic_ai._placeholders import PLACEHOLDER_KEY, PLACEHOLDER_PREFIX
from tests.integration_support import big_strings, history, roundtrip
from tests.memory_support import set_written_at

URI = re.compile(r'media\+sha256://[0-9a-f]{64}')
PLAIN_STORES = ('file', 'sqlite')


def plain_store(kind: str, tmp_path: Path) -> Any:
    """A pydantic-ai-harness step store that knows nothing of mediastash (no media store)."""
    if kind == 'file':
        return FileStepStore(tmp_path / 'steps', media_store=None)
    return SqliteStepStore(database=str(tmp_path / 'steps.db'), media_store=None)


def snapshot(messages: list[Any], *, step: int = 1, run_id: str = 'run-1') -> ContinuableSnapshot:
    return ContinuableSnapshot(run_id=run_id, step_index=step, messages=messages, state='complete')  # type: ignore[arg-type]


async def stored_uris(media: MemoryMediaStore) -> set[str]:
    return {uri async for uri in media.iter_uris()}


def texts_of(messages: list[ModelMessage]) -> list[str]:
    """Every string a model could read in the messages' parts (prompt items, part contents)."""
    found: list[str] = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, 'content', None)
            items = content if isinstance(content, list) else [content]
            found.extend(item for item in items if isinstance(item, str))
    return found


def placeholders_in(messages: list[ModelMessage]) -> list[str]:
    return [text for text in texts_of(messages) if text.startswith(PLACEHOLDER_PREFIX)]


async def save_through_wrapper(kind: str, tmp_path: Path, messages: list[ModelMessage]) -> MemoryMediaStore:
    media = MemoryMediaStore()
    store = OffloadingStepStore(plain_store(kind, tmp_path), media_store=media)
    await store.register_run(RunRecord(run_id='run-1'))
    await store.save_snapshot(snapshot(messages))
    return media


# -- the plain reader sees everything --------------------------------------------------------------


@pytest.mark.parametrize('kind', PLAIN_STORES)
async def test_a_plain_reader_sees_every_part_with_placeholders_naming_the_media(kind: str, tmp_path: Path) -> None:
    messages = history()
    media = await save_through_wrapper(kind, tmp_path, messages)

    plain = await plain_store(kind, tmp_path).latest_snapshot(run_id='run-1')
    assert plain is not None
    shown = list(plain.messages)
    assert [m.kind for m in shown] == [m.kind for m in messages]
    assert [len(m.parts) for m in shown] == [len(m.parts) for m in messages]  # nothing dropped
    # Parts keep their kind (tool-call/return pairing intact); a file part becomes text, the only change.
    expected_kinds = [['text' if p.part_kind == 'file' else p.part_kind for p in m.parts] for m in messages]
    assert [[p.part_kind for p in m.parts] for m in shown] == expected_kinds
    assert shown[2].parts[0].tool_call_id == 'call-1' and shown[1].parts[0].tool_call_id == 'call-1'

    # Every stored blob is named by a placeholder, each placeholder names one stored blob.
    placeholders = placeholders_in(shown)
    assert len(placeholders) == 5  # image, pdf, long text, tool output, generated image
    named = {URI.search(text).group(0) for text in placeholders}  # type: ignore[union-attr]
    assert named == await stored_uris(media)
    assert all('OffloadingStepStore' in text and len(text) < 300 for text in placeholders)
    assert 'image/png, 146.5 KiB' in placeholders[0]
    # What was small stays readable as it was.
    assert shown[0].parts[0].content[0] == 'what is in these?'
    assert shown[0].parts[0].content[4].data == b'tiny'
    assert shown[3].parts[0].content == 'here is an image'
    assert shown[4] == roundtrip(messages)[4]
    # No payload reached the plain store.
    assert big_strings(ModelMessagesTypeAdapter.dump_python(shown, mode='json')) == []


async def test_a_plain_harness_cli_style_read_of_the_file_is_valid_json_with_placeholders(tmp_path: Path) -> None:
    await save_through_wrapper('file', tmp_path, history())
    (path,) = (tmp_path / 'steps').glob('*/snapshots/*.json')
    raw = json.loads(path.read_text())
    assert [len(m['parts']) for m in raw['messages']] == [1, 1, 1, 2, 1]
    assert path.stat().st_size < 12_000


async def test_an_agent_continuing_from_a_plain_read_sees_the_placeholders(tmp_path: Path) -> None:
    media = MemoryMediaStore()
    store = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
    report = 'r' * 200_000

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(p, ToolCallPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[ToolCallPart(tool_name='fetch_report', args={}, tool_call_id='c1')])
        return ModelResponse(parts=[TextPart('done')])

    writer: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=[StepPersistence(store=store)])

    @writer.tool_plain
    def fetch_report() -> str:
        return report

    image = BinaryContent(data=os.urandom(200_000), media_type='image/png')
    await writer.run(['describe this image', image])
    (run,) = await store.list_runs()

    plain = await FileStepStore(tmp_path / 'steps', media_store=None).latest_snapshot(run_id=run.run_id)
    assert plain is not None
    seen: list[list[ModelMessage]] = []

    def reader_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart('ok')])

    reader: Agent[None, str] = Agent(FunctionModel(reader_model))
    result = await reader.run('what did the report say?', message_history=list(plain.messages))
    assert result.output == 'ok'
    (prompt,) = seen
    texts = texts_of(prompt)
    assert 'describe this image' in texts
    assert 'what did the report say?' in texts
    placeholders = [text for text in texts if text.startswith(PLACEHOLDER_PREFIX)]
    assert len(placeholders) == 2  # the image in the first request, the tool output in the tool return
    assert {URI.search(text).group(0) for text in placeholders} == await stored_uris(media)  # type: ignore[union-attr]
    returns = [p for m in prompt for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == 1 and returns[0].tool_call_id == 'c1' and returns[0].content.startswith(PLACEHOLDER_PREFIX)
    assert not any(isinstance(item, BinaryContent) for m in prompt for p in m.parts for item in _items(p))


def _items(part: Any) -> list[Any]:
    content = getattr(part, 'content', None)
    return content if isinstance(content, list) else [content]


# -- the wrapper still gets the exact messages back ----------------------------------------------


@pytest.mark.parametrize('kind', PLAIN_STORES)
async def test_the_wrapper_restores_exactly_and_envelopes_are_stable(kind: str, tmp_path: Path) -> None:
    media = MemoryMediaStore()
    store = OffloadingStepStore(plain_store(kind, tmp_path), media_store=media)
    await store.register_run(RunRecord(run_id='run-1'))
    messages = history()
    grown = [*messages, ModelResponse(parts=[TextPart('more')]), ModelRequest(parts=[UserPromptPart('go on')])]
    await store.save_snapshot(snapshot(messages, step=1))
    await store.save_snapshot(snapshot(grown, step=2))
    back = await store.list_snapshots(run_id='run-1')
    assert [s.messages for s in back] == [roundtrip(messages), roundtrip(grown)]

    first, second = await plain_store(kind, tmp_path).list_snapshots(run_id='run-1')
    dump = ModelMessagesTypeAdapter.dump_json
    assert [dump([m]) for m in first.messages] == [dump([m]) for m in second.messages[: len(messages)]]
    if kind == 'sqlite':  # the store keeps each distinct message once: envelopes included
        with sqlite3.connect(tmp_path / 'steps.db') as connection:
            (rows,) = connection.execute('SELECT COUNT(*) FROM snapshot_messages').fetchone()
        assert rows == len(grown)


async def test_unusual_places_speech_audio_and_metadata_restore_and_show(tmp_path: Path) -> None:
    audio = BinaryContent(data=b'\x01\x02' * 40_000, media_type='audio/wav')
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SpeechPart(speaker='user', transcript='hello there', audio=audio)]),
        ModelRequest(
            parts=[ToolReturnPart(tool_name='t', tool_call_id='c', content={'nested': [audio], 'note': 'n' * 70_000})],
            metadata={'attachment': {'kind': 'binary', 'data': 'eg' * 50_000}},
        ),
        ModelResponse(parts=[FilePart(content=BinaryContent(data=b'\x07' * 90_000, media_type='image/webp'))]),
    ]
    media = await save_through_wrapper('file', tmp_path, messages)
    plain = await FileStepStore(tmp_path / 'steps', media_store=None).latest_snapshot(run_id='run-1')
    assert plain is not None
    speech, tool, file = plain.messages
    shown_audio = speech.parts[0].audio
    assert speech.parts[0].transcript == 'hello there'
    assert shown_audio.data == b'' and shown_audio.media_type == 'audio/wav'
    assert shown_audio.vendor_metadata[PLACEHOLDER_KEY].startswith(PLACEHOLDER_PREFIX)
    content = tool.parts[0].content
    assert content['nested'][0].startswith(PLACEHOLDER_PREFIX)
    assert content['note'] == 'n' * 70_000  # a plain string in a dict is no payload in the marker format
    assert set(tool.metadata) == {ENVELOPE_KEY}  # the caller's metadata lives in the envelope
    assert isinstance(file.parts[0], TextPart) and 'image/webp' in file.parts[0].content
    assert len(await stored_uris(media)) == 3  # the audio (twice, stored once), the attachment, the image

    wrapper = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
    back = await wrapper.latest_snapshot(run_id='run-1')
    assert back is not None and back.messages == roundtrip(messages)


async def test_inner_store_with_its_own_media_store_round_trips(tmp_path: Path) -> None:
    """The migration layout: the harness store externalizes too (into the same storage)."""
    media = MemoryMediaStore()
    inner = FileStepStore(tmp_path / 'steps', media_store=media, media_threshold_bytes=1024)
    store = OffloadingStepStore(inner, media_store=media)
    messages = [*history(), ModelRequest(parts=[UserPromptPart('a' * 5000)])]  # only the inner store moves this
    await store.save_snapshot(snapshot(messages))
    back = await store.latest_snapshot(run_id='run-1')
    assert back is not None and back.messages == roundtrip(messages)
    seen = await FileStepStore(tmp_path / 'steps', media_store=media).latest_snapshot(run_id='run-1')
    assert seen is not None and len(placeholders_in(list(seen.messages))) == 5


# -- the previous envelope version, and damage ------------------------------------------------------


async def v1_envelopes(messages: list[ModelMessage], media: MemoryMediaStore) -> list[ModelMessage]:
    """What mediastash wrote before envelope version 2: part-less messages carrying the whole lean JSON."""
    dumped = ModelMessagesTypeAdapter.dump_python(messages, mode='json')
    lean = await externalize_media(dumped, media_store=media)
    out: list[ModelMessage] = []
    for message, plain, lean_message in zip(messages, dumped, lean, strict=True):
        if plain == lean_message:
            out.append(message)
            continue
        metadata = {ENVELOPE_KEY: {'v': 1, 'message': lean_message}}
        fields = {'timestamp': message.timestamp, 'run_id': message.run_id, 'conversation_id': message.conversation_id}
        if isinstance(message, ModelRequest):
            out.append(ModelRequest(parts=[], metadata=metadata, **fields))
        else:
            out.append(ModelResponse(parts=[], metadata=metadata, **fields))
    return out


@pytest.mark.parametrize('kind', PLAIN_STORES)
async def test_version_1_envelopes_still_restore_exactly(kind: str, tmp_path: Path) -> None:
    media = MemoryMediaStore()
    messages = history()
    old = await v1_envelopes(messages, media)
    assert sum(not m.parts for m in old) == 3
    inner = plain_store(kind, tmp_path)
    await inner.register_run(RunRecord(run_id='run-1'))
    await inner.save_snapshot(snapshot(old))
    fresh = OffloadingStepStore(plain_store(kind, tmp_path), media_store=media, options=WalkOptions(known_blobs=False))
    back = await fresh.latest_snapshot(run_id='run-1')
    assert back is not None and back.messages == roundtrip(messages)
    assert back.messages[0].parts[0].content[1].data == messages[0].parts[0].content[1].data


def tamper(path: Path, change: Any) -> None:
    raw = json.loads(path.read_text())
    change(raw['messages'])
    path.write_text(json.dumps(raw))


def body(messages: list[Any], index: int = 0) -> dict[str, Any]:
    return messages[index]['metadata'][ENVELOPE_KEY]  # type: ignore[no-any-return]


def part_slot(messages: list[Any], part: int, index: int = 0) -> dict[str, Any]:
    (slot,) = [slot for slot in body(messages, index)['slots'] if slot['path'] == ['parts', part]]
    return slot  # type: ignore[no-any-return]


def as_version_2(messages: list[Any], index: int = 0) -> None:
    """The envelope of message ``index`` as mediastash wrote it before the kit: ``{'v': 2, 'message': body}``."""
    message = messages[index]
    lean: dict[str, Any] = {'kind': message['kind'], 'parts': [None] * len(message['parts'])}
    for slot in body(messages, index)['slots']:
        if slot['path'][0] == 'parts':
            lean['parts'][slot['path'][1]] = slot['lean']
        else:
            lean[slot['path'][0]] = slot['lean']
    message['metadata'][ENVELOPE_KEY] = {'v': 2, 'message': lean}


DAMAGE = {
    'unknown format': (
        lambda m: body(m).update(format='mediastash-envelope-v3'),
        r"unsupported format 'mediastash-envelope-v3' \(this reader knows 'mediastash-envelope-v2' and the versions",
    ),
    'a part dropped': (lambda m: m[0]['parts'].pop(), 'one entry per part'),
    'slots not a list': (lambda m: body(m).update(slots={}), 'is damaged .*non-empty slots list'),
    'a part slot not a mapping': (lambda m: part_slot(m, 0).update(lean='x'), 'a mapping for each part'),
    'metadata missing': (
        lambda m: body(m).update(slots=[s for s in body(m)['slots'] if s['path'] != ['metadata']]),
        "'metadata'",
    ),
    'a place named twice': (lambda m: body(m)['slots'].append(part_slot(m, 0)), 'naming a place twice'),
    'a slot at kind': (lambda m: body(m)['slots'].append({'path': ['kind'], 'lean': 'x'}), 'a place a message'),
    'extra envelope key': (lambda m: body(m).update(extra=1), 'is damaged'),
    'extra metadata key': (lambda m: m[0]['metadata'].update(extra=1), 'only the'),
    'unknown marker format': (
        lambda m: part_slot(m, 0)['lean']['content'][1].update(
            __harness_external_marker_format__='escaped-keys-v9',
            __harness_external_escaped_keys__={'__harness_external_media__': 5},
        ),
        'unreadable marker',
    ),
}

DAMAGE_VERSION_2 = {
    'unknown version': (lambda m: body(m).update(v=3), r'unsupported version 3 \(this reader knows 1 and 2\)'),
    'boolean version': (lambda m: body(m).update(v=True), 'unsupported version True'),
    'a part dropped': (lambda m: m[0]['parts'].pop(), 'one entry per part'),
    'parts not a list': (lambda m: body(m)['message'].update(parts={}), 'one entry per part'),
    'a part entry not a mapping': (lambda m: body(m)['message']['parts'].__setitem__(0, 'x'), 'mapping or null'),
    'metadata missing': (lambda m: body(m)['message'].pop('metadata'), "'metadata'"),
    'wrong kind': (lambda m: body(m)['message'].update(kind='response'), "must hold a 'request' message"),
    'extra body key': (lambda m: body(m).update(extra=1), "the keys 'v' and 'message' \\(and 'seal'\\)"),
    'extra metadata key': (lambda m: m[0]['metadata'].update(extra=1), 'only the'),
    'version 1 with parts': (lambda m: body(m).update(v=1), 'version 1 must have no parts'),
    'unknown marker format': (
        lambda m: body(m)['message']['parts'][0]['content'][1].update(
            __harness_external_marker_format__='escaped-keys-v9',
            __harness_external_escaped_keys__={'__harness_external_media__': 5},
        ),
        'unreadable marker',
    ),
}


@pytest.mark.parametrize(
    ('damage', 'version'), [*((d, 'kit') for d in sorted(DAMAGE)), *((d, '2') for d in sorted(DAMAGE_VERSION_2))]
)
async def test_damaged_envelopes_raise_envelope_error(damage: str, version: str, tmp_path: Path) -> None:
    messages = history()
    media = await save_through_wrapper('file', tmp_path, messages)
    (path,) = (tmp_path / 'steps').glob('*/snapshots/*.json')
    if version == '2':
        tamper(path, as_version_2)
        store = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
        back = await store.latest_snapshot(run_id='run-1')  # undamaged, the older body restores
        assert back is not None and back.messages == roundtrip(messages)
    change, message = (DAMAGE if version == 'kit' else DAMAGE_VERSION_2)[damage]
    tamper(path, change)
    store = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
    with pytest.raises(EnvelopeError, match=message) as caught:
        await store.latest_snapshot(run_id='run-1')
    assert "run 'run-1' at step 1, message 0" in str(caught.value)


# -- garbage collection over version 2 snapshots --------------------------------------------------


@pytest.mark.parametrize('kind', PLAIN_STORES)
async def test_gc_keeps_every_blob_a_version_2_snapshot_needs(kind: str, tmp_path: Path) -> None:
    messages = history()
    media = await save_through_wrapper(kind, tmp_path, messages)
    needed = await stored_uris(media)
    orphan = await media.put(b'nobody references me')
    long_ago = time.time() - 7200
    for uri in [*needed, orphan]:
        set_written_at(media, uri, long_ago)
    path = tmp_path / 'steps' if kind == 'file' else tmp_path / 'steps.db'
    root = FileStepStoreRoot(path) if kind == 'file' else SqliteStepStoreRoot(path)
    # [path] is what `mediastash gc --roots` reads
    by_path = await collect_garbage(media, [path], grace=timedelta(hours=1), uris_file=tmp_path / 'dry.txt')
    assert set(by_path.iter_uris('deletable')) == {orphan}
    report = await collect_garbage(media, [root], grace=timedelta(hours=1), dry_run=False, uris_file=tmp_path / 'gc')
    assert set(report.iter_uris('deleted')) == {orphan}
    assert await stored_uris(media) == needed
    store = OffloadingStepStore(plain_store(kind, tmp_path), media_store=media, options=WalkOptions(known_blobs=False))
    back = await store.latest_snapshot(run_id='run-1')
    assert back is not None and back.messages == roundtrip(messages)


async def test_a_resave_hands_over_the_same_envelopes_and_rebuilds_changed_ones() -> None:
    from mediastash.integrations.pydantic_ai._typed import Offloader

    offloader = Offloader(MemoryMediaStore(), options=WalkOptions(threshold_bytes=64 * 1024, max_concurrency=4))
    messages = history()
    first = await offloader.offload(messages)
    second = await offloader.offload([*messages, ModelRequest(parts=[UserPromptPart('next')])])
    assert all(a is b for a, b in zip(first, second, strict=False))  # built once, handed over again
    edited = list(messages)
    edited[2] = ModelRequest(parts=[ToolReturnPart(tool_name='fetch', content='ü' * 70_000, tool_call_id='call-1')])
    third = await offloader.offload(edited)
    assert third[0] is first[0] and third[2] is not first[2]
    assert 'ü' * 10 not in ModelMessagesTypeAdapter.dump_json([third[2]]).decode()
    assert await offloader.restore(third, run_id='r', step_index=3) == roundtrip(edited)


def binary_marker(uri: str) -> dict[str, Any]:
    return {
        'kind': 'binary',
        'media_type': 'image/png',
        '__harness_external_media__': True,
        '__harness_external_uri__': uri,
        'uri': uri,
    }


def test_shapes_pydantic_ai_refuses_fall_back_to_text_parts_and_still_restore() -> None:
    """A marker where pydantic-ai accepts no text: the part (else the message) becomes text parts, one per part."""
    from mediastash.integrations.pydantic_ai._envelope import SnapshotPlace, envelopes_for, lean_json_of
    from mediastash.uri import media_uri_for

    uri = media_uri_for(b'x')
    in_error_list = {
        'kind': 'request',
        'parts': [
            {'part_kind': 'retry-prompt', 'content': [binary_marker(uri)], 'tool_name': None, 'tool_call_id': 'c'},
            {'part_kind': 'user-prompt', 'content': 'keep me'},
        ],
        'metadata': None,
    }
    in_usage = {
        'kind': 'response',
        'parts': [{'part_kind': 'text', 'content': 'hello'}, {'part_kind': 'text', 'content': 'again'}],
        'usage': {'details': {'tokens': binary_marker(uri)}},
        'metadata': {'note': 1},
    }
    leans = [in_error_list, in_usage]
    envelopes = envelopes_for(leans, [{uri: 1536}, {}], lambda body: 'unused')
    stored = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(envelopes))
    first, second = stored
    assert [p.part_kind for p in first.parts] == ['user-prompt', 'user-prompt']
    assert (
        first.parts[0].content.startswith(PLACEHOLDER_PREFIX + 'a retry-prompt part') and uri in first.parts[0].content
    )
    assert first.parts[1].content == 'keep me'
    assert [p.part_kind for p in second.parts] == ['text', 'text']
    assert all(p.content.startswith(PLACEHOLDER_PREFIX) for p in second.parts)  # the message itself could not hold it
    for index, (message, lean) in enumerate(zip(stored, leans, strict=True)):
        back = lean_json_of(message, place=SnapshotPlace('r', 1), message_index=index)
        assert {k: v for k, v in back.items() if k in lean} == lean


async def test_re_saving_a_version_1_run_through_the_wrapper_makes_it_readable_without_mediastash(
    tmp_path: Path,
) -> None:
    """The upgrade docs/migrating.md gives for runs written before placeholders existed."""
    media = MemoryMediaStore()
    messages = history()
    inner = FileStepStore(tmp_path / 'steps', media_store=None)
    await inner.register_run(RunRecord(run_id='run-1'))
    await inner.save_snapshot(snapshot(await v1_envelopes(messages, media)))
    before = await FileStepStore(tmp_path / 'steps', media_store=None).latest_snapshot(run_id='run-1')
    assert before is not None and [len(m.parts) for m in before.messages] == [0, 1, 0, 0, 1]

    wrapper = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
    latest = await wrapper.latest_snapshot(run_id='run-1')
    assert latest is not None
    await wrapper.save_snapshot(latest)
    after = await FileStepStore(tmp_path / 'steps', media_store=None).latest_snapshot(run_id='run-1')
    assert after is not None and [len(m.parts) for m in after.messages] == [len(m.parts) for m in messages]
    again = await wrapper.latest_snapshot(run_id='run-1')
    assert again is not None and again.messages == roundtrip(messages)
