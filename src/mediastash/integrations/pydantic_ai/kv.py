"""``OffloadingKV``: media offloading for any pydantic-ai-persistence ``AsyncKV``."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Final, Unpack

from mediastash._checks import non_negative_int
from mediastash._lru import BoundedLRU
from mediastash.errors import MediaNotFoundError, TreeDepthError
from mediastash.integrations._splice import DEFAULT_LITERAL_BYTES, LiteralCache, dumps_spliced
from mediastash.integrations.pydantic_ai._references import references_to_markers
from mediastash.markers import RESERVED_KEY_PREFIX
from mediastash.reference_keys import ReferenceKey, reference_key_of
from mediastash.stores.protocols import MediaStore
from mediastash.uri import MEDIA_URI_SCHEME
from mediastash.walker import WalkOptions
from mediastash.walker.internal import (
    WalkKeywords,
    WalkSettings,
    deepest_path,
    externalize_with,
    options_from_keywords,
    restore_collecting,
)

__all__ = ['OffloadingKV']

DEFAULT_RECENT_BYTES: Final = 64 << 20
"""Default budget for remembering values this wrapper wrote, so reading them back needs no restore."""

_CANDIDATE_KEYS: Final = ('"data"', '"content"')
_URL_PART_KIND: Final = '-url"'
"""The end of every URL part's ``kind`` in JSON (``"image-url"``, ...): a value without it holds no reference part."""


