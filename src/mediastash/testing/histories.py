"""Realistic synthetic agent histories, in the JSON form pydantic-ai persists them (see ``mediastash._histories``).

Re-exported here for tests, benchmarks and users; the demo and tune import the
private module so that production code does not depend on the test kit.
"""

from mediastash._histories import (
    HistoryStats,
    KiB,
    MiB,
    agent_history,
    copy_tree,
    describe_history,
    image_sizes,
    json_size,
    small_parts_history,
    step_snapshots,
)

__all__ = [
    'KiB',
    'MiB',
    'HistoryStats',
    'agent_history',
    'copy_tree',
    'describe_history',
    'image_sizes',
    'json_size',
    'small_parts_history',
    'step_snapshots',
]
