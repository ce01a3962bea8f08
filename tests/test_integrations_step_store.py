"""OffloadingStepStore over every inner step store we can run here, with every media store."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, UserPromptPart
from pydantic_ai_harness.step_persistence import (
    ContinuableSnapshot,
    FileStepStore,
    InMemoryStepStore,
    MongoStepStore,
    RunRecord,
    SqliteStepStore,
    StepStore,
    ToolEffectRecord,
)
from pydantic_ai_harness.step_persistence.recovery import inspect_recovery
from pydantic_ai_persistence import InMemoryAsyncKV, KVStepStore

from mediastash import MediaNotFoundError, MemoryMediaStore
from mediastash.integrations import ENVELOPE_KEY, ENVELOPE_VERSION, EnvelopeError, OffloadingKV, OffloadingStepStore
from mediastash.walker import WalkOptions
from tests.integration_support import (
    ALL_MEDIA_STORES,
    THRESHOLD,
    big_strings,
    close_store,
    history,
    make_media_store,
    roundtrip,
)
from tests.memory_support import drop_blob
from tests.mongo_support import unique_name

InnerFactory = Callable[[Path, Any], Any]

INNER_STORES: dict[str, InnerFactory] = {
    'memory': lambda tmp, media: InMemoryStepStore(),
    'file': lambda tmp, media: FileStepStore(tmp / 'steps', media_store=None),
    'sqlite': lambda tmp, media: SqliteStepStore(database=str(tmp / 'steps.db'), media_store=None),
    'kv': lambda tmp, media: KVStepStore(OffloadingKV(InMemoryAsyncKV(), media_store=media)),
    'mongo': lambda tmp, media: None,  # built in `inner` below: it needs the session MongoDB server
}


@pytest.fixture(params=ALL_MEDIA_STORES)
async def media_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    store = await make_media_store(request.param, tmp_path, request)
    yield store
    await close_store(store)


@pytest.fixture(params=sorted(INNER_STORES))
async def inner(request: pytest.FixtureRequest, tmp_path: Path, media_store: Any) -> AsyncIterator[Any]:
    if request.param != 'mongo':
        yield INNER_STORES[request.param](tmp_path, media_store)
        return
    store = MongoStepStore(db_url=request.getfixturevalue('mongo_uri'), database=unique_name('steps'), media_store=None)
    yield store
    await store.aclose()


def snapshot(messages: list[Any], *, step: int = 1, state: str = 'complete', run_id: str = 'run-1') -> Any:
    return ContinuableSnapshot(run_id=run_id, step_index=step, messages=messages, state=state)  # type: ignore[arg-type]


async def test_round_trip_over_every_inner_store(inner: Any, media_store: Any) -> None:
    store = OffloadingStepStore(inner, media_store=media_store)
    assert isinstance(store, StepStore)
    messages = history()
    await store.register_run(RunRecord(run_id='run-1'))
    await store.save_snapshot(snapshot(messages[:2], step=1))
    await store.save_snapshot(snapshot(messages, step=2))

    back = await store.latest_snapshot(run_id='run-1')
    assert back is not None
    assert back.step_index == 2
    assert back.messages == roundtrip(messages)
    prompt = back.messages[0].parts[0].content
    assert prompt[1].data == messages[0].parts[0].content[1].data
    assert prompt[1].identifier == 'photo-1'
    assert back.messages[3].parts[1].content.vendor_metadata == {'detail': 'high'}

    lean = await inner.latest_snapshot(run_id='run-1') if not isinstance(inner, KVStepStore) else None
    if lean is not None:
        dumped = ModelMessagesTypeAdapter.dump_python(lean.messages, mode='json')
        assert big_strings(dumped) == []
        assert lean.messages[1] == messages[1]  # no payload: handed over untouched
        assert set(lean.messages[0].metadata) == {ENVELOPE_KEY}
        assert lean.messages[0].metadata[ENVELOPE_KEY]['format'] == ENVELOPE_VERSION == 'mediastash-envelope-v2'
        # Every part is still there for a plain reader; each payload is a short placeholder naming its URI.
        assert [len(m.parts) for m in lean.messages] == [len(m.parts) for m in messages]
        shown = lean.messages[0].parts[0].content
        assert shown[0] == 'what is in these?' and shown[1].startswith('[mediastash placeholder: image/png')

    all_snapshots = await store.list_snapshots(run_id='run-1')
    assert [s.messages for s in all_snapshots] == [roundtrip(messages[:2]), roundtrip(messages)]


async def test_kv_inner_values_stay_small(media_store: Any) -> None:
    kv = InMemoryAsyncKV()
    store = OffloadingStepStore(KVStepStore(kv), media_store=media_store)
    messages = history()
    await store.save_snapshot(snapshot(messages))
    ((_, value),) = await kv.query('run#run-1', 'snap#')
    assert len(value) < 12_000
    assert (await store.latest_snapshot(run_id='run-1')).messages == roundtrip(messages)


async def test_blobs_are_written_before_the_inner_snapshot() -> None:
    media = MemoryMediaStore()
    seen: list[int] = []

    class Spy(InMemoryStepStore):
        async def save_snapshot(self, snap: ContinuableSnapshot) -> None:
            seen.append(len(media._blobs))
            await super().save_snapshot(snap)

    await OffloadingStepStore(Spy(), media_store=media).save_snapshot(snapshot(history()))
    assert seen == [4]  # image, pdf, long text and tool output were stored first


async def test_resaving_a_known_history_costs_no_put() -> None:
    media = MemoryMediaStore()
    puts: list[int] = []
    original_put = media.put

    async def counting_put(data: bytes, **kwargs: Any) -> str:
        puts.append(len(data))
        return await original_put(data, **kwargs)

    media.put = counting_put  # type: ignore[method-assign]
    store = OffloadingStepStore(InMemoryStepStore(), media_store=media)
    messages = history()
    await store.save_snapshot(snapshot(messages, step=1))
    assert len(puts) == 4
    await store.save_snapshot(snapshot([*messages, ModelRequest(parts=[UserPromptPart('more')])], step=2))
    assert len(puts) == 4


async def test_interrupted_snapshot_only_with_include_interrupted(media_store: Any) -> None:
    store = OffloadingStepStore(InMemoryStepStore(), media_store=media_store)
    messages = history()
    await store.save_snapshot(snapshot(messages[:1], step=1))
    await store.save_snapshot(snapshot(messages[:2], step=2, state='interrupted'))
    assert (await store.latest_snapshot(run_id='run-1')).step_index == 1
    latest = await store.latest_snapshot(run_id='run-1', include_interrupted=True)
    assert latest.state == 'interrupted'
    assert latest.messages == roundtrip(messages[:2])
    inspection = await inspect_recovery(store=store, run_id='run-1')  # type: ignore[arg-type]
    assert inspection.latest is not None and inspection.latest.messages == roundtrip(messages[:2])


async def test_other_methods_pass_through() -> None:
    inner = InMemoryStepStore()
    store = OffloadingStepStore(inner, media_store=MemoryMediaStore())
    record = ToolEffectRecord(tool_call_id='c', tool_name='t', run_id='r', status='started')
    await store.record_tool_effect(record)
    assert await store.list_unresolved_tool_effects(run_id='r') == [record]
    assert store._snapshots is inner._snapshots
    with pytest.raises(AttributeError):
        store.no_such_method  # noqa: B018


async def test_tampered_envelope_names_run_and_step() -> None:
    inner = InMemoryStepStore()
    store = OffloadingStepStore(inner, media_store=MemoryMediaStore())
    await store.save_snapshot(snapshot(history(), step=7, run_id='run-t'))
    stored = inner._snapshots['run-t'][0]
    stored.messages[0].metadata[ENVELOPE_KEY]['format'] = 'mediastash-envelope-v99'
    with pytest.raises(EnvelopeError, match=r"run 'run-t' at step 7, message 0: .*unsupported format"):
        await store.latest_snapshot(run_id='run-t')
    stored.messages[0].metadata[ENVELOPE_KEY] = {'v': 1, 'message': 'nope'}
    with pytest.raises(EnvelopeError, match="run 'run-t' at step 7"):
        await store.latest_snapshot(run_id='run-t')
    stored.messages[0].metadata['extra'] = 1
    with pytest.raises(EnvelopeError, match='only the'):
        await store.latest_snapshot(run_id='run-t')


async def test_missing_blob_names_uri_and_run(tmp_path: Path) -> None:
    media = MemoryMediaStore()
    store = OffloadingStepStore(FileStepStore(tmp_path, media_store=None), media_store=media)
    await store.save_snapshot(snapshot(history(), step=3, run_id='run-m'))
    uri = next(iter([u async for u in media.iter_uris()]))
    drop_blob(media, uri)
    fresh = OffloadingStepStore(
        FileStepStore(tmp_path, media_store=None), media_store=media, options=WalkOptions(known_blobs=False)
    )
    with pytest.raises(MediaNotFoundError, match=rf"{re.escape(uri)}.*run 'run-m' step 3") as caught:
        await fresh.latest_snapshot(run_id='run-m')
    assert caught.value.uri == uri
    assert isinstance(caught.value, FileNotFoundError)


async def test_caller_metadata_using_the_reserved_key_survives() -> None:
    store = OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore())
    tricky = ModelRequest(parts=[UserPromptPart('hi')], metadata={ENVELOPE_KEY: {'v': 1, 'message': {}}})
    await store.save_snapshot(snapshot([tricky]))
    back = await store.latest_snapshot(run_id='run-1')
    assert back.messages == roundtrip([tricky])


async def test_small_threshold_and_text_only(tmp_path: Path) -> None:
    store = OffloadingStepStore(
        FileStepStore(tmp_path, media_store=None),
        media_store=MemoryMediaStore(),
        options=WalkOptions(threshold_bytes=10),
    )
    messages = [ModelRequest(parts=[UserPromptPart('a sentence longer than ten bytes')])]
    await store.save_snapshot(snapshot(messages))
    text = next((tmp_path / 'run-1' / 'snapshots').glob('*.json')).read_text()
    assert 'a sentence' not in text and ENVELOPE_KEY in text
    assert (await store.latest_snapshot(run_id='run-1')).messages == roundtrip(messages)
    (part,) = json.loads(text)['messages'][0]['parts']
    assert part['part_kind'] == 'user-prompt' and part['content'].startswith('[mediastash placeholder: text, 32 B')


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match='threshold_bytes'):
        OffloadingStepStore(
            InMemoryStepStore(), media_store=MemoryMediaStore(), options=WalkOptions(threshold_bytes=-1)
        )
    with pytest.raises(ValueError, match='max_concurrency'):
        OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore(), options=WalkOptions(max_concurrency=0))


_ = THRESHOLD
