"""The core package never needs pydantic-ai, pydantic-ai-harness or pydantic-ai-persistence."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pydantic_ai

AGENT_PACKAGES = ('pydantic_ai', 'pydantic_ai_harness', 'pydantic_ai_persistence')


def blocking(packages: tuple[str, ...], body: str) -> str:
    """A script that runs ``body`` with every import of ``packages`` (and their submodules) failing.

    A dotted name blocks that module and its submodules only (``pydantic_ai.conversation_store``: a
    pydantic-ai older than 2.66).
    """
    return f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == blocked or name.startswith(blocked + '.') for blocked in {set(packages)!r}):
            raise ModuleNotFoundError(f'blocked: {{name}}', name=name)
        return None
sys.meta_path.insert(0, Block())
{body}"""


BLOCKER = blocking(
    AGENT_PACKAGES,
    """
import mediastash, mediastash.walker, mediastash.stores, mediastash.known_blobs
assert not any(m.split('.')[0].startswith('pydantic_ai') for m in sys.modules), sorted(sys.modules)
try:
    from mediastash.integrations import OffloadingStepStore
except ImportError as error:
    print('integrations-need-extra', error)
""",
)

LANGGRAPH_WITHOUT_PYDANTIC_AI = blocking(
    AGENT_PACKAGES,
    """
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.gc import CheckpointerRoot
import mediastash.integrations
assert not any(m.split('.')[0].startswith('pydantic_ai') for m in sys.modules), sorted(sys.modules)
try:
    mediastash.integrations.OffloadingStepStore
except ImportError as error:
    print('harness-names-need-extra', error)
print('langgraph-ok', OffloadingCheckpointSaver.__name__)
""",
)

LANGGRAPH_MISSING = blocking(
    ('langgraph', 'langchain_core'),
    """
import mediastash, mediastash.gc
try:
    import mediastash.integrations.langgraph
except ImportError as error:
    print('langgraph-needs-extra', error)
""",
)


WITHOUT_THE_HARNESS = blocking(
    ('pydantic_ai_harness', 'pydantic_ai_persistence'),
    """
from mediastash.integrations import MediaUrls, MediaUrlSwapper, EnvelopeError, OffloadingKV
from mediastash.integrations.provider_files import ProviderFiles
print('pydantic-ai-names-ok', MediaUrls.__name__, ProviderFiles.__name__, OffloadingKV.__name__)
try:
    from mediastash.integrations import OffloadingStepStore
except ImportError as error:
    print('needs-harness', error)
""",
)

WITHOUT_PYDANTIC_AI = blocking(
    AGENT_PACKAGES,
    """
import mediastash.integrations
for name in ('MediaUrls', 'OffloadingConversationStore', 'EnvelopeError', 'OffloadingKV'):
    try:
        getattr(mediastash.integrations, name)
    except ImportError as error:
        print('needs', name, error)
try:
    import mediastash.integrations.provider_files
except ImportError as error:
    print('needs provider_files', error)
""",
)


BEFORE_CONVERSATION_STORES = blocking(
    ('pydantic_ai.conversation_store', 'pydantic_ai_harness', 'pydantic_ai_persistence'),
    """
from mediastash.integrations import MediaUrls
try:
    from mediastash.integrations import OffloadingConversationStore
except ImportError as error:
    print('needs-newer', error)
""",
)


JSON_WALK_WITHOUT_PYDANTIC_AI = blocking(
    AGENT_PACKAGES,
    """
import asyncio, base64, tempfile
from mediastash import DiskMediaStore, WalkOptions, externalize_media, restore_media
from mediastash.walker.internal import payload_sizes

tree = {
    'messages': [
        {'kind': 'binary', 'media_type': 'image/png', 'data': base64.b64encode(bytes(range(256)) * 400).decode()},
        {'part_kind': 'user-prompt', 'content': 'long text ' * 2000},
        {'part_kind': 'tool-return', 'content': {'rows': list(range(5000))}},
    ]
}

async def main():
    with tempfile.TemporaryDirectory() as folder:
        store = DiskMediaStore(folder)
        options = WalkOptions(threshold_bytes=4096, structured=True)
        lean = await externalize_media(tree, media_store=store, options=options)
        stored = [name for name in lean['messages'] if 'content' not in name and 'data' not in name]
        back = await restore_media(lean, media_store=store, options=options)
        print('json-walk', len(stored), back == tree, sorted(payload_sizes(tree)))

asyncio.run(main())
assert not any(m.split('.')[0].startswith('pydantic_ai') for m in sys.modules), sorted(sys.modules)
""",
)


