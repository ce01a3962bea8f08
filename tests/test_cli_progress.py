"""Progress bars of long CLI work show the estimated time left where the total is known (issue 28 item 8)."""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from mediastash.cli._ui import Ui
from tests.terminal_support import stderr_on_a_terminal

ETA = re.compile(r'eta (\d+:\d\d:\d\d|-:--:--)')
_STYLE = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')


def plain(screen: str) -> str:
    """A terminal's output without its colour and cursor codes."""
    return _STYLE.sub('', screen)


def shown(total: float | None, *, steps: int = 4, pause: float = 0.15) -> str:
    """What ``Ui.progress`` draws on a terminal (a forced-terminal console) for ``steps`` steps out of ``total``."""
    ui = Ui()
    screen = io.StringIO()
    ui.err = Console(file=screen, force_terminal=True, width=120)
    with ui.progress('copying', total=total) as step:
        for _ in range(steps):
            time.sleep(pause)
            step.advance(1)
        time.sleep(pause)
    return plain(screen.getvalue())


def test_a_known_total_shows_an_estimated_time_left() -> None:
    drawn = shown(total=40)
    estimates = ETA.findall(drawn)
    assert estimates, drawn
    # Four steps of at least 0.15 s each out of forty: at least 5 s left once a rate is known.
    assert estimates[0] == '-:--:--'  # no rate yet
    seconds = [
        sum(int(part) * 60**power for power, part in enumerate(reversed(e.split(':'))))
        for e in estimates[1:]
        if e[0] != '-'
    ]
    assert seconds and all(seconds_left >= 4 for seconds_left in seconds), estimates
    assert '4/40' in drawn


def test_an_unknown_total_shows_no_estimate() -> None:
    drawn = shown(total=None, steps=2)
    assert 'copying' in drawn
    assert 'eta' not in drawn


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='pseudo-terminals as on Linux')
def test_tune_shows_the_time_left_while_replaying(tmp_path: Path) -> None:
    from pydantic_ai.messages import (
        BinaryContent,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )

    messages = []
    for step in range(6):
        image = BinaryContent(bytes([step]) * 120_000, media_type='image/png')
        messages += [
            ModelRequest(parts=[UserPromptPart(content=['look', image])]),
            ModelResponse(parts=[TextPart('ok')]),
        ]
    (tmp_path / 'h.json').write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    drawn = stderr_on_a_terminal('tune', 'h.json', '--store', 'memory://', '--thresholds', '4KiB,64KiB', cwd=tmp_path)
    assert 'replaying snapshots' in drawn
    assert ETA.search(plain(drawn)), drawn
