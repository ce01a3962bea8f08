"""``Root``: what the garbage collector needs from a place whose references keep blobs alive."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

__all__ = ['Root']


@runtime_checkable
class Root(Protocol):
    """A place that references blobs: a file, a database, a framework's store of histories.

    Any object with these two methods is a root (a structural protocol: an
    integration implements it without importing ``mediastash.gc``). The
    contract the collector relies on:

    - **References stream.** ``reference_batches()`` yields the
      ``media+sha256://`` URIs of one item at a time (a snapshot, a file, a
      page of rows), never every reference of the root at once: the
      collector's memory must not grow with the root.
    - **Read-only.** A root reads the lean form as stored: it restores
      nothing, reads no blob and writes nothing.
    - **Whole or refused.** A root that cannot read everything it covers (a
      value it does not understand, a backend that fails part-way, a writer
      that disturbed the read) raises ``mediastash.errors.RootReadError``;
      the collector then deletes nothing. It never yields less than it holds.
    - ``describe()`` names the root for messages without any secret (no
      password or user from a connection string).

    Subclassing ``Root`` is optional; it adds a ``repr`` built from
    ``describe()``. ``docs/gc.md`` shows a root written for a new framework.
    """

    @abstractmethod
    def reference_batches(self) -> AsyncIterator[set[str]]:
        """Yield the URIs each item of the root references (one set per snapshot, file or page of records)."""

    @abstractmethod
    def describe(self) -> str:
        """A short, secret-free name for messages."""

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.describe()})'
