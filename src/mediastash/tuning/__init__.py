"""Threshold tuning: replay your histories against your store at several thresholds, measure, recommend.

What ``mediastash tune`` runs, usable from Python::

    histories = await load_inputs([Path('history.json')])
    async with UrlNamespaces('/var/media') as namespaces:
        rows = await sweep(histories, [16 << 10, 64 << 10, 256 << 10], namespaces)
    sizes = history_payload_sizes(histories)
    pick = recommend(rows, margin=0.10, payload_sizes=sizes)
    print(pick.line(), advice(pick, sizes, steps_by_history(histories), thresholds=[16 << 10, 64 << 10, 256 << 10]))

``docs/tuning.md`` describes what is replayed, what is measured and the rule.
An input other than a JSON history file is read by the reader that claims it
(``register_history_reader``; the harness step stores' reader is the pydantic-ai
integration's): this package imports no framework.
"""

from mediastash._units import format_bytes, format_seconds, format_threshold
from mediastash.tuning._inputs import (
    History,
    HistoryInputError,
    load_history_file,
    load_inputs,
    load_step_store,
    synthetic_history,
)
from mediastash.tuning._namespaces import (
    SCRATCH_PREFIX,
    STALE_AFTER,
    MemoryNamespaces,
    NamespaceCleanupError,
    Namespaces,
    StoreNamespaces,
    UrlNamespaces,
    journal_folder,
)
from mediastash.tuning._plot import PlotError, check_plot_target, plot_sweep
from mediastash.tuning._readers import HistoryRead, available_history_readers, register_history_reader
from mediastash.tuning._results import (
    DYNAMODB_ITEM_LIMIT,
    KNOWN_LIMITS,
    MONGODB_DOCUMENT_LIMIT,
    Limit,
    ThresholdRow,
)
from mediastash.tuning._rule import (
    CLUSTER_HEADROOM,
    DEFAULT_MARGIN,
    DEFAULT_READ_COST,
    FEW_PAYLOADS,
    FEW_STEPS,
    Recommendation,
    advice,
    recommend,
    rule_text,
    size_histogram,
)
from mediastash.tuning._sweep import (
    RoundTripMismatch,
    count_snapshots,
    history_payload_sizes,
    persisted_size,
    snapshots_of,
    steps_by_history,
    sweep,
)

__all__ = [
    'CLUSTER_HEADROOM',
    'DEFAULT_MARGIN',
    'DEFAULT_READ_COST',
    'DYNAMODB_ITEM_LIMIT',
    'FEW_PAYLOADS',
    'FEW_STEPS',
    'KNOWN_LIMITS',
    'MONGODB_DOCUMENT_LIMIT',
    'SCRATCH_PREFIX',
    'STALE_AFTER',
    'History',
    'HistoryInputError',
    'HistoryRead',
    'Limit',
    'MemoryNamespaces',
    'NamespaceCleanupError',
    'Namespaces',
    'PlotError',
    'Recommendation',
    'RoundTripMismatch',
    'StoreNamespaces',
    'ThresholdRow',
    'UrlNamespaces',
    'advice',
    'available_history_readers',
    'check_plot_target',
    'count_snapshots',
    'format_bytes',
    'format_seconds',
    'format_threshold',
    'history_payload_sizes',
    'journal_folder',
    'load_history_file',
    'load_inputs',
    'load_step_store',
    'persisted_size',
    'plot_sweep',
    'recommend',
    'register_history_reader',
    'rule_text',
    'size_histogram',
    'snapshots_of',
    'steps_by_history',
    'sweep',
    'synthetic_history',
]
