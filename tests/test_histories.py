"""The synthetic histories are real pydantic-ai JSON, deterministic, and sized as asked."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from mediastash.testing import (
    KiB,
    MiB,
    agent_history,
    copy_tree,
    describe_history,
    image_sizes,
    json_size,
    small_parts_history,
    step_snapshots,
)
from tests.stacks import current_stack

pytestmark = pytest.mark.pydantic_ai


def binaries(tree: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get('kind') == 'binary':
                found.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def parts_of_kind(history: list[dict[str, Any]], part_kind: str) -> list[dict[str, Any]]:
    return [part for message in history for part in message['parts'] if part['part_kind'] == part_kind]


def without_added_empty_fields(dumped: Any, history: Any, added: set[str]) -> Any:
    """``dumped`` less the keys ``history`` lacks whose value is empty (``None``, ``[]``, ``{}``); ``added`` names them.

    A pydantic-ai newer than the harness stack's dumps fields it added since (``context_id``,
    ``ui_visibility``, ...), each empty in a history that never set them.
    """
    if isinstance(dumped, dict) and isinstance(history, dict):
        kept = {}
        for key, value in dumped.items():
            if key not in history and value in (None, [], {}):
                added.add(key)
                continue
            kept[key] = without_added_empty_fields(value, history.get(key), added)
        return kept
    if isinstance(dumped, list) and isinstance(history, list) and len(dumped) == len(history):
        return [without_added_empty_fields(a, b, added) for a, b in zip(dumped, history, strict=True)]
    return dumped


def assert_real_pydantic_ai_json(history: list[dict[str, Any]]) -> None:
    """The history is exactly pydantic-ai's JSON dump of itself (on the latest stack: less new empty fields)."""
    messages = ModelMessagesTypeAdapter.validate_python(history)
    added: set[str] = set()
    redumped = without_added_empty_fields(ModelMessagesTypeAdapter.dump_python(messages, mode='json'), history, added)
    assert redumped == history
    assert json.dumps(redumped) == json.dumps(history)  # same key order too
    if current_stack() == 'harness':
        assert not added  # the histories are built for the harness stack's pydantic-ai, field for field


@pytest.fixture(scope='module')
def medium_history() -> list[dict[str, Any]]:
    return agent_history(steps=12, image_bytes_total=6 * MiB, reused_images=3, large_tool_outputs=3, seed=7)


def test_agent_history_is_what_pydantic_ai_dumps(medium_history: list[dict[str, Any]]) -> None:
    assert_real_pydantic_ai_json(medium_history)


def test_binary_data_is_urlsafe_base64_with_png_bytes(medium_history: list[dict[str, Any]]) -> None:
    images = binaries(medium_history)
    assert images
    assert any('-' in image['data'] or '_' in image['data'] for image in images)
    for image in images:
        assert '+' not in image['data'] and '/' not in image['data']
        assert base64.urlsafe_b64decode(image['data']).startswith(b'\x89PNG\r\n\x1a\n')
        assert image['media_type'] == 'image/png'


def test_agent_history_sizes_match_the_parameters(medium_history: list[dict[str, Any]]) -> None:
    stats = describe_history(medium_history)
    assert stats.messages == 1 + 2 * 12
    distinct = {image['data'] for image in binaries(medium_history)}
    sizes = [len(base64.urlsafe_b64decode(data)) for data in distinct]
    assert sum(sizes) == 6 * MiB
    assert all(50 * KiB <= size <= 2 * MiB for size in sizes)
    assert stats.large_binary_bytes == 6 * MiB
    assert stats.large_binary_parts == len(distinct) + 3  # three re-sent images
    assert stats.large_texts == 3
    large = [p for p in parts_of_kind(medium_history, 'tool-return') if isinstance(p['content'], str)]
    large_sizes = [len(p['content'].encode()) for p in large if len(p['content']) >= 64 * KiB]
    assert len(large_sizes) == 3
    assert all(100 * KiB <= size <= 500 * KiB for size in large_sizes)
    assert stats.largest_small_payload < 64 * KiB
    assert stats.json_bytes == json_size(medium_history) > 6 * MiB * 4 // 3


