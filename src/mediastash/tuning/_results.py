"""What a sweep measures for one threshold, and the size limits a snapshot may have to fit."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final

__all__ = ['DYNAMODB_ITEM_LIMIT', 'KNOWN_LIMITS', 'MONGODB_DOCUMENT_LIMIT', 'Limit', 'ThresholdRow']

MONGODB_DOCUMENT_LIMIT: Final = 16 * 1024 * 1024
"""MongoDB's maximum BSON document size: 16 MiB."""

DYNAMODB_ITEM_LIMIT: Final = 400 * 1024
"""DynamoDB's maximum item size: 400 KB (409,600 bytes, attribute names included)."""


@dataclass(frozen=True, slots=True)
class Limit:
    """A cap on one persisted snapshot's size."""

    name: str
    bytes: int

    def describe(self) -> str:
        return f'{self.name} ({self.bytes:,} bytes)'


KNOWN_LIMITS: Final = {
    'mongodb': Limit("MongoDB's 16 MiB document cap", MONGODB_DOCUMENT_LIMIT),
    'dynamodb': Limit("DynamoDB's 400 KB item cap", DYNAMODB_ITEM_LIMIT),
}


@dataclass(frozen=True, slots=True)
class ThresholdRow:
    """Measured results of replaying every history at one threshold.

    Sizes are bytes; ``persisted_*`` is the compact UTF-8 JSON of each lean
    snapshot (``json.dumps(lean, separators=(',', ':'), ensure_ascii=False)``);
    ``p95`` is the nearest-rank 95th percentile over all snapshots. ``blobs``
    and ``media_bytes`` count the distinct blobs written and their bytes.
    ``puts`` / ``gets`` / ``store_calls`` are calls the walks made on the
    store (``store_calls`` also counts existence checks). Times are seconds:
    the median over snapshots of one ``externalize_media`` (known-blob cache
    on, as a saver runs it) and of one ``restore_media`` that reads the store
    (``known_blobs=False``).
    """

    threshold_bytes: int
    snapshots: int
    persisted_bytes_total: int
    persisted_bytes_p95: int
    persisted_bytes_max: int
    blobs: int
    media_bytes: int
    puts: int
    gets: int
    store_calls: int
    externalize_seconds_median: float
    restore_seconds_median: float
    fits_mongodb: bool
    fits_dynamodb: bool

    def fits(self, limit: Limit | None) -> bool:
        """Whether the largest snapshot is within ``limit`` (always, without one)."""
        return limit is None or self.persisted_bytes_max <= limit.bytes

    def as_json(self) -> dict[str, Any]:
        return asdict(self)
