"""LangGraph's synchronous API over ``OffloadingCheckpointSaver`` with synchronous inner savers.

The graph of ``test_integrations_langgraph_graph`` (a fresh image per step, a large tool result every tenth
step) driven by ``graph.invoke`` and ``graph.stream`` on ``SqliteSaver``, from the main thread with no event
loop and from four worker threads at once, and on ``PostgresSaver`` and ``InMemorySaver``: the state and the
state history equal a plain saver's, the checkpoint database is at least ten times smaller, and the wrapper's
own loop thread stops on ``close()`` and at interpreter exit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from mediastash import DiskMediaStore
from mediastash.integrations.langgraph import OffloadingCheckpointSaver
from mediastash.walker import WalkOptions
from tests.test_integrations_langgraph_graph import build_graph, comparable, database_bytes

STEPS, IMAGE_BYTES, TOOL_BYTES = 20, 80_000, 100_000
START: Any = {'messages': [HumanMessage(content='start', id='start')], 'step': 0}


def config(thread: str) -> Any:
    return {'configurable': {'thread_id': thread}, 'recursion_limit': STEPS + 10}


def drive(graph: Any, thread: str, how: str) -> None:
    """Run the graph to its end on ``thread`` with ``graph.invoke`` or by consuming ``graph.stream``."""
    if how == 'invoke':
        graph.invoke(START, config(thread))
    else:
        chunks = list(graph.stream(START, config(thread), stream_mode='values'))
        assert len(chunks) == STEPS + 1


def readback(graph: Any, thread: str) -> tuple[Any, list[Any]]:
    """``get_state`` and ``get_state_history`` of ``thread``, comparable across runs."""
    state = graph.get_state(config(thread))
    return comparable(state), [comparable(snapshot) for snapshot in graph.get_state_history(config(thread))]


def test_invoke_and_stream_on_sqlite_saver_read_back_the_same_ten_times_smaller(tmp_path: Path) -> None:
    builder = build_graph(STEPS, IMAGE_BYTES, TOOL_BYTES)
    threads = {'by-invoke': 'invoke', 'by-stream': 'stream'}
    with SqliteSaver.from_conn_string(str(tmp_path / 'plain.db')) as plain_saver:
        plain = builder.compile(checkpointer=plain_saver)
        for thread, how in threads.items():
            drive(plain, thread, how)
        expected = {thread: readback(plain, thread) for thread in threads}
    with (
        SqliteSaver.from_conn_string(str(tmp_path / 'wrapped.db')) as inner,
        OffloadingCheckpointSaver(inner, media_store=DiskMediaStore(tmp_path / 'media')) as saver,
    ):
        wrapped = builder.compile(checkpointer=saver)
        for thread, how in threads.items():
            drive(wrapped, thread, how)
        for thread in threads:
            state, history = readback(wrapped, thread)
            assert state == expected[thread][0]
            assert len(history) == STEPS + 2
            assert history == expected[thread][1]
        image = wrapped.get_state(config('by-stream')).values['messages'][1].content[1]
        assert len(image['base64']) > IMAGE_BYTES  # the image itself, not a placeholder
        cold = OffloadingCheckpointSaver(
            inner, media_store=DiskMediaStore(tmp_path / 'media'), options=WalkOptions(known_blobs=False)
        )
        with cold:  # a fresh wrapper that remembers nothing reads every blob from the store
            assert readback(builder.compile(checkpointer=cold), 'by-invoke') == expected['by-invoke']
    plain_bytes, wrapped_bytes = database_bytes(tmp_path / 'plain.db'), database_bytes(tmp_path / 'wrapped.db')
    assert plain_bytes >= 10 * wrapped_bytes, (plain_bytes, wrapped_bytes)
    stored = sum(p.stat().st_size for p in (tmp_path / 'media').rglob('*') if p.is_file())
    distinct = STEPS * IMAGE_BYTES + (STEPS // 10) * TOOL_BYTES  # the two runs share every payload
    assert distinct * 0.9 <= stored <= distinct * 1.3
    assert not saver._loop_thread.started


def test_four_threads_at_once_on_one_wrapped_sqlite_saver(tmp_path: Path) -> None:
    builder = build_graph(STEPS, IMAGE_BYTES, TOOL_BYTES)
    plain = builder.compile(checkpointer=InMemorySaver())
    drive(plain, 'reference', 'invoke')
    expected = readback(plain, 'reference')
    threads = [f'worker-{n}' for n in range(4)]
    with (
        SqliteSaver.from_conn_string(str(tmp_path / 'wrapped.db')) as inner,
        OffloadingCheckpointSaver(inner, media_store=DiskMediaStore(tmp_path / 'media')) as saver,
    ):
        graph = builder.compile(checkpointer=saver)
        barrier = threading.Barrier(len(threads))

        def run(thread: str) -> tuple[Any, list[Any]]:
            barrier.wait()  # all four start together
            drive(graph, thread, 'stream' if thread.endswith(('1', '3')) else 'invoke')
            return readback(graph, thread)

        with ThreadPoolExecutor(len(threads)) as pool:
            results = list(pool.map(run, threads))
        assert results == [expected] * len(threads)
        lean = inner.get_tuple(config('worker-2'))
        assert lean is not None and len(str(lean.checkpoint['channel_values']['messages'])) < 40_000
    stored = sum(p.stat().st_size for p in (tmp_path / 'media').rglob('*') if p.is_file())
    assert stored <= 1.3 * (STEPS * IMAGE_BYTES + (STEPS // 10) * TOOL_BYTES)  # one blob per distinct payload


def test_the_sync_api_on_postgres_saver(tmp_path: Path, postgres_dsn: str) -> None:
    import psycopg

    builder = build_graph(12, 70_000, 70_000)
    plain = builder.compile(checkpointer=InMemorySaver())
    plain.invoke(START, config('pg'))
    with (
        postgres_saver(postgres_dsn) as inner,
        OffloadingCheckpointSaver(inner, media_store=DiskMediaStore(tmp_path / 'media')) as saver,
    ):
        graph = builder.compile(checkpointer=saver)
        for _ in graph.stream(START, config('pg')):
            pass
        assert readback(graph, 'pg') == readback(plain, 'pg')
        lean = inner.get_tuple(config('pg'))
        assert lean is not None and len(str(lean.checkpoint['channel_values']['messages'])) < 30_000
    assert isinstance(inner.conn, psycopg.Connection)


def test_the_sync_api_on_in_memory_saver_and_the_async_api_on_the_same_wrapper(tmp_path: Path) -> None:
    import asyncio

    builder = build_graph(6, 70_000, 70_000)
    inner = InMemorySaver()
    with OffloadingCheckpointSaver(inner, media_store=DiskMediaStore(tmp_path / 'media')) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke(START, config('sync'))
        synced = readback(graph, 'sync')

        async def main() -> tuple[Any, list[Any]]:
            await graph.ainvoke(START, config('async'))
            state = await graph.aget_state(config('async'))
            return comparable(state), [comparable(s) async for s in graph.aget_state_history(config('async'))]

        assert asyncio.run(main()) == synced
        assert readback(graph, 'async') == synced  # sync again after the loop that async used has closed


def test_the_loop_thread_stops_at_interpreter_exit_without_close(tmp_path: Path) -> None:
    program = textwrap.dedent(
        """
        import atexit, sys, threading

        def check():  # registered first, so it runs after the wrapper's own exit handler
            alive = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
            sys.stdout.write(f'alive at exit: {alive}\\n')

        atexit.register(check)

        from langgraph.checkpoint.memory import InMemorySaver
        from mediastash import DiskMediaStore
        from mediastash.integrations.langgraph import OffloadingCheckpointSaver
        from tests.test_integrations_langgraph_graph import build_graph

        saver = OffloadingCheckpointSaver(InMemorySaver(), media_store=DiskMediaStore(sys.argv[1]))
        graph = build_graph(2, 70_000, 70_000).compile(checkpointer=saver)
        graph.invoke({'messages': [], 'step': 0}, {'configurable': {'thread_id': 't'}})
        print('threads while running:', sorted(t.name for t in threading.enumerate()))
        """
    )
    done = subprocess.run(
        [sys.executable, '-c', program, str(tmp_path / 'media')],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert 'mediastash-langgraph-sync' in done.stdout.splitlines()[0]
    assert done.stdout.splitlines()[-1] == 'alive at exit: []'


@contextmanager
def postgres_saver(dsn: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """A ``PostgresSaver`` whose tables live in a schema of their own, dropped afterwards."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    schema = f'lg_sync_{uuid.uuid4().hex[:12]}'
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with psycopg.connect(
            dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row, options=f'-c search_path={schema}'
        ) as connection:
            saver = PostgresSaver(connection)
            saver.setup()
            yield saver
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
