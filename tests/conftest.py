"""Session servers (moto, SeaweedFS, the MongoDB-wire server) are available to every test module.

Tests marked for one stack are skipped on the other (``tests/stacks.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stacks import LATEST_MARKS, SKIPPED_MARKS, current_stack, module_marks

pytest_plugins = ['tests.s3_servers', 'tests.mongo_support', 'tests.postgres_support']


@pytest.fixture(autouse=True)
def _private_state_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own ``XDG_STATE_HOME`` (where ``mediastash tune`` keeps its run journal), never the user's."""
    folder = tmp_path_factory.mktemp('state')
    monkeypatch.setenv('XDG_STATE_HOME', str(folder))
    return folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skipped = SKIPPED_MARKS[current_stack()]
    for item in items:
        for mark, reason in skipped.items():
            if item.get_closest_marker(mark) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """On the latest stack, collect only the test modules marked for it (``tests/stacks.py``)."""
    if collection_path.suffix != '.py' or not collection_path.name.startswith('test_'):
        return None
    if current_stack() == 'latest' and not module_marks(collection_path) & LATEST_MARKS:
        return True
    return None
