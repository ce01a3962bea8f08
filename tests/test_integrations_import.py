"""The core package never needs pydantic-ai, pydantic-ai-harness or pydantic-ai-persistence."""

from __future__ import annotations

import subprocess
import sys

BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'pydantic_ai', 'pydantic_ai_harness', 'pydantic_ai_persistence'}:
            raise ImportError(f'blocked: {name}')
        return None
sys.meta_path.insert(0, Block())
import mediastash, mediastash.walker, mediastash.stores, mediastash.known_blobs
assert not any(m.split('.')[0].startswith('pydantic_ai') for m in sys.modules), sorted(sys.modules)
try:
    import mediastash.integrations
except ImportError as error:
    print('integrations-need-extra', error)
"""


def test_core_imports_without_the_agent_packages() -> None:
    result = subprocess.run([sys.executable, '-c', BLOCKER], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert 'integrations-need-extra' in result.stdout
