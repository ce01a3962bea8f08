"""Every page says what to install for its examples before the first example that needs it (issue 28 item 6).

A newcomer who ran the Quick start (``pip install -e .``: the core only) and
pasted the next example met ``No module named 'pydantic_ai'``. Here each
example's imports (and the servers it reads from the environment) say which
extras and packages it needs; a ``pip install`` line above the example on the
same page must name each of them: ``"mediastash[s3]"``, ``mediastash[harness]``
or a plain package such as ``langgraph-checkpoint-sqlite``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs_examples import Block, collect, documentation_files, server_needs

PYDANTIC_AI = frozenset({'extra:pydantic-ai', 'extra:harness'})  # the harness extra brings pydantic-ai too
HARNESS = frozenset({'extra:harness'})
LANGGRAPH = frozenset({'extra:langgraph'})

# Imported module (or a prefix of it) -> what must be installed: any one of these names.
MODULES: dict[str, frozenset[str]] = {
    'pydantic_ai.models.openai': frozenset({'pkg:pydantic-ai-slim[openai]', 'pkg:openai'}),
    'pydantic_ai.providers.openai': frozenset({'pkg:pydantic-ai-slim[openai]', 'pkg:openai'}),
    'pydantic_ai.models.google': frozenset({'pkg:pydantic-ai-slim[google]', 'pkg:google-genai'}),
    'pydantic_ai.providers.google': frozenset({'pkg:pydantic-ai-slim[google]', 'pkg:google-genai'}),
    'pydantic_ai': PYDANTIC_AI,
    'pydantic_ai_harness': HARNESS,
    'pydantic_ai_persistence': HARNESS,
    'langgraph.checkpoint.sqlite': frozenset({'pkg:langgraph-checkpoint-sqlite'}),
    'langgraph.checkpoint.postgres': frozenset({'pkg:langgraph-checkpoint-postgres'}),
    'langgraph.checkpoint': LANGGRAPH,
    'langgraph': frozenset({'pkg:langgraph'}),  # StateGraph and friends: the langgraph package, not in the extra
    'langchain_core': LANGGRAPH,
    'mediastash.integrations.pydantic_ai': PYDANTIC_AI,
    'mediastash.integrations.langgraph': LANGGRAPH,
    'mediastash.integrations.openai_agents': frozenset({'extra:openai-agents'}),
    'agents': frozenset({'extra:openai-agents', 'pkg:openai-agents'}),
    'mediastash.stores.s3': frozenset({'extra:s3'}),
    'mediastash.stores.mongo': frozenset({'extra:mongo'}),
    'mediastash.stores.postgres': frozenset({'extra:postgres'}),
    'aiobotocore': frozenset({'extra:s3'}),
    'boto3': frozenset({'extra:s3', 'pkg:boto3'}),
    'pymongo': frozenset({'extra:mongo'}),
    'asyncpg': frozenset({'extra:postgres'}),
    'matplotlib': frozenset({'extra:plot'}),
    'mongomock_motor': frozenset({'pkg:mongomock-motor'}),
}
# Names imported from mediastash packages that need more than the core.
NAMES: dict[str, frozenset[str]] = {
    'S3MediaStore': frozenset({'extra:s3'}),
    'PresignedUrls': frozenset({'extra:s3'}),
    'MongoMediaStore': frozenset({'extra:mongo'}),
    'PostgresMediaStore': frozenset({'extra:postgres'}),
    'OffloadingStepStore': HARNESS,
    'OffloadingKV': PYDANTIC_AI,
    'MediaUrls': PYDANTIC_AI,
    'MediaUrlSwapper': PYDANTIC_AI,
    'KVUploadRegistry': HARNESS,
    'StoreTests': frozenset({'extra:testing'}),
}
SERVERS = {
    's3': frozenset({'extra:s3'}),
    'mongo': frozenset({'extra:mongo'}),
    'postgres': frozenset({'extra:postgres'}),
}

_INSTALL = re.compile(r'pip install\s+(.*)')
_EXTRAS = re.compile(r'^(?:mediastash|\.)\[([^\]]*)\]$')


def needs(block: Block) -> set[frozenset[str]]:
    """What ``block`` needs installed beyond the core: one set of alternatives per need."""
    found: set[frozenset[str]] = {SERVERS[server] for server in server_needs(block.code)}
    for node in ast.walk(ast.parse(block.code)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
            if node.module.split('.')[0] == 'mediastash':
                found |= {NAMES[alias.name] for alias in node.names if alias.name in NAMES}
        for module in modules:
            for prefix, alternatives in MODULES.items():
                if module == prefix or module.startswith(prefix + '.'):
                    found.add(alternatives)
                    break
    return found


def installed_by(line: str) -> set[str]:
    """What a ``pip install ...`` line installs: ``extra:NAME`` for mediastash's extras, ``pkg:NAME`` for others."""
    match = _INSTALL.search(line)
    if match is None:
        return set()
    command = match.group(1).split('`')[0].split('#')[0]  # up to the end of inline code or a shell comment
    names: set[str] = set()
    for word in command.split():
        word = word.strip('"\',;()')
        if not word or word.startswith('-'):
            continue
        extras = _EXTRAS.match(word)
        if extras is not None:
            names |= {f'extra:{name.strip()}' for name in extras.group(1).split(',')}
            continue
        package, _, rest = word.partition('[')
        names.add(f'pkg:{package.lower()}')
        names |= {f'pkg:{package.lower()}[{extra.strip()}]' for extra in rest.rstrip(']').split(',') if rest}
    return names