def printed(script: str) -> str:
    """What ``script`` prints in a fresh interpreter (it must exit cleanly)."""
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_core_imports_without_the_agent_packages() -> None:
    output = printed(BLOCKER)
    assert 'integrations-need-extra' in output
    assert 'pip install "mediastash[harness]"' in output


def test_the_json_walk_runs_without_pydantic_ai() -> None:
    """Issue 30 item 2: the walker imports no framework, so a whole JSON round trip (binary, text and structured
    payloads, on a disk store) runs in a process where every import of pydantic-ai fails."""
    (line,) = printed(JSON_WALK_WITHOUT_PYDANTIC_AI).splitlines()
    structured = len(json.dumps({'rows': list(range(5000))}, separators=(',', ':')))
    assert line == f'json-walk 3 True {sorted([102400, 20000, structured])}'


def test_the_langgraph_integration_imports_without_pydantic_ai() -> None:
    """``mediastash.integrations.langgraph`` needs no agent package; the harness names still say what they need."""
    output = printed(LANGGRAPH_WITHOUT_PYDANTIC_AI)
    assert 'langgraph-ok OffloadingCheckpointSaver' in output
    assert 'harness-names-need-extra' in output
    assert 'pip install "mediastash[harness]"' in output


def test_the_langgraph_integration_names_its_extra_when_langgraph_is_missing() -> None:
    assert 'pip install "mediastash[langgraph]"' in printed(LANGGRAPH_MISSING)


