"""Every ```python block of README.md and docs/ runs as pasted, prints what its output block shows, and the collector
that checks this fails on a broken block (tests/docs_examples.py says how blocks are found and run).

Examples that need a server read its address from the environment with a documented default; here they get
the servers the other tests use: ``MEDIASTASH_S3_ENDPOINT_URL`` (the session's moto server, bucket
``agent-media`` created, any credentials), ``MEDIASTASH_MONGO_URI`` and ``MEDIASTASH_POSTGRES_DSN``
(``scripts/test`` starts both). Each example runs in a process of its own in an empty temporary folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.docs_examples import (
    MAX_FRAGMENTS,
    ROOT,
    Block,
    ExampleFailed,
    check,
    collect,
    documentation_files,
    example_environment,
    lint,
    output_matches,
    server_needs,
)
from tests.s3_servers import S3Endpoint

BLOCKS = [block for path in documentation_files() for block in collect(path)]
EXAMPLES = [block for block in BLOCKS if not block.fragment]
EXAMPLE_BUCKET = 'agent-media'  # the bucket the S3 examples name


@pytest.fixture(scope='session')
def s3_for_examples(moto_server: S3Endpoint) -> dict[str, str]:
    """The moto server as the S3 examples find it: its URL, credentials it accepts, the bucket they use."""
    import boto3

    client = boto3.client('s3', **moto_server.client_options())
    if EXAMPLE_BUCKET not in {bucket['Name'] for bucket in client.list_buckets().get('Buckets', [])}:
        client.create_bucket(Bucket=EXAMPLE_BUCKET)
    return {
        'MEDIASTASH_S3_ENDPOINT_URL': moto_server.url,
        'AWS_ACCESS_KEY_ID': moto_server.access_key_id,
        'AWS_SECRET_ACCESS_KEY': moto_server.secret_access_key,
        'AWS_DEFAULT_REGION': moto_server.region_name,
    }


def servers_for(block: Block, request: pytest.FixtureRequest) -> dict[str, str]:
    """The addresses of the servers ``block`` reads from the environment, each started only when needed."""
    needs = server_needs(block.code)
    servers: dict[str, str] = {}
    if 's3' in needs:
        servers.update(request.getfixturevalue('s3_for_examples'))
    if 'mongo' in needs:
        servers['MEDIASTASH_MONGO_URI'] = request.getfixturevalue('mongo_uri')
    if 'postgres' in needs:
        servers['MEDIASTASH_POSTGRES_DSN'] = request.getfixturevalue('postgres_dsn')
    return servers


# Pages whose examples need pydantic-ai's ConversationStore: they run on the latest stack only (tests/stacks.py).
CONVERSATION_PAGES = frozenset({'conversations.md'})


def example_param(block: Block) -> Any:
    marks = [pytest.mark.conversation_store] if block.path.name in CONVERSATION_PAGES else []
    return pytest.param(block, marks=marks, id=block.name)


@pytest.mark.parametrize('block', [example_param(block) for block in EXAMPLES])
def test_documentation_example_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    check(block, tmp_path, example_environment(os.environ, servers_for(block, request)))


def test_examples_have_no_unused_imports_or_undefined_names(tmp_path: Path) -> None:
    """Pyflakes' rules over every example: what a run cannot see (an unused import, a name only some paths reach)."""
    findings = lint(EXAMPLES, tmp_path)
    assert not findings, '\n'.join(findings)


def test_at_most_three_fragments() -> None:
    fragments = [block.name for block in BLOCKS if block.fragment]
    assert len(fragments) <= MAX_FRAGMENTS, f'more than {MAX_FRAGMENTS} blocks are fragments: {fragments}'


def test_the_collector_finds_every_python_fence() -> None:
    """A python fence the collector missed would never run: count them another way."""
    opening = re.compile(r'^\s*(`{3,}|~{3,})\s*(python|py)\b', re.IGNORECASE)
    for path in documentation_files():
        lines = path.read_text(encoding='utf-8').splitlines()
        assert len(collect(path)) == sum(1 for line in lines if opening.match(line)), path
    assert {path.name for path in documentation_files()} >= {'README.md', 'index.md', 'stores.md'}
    assert any(block.path.parent.name == 'api' for block in BLOCKS) or not list((ROOT / 'docs' / 'api').glob('*.md'))


# -- the collector itself --------------------------------------------------------------------------


def page(tmp_path: Path, text: str) -> list[Block]:
    path = tmp_path / 'page.md'
    path.write_text(text, encoding='utf-8')
    return collect(path)


def checked(tmp_path: Path, text: str) -> str:
    (block,) = page(tmp_path, text)
    return check(block, tmp_path / 'work', example_environment(os.environ, {}), timeout=60)


def test_a_block_with_an_undefined_name_fails(tmp_path: Path) -> None:
    with pytest.raises(ExampleFailed, match='NameError'):
        checked(tmp_path, 'Text.\n\n```python\nprint(messages)\n```\n')


