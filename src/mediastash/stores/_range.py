"""``DigestRange``: one contiguous part of the sha256 space, so N workers can each list and collect 1/N of a store."""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from mediastash.errors import InvalidArgumentError
from mediastash.stores.capabilities import capabilities_of
from mediastash.stores.protocols import BlobInfo
from mediastash.uri import MEDIA_URI_SCHEME

__all__ = ['DigestRange', 'blobs_in_range']

_HEX_PREFIX: Final = re.compile(r'[0-9a-f]{0,64}')
_MAX_SHARDS: Final = 1 << 32


@dataclass(frozen=True, slots=True)
class DigestRange:
    """The digests ``d`` with ``start <= d < end`` (lowercase hex compared as text; ``end=None``: no upper bound).

    ``start`` and ``end`` are hex prefixes of up to 64 characters; a shorter
    one stands for itself padded with zeros (``'8'`` is ``'800...0'``), so
    ``DigestRange('00', '40')`` is the first quarter of the space.
    ``DigestRange.shard(k, n)`` is the ``k``-th of ``n`` equal parts.
    """

    start: str = ''
    end: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.start, str) or not _HEX_PREFIX.fullmatch(self.start):
            raise InvalidArgumentError('start', 'lowercase hex of at most 64 characters', self.start)
        if self.end is not None and (not isinstance(self.end, str) or not _HEX_PREFIX.fullmatch(self.end)):
            raise InvalidArgumentError('end', 'None or lowercase hex of at most 64 characters', self.end)

    @classmethod
    def shard(cls, index: int, count: int) -> DigestRange:
        """Part ``index`` (from 0) of ``count`` equal parts of the digest space; together they cover it once."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= _MAX_SHARDS:
            raise InvalidArgumentError('shard count', f'an int from 1 to {_MAX_SHARDS}', count)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise InvalidArgumentError('shard index', 'an int from 0 to the shard count minus 1', index)
        end = None if index == count - 1 else _bound(index + 1, count)
        return cls(_bound(index, count) if index else '', end)

    @property
    def whole(self) -> bool:
        """True when the range is every digest."""
        return self.start.strip('0') == '' and self.end is None

    def __contains__(self, digest: object) -> bool:
        return isinstance(digest, str) and digest >= self.start and (self.end is None or digest < self.end)

    def prefixes(self, length: int) -> range:
        """The ``length``-hex-digit prefixes (as ints) that digests of the range can start with, in order."""
        first = int(self.start.ljust(length, '0')[:length], 16) if length else 0
        if self.end is None:
            return range(first, 16**length)
        padded = self.end.ljust(64, '0')
        last = int(padded[:length], 16) if length else 0
        if padded[length:].strip('0') == '':
            last -= 1  # the range ends exactly where this prefix begins
        return range(first, last + 1)

    def describe(self) -> str:
        """A short form for messages: ``[start, end)``."""
        return f'[{self.start or "0"}, {self.end or "end"})'


def _bound(index: int, count: int) -> str:
    return format((index << 256) // count, '064x')


async def blobs_in_range(store: Any, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
    """The blobs of ``store`` in ``digest_range``: its own ``iter_blobs_in_range`` when it has one, else its
    whole ``iter_blobs`` listing filtered (any store or wrapper that lists its blobs works)."""
    if capabilities_of(store).ranged_listing:
        listing: AsyncIterable[BlobInfo] = store.iter_blobs_in_range(digest_range)
        async for info in listing:
            yield info
        return
    whole = digest_range.whole
    async for info in store.iter_blobs():
        if whole or info.uri[len(MEDIA_URI_SCHEME) :] in digest_range:
            yield info
