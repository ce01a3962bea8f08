"""Integrations take the walk settings as ``options=WalkOptions(...)``; the separate keywords of before
(``threshold_bytes``, ``known_blobs``, ``max_concurrency``) still work for one release, with a ``DeprecationWarning``
naming the new form, and together with ``options=`` are a typed error (``walker/_options.options_from_keywords``).

One case per integration, each built on the framework's real in-memory store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mediastash import InvalidArgumentError, KnownBlobCache, MemoryMediaStore, WalkOptions
from mediastash.walker._options import DEPRECATED_KEYWORDS
from tests.strict_warnings import every_warning_an_error

Make = Callable[..., Any]
Read = Callable[[Any], WalkOptions]


def step_store() -> tuple[str, Make, Read]:
    from pydantic_ai_harness.step_persistence import InMemoryStepStore

    from mediastash.integrations import OffloadingStepStore

    def make(**kw: Any) -> Any:
        return OffloadingStepStore(InMemoryStepStore(), media_store=MemoryMediaStore(), **kw)

    return 'OffloadingStepStore', make, lambda store: store._offloader.options


def kv() -> tuple[str, Make, Read]:
    from pydantic_ai_persistence import InMemoryAsyncKV

    from mediastash.integrations import OffloadingKV

    def make(**kw: Any) -> Any:
        return OffloadingKV(InMemoryAsyncKV(), media_store=MemoryMediaStore(), **kw)

    return 'OffloadingKV', make, lambda store: store._walk_options


def conversation_store() -> tuple[str, Make, Read]:
    from pydantic_ai.conversation_store import InMemoryConversationStore

    from mediastash.integrations import OffloadingConversationStore

    def make(**kw: Any) -> Any:
        return OffloadingConversationStore(InMemoryConversationStore(), media_store=MemoryMediaStore(), **kw)

    return 'OffloadingConversationStore', make, lambda store: store._offloader.options


def checkpoint_saver() -> tuple[str, Make, Read]:
    from langgraph.checkpoint.memory import InMemorySaver

    from mediastash.integrations.langgraph import OffloadingCheckpointSaver

    def make(**kw: Any) -> Any:
        return OffloadingCheckpointSaver(InMemorySaver(), media_store=MemoryMediaStore(), **kw)

    return 'OffloadingCheckpointSaver', make, lambda store: store._walk_options


def session(tmp_path: Path) -> tuple[str, Make, Read]:
    from agents import SQLiteSession

    from mediastash.integrations.openai_agents import OffloadingSession

    def make(**kw: Any) -> Any:
        return OffloadingSession(SQLiteSession('chat', tmp_path / 'chat.db'), media_store=MemoryMediaStore(), **kw)

    return 'OffloadingSession', make, lambda store: store._walk_options


def media_urls() -> tuple[str, Make, Read]:
    from mediastash.integrations import MediaUrls

    def make(**kw: Any) -> Any:
        return MediaUrls(MemoryMediaStore(), **kw)

    return 'MediaUrls', make, lambda capability: capability.swapper._walk_options


def media_url_swapper() -> tuple[str, Make, Read]:
    from mediastash.integrations import MediaUrlSwapper

    def make(**kw: Any) -> Any:
        return MediaUrlSwapper(MemoryMediaStore(), **kw)

    return 'MediaUrlSwapper', make, lambda swapper: swapper._walk_options


INTEGRATIONS = [
    pytest.param(step_store, id='step-store', marks=pytest.mark.harness),
    pytest.param(kv, id='kv', marks=pytest.mark.harness),  # pydantic-ai-persistence comes with the harness
    pytest.param(conversation_store, id='conversation-store', marks=pytest.mark.conversation_store),
    pytest.param(checkpoint_saver, id='langgraph-saver'),
    pytest.param(session, id='openai-agents-session'),
    pytest.param(media_urls, id='media-urls', marks=pytest.mark.pydantic_ai),
    pytest.param(media_url_swapper, id='media-url-swapper', marks=pytest.mark.pydantic_ai),
]


@pytest.fixture(params=INTEGRATIONS)
def integration(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Make, Read]:
    build: Any = request.param
    if build is session:
        return session(tmp_path)
    result: tuple[str, Make, Read] = build()
    return result


def test_the_old_keywords_still_work_and_warn_naming_the_new_form(integration: tuple[str, Make, Read]) -> None:
    owner, make, read = integration
    cache = KnownBlobCache()
    with pytest.warns(DeprecationWarning, match=DEPRECATED_KEYWORDS) as caught:
        built = make(threshold_bytes=1234, known_blobs=cache, max_concurrency=3)
    (warning,) = caught.list
    message = str(warning.message)
    assert message.startswith(DEPRECATED_KEYWORDS)
    given = 'threshold_bytes=..., known_blobs=..., max_concurrency=...'
    assert f'{owner}(options=WalkOptions({given}))' in message
    assert warning.filename == __file__, 'the warning points at the line that built the integration'
    chosen = read(built)
    assert (chosen.threshold_bytes, chosen.known_blobs, chosen.max_concurrency) == (1234, cache, 3)


def test_options_alone_do_not_warn(integration: tuple[str, Make, Read]) -> None:
    _, make, read = integration
    with every_warning_an_error():
        built = make(options=WalkOptions(threshold_bytes=999, known_blobs=False))
        default = make()
    assert (read(built).threshold_bytes, read(built).known_blobs) == (999, False)
    assert read(default).threshold_bytes == WalkOptions().threshold_bytes


@pytest.mark.parametrize(
    ('keyword', 'value'), [('threshold_bytes', 65536), ('known_blobs', False), ('max_concurrency', 2)]
)
def test_options_and_a_keyword_together_are_a_typed_error(
    integration: tuple[str, Make, Read], keyword: str, value: Any
) -> None:
    _, make, _ = integration
    with every_warning_an_error():  # refused before any warning: the call has two answers for one setting
        refused = f'^{keyword} must be left out when options= is given'
        with pytest.raises(InvalidArgumentError, match=refused) as info:
            make(options=WalkOptions(), **{keyword: value})
    assert str(value) not in str(info.value)  # the value is never shown


def test_an_unknown_keyword_is_the_type_error_python_gives(integration: tuple[str, Make, Read]) -> None:
    owner, make, _ = integration
    with pytest.raises(TypeError, match=rf"^{owner}\(\) got an unexpected keyword argument 'threshold'"):
        make(threshold=1)


def test_a_bad_keyword_value_is_refused_as_before(integration: tuple[str, Make, Read]) -> None:
    _, make, _ = integration
    with (
        pytest.warns(DeprecationWarning, match=DEPRECATED_KEYWORDS),
        pytest.raises(InvalidArgumentError, match=r'^max_concurrency'),
    ):
        make(max_concurrency=0)
