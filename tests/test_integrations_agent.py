"""End to end: a real pydantic-ai Agent with StepPersistence over OffloadingStepStore (no network)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryImage, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.step_persistence import FileStepStore, StepPersistence, continue_run, fork_run
from pydantic_ai_harness.step_persistence.recovery import inspect_recovery

from mediastash import DiskMediaStore
from mediastash.integrations import OffloadingStepStore
from tests.integration_support import dir_size

REPORT = 'r' * (1 << 20)


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the tool once, then answer."""
    calls = sum(isinstance(part, ToolCallPart) for message in messages for part in message.parts)
    if calls < 2:
        return ModelResponse(
            parts=[ToolCallPart(tool_name='fetch_report', args={'n': calls}, tool_call_id=f'c{calls}')]
        )
    return ModelResponse(parts=[TextPart('done')])


def make_agent(store: Any, *, fail: bool = False) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(scripted), capabilities=[StepPersistence(store=store)])

    @agent.tool_plain
    def fetch_report(n: int) -> str:
        if fail and n == 1:
            raise RuntimeError('tool crashed')
        return REPORT

    return agent


def images() -> list[Any]:
    return [
        'compare these',
        BinaryImage(data=os.urandom(400_000), media_type='image/png'),
        BinaryImage(data=os.urandom(300_000), media_type='image/jpeg'),
    ]


async def test_agent_run_persists_lean_and_continues_exactly(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    store = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
    result = await make_agent(store).run(images())
    run_id = (await store.list_runs())[-1].run_id

    history = await continue_run(store, run_id=run_id)
    assert history == result.all_messages()
    assert await fork_run(store, run_id=run_id) == result.all_messages()

    # Every snapshot repeats the history, yet the step store holds only envelopes; each blob is stored once.
    snapshot_files = list((tmp_path / 'steps').rglob('snapshots/*.json'))
    assert len(snapshot_files) >= 2
    assert dir_size(tmp_path / 'steps') < 64 * 1024
    assert len([u async for u in media.iter_uris()]) == 3
    assert dir_size(tmp_path / 'media') < 400_000 + 300_000 + len(REPORT) + 4096

    follow_up = await make_agent(store).run('and now?', message_history=history)
    assert follow_up.output == 'done'


async def test_crash_mid_tool_cycle_leaves_interrupted_snapshot(tmp_path: Path) -> None:
    media = DiskMediaStore(tmp_path / 'media')
    store = OffloadingStepStore(FileStepStore(tmp_path / 'steps', media_store=None), media_store=media)
    prompt = images()
    with pytest.raises(RuntimeError, match='tool crashed'):
        await make_agent(store, fail=True).run(prompt)
    run_id = (await store.list_runs())[-1].run_id

    inspection = await inspect_recovery(store=store, run_id=run_id)  # type: ignore[arg-type]
    assert inspection.latest is not None and inspection.latest.state == 'interrupted'
    history = await continue_run(store, run_id=run_id, include_interrupted=True)
    assert history == inspection.latest.messages
    assert history[0].parts[0].content[1:] == prompt[1:]
    last_with_parts = next(message for message in reversed(history) if message.parts)
    assert isinstance(last_with_parts.parts[-1], ToolCallPart)  # the unsettled call
    settled = await continue_run(store, run_id=run_id)
    assert len(settled) < len(history)