def test_images_are_incompressible() -> None:
    import zlib

    history = agent_history(steps=2, image_bytes_total=200 * KiB, large_tool_outputs=0, seed=1)
    for image in binaries(history):
        raw = base64.urlsafe_b64decode(image['data'])
        assert len(zlib.compress(raw)) > 0.99 * len(raw)


def test_reused_images_repeat_an_earlier_payload() -> None:
    history = agent_history(steps=10, image_bytes_total=2 * MiB, reused_images=4, large_tool_outputs=0, seed=3)
    datas = [image['data'] for image in binaries(history)]
    assert len(datas) - len(set(datas)) == 4


def test_every_tool_call_has_its_return(medium_history: list[dict[str, Any]]) -> None:
    calls = {part['tool_call_id'] for part in parts_of_kind(medium_history, 'tool-call')}
    returns = {part['tool_call_id'] for part in parts_of_kind(medium_history, 'tool-return')}
    assert calls == returns


def test_small_filler_parts_per_step() -> None:
    history = agent_history(steps=4, image_bytes_total=0, large_tool_outputs=0, small_parts_per_step=9, seed=2)
    assert sum(len(message['parts']) for message in history[1:]) == 4 * 9
    assert_real_pydantic_ai_json(history)


def test_same_seed_same_tree_other_seed_other_tree() -> None:
    one = agent_history(steps=3, image_bytes_total=300 * KiB, large_tool_outputs=1, seed=5)
    assert one == agent_history(steps=3, image_bytes_total=300 * KiB, large_tool_outputs=1, seed=5)
    assert one != agent_history(steps=3, image_bytes_total=300 * KiB, large_tool_outputs=1, seed=6)


def test_small_parts_history() -> None:
    history = small_parts_history(5000, seed=0)
    assert sum(len(message['parts']) for message in history) == 5000
    stats = describe_history(history)
    assert stats.large_binary_parts == stats.large_texts == 0
    assert stats.binary_parts > 0
    assert stats.largest_small_payload < 64 * KiB
    assert_real_pydantic_ai_json(history)


@pytest.mark.parametrize('parts', [0, 1, 2, 3, 4, 13])
def test_small_parts_history_exact_counts(parts: int) -> None:
    history = small_parts_history(parts, seed=parts)
    assert sum(len(message['parts']) for message in history) == parts
    assert_real_pydantic_ai_json(history)


def test_step_snapshots_are_growing_fresh_prefixes(medium_history: list[dict[str, Any]]) -> None:
    snapshots = list(step_snapshots(medium_history))
    assert len(snapshots) == 12
    assert [len(s) for s in snapshots] == [1 + 2 * (i + 1) for i in range(12)]
    assert snapshots[-1] == medium_history
    fresh_image = binaries(snapshots[-1])[0]['data']
    original = {id(image['data']) for image in binaries(medium_history)}
    assert id(fresh_image) not in original
    shared = list(step_snapshots(medium_history, fresh=False))
    assert shared[-1][0] is medium_history[0]


def test_step_snapshots_end_with_the_whole_history() -> None:
    history = small_parts_history(40, seed=1)[:-1]
    assert list(step_snapshots(history))[-1] == history


def test_copy_tree_is_deep_and_equal() -> None:
    tree: dict[str, Any] = {'a': ['x' * 2000, {'b': 1}], 'c': None}
    copied = copy_tree(tree)
    assert copied == tree
    assert copied['a'] is not tree['a'] and copied['a'][0] is not tree['a'][0]


def test_image_sizes_add_up_and_stay_in_bounds() -> None:
    rng = random.Random(0)
    for total in (0, 50 * KiB, 2 * MiB, 2 * MiB + 1, 40 * MiB):
        sizes = image_sizes(total, 50 * KiB, 2 * MiB, rng=rng)
        assert sum(sizes) == total
        assert all(50 * KiB <= size <= 2 * MiB for size in sizes)


@pytest.mark.parametrize(
    'kwargs',
    [{'steps': 0}, {'image_bytes_total': 10}, {'image_bytes_total': -1}, {'image_max_bytes': 60 * KiB}],
)
def test_bad_parameters_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r'steps|image'):
        agent_history(**kwargs)


def test_no_filler_still_gives_valid_messages() -> None:
    history = agent_history(steps=3, image_bytes_total=0, large_tool_outputs=0, small_parts_per_step=0, seed=4)
    assert all(message['parts'] for message in history)
    assert_real_pydantic_ai_json(history)
