"""The collector behind tests/test_docs_examples.py: every ```python block of README.md and docs/ runs as pasted.

- ``collect`` reads a Markdown file's fenced blocks (indented ones in lists
  too). A ```python (or ```py) block is an example; a block whose first line
  starts with ``# fragment:`` is a fragment (a signature shown in prose): it
  is not run, and the docs may hold at most ``MAX_FRAGMENTS`` of them.
- The fenced block right after an example (only blank lines between) whose
  info string is ``text``, ``output`` or empty is the example's expected
  output: what it prints must match it line by line (trailing spaces
  ignored). ``...`` inside a line matches any text on that line; a line that
  is only ``...`` matches any number of lines (timings, paths).
- ``run`` writes the block to a file of its own and runs it with this
  interpreter in a fresh process whose working directory is an empty
  temporary folder, so examples never write into the repository and never
  share a known-blob cache, a logging setup or an event loop. The
  environment carries the servers' addresses (``example_environment``).
- ``check`` fails (``ExampleFailed``) when the process exits non-zero, times
  out, prints a never-awaited coroutine or an unclosed client session, or
  prints other than the expected output. ``lint`` adds pyflakes' findings
  (ruff's ``F`` rules: unused imports, undefined names on paths a run skips).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    'DEAD_PROVIDER_URL',
    'MAX_FRAGMENTS',
    'ROOT',
    'Block',
    'ExampleFailed',
    'check',
    'collect',
    'documentation_files',
    'example_environment',
    'lint',
    'output_matches',
    'run',
    'server_needs',
]

ROOT = Path(__file__).resolve().parent.parent
MAX_FRAGMENTS = 3
TIMEOUT_SECONDS = 180.0
FRAGMENT_PREFIX = '# fragment:'
OUTPUT_INFOS = frozenset({'', 'text', 'output'})
PYTHON_INFOS = frozenset({'python', 'py'})
# Provider SDKs are pointed here, a closed port on this machine: an example that really called a
# hosted model fails at once instead of reaching the Internet (examples use TestModel/FunctionModel).
DEAD_PROVIDER_URL = 'http://127.0.0.1:9/v1'
# The environment variables examples read a server's address from (each with a default in the example).
SERVER_VARIABLES = {
    'MEDIASTASH_S3_ENDPOINT_URL': 's3',
    'MEDIASTASH_MONGO_URI': 'mongo',
    'MEDIASTASH_POSTGRES_DSN': 'postgres',
}
# Messages that mean an example is broken even though it exited 0.
BAD_STDERR = ('was never awaited', 'Unclosed client session', 'Unclosed connector', 'DeprecationWarning')
"""Printed by an example that runs but is wrong; a DeprecationWarning is shown for the example's own calls."""

_FENCE = re.compile(r'^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$')


class ExampleFailed(AssertionError):
    """A documentation example did not run, or printed other than its output block."""


@dataclass(frozen=True)
class Block:
    """One fenced Python block: where it is, its code, and the output the page shows for it."""

    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    expected_output: str | None = None

    @property
    def fragment(self) -> bool:
        return self.code.lstrip().startswith(FRAGMENT_PREFIX)

    @property
    def name(self) -> str:
        """``docs/s3.md:8``: the page relative to the repository and the line of its fence."""
        try:
            where = self.path.relative_to(ROOT)
        except ValueError:
            where = self.path
        return f'{where.as_posix()}:{self.line}'


@dataclass(frozen=True)
class _Fence:
    line: int
    info: str
    text: str
    end: int  # index of the line after the closing fence


def _fences(lines: list[str]) -> Iterator[_Fence]:
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, opened = opening['indent'], opening['fence'], index
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if (
                closing is not None
                and closing['fence'][0] == fence[0]
                and len(closing['fence']) >= len(fence)
                and not closing['info'].strip()
            ):
                break
            body.append(lines[index][len(indent) :] if lines[index].startswith(indent) else lines[index].lstrip())
            index += 1
        index += 1
        yield _Fence(
            line=opened + 1, info=opening['info'].strip(), text=''.join(f'{line}\n' for line in body), end=index
        )


def _language(info: str) -> str:
    return info.split(None, 1)[0].lower().lstrip('.{') if info else ''


def collect(path: Path) -> list[Block]:
    """The Python blocks of one Markdown file, each with the output block that follows it, if any."""
    lines = path.read_text(encoding='utf-8').splitlines()
    fences = list(_fences(lines))
    blocks = []
    for position, fence in enumerate(fences):
        if _language(fence.info) not in PYTHON_INFOS:
            continue
        expected = None
        after = fences[position + 1] if position + 1 < len(fences) else None
        if (
            after is not None
            and _language(after.info) in OUTPUT_INFOS
            and all(not line.strip() for line in lines[fence.end : after.line - 1])
        ):
            expected = after.text
        blocks.append(Block(path=path, line=fence.line, code=fence.text, expected_output=expected))
    return blocks


def documentation_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [root / 'README.md', *sorted((root / 'docs').rglob('*.md'))]


