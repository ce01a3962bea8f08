"""The typed fast path writes exactly what `externalize_media` writes for the full JSON, without base64."""

from __future__ import annotations

import json
from typing import Any

import pybase64
import pytest
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ToolReturnPart,
    UserPromptPart,
)

import mediastash.walker._batch as payloads_module
from mediastash import MemoryMediaStore, WalkOptions, externalize_media
from mediastash.integrations.pydantic_ai._typed import Offloader
from mediastash.markers import MARKER_KEY
from mediastash.walker._batch import urlsafe_alphabet_used
from tests.integration_support import THRESHOLD, history, roundtrip

pytestmark = pytest.mark.pydantic_ai


def offloader(store: Any, **options: Any) -> Offloader:
    settings: dict[str, Any] = {'threshold_bytes': THRESHOLD, 'known_blobs': True, 'max_concurrency': 4}
    settings.update(options)
    return Offloader(store, options=WalkOptions(**settings))


def unusual_history() -> list[Any]:
    """Payloads the typed pass does not handle itself (left to the walker on the small dump)."""
    blob = BinaryContent(data=b'\x01\x02' * 40_000, media_type='audio/wav')
    return [
        ModelRequest(
            parts=[ToolReturnPart(tool_name='t', tool_call_id='c', content={'nested': [blob], 'note': 'n' * 70_000})],
            metadata={'attachment': {'kind': 'binary', 'data': pybase64.b64encode_as_string(b'z' * 70_000)}},
        ),
        ModelRequest(parts=[UserPromptPart(content='x' * 70_000)], metadata={MARKER_KEY: True}),
    ]


@pytest.mark.parametrize('make', [history, unusual_history])
async def test_lean_json_is_byte_identical_to_the_walker(make: Any) -> None:
    messages = make()
    lean, changed = await offloader(MemoryMediaStore()).lean_json(messages)
    reference = await externalize_media(
        ModelMessagesTypeAdapter.dump_python(messages, mode='json'), media_store=MemoryMediaStore(), known_blobs=False
    )
    assert json.dumps(lean) == json.dumps(reference)
    plain = ModelMessagesTypeAdapter.dump_python(messages, mode='json')
    assert changed == [a != b for a, b in zip(reference, plain, strict=True)]


async def test_second_save_is_identical_and_touches_no_store() -> None:
    store = MemoryMediaStore()
    off = offloader(store)
    messages = history()
    first, _ = await off.lean_json(messages)

    async def refuse(*args: Any, **kwargs: Any) -> str:
        raise AssertionError('no put expected for known payloads')

    store.put = refuse  # type: ignore[method-assign]
    second, _ = await off.lean_json(messages)
    assert json.dumps(first) == json.dumps(second)


async def test_no_base64_for_typed_payloads(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = pybase64.b64encode

    def counting(data: Any, *args: Any, **kwargs: Any) -> bytes:
        calls.append(len(data))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(payloads_module.pybase64, 'b64encode', counting)
    off = offloader(MemoryMediaStore())
    messages = [
        ModelRequest(parts=[UserPromptPart(content=[BinaryImage(data=b'\xff' * 300_000, media_type='image/png')])])
    ]
    await off.lean_json(messages)
    assert sum(calls) <= 3 << 16  # one probe slice decided the alphabet stamp
    calls.clear()
    await off.lean_json(messages)
    assert calls == []


def test_urlsafe_probe_matches_full_encoding() -> None:
    for raw in (b'\x00' * 200_000, b'\xff' * 10, b'\x00' * 300_000 + b'\xfb\xef', b'abc' * 100_000, bytes(range(256))):
        encoded = pybase64.b64encode(raw, altchars=b'-_')
        assert urlsafe_alphabet_used(raw) == (b'-' in encoded or b'_' in encoded)


async def test_restore_gives_typed_bytes_and_identifiers() -> None:
    store = MemoryMediaStore()
    off = offloader(store)
    messages = history()
    lean = await off.offload(messages)
    back = await offloader(store, known_blobs=False).restore(lean, run_id='r', step_index=0)
    assert back == roundtrip(messages)
    assert back[0].parts[0].content[1].identifier == 'photo-1'
    assert back[0].parts[0].content[2].identifier == messages[0].parts[0].content[2].identifier


async def test_restore_falls_back_when_a_marker_sits_in_untyped_json() -> None:
    store = MemoryMediaStore()
    messages = unusual_history()
    lean = await offloader(store).offload(messages)
    back = await offloader(store, known_blobs=False).restore(lean, run_id='r', step_index=0)
    assert back == roundtrip(messages)
    assert isinstance(back[0].metadata['attachment']['data'], str)
