"""A real ``StateGraph`` with ``add_messages`` on ``AsyncSqliteSaver``, plain and wrapped in
``OffloadingCheckpointSaver``: the same state and state history, and a checkpoint database at least ten times
smaller. ``benchmarks/langgraph.py`` times the same graph (``build_graph`` and ``run_graph`` live here for it).

Each super-step adds a user message with a fresh image in one of the three block styles (LangChain standard,
OpenAI ``image_url`` data URL, Anthropic ``source``) and, every tenth step, an AI tool call with a large tool
result. Every message has a fixed id, so the two runs are comparable message by message.
"""

from __future__ import annotations

import base64
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from mediastash import DiskMediaStore
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.walker import WalkOptions
from tests.postgres_support import postgres_dsn

__all__ = ['GraphRun', 'build_graph', 'comparable', 'postgres_dsn', 'run_graph']  # postgres_dsn: the fixture


class GraphState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    step: int


def image_block(step: int, data: str) -> dict[str, Any]:
    """The step's image, in the style ``step % 3`` picks."""
    style = step % 3
    if style == 0:
        return {'type': 'image', 'base64': data, 'mime_type': 'image/png'}
    if style == 1:
        return {'type': 'image_url', 'image_url': {'url': f'data:image/jpeg;base64,{data}'}}
    return {'type': 'image', 'source': {'type': 'base64', 'media_type': 'image/png', 'data': data}}


def build_graph(steps: int, image_bytes: int, tool_bytes: int, seed: int = 7) -> Any:
    """The graph: one node run ``steps`` times, each run adding the messages described in the module docstring."""
    rng = random.Random(seed)
    images = [base64.b64encode(rng.randbytes(image_bytes)).decode() for _ in range(steps)]

    def work(state: GraphState) -> dict[str, Any]:
        step = state.get('step', 0)
        added: list[AnyMessage] = [
            HumanMessage(
                content=[{'type': 'text', 'text': f'step {step}'}, image_block(step, images[step])], id=f'u{step}'
            )
        ]
        if step % 10 == 0:
            call = {'name': 'read_log', 'args': {'step': step}, 'id': f'call{step}'}
            added.append(AIMessage(content='', tool_calls=[call], id=f'a{step}'))
            log = ''.join(f'{step}:{line} log line of the tool\n' for line in range(tool_bytes // 24))
            added.append(ToolMessage(content=log, tool_call_id=f'call{step}', id=f't{step}'))
        return {'messages': added, 'step': step + 1}

    def route(state: GraphState) -> str:
        return END if state['step'] >= steps else 'work'

    builder = StateGraph(GraphState)
    builder.add_node('work', work)
    builder.add_edge(START, 'work')
    builder.add_conditional_edges('work', route)
    return builder


@dataclass
class GraphRun:
    seconds: float
    state: Any
    history: list[Any]
    state_seconds: float
    history_seconds: float
    database_bytes: int
    cold_state_seconds: float = 0.0
    """``aget_state`` through a saver that knows no blob yet (wrapped: ``known_blobs=False``; plain: read again)."""
    cold_history_seconds: float = 0.0


def database_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + '*'))


async def run_graph(
    database: Path, steps: int, image_bytes: int, tool_bytes: int, media: Path | None = None
) -> GraphRun:
    """Run the graph on a fresh ``AsyncSqliteSaver`` at ``database`` (wrapped when ``media`` names a folder)."""
    graph_builder = build_graph(steps, image_bytes, tool_bytes)
    config: Any = {'configurable': {'thread_id': 'run'}, 'recursion_limit': steps + 10}
    store = DiskMediaStore(media) if media is not None else None
    try:
        async with AsyncSqliteSaver.from_conn_string(str(database)) as inner:
            saver: BaseCheckpointSaver[Any] = inner
            if store is not None:
                saver = OffloadingCheckpointSaver(inner, media_store=store)
            graph = graph_builder.compile(checkpointer=saver)
            started = time.perf_counter()
            await graph.ainvoke({'messages': [HumanMessage(content='start', id='start')], 'step': 0}, config)
            seconds = time.perf_counter() - started
            started = time.perf_counter()
            state = await graph.aget_state(config)
            state_seconds = time.perf_counter() - started
            started = time.perf_counter()
            history = [snapshot async for snapshot in graph.aget_state_history(config)]
            history_seconds = time.perf_counter() - started
            cold_saver: BaseCheckpointSaver[Any] = inner
            if store is not None:
                cold_saver = OffloadingCheckpointSaver(inner, media_store=store, options=WalkOptions(known_blobs=False))
            cold = graph_builder.compile(checkpointer=cold_saver)
            started = time.perf_counter()
            await cold.aget_state(config)
            cold_state_seconds = time.perf_counter() - started
            started = time.perf_counter()
            _ = [snapshot async for snapshot in cold.aget_state_history(config)]
            cold_history_seconds = time.perf_counter() - started
    finally:
        if store is not None:
            await store.aclose()
    return GraphRun(
        seconds,
        state,
        history,
        state_seconds,
        history_seconds,
        database_bytes(database),
        cold_state_seconds,
        cold_history_seconds,
    )