def _normalized(text: str) -> str:
    return '\n'.join(line.rstrip() for line in text.strip('\n').splitlines()).strip('\n')


def _pattern(expected: str) -> re.Pattern[str]:
    pieces = []
    for line in _normalized(expected).split('\n'):
        if line.strip() == '...':
            pieces.append(r'(?:[^\n]*\n)*?')
        else:
            pieces.append('[^\\n]*'.join(re.escape(part) for part in line.split('...')) + r'\n')
    return re.compile(''.join(pieces))


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` (what an example printed) is ``expected`` with ``...`` as a wildcard."""
    return _pattern(expected).fullmatch(_normalized(actual) + '\n') is not None


def example_environment(base: Mapping[str, str], servers: Mapping[str, str]) -> dict[str, str]:
    """The environment an example runs in: ``base``, the servers' addresses, and dead provider endpoints."""
    env = {name: value for name, value in base.items() if not name.startswith(('PYTEST_', 'COV_'))}
    env.update(
        {
            'OPENAI_API_KEY': 'docs-example-key',
            'OPENAI_BASE_URL': DEAD_PROVIDER_URL,
            'ANTHROPIC_API_KEY': 'docs-example-key',
            'ANTHROPIC_BASE_URL': DEAD_PROVIDER_URL,
            'PYTHONDONTWRITEBYTECODE': '1',
            'PYTHONUNBUFFERED': '1',
            'NO_COLOR': '1',
            'COLUMNS': '120',
        }
    )
    env.update(servers)
    return env


def run(
    block: Block, workdir: Path, env: Mapping[str, str], timeout: float = TIMEOUT_SECONDS
) -> subprocess.CompletedProcess[str]:
    """Run ``block`` as a program of its own in ``workdir/run`` (an empty folder) and return what happened."""
    code_dir, cwd = workdir / 'code', workdir / 'run'
    code_dir.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    script = code_dir / (re.sub(r'\W', '_', block.name) + '.py')
    script.write_text(block.code, encoding='utf-8')
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def check(block: Block, workdir: Path, env: Mapping[str, str], timeout: float = TIMEOUT_SECONDS) -> str:
    """Run ``block`` and raise ``ExampleFailed`` unless it ran cleanly and printed its output block; return stdout."""
    __tracebackhide__ = True
    if block.fragment:
        raise ExampleFailed(f'{block.name} is a fragment ({FRAGMENT_PREFIX} ...): fragments are not run')
    try:
        done = run(block, workdir, env, timeout)
    except subprocess.TimeoutExpired:
        raise ExampleFailed(f'{block.name} did not finish within {timeout:.0f} s') from None
    if done.returncode != 0:
        raise ExampleFailed(f'{block.name} exited with status {done.returncode}:\n{done.stderr[-4000:]}')
    bad = [message for message in BAD_STDERR if message in done.stderr]
    if bad:
        raise ExampleFailed(f'{block.name} ran but printed {bad[0]!r}:\n{done.stderr[-4000:]}')
    if block.expected_output is not None and not output_matches(block.expected_output, done.stdout):
        raise ExampleFailed(
            f'{block.name} printed other than the output block after it.\n'
            f'--- expected\n{block.expected_output}--- printed\n{done.stdout}'
        )
    return done.stdout


def lint(blocks: list[Block], workdir: Path) -> list[str]:
    """Pyflakes' findings (ruff's ``F`` rules) in ``blocks``, each as ``page.md:<line in the page>:<column>: ...``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for number, block in enumerate(blocks):
        (workdir / f'example_{number}.py').write_text(block.code, encoding='utf-8')
    ruff = str(Path(sys.executable).with_name('ruff'))
    done = subprocess.run(
        [ruff, 'check', '--no-cache', '--isolated', '--select', 'F', '--output-format', 'concise', '.'],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )

    def where(found: re.Match[str]) -> str:
        block = blocks[int(found[1])]
        try:
            page = block.path.relative_to(ROOT).as_posix()
        except ValueError:
            page = str(block.path)
        return f'{page}:{block.line + int(found[2])}:{found[3]}'

    lines = [re.sub(r'^example_(\d+)\.py:(\d+):(\d+)', where, line) for line in done.stdout.splitlines()]
    findings = [line for line in lines if not line.startswith('example_') and re.match(r'^\S+:\d+:\d+: ', line)]
    if done.returncode not in (0, 1) or (done.returncode == 1 and not findings):
        raise ExampleFailed(f'ruff failed: {done.stderr or done.stdout}')
    return findings


def server_needs(code: str) -> set[str]:
    """Which test servers an example reads the address of: ``'s3'``, ``'mongo'``, ``'postgres'``."""
    variables = {
        'MEDIASTASH_S3_ENDPOINT_URL': 's3',
        'MEDIASTASH_MONGO_URI': 'mongo',
        'MEDIASTASH_POSTGRES_DSN': 'postgres',
    }
    return {kind for variable, kind in variables.items() if variable in code}