class OffloadingKV(WalkSettings):
    """Wraps an ``AsyncKV`` so large payloads in its JSON values live in ``media_store``.

    ``put`` externalizes the value's payloads (``externalize_media`` over the
    parsed JSON) before writing the lean JSON; ``get`` and ``query`` restore.
    Values that are not JSON, or have nothing to externalize, are written and
    read back unchanged, byte for byte; a value carrying the marker format's
    reserved keys is stored escaped and reads back as equal JSON. A reference
    part (a URL part whose URL is a stored blob's ``media+sha256://`` URI,
    from ``OffloadingStepStore(restore='references')``) is written as exactly
    the marker its ``BinaryContent`` had, so it reads back with its bytes,
    when ``reference_key`` (as given to the restoring wrapper; ``None``: this
    process's key) vouches for it; any other reference part is written as
    the URL part it is (``docs/security.md``).
    Every other attribute is ``inner``'s own.

    A restored value is assembled by splicing: the small restored tree is
    dumped with placeholders for the payloads, which are then replaced by the
    payloads' JSON literals (quoted base64, or text escaped once and kept in a
    cache of ``literal_bytes``); the text equals the plain ``json.dumps``.

    ``recent_bytes`` bounds a memory of the values this wrapper wrote: reading
    one back while the inner KV still holds exactly the lean value written
    returns the caller's own string without any restore. ``KVStepStore``
    re-reads every snapshot of a run on each save, so a budget that holds a
    run's snapshots turns that from rebuilding each snapshot into a lookup.

    The walk settings come as ``options=WalkOptions(...)``, as for every
    integration (``docs/integrations.md``; the separate keywords of before
    warn, for one release); structured payloads (a tool return's large JSON
    ``content``) move too unless it says ``structured=False``.
    """

    def __init__(
        self,
        inner: Any,
        *,
        media_store: MediaStore,
        recent_bytes: int = DEFAULT_RECENT_BYTES,
        literal_bytes: int = DEFAULT_LITERAL_BYTES,
        options: WalkOptions | None = None,
        reference_key: ReferenceKey | bytes | None = None,
        **walk_keywords: Unpack[WalkKeywords],
    ) -> None:
        self._reference_key = reference_key_of(reference_key)
        non_negative_int('recent_bytes', recent_bytes)
        non_negative_int('literal_bytes', literal_bytes)
        self._walk_options = options_from_keywords('OffloadingKV', options, walk_keywords, structured=True)
        # Without the known-blob cache every restore fetches fresh payload strings: nothing to reuse.
        self._literals = LiteralCache(literal_bytes if self.known_blobs is not False else 0, ensure_ascii=False)
        self.recent_bytes = recent_bytes
        self._recent: BoundedLRU[tuple[str, str], tuple[str, str]] = BoundedLRU(max_cost=self.recent_bytes)
        self.inner = inner
        self.media_store = media_store

    async def put(self, pk: str, sk: str, data: str) -> None:
        """Store the value's payloads, then write the lean value under ``(pk, sk)``.

        A JSON value nested deeper than ``json`` or the walker takes raises
        ``TreeDepthError`` (nothing is written).
        """
        lean = await self._lean(data)
        self._forget(pk, sk)
        await self.inner.put(pk, sk, lean)
        if lean is not data:
            self._remember(pk, sk, lean, data)

    async def get(self, pk: str, sk: str) -> str | None:
        """The value under ``(pk, sk)`` with its payloads restored, or ``None``."""
        data: str | None = await self.inner.get(pk, sk)
        if data is None:
            return None
        full: str = await self._full(data, pk, sk)
        return full

    async def query(self, pk: str, sk_prefix: str | None = None) -> list[tuple[str, str]]:
        """``inner.query`` with every value's payloads restored (order kept)."""
        rows = await self.inner.query(pk, sk_prefix)
        values = await asyncio.gather(*(self._full(data, pk, sk) for sk, data in rows))
        return [(sk, value) for (sk, _), value in zip(rows, values, strict=True)]

    async def delete(self, pk: str, sk: str) -> None:
        """Delete the value (its blobs stay: they may be shared)."""
        self._forget(pk, sk)
        await self.inner.delete(pk, sk)

    def _remember(self, pk: str, sk: str, lean: str, full: str) -> None:
        self._recent.put((pk, sk), (lean, full), sys.getsizeof(full))

    def _forget(self, pk: str, sk: str) -> None:
        self._recent.pop((pk, sk))

    def __getattr__(self, name: str) -> Any:
        if name == 'inner':
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def _lean(self, data: Any) -> Any:
        if not isinstance(data, str):
            return data
        references = MEDIA_URI_SCHEME in data and _URL_PART_KIND in data
        if (
            not references
            and RESERVED_KEY_PREFIX not in data
            and (len(data) * 4 < self._walk_options.threshold_bytes or not any(key in data for key in _CANDIDATE_KEYS))
        ):
            return data  # nothing could be moved, and nothing could be mistaken for a marker on the way back
        tree = _parsed(data)
        if tree is _NOT_JSON:
            return data
        lean = await externalize_with(tree, self.media_store, self._walk_options)
        if references:
            lean, _ = await references_to_markers(lean, self.media_store, self._walk_options, self._reference_key)
        try:
            if lean == tree:
                return data
            return json.dumps(lean, ensure_ascii=False, separators=(',', ':'))
        except RecursionError:  # the walk takes what json cannot dump this deep in the call stack
            raise _too_deep(tree) from None

    async def _full(self, data: Any, pk: str, sk: str) -> Any:
        if not isinstance(data, str) or RESERVED_KEY_PREFIX not in data:
            return data
        recent = self._recent.get((pk, sk))
        if recent is not None and (recent[0] is data or recent[0] == data):
            return recent[1]
        tree = _parsed(data)
        if tree is _NOT_JSON:
            return data
        try:
            full, slots = await restore_collecting(tree, self.media_store, self._walk_options)
        except MediaNotFoundError as error:
            where = f'{error.where or type(self.media_store).__name__}, needed by the value at {pk!r}/{sk!r}'
            raise MediaNotFoundError(error.uri, where=where) from error
        try:
            if slots:
                return dumps_spliced(full, slots, self._literals)
            if full == tree:
                return data
            return json.dumps(full, ensure_ascii=False, separators=(',', ':'))
        except RecursionError:
            raise _too_deep(tree) from None


_NOT_JSON: Final = object()
"""What ``_parsed`` returns for a value that is not JSON (stored and read back as it is)."""


def _parsed(data: str) -> Any:
    """``data`` parsed as JSON, or ``_NOT_JSON``; ``TreeDepthError`` when it nests deeper than ``json`` reads."""
    try:
        return json.loads(data)
    except ValueError:
        return _NOT_JSON
    except RecursionError:
        raise _too_deep(None) from None


def _too_deep(tree: object) -> TreeDepthError:
    """The error for a value nested deeper than ``json`` parses or dumps here (path of its deepest container)."""
    return TreeDepthError(limit=None, path='$' if tree is None else deepest_path(tree))