def comparable(snapshot: Any) -> tuple[Any, ...]:
    """A state snapshot without what LangGraph regenerates per run (checkpoint ids, timestamps, run ids)."""
    metadata = snapshot.metadata or {}
    return (
        snapshot.values,
        snapshot.next,
        metadata.get('source'),
        metadata.get('step'),
        [(task.name, task.path) for task in snapshot.tasks],
    )


async def test_the_graph_reads_back_the_same_with_a_database_ten_times_smaller(tmp_path: Path) -> None:
    steps, image_bytes, tool_bytes = 30, 80_000, 100_000
    plain = await run_graph(tmp_path / 'plain.db', steps, image_bytes, tool_bytes)
    wrapped = await run_graph(tmp_path / 'wrapped.db', steps, image_bytes, tool_bytes, media=tmp_path / 'media')

    assert len(plain.state.values['messages']) == 1 + steps + 2 * (steps // 10)
    assert comparable(wrapped.state) == comparable(plain.state)
    assert len(wrapped.history) == len(plain.history) == steps + 2
    for ours, theirs in zip(wrapped.history, plain.history, strict=True):
        assert comparable(ours) == comparable(theirs)
    first = wrapped.state.values['messages'][1].content[1]
    assert len(first['base64']) > image_bytes  # the image itself, not a placeholder
    assert plain.database_bytes >= 10 * wrapped.database_bytes, (plain.database_bytes, wrapped.database_bytes)
    stored = sum(p.stat().st_size for p in (tmp_path / 'media').rglob('*') if p.is_file())
    distinct = steps * image_bytes + (steps // 10) * tool_bytes
    assert distinct * 0.9 <= stored <= distinct * 1.3  # each distinct payload once


async def test_a_sync_invoke_from_a_worker_thread_goes_through_the_bridge(tmp_path: Path) -> None:
    import asyncio

    store = DiskMediaStore(tmp_path / 'media')
    try:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / 'cp.db')) as inner:
            saver = OffloadingCheckpointSaver(inner, media_store=store)
            graph = build_graph(4, 70_000, 70_000).compile(checkpointer=saver)
            config: Any = {'configurable': {'thread_id': 'sync'}}
            await saver.aget_tuple(config)  # binds the loop the sync calls run on
            result = await asyncio.to_thread(graph.invoke, {'messages': [], 'step': 0}, config)
            assert len(result['messages']) == 4 + 2
            state = await asyncio.to_thread(graph.get_state, config)
            assert state.values == result
            lean = await inner.aget_tuple(config)
            assert lean is not None
            assert len(str(lean.checkpoint['channel_values']['messages'])) < 20_000
    finally:
        await store.aclose()


async def test_the_graph_on_async_postgres_saver(tmp_path: Path, postgres_dsn: str) -> None:
    """The same graph on ``AsyncPostgresSaver`` (its own schema): wrapped, it reads back what a plain saver does."""
    import uuid

    from langgraph.checkpoint.memory import InMemorySaver

    from tests.test_integrations_langgraph_conformance import drop_schemas, postgres_saver

    builder = build_graph(12, 70_000, 70_000)
    config: Any = {'configurable': {'thread_id': 'pg'}, 'recursion_limit': 30}
    start = {'messages': [HumanMessage(content='start', id='start')], 'step': 0}
    plain = builder.compile(checkpointer=InMemorySaver())
    await plain.ainvoke(start, config)
    schema = f'lg_{uuid.uuid4().hex[:12]}'
    store = DiskMediaStore(tmp_path / 'media')
    try:
        async with postgres_saver(postgres_dsn, schema) as inner:
            graph = builder.compile(checkpointer=OffloadingCheckpointSaver(inner, media_store=store))
            await graph.ainvoke(start, config)
            fresh = builder.compile(
                checkpointer=OffloadingCheckpointSaver(inner, media_store=store, options=WalkOptions(known_blobs=False))
            )
            theirs = [comparable(s) async for s in plain.aget_state_history(config)]
            assert [comparable(s) async for s in fresh.aget_state_history(config)] == theirs
            lean = await inner.aget_tuple(config)
            assert lean is not None
            assert len(str(lean.checkpoint['channel_values']['messages'])) < 30_000
    finally:
        await store.aclose()
        await drop_schemas(postgres_dsn, [schema])
