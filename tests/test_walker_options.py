"""WalkOptions: one checked value for the walk settings, shared by the walks, the wrappers and MediaUrls."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest
from pydantic_ai.messages import BinaryImage, ImageUrl, ModelRequest, UserPromptPart
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, InMemoryStepStore
from pydantic_ai_persistence import InMemoryAsyncKV

import mediastash
from mediastash import (
    InvalidArgumentError,
    KnownBlobCache,
    MemoryMediaStore,
    WalkOptions,
    make_static_public_url,
    media_uri_for,
)
from mediastash.integrations import MediaUrls, MediaUrlSwapper, OffloadingKV, OffloadingStepStore
from mediastash.markers import MARKER_KEY
from mediastash.walker import DEFAULT_MAX_CONCURRENCY, DEFAULT_THRESHOLD_BYTES, externalize_media, restore_media

SECRET = 'sk-live-0123456789abcdef'
"""A string passed where a setting belongs: the error must never repeat it."""


def test_defaults_are_the_documented_ones() -> None:
    options = WalkOptions()
    assert (options.threshold_bytes, options.known_blobs, options.max_concurrency) == (64 * 1024, True, 8)
    assert (DEFAULT_THRESHOLD_BYTES, DEFAULT_MAX_CONCURRENCY) == (64 * 1024, 8)
    assert mediastash.WalkOptions is WalkOptions and 'WalkOptions' in mediastash.__all__
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.threshold_bytes = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ('name', 'bad'),
    [
        ('threshold_bytes', -98765),
        ('threshold_bytes', 1.5),
        ('threshold_bytes', SECRET),
        ('threshold_bytes', True),
        ('threshold_bytes', None),
        ('max_concurrency', 0),
        ('max_concurrency', -98765),
        ('max_concurrency', SECRET),
        ('max_concurrency', False),
        ('known_blobs', SECRET),
        ('known_blobs', 1),
        ('known_blobs', {}),
    ],
)
def test_a_bad_setting_names_the_option_never_the_value(name: str, bad: Any) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        WalkOptions(**{name: bad})
    message = str(info.value)
    assert message.startswith(name) and info.value.name == name
    if isinstance(bad, str | float) or (type(bad) is int and abs(bad) > 9):
        assert str(bad) not in message  # only the type is shown
    assert (type(bad).__name__ if bad is not None else 'None') in message
    assert isinstance(info.value, ValueError)


def test_a_known_blobs_of_the_wrong_type_is_still_a_type_error() -> None:
    """It raised TypeError before WalkOptions existed; callers catching that keep working."""
    with pytest.raises(TypeError, match='known_blobs'):
        WalkOptions(known_blobs=SECRET)  # type: ignore[arg-type]


def test_good_values_are_kept() -> None:
    cache = KnownBlobCache()
    options = WalkOptions(threshold_bytes=0, known_blobs=cache, max_concurrency=1)
    assert (options.threshold_bytes, options.known_blobs, options.max_concurrency) == (0, cache, 1)
    assert WalkOptions(known_blobs=False).known_blobs is False


async def test_the_walks_take_options_instead_of_the_keywords() -> None:
    store = MemoryMediaStore()
    tree = [{'part_kind': 'user-prompt', 'content': 'x' * 300}]
    lean = await externalize_media(tree, media_store=store, options=WalkOptions(threshold_bytes=100))
    assert lean[0][MARKER_KEY] is True
    assert await externalize_media(tree, media_store=store) == tree  # the 64 KiB default
    assert await restore_media(lean, media_store=store, options=WalkOptions(known_blobs=False)) == tree


@pytest.mark.parametrize(
    ('keyword', 'value'), [('threshold_bytes', 100), ('known_blobs', False), ('max_concurrency', 2)]
)
async def test_options_and_a_changed_keyword_together_are_refused(keyword: str, value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=f'^{keyword} must be left out when options= is given'):
        await externalize_media([], media_store=MemoryMediaStore(), options=WalkOptions(), **{keyword: value})
    with pytest.raises(InvalidArgumentError, match=f'^{keyword} must be left out'):
        OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore(), options=WalkOptions(), **{keyword: value})


async def test_options_must_be_walk_options() -> None:
    with pytest.raises(InvalidArgumentError, match=r'^options must be a WalkOptions'):
        await restore_media([], media_store=MemoryMediaStore(), options={'threshold_bytes': 1})  # type: ignore[arg-type]


@pytest.mark.filterwarnings('ignore:walk settings given as separate keywords:DeprecationWarning')
def test_wrappers_check_their_settings_when_built() -> None:
    """A bad known_blobs used to surface at the first save; now the constructor refuses it (the deprecated
    keywords too: tests/test_walk_keywords_deprecated.py)."""
    for make in (
        lambda **kw: OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore(), **kw),
        lambda **kw: OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore(), **kw),
        lambda **kw: MediaUrls(MemoryMediaStore(), **kw),
    ):
        with pytest.raises(InvalidArgumentError, match=r'^known_blobs'):
            make(known_blobs=SECRET)
        with pytest.raises(InvalidArgumentError, match=r'^threshold_bytes') as info:
            make(threshold_bytes=-98765)
        assert '98765' not in str(info.value)


def snapshot(messages: list[Any]) -> ContinuableSnapshot:
    return ContinuableSnapshot(run_id='run', step_index=1, messages=messages, state='complete')  # type: ignore[arg-type]


async def test_step_store_uses_the_options_threshold() -> None:
    inner = InMemoryStepStore()
    media = MemoryMediaStore()
    store = OffloadingStepStore(inner, media_store=media, options=WalkOptions(threshold_bytes=100))
    messages = [ModelRequest(parts=[UserPromptPart('y' * 300)])]
    await store.save_snapshot(snapshot(messages))
    saved = await inner.latest_snapshot(run_id='run')
    assert saved is not None and 'y' * 300 not in json.dumps(saved.messages[0].parts[0].content)
    assert await media.exists(media_uri_for(b'y' * 300))
    restored = await store.latest_snapshot(run_id='run')
    assert restored is not None and restored.messages[0].parts[0].content == 'y' * 300


async def test_kv_settings_read_and_assign_through_the_options() -> None:
    inner = InMemoryAsyncKV()
    kv = OffloadingKV(inner, media_store=MemoryMediaStore(), options=WalkOptions(threshold_bytes=100))
    assert (kv.threshold_bytes, kv.known_blobs, kv.max_concurrency) == (100, True, 8)
    value = json.dumps({'part_kind': 'text', 'content': 'z' * 300})
    await kv.put('p', 'a', value)
    assert 'z' * 300 not in (await inner.get('p', 'a'))
    kv.threshold_bytes = 1000  # a later assignment takes effect, as when it was a plain attribute
    await kv.put('p', 'b', value)
    assert await inner.get('p', 'b') == value
    with pytest.raises(InvalidArgumentError, match=r'^max_concurrency'):
        kv.max_concurrency = 0
    assert kv.max_concurrency == 8


async def test_media_urls_use_the_options_threshold() -> None:
    image = os.urandom(3000)
    messages = [ModelRequest(parts=[UserPromptPart(content=['look', BinaryImage(image, media_type='image/png')])])]
    store = MemoryMediaStore(public_url=make_static_public_url('https://cdn.example/media'))
    swapper = MediaUrlSwapper(store, kinds=['image'], url_lifetime=None, options=WalkOptions(threshold_bytes=1000))
    swapped = await swapper.swap(messages)
    assert isinstance(swapped[0].parts[0].content[1], ImageUrl)
    assert swapper.threshold_bytes == 1000
    default = MediaUrlSwapper(store, kinds=['image'], url_lifetime=None)
    assert await default.swap(messages) is messages  # 3000 bytes is below the 64 KiB default
    capability = MediaUrls(store, options=WalkOptions(threshold_bytes=1000, max_concurrency=2))
    assert capability.swapper.max_concurrency == 2 and 'threshold_bytes=1000' in repr(capability)


@pytest.mark.parametrize(
    ('value', 'said'),
    [
        (-5, 'got a negative int'),
        (0, 'got zero'),
        (-0.5, 'got a negative float'),
        (None, 'got None'),
        ('7', 'got a str'),
    ],
)
def test_a_bad_number_is_described_by_its_kind_never_its_value(value: object, said: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        WalkOptions(max_concurrency=value)  # type: ignore[arg-type]
    assert str(caught.value) == f'max_concurrency must be a positive int ({said})'