def private_walker_imports(source: str) -> list[str]:
    """Every import in ``source`` that reaches a private module of ``mediastash.walker`` (or a private name)."""
    import ast

    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names = [f'{node.module}.{alias.name}' for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split('.')
            if parts[:2] == ['mediastash', 'walker'] and any(part.startswith('_') for part in parts[2:]):
                found.append(name)
    return found


def test_private_walker_imports_are_found() -> None:
    """The check itself: each way of reaching into the walker is caught, the interface modules are not."""
    source = (
        'from mediastash.walker._common import TreeCopier\n'
        'import mediastash.walker._batch as batch\n'
        'from mediastash.walker import _typed\n'
        'from mediastash.walker.restore import _Restorer\n'
        'from mediastash.walker import WalkOptions, externalize_media\n'
        'from mediastash.walker.internal import TreeCopier\n'
        'from mediastash.walker.typed import TypedWalker\n'
    )
    assert private_walker_imports(source) == [
        'mediastash.walker._common.TreeCopier',
        'mediastash.walker._batch',
        'mediastash.walker._typed',
        'mediastash.walker.restore._Restorer',
    ]


def test_integrations_use_only_the_walkers_interface() -> None:
    """integrations/ imports the walker's public names and its interface modules, never its private modules."""
    from pathlib import Path

    import mediastash.integrations

    folder = Path(mediastash.integrations.__file__).parent
    modules = sorted(folder.rglob('*.py'))
    assert len(modules) > 5
    reaching = {str(path.relative_to(folder)): private_walker_imports(path.read_text()) for path in modules}
    assert {name: found for name, found in reaching.items() if found} == {}


def test_the_pydantic_ai_names_import_without_the_harness_and_the_harness_names_name_their_extra() -> None:
    output = printed(WITHOUT_THE_HARNESS)
    assert 'pydantic-ai-names-ok MediaUrls ProviderFiles OffloadingKV' in output
    (line,) = [line for line in output.splitlines() if line.startswith('needs-harness')]
    assert 'OffloadingStepStore needs pydantic-ai-harness: pip install "mediastash[harness]"' in line


def test_each_pydantic_ai_name_names_the_pydantic_ai_extra() -> None:
    lines = printed(WITHOUT_PYDANTIC_AI).splitlines()
    assert [line.split()[1] for line in lines] == [
        'MediaUrls',
        'OffloadingConversationStore',
        'EnvelopeError',
        'OffloadingKV',
        'provider_files',
    ]
    assert all('pip install "mediastash[pydantic-ai]"' in line for line in lines), lines
    assert not any('harness]' in line for line in lines)


OPENAI_AGENTS_ALONE = blocking(
    (*AGENT_PACKAGES, 'langgraph', 'langchain_core'),
    """
from mediastash.integrations.openai_agents import OffloadingSession, SessionRoot
from mediastash.gc import SQLiteSessionRoot
print('openai-agents-ok', OffloadingSession.__name__)
""",
)

OPENAI_AGENTS_MISSING = blocking(
    ('agents',),
    """
import mediastash, mediastash.gc
from mediastash.gc import SQLiteSessionRoot  # reads the database with SQL: no SDK needed
from mediastash.integrations.openai_agents import PostgresSessionRoot, SessionRoot
try:
    from mediastash.integrations.openai_agents import OffloadingSession
except ImportError as error:
    print('openai-agents-needs-extra', error)
""",
)


def test_the_openai_agents_integration_needs_neither_pydantic_ai_nor_langchain() -> None:
    assert 'openai-agents-ok OffloadingSession' in printed(OPENAI_AGENTS_ALONE)


def test_the_openai_agents_integration_names_its_extra_when_the_sdk_is_missing() -> None:
    assert 'pip install "mediastash[openai-agents]"' in printed(OPENAI_AGENTS_MISSING)


def test_the_conversation_wrapper_on_a_pydantic_ai_without_conversation_stores_says_which_version() -> None:
    (line,) = printed(BEFORE_CONVERSATION_STORES).splitlines()
    assert line.startswith('needs-newer mediastash.integrations.OffloadingConversationStore needs pydantic-ai 2.66')
    assert '"pydantic-ai-slim>=2.66"' in line


def test_the_pydantic_ai_subpackage_and_the_integrations_package_give_the_same_objects() -> None:
    """Issue 30 item 2: the pydantic-ai integration lives in ``integrations.pydantic_ai``; old imports still work."""
    import mediastash.integrations
    import mediastash.integrations.provider_files as first_name
    import mediastash.integrations.pydantic_ai
    import mediastash.integrations.pydantic_ai.provider_files as home

    assert mediastash.integrations.__all__ == mediastash.integrations.pydantic_ai.__all__
    for name in mediastash.integrations.__all__:
        try:
            value = getattr(mediastash.integrations, name)
        except ImportError:  # OffloadingConversationStore on the harness stack's pydantic-ai: both refuse it
            with pytest.raises(ImportError, match=f'^mediastash.integrations.pydantic_ai.{name} needs '):
                getattr(mediastash.integrations.pydantic_ai, name)
            continue
        assert value is getattr(mediastash.integrations.pydantic_ai, name), name
    assert first_name.__all__ == home.__all__
    assert all(getattr(first_name, name) is getattr(home, name) for name in home.__all__)
    with pytest.raises(AttributeError, match=r"module 'mediastash\.integrations' has no attribute 'Nothing'"):
        mediastash.integrations.Nothing  # noqa: B018


SUBPACKAGE_WITHOUT_THE_HARNESS = blocking(
    ('pydantic_ai_harness', 'pydantic_ai_persistence'),
    """
try:
    from mediastash.integrations.pydantic_ai import OffloadingStepStore
except ImportError as error:
    print(error)
""",
)


def test_the_subpackage_names_itself_and_the_extra_when_the_harness_is_missing() -> None:
    assert printed(SUBPACKAGE_WITHOUT_THE_HARNESS).strip() == (
        'mediastash.integrations.pydantic_ai.OffloadingStepStore needs pydantic-ai-harness: '
        'pip install "mediastash[harness]"'
    )
