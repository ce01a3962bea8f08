"""The two stacks the suite runs on (``scripts/test``), and which marked tests each one skips.

- ``harness``: pydantic-ai-harness and the pydantic-ai it pins. Every test runs
  except those marked ``conversation_store`` (that pydantic-ai has no
  ``ConversationStore``).
- ``latest``: the newest pydantic-ai-slim without the harness. Only the test
  modules that name the mark ``pydantic_ai`` or ``conversation_store`` are
  collected there (the rest does not depend on pydantic-ai and runs on the
  harness stack; many import the harness), ``scripts/test`` selects the tests
  so marked, and those marked ``harness`` are skipped.

``MEDIASTASH_STACK`` names the stack; unset, it is ``harness`` when
pydantic-ai-harness is installed and ``latest`` otherwise. A name that does
not match what is installed stops the run, so a broken install can never pass
as the other stack with its tests skipped.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path
from typing import Final, Literal

import pytest

__all__ = ['LATEST_MARKS', 'SKIPPED_MARKS', 'Stack', 'current_stack', 'module_marks', 'skip_module_unless']

Stack = Literal['harness', 'latest']
STACK_VARIABLE: Final = 'MEDIASTASH_STACK'

SKIPPED_MARKS: Final[dict[Stack, dict[str, str]]] = {
    'harness': {'conversation_store': "needs pydantic-ai's ConversationStore (2.66+): runs on the latest stack"},
    'latest': {'harness': 'needs pydantic-ai-harness: runs on the harness stack'},
}

LATEST_MARKS: Final = frozenset({'pydantic_ai', 'conversation_store'})
"""The module marks that make a test module run on the latest stack."""


def module_marks(path: Path) -> frozenset[str]:
    """The marks a test module names anywhere as ``pytest.mark.NAME`` (its ``pytestmark``, a decorator, a param).

    Read from the source, so a module is chosen without importing it.
    """
    try:
        tree = ast.parse(path.read_text(encoding='utf-8'), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == 'mark'
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == 'pytest'
    )


def _harness_installed() -> bool:
    return importlib.util.find_spec('pydantic_ai_harness') is not None


def current_stack() -> Stack:
    """The stack this run is on (see the module docstring); raises ``pytest.UsageError`` on a mismatch."""
    named = os.environ.get(STACK_VARIABLE)
    installed: Stack = 'harness' if _harness_installed() else 'latest'
    if named is None or named == '':
        return installed
    if named not in SKIPPED_MARKS:
        raise pytest.UsageError(f'{STACK_VARIABLE} must be harness or latest')
    if named != installed:
        state = 'installed' if installed == 'harness' else 'not installed'
        raise pytest.UsageError(f'{STACK_VARIABLE}={named}, but pydantic-ai-harness is {state}')
    return named  # type: ignore[return-value]


def skip_module_unless(mark: str) -> None:
    """Skip the calling test module (before its imports) on the stack that skips ``mark``.

    For a module whose every test carries ``mark`` and whose imports fail on
    the other stack; call it right after ``import pytest``.
    """
    reason = SKIPPED_MARKS[current_stack()].get(mark)
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)