def test_a_block_with_top_level_await_fails(tmp_path: Path) -> None:
    with pytest.raises(ExampleFailed, match='SyntaxError'):
        checked(tmp_path, '```python\nimport asyncio\n\nawait asyncio.sleep(0)\n```\n')


def test_a_block_with_an_ellipsis_placeholder_fails(tmp_path: Path) -> None:
    with pytest.raises(ExampleFailed, match=r'TypeError|SyntaxError|MediaStashError|Invalid'):
        checked(tmp_path, '```python\nfrom mediastash import DiskMediaStore\n\nDiskMediaStore(..., fsync=...)\n```\n')


def test_a_coroutine_never_awaited_fails(tmp_path: Path) -> None:
    code = 'import asyncio\n\n\nasync def main():\n    pass\n\n\nmain()\n'
    with pytest.raises(ExampleFailed, match='never awaited'):
        checked(tmp_path, f'```python\n{code}```\n')


def test_printed_output_is_checked_against_the_block_after(tmp_path: Path) -> None:
    good = '```python\nprint(6 * 7)\nprint("took 0.123 s")\n```\n\n```text\n42\ntook ... s\n```\n'
    assert checked(tmp_path, good) == '42\ntook 0.123 s\n'
    with pytest.raises(ExampleFailed, match='printed other than'):
        checked(tmp_path, '```python\nprint(6 * 7)\n```\n\n```text\n43\n```\n')


def test_an_output_block_belongs_only_to_the_block_right_before_it(tmp_path: Path) -> None:
    (block,) = page(tmp_path, '```python\nprint(1)\n```\n\nSome prose.\n\n```text\n2\n```\n')
    assert block.expected_output is None
    (block,) = page(tmp_path, '```python\nprint(1)\n```\n```sh\necho 2\n```\n')
    assert block.expected_output is None


def test_output_wildcards() -> None:
    assert output_matches('a\n...\nz\n', 'a\nb\nc\nz\n')
    assert output_matches('a\n...\nz\n', 'a\nz\n')
    assert output_matches('size: ... bytes', 'size: 12 bytes  \n')
    assert not output_matches('a\nz', 'a\nb\nz')
    assert not output_matches('size: ... bytes', 'size: 12 bytes\nmore')


def test_examples_run_in_an_empty_folder_outside_the_repository(tmp_path: Path) -> None:
    code = 'import os\nfrom pathlib import Path\n\nprint(os.listdir("."))\nprint(Path.cwd())\n'
    printed = checked(tmp_path, f'```python\n{code}```\n')
    listing, cwd = printed.splitlines()
    assert listing == '[]'
    assert not Path(cwd).resolve().is_relative_to(ROOT)


def test_a_new_page_is_collected_without_registering_it(tmp_path: Path) -> None:
    """Every Markdown file under docs/ (at any depth) and README.md: a new page's examples run with no list to edit."""
    (tmp_path / 'README.md').write_text('```python\nprint(1)\n```\n', encoding='utf-8')
    (tmp_path / 'docs' / 'guides').mkdir(parents=True)
    (tmp_path / 'docs' / 'guides' / 'new.md').write_text('# New\n\n```python\nundefined_name\n```\n', encoding='utf-8')
    found = [block for path in documentation_files(tmp_path) for block in collect(path)]
    assert [(block.path.name, block.line) for block in found] == [('README.md', 1), ('new.md', 3)]
    with pytest.raises(ExampleFailed, match='NameError'):
        check(found[1], tmp_path / 'work', example_environment(os.environ, {}), timeout=60)


def test_lint_names_the_page_and_line_of_a_finding(tmp_path: Path) -> None:
    (block,) = page(tmp_path, 'Prose.\n\n```python\nimport json\n\nprint(1)\n```\n')
    (finding,) = lint([block], tmp_path / 'lint')
    assert finding.startswith(f'{tmp_path}/page.md:4:8: F401')


def test_fragments_are_counted_not_run(tmp_path: Path) -> None:
    text = '```python\n# fragment: the signature\nexternalize_media(tree, *, media_store)\n```\n'
    (block,) = page(tmp_path, text)
    assert block.fragment
    with pytest.raises(ExampleFailed, match='fragment'):
        check(block, tmp_path, {})


def test_indented_blocks_in_lists_are_found(tmp_path: Path) -> None:
    blocks = page(
        tmp_path, '* a step:\n\n    ```python\n    x = 1\n    print(x)\n    ```\n\n    ```text\n    1\n    ```\n'
    )
    (block,) = blocks
    assert block.code == 'x = 1\nprint(x)\n'
    assert block.expected_output == '1\n'
    assert block.line == 3


def test_a_provider_model_is_never_reached(tmp_path: Path) -> None:
    """Provider SDKs point at a closed local port, so an example that calls a hosted model fails fast."""
    code = (
        'import os\n\nassert os.environ["OPENAI_BASE_URL"].startswith("http://127.0.0.1:")\n'
        'assert os.environ["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")\n'
    )
    checked(tmp_path, f'```python\n{code}```\n')
