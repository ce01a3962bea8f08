"""Run the CLI with stderr on a pseudo-terminal, where progress is shown (shared by the sync and tune tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def stderr_on_a_terminal(*args: object, cwd: Path | None = None, timeout: float = 600) -> str:
    """Run ``python -m mediastash ARGS`` with stderr on a pseudo-terminal; what it showed there (exit 0 asserted)."""
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, '-m', 'mediastash', *map(str, args)], stdout=subprocess.DEVNULL, stderr=follower, cwd=cwd
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert process.wait(timeout=timeout) == 0
    return b''.join(chunks).decode(errors='replace')
