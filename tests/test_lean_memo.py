"""Issue 32: a typed save walks only the messages that are new or changed since the previous save.

``LeanMemo`` keeps each message's lean JSON by object with the message's ``ObjectState``; these tests
change messages in place between saves in every way that changes their JSON and check that what is
saved is the changed message, never the remembered one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, FileStepStore

from mediastash import DiskMediaStore, MemoryMediaStore, externalize_media
from mediastash.integrations import OffloadingStepStore
from mediastash.integrations.pydantic_ai._typed_walk import TypedWalker
from mediastash.walker import WalkOptions
from mediastash.walker._unchanged import state_of

THRESHOLD = 1024


def rows(count: int, seed: int = 0) -> list[dict[str, Any]]:
    return [{'id': seed + i, 'score': 0.0, 'title': f'hit {i}', 'tags': ['a', 'b'], 'n': 1} for i in range(count)]


def history(seed: int = 0) -> list[ModelMessage]:
    image = BinaryContent(data=bytes(range(256)) * 16 + seed.to_bytes(2, 'big'), media_type='image/png')
    return [
        ModelRequest(parts=[UserPromptPart(content=['look at this', image])]),
        ModelResponse(
            parts=[TextPart('searching'), ToolCallPart(tool_name='search', args={'q': 'x'}, tool_call_id='c')]
        ),
        ModelRequest(parts=[ToolReturnPart(tool_name='search', content=rows(60, seed), tool_call_id='c')]),
        ModelRequest(parts=[UserPromptPart(content='log line\n' * 300)]),
    ]


def _set_first_row(key: str, value: Any) -> Callable[[list[ModelMessage]], None]:
    def change(messages: list[ModelMessage]) -> None:
        messages[2].parts[0].content[0][key] = value  # type: ignore[union-attr]

    return change


def _reorder_first_row(messages: list[ModelMessage]) -> None:
    row = messages[2].parts[0].content[0]  # type: ignore[union-attr]
    row['id'] = row.pop('id')


def _new_image_bytes(messages: list[ModelMessage]) -> None:
    image = messages[0].parts[0].content[1]  # type: ignore[union-attr,index]
    image.data = image.data[:-1] + b'\xff'


def _image_media_type(messages: list[ModelMessage]) -> None:
    messages[0].parts[0].content[1].media_type = 'image/jpeg'  # type: ignore[union-attr,index]


def _longer_text(messages: list[ModelMessage]) -> None:
    part = messages[3].parts[0]
    part.content = part.content + 'one more line\n'  # type: ignore[operator]


def _tool_name(messages: list[ModelMessage]) -> None:
    messages[2].parts[0].tool_name = 'find'  # type: ignore[union-attr]


def _append_row(messages: list[ModelMessage]) -> None:
    messages[2].parts[0].content.append({'id': -1})  # type: ignore[union-attr]


def _nested_tag(messages: list[ModelMessage]) -> None:
    messages[2].parts[0].content[5]['tags'][1] = 'c'  # type: ignore[union-attr]


def _tool_args(messages: list[ModelMessage]) -> None:
    messages[1].parts[1].args['q'] = 'y'  # type: ignore[index,union-attr]


def _new_part(messages: list[ModelMessage]) -> None:
    messages[1].parts.append(TextPart('and more'))  # type: ignore[attr-defined]


CHANGES: dict[str, Callable[[list[ModelMessage]], None]] = {
    'int becomes an equal bool': _set_first_row('n', True),
    'int becomes an equal float': _set_first_row('n', 1.0),
    'zero becomes negative zero': _set_first_row('score', -0.0),
    'dict keys reordered': _reorder_first_row,
    'row appended': _append_row,
    'nested list item': _nested_tag,
    'tool args': _tool_args,
    'part appended': _new_part,
    'binary data replaced': _new_image_bytes,
    'binary media type': _image_media_type,
    'text grows': _longer_text,
    'tool name': _tool_name,
}


def _dumped(messages: list[ModelMessage]) -> str:
    return ModelMessagesTypeAdapter.dump_json(messages).decode()


@pytest.mark.parametrize('change', sorted(CHANGES))
def test_object_state_differs_after_each_change_that_changes_the_json(change: str) -> None:
    messages = history()
    before = [state_of(message) for message in messages]
    dumped = _dumped(messages)
    CHANGES[change](messages)
    assert _dumped(messages) != dumped  # the change is one the JSON shows
    after = [state_of(message) for message in messages]
    assert all(state is not None for state in before + after)
    assert any(not old.same_as(new) for old, new in zip(before, after, strict=True))  # type: ignore[union-attr]


def test_object_state_is_the_same_for_an_unchanged_graph_and_none_for_unknown_objects() -> None:
    messages = history()
    assert all(state_of(m).same_as(state_of(m)) for m in messages)  # type: ignore[union-attr,arg-type]

    class Hit(BaseModel):
        title: str

    assert state_of(ToolReturnPart(tool_name='t', content=[Hit(title='x')], tool_call_id='c')) is None
    shared = TextPart('twice')
    assert state_of(ModelResponse(parts=[shared, shared])) is None  # a shared object: not followed
    loop: list[Any] = [TextPart('x')]
    loop.append(loop)
    assert state_of(loop) is None
    unset = TextPart('no content')
    del unset.content  # a dataclass field that is not set: no state rather than an error
    assert state_of(ModelResponse(parts=[unset])) is None


@pytest.mark.parametrize('change', sorted(CHANGES))
async def test_a_message_changed_in_place_between_saves_is_walked_again(change: str) -> None:
    """Unchanged messages get the very lean JSON of the previous save; a changed one gets what the plain
    JSON walk of its dump writes now."""
    options = WalkOptions(threshold_bytes=THRESHOLD, structured=True)
    store = MemoryMediaStore()
    walker = TypedWalker(store, options)
    messages = history()
    first = await walker.externalize(messages)
    second = await walker.externalize(messages)
    assert all(a is b for a, b in zip(first.json, second.json, strict=True))  # nothing walked again
    CHANGES[change](messages)
    third = await walker.externalize(messages)
    expected = await externalize_media(
        ModelMessagesTypeAdapter.dump_python(messages, mode='json'), media_store=MemoryMediaStore(), options=options
    )
    assert json.dumps(third.json) == json.dumps(expected)
    reused = [a is b for a, b in zip(second.json, third.json, strict=True)]
    assert not all(reused) and any(reused)


async def test_the_saved_snapshot_holds_a_message_changed_in_place(tmp_path: Path) -> None:
    """End to end through OffloadingStepStore(FileStepStore): every change made between saves is in what the
    next save wrote, read back by a new wrapper (nothing in memory)."""
    media = DiskMediaStore(tmp_path / 'media')
    store = OffloadingStepStore(
        FileStepStore(tmp_path / 'steps', media_store=None),
        media_store=media,
        options=WalkOptions(threshold_bytes=THRESHOLD),
    )
    messages = history()
    step = 0
    for change in CHANGES.values():
        await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=step, messages=list(messages)))
        change(messages)
        step += 1
        await store.save_snapshot(ContinuableSnapshot(run_id='r', step_index=step, messages=list(messages)))
        step += 1
        reader = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
        snapshot = await reader.latest_snapshot(run_id='r')
        assert snapshot is not None
        assert 'media+sha256://' in (tmp_path / 'steps' / 'r' / 'snapshots' / f'{step - 1}.json').read_text()
        assert _dumped(list(snapshot.messages)) == _dumped(messages)


async def test_a_remembered_message_whose_blob_was_deleted_stores_it_again(tmp_path: Path) -> None:
    """A message taken from the memo still sends its payloads through the batch: a blob deleted since the
    previous save is stored again, never left dangling."""
    media = DiskMediaStore(tmp_path / 'media')
    walker = TypedWalker(media, WalkOptions(threshold_bytes=THRESHOLD, structured=True))
    messages = history()
    first = await walker.externalize(messages)
    uris = sorted({uri for sizes in first.sizes for uri in sizes})
    assert len(uris) == 3  # the image, the rows, the log text
    for uri in uris:
        assert await media.delete(uri)
    second = await walker.externalize(messages)
    assert all(a is b for a, b in zip(first.json, second.json, strict=True))
    for uri in uris:
        assert await media.exists(uri)
