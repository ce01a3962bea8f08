"""The stack selection of tests/stacks.py: which modules the latest stack collects, and a stack name that lies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stacks import LATEST_MARKS, SKIPPED_MARKS, current_stack, module_marks

TESTS = Path(__file__).resolve().parent


def test_module_marks_are_read_from_the_source_wherever_they_are(tmp_path: Path) -> None:
    module = tmp_path / 'test_example.py'
    module.write_text(
        'import pytest\n'
        'pytestmark = [pytest.mark.pydantic_ai, pytest.mark.slowish]\n'
        '@pytest.mark.harness\n'
        'def test_a(): pass\n'
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.conversation_store)])\n"
        'def test_b(x): pass\n'
        'mark = other.mark.not_pytest\n',
        encoding='utf-8',
    )
    assert module_marks(module) == {'pydantic_ai', 'slowish', 'harness', 'parametrize', 'conversation_store'}
    broken = tmp_path / 'test_broken.py'
    broken.write_text('def (:\n', encoding='utf-8')
    assert module_marks(broken) == frozenset()


def test_the_latest_stack_collects_the_modules_that_exercise_pydantic_ai() -> None:
    chosen = {path.name for path in TESTS.glob('test_*.py') if module_marks(path) & LATEST_MARKS}
    assert {
        'test_conversations.py',
        'test_docs_examples.py',
        'test_integrations_import.py',
        'test_integrations_media_urls.py',
        'test_integrations_typed.py',
        'test_media_urls_provider.py',
        'test_provider_files.py',
    } <= chosen
    # A module that imports the harness at its top would fail to import there: none is chosen.
    for name in chosen:
        source = (TESTS / name).read_text(encoding='utf-8')
        assert '\nfrom pydantic_ai_harness' not in source and '\nfrom pydantic_ai_persistence' not in source, name


def test_a_stack_name_must_match_what_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    installed = current_stack()
    other = 'latest' if installed == 'harness' else 'harness'
    monkeypatch.setenv('MEDIASTASH_STACK', other)
    with pytest.raises(pytest.UsageError, match='pydantic-ai-harness is'):
        current_stack()
    monkeypatch.setenv('MEDIASTASH_STACK', 'newest')
    with pytest.raises(pytest.UsageError, match='must be harness or latest'):
        current_stack()
    monkeypatch.setenv('MEDIASTASH_STACK', installed)
    assert current_stack() == installed
    assert set(SKIPPED_MARKS[installed]) == ({'conversation_store'} if installed == 'harness' else {'harness'})