@dataclass(frozen=True)
class Missing:
    page: str
    line: int
    needs: tuple[str, ...]


def missing_installs(path: Path) -> list[Missing]:
    """For each example of ``path``, each need no ``pip install`` line above it on the page satisfies."""
    lines = path.read_text(encoding='utf-8').splitlines()
    problems: list[Missing] = []
    for block in collect(path):
        if block.fragment:
            continue
        installed: set[str] = set()
        for text in lines[: block.line - 1]:
            installed |= installed_by(text)
        for alternatives in needs(block):
            if not alternatives & installed:
                problems.append(Missing(str(path), block.line, tuple(sorted(alternatives))))
    return problems


def test_every_example_is_preceded_by_what_it_needs_installed() -> None:
    problems = [problem for path in documentation_files() for problem in missing_installs(path)]
    assert not problems, '\n'.join(
        f'{p.page}:{p.line}: no pip install line above names one of {p.needs}' for p in problems
    )


def test_the_check_finds_a_missing_install_line(tmp_path: Path) -> None:
    """An example that needs pydantic-ai, with no install line, or one below it, is found; one above satisfies it."""
    example = '```python\nfrom pydantic_ai import Agent\n\nprint(Agent)\n```\n'
    page = tmp_path / 'page.md'
    page.write_text(f'# Page\n\n{example}\n`pip install "mediastash[pydantic-ai]"`\n', encoding='utf-8')
    (problem,) = missing_installs(page)
    assert (problem.line, problem.needs) == (3, ('extra:harness', 'extra:pydantic-ai'))
    page.write_text(f'# Page\n\nInstall: `pip install "mediastash[pydantic-ai]"`.\n\n{example}', encoding='utf-8')
    assert missing_installs(page) == []


@pytest.mark.parametrize(
    ('code', 'expected'),
    [
        ('from pydantic_ai_harness.step_persistence import FileStepStore', [HARNESS]),
        (
            'from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver',
            [frozenset({'pkg:langgraph-checkpoint-sqlite'})],
        ),
        ('from langgraph.graph import StateGraph', [frozenset({'pkg:langgraph'})]),
        ('from mediastash import S3MediaStore', [frozenset({'extra:s3'})]),
        ('import os\nos.environ.get("MEDIASTASH_POSTGRES_DSN")', [frozenset({'extra:postgres'})]),
        ('from mediastash import DiskMediaStore', []),
    ],
)
def test_what_an_example_needs_is_read_from_its_imports(code: str, expected: list[frozenset[str]]) -> None:
    block = Block(path=Path('page.md'), line=1, code=code + '\n', expected_output=None)
    assert needs(block) == set(expected)


def test_install_lines_are_read_in_every_form_the_docs_use() -> None:
    assert installed_by('pip install "mediastash[harness,s3]"') == {'extra:harness', 'extra:s3'}
    assert installed_by("Install the extra: `pip install 'mediastash[mongo]'` (pymongo)") == {'extra:mongo'}
    assert installed_by('.venv/bin/pip install -q -e ".[pydantic-ai]"') == {'extra:pydantic-ai'}
    assert installed_by('pip install "mediastash[langgraph]" langgraph langgraph-checkpoint-sqlite') == {
        'extra:langgraph',
        'pkg:langgraph',
        'pkg:langgraph-checkpoint-sqlite',
    }
    assert 'pkg:pydantic-ai-slim[openai]' in installed_by('pip install "pydantic-ai-slim[openai,google]"')
    assert installed_by('no install here') == set()
