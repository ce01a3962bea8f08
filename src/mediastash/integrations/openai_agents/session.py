"""``OffloadingSession``: media offloading for any OpenAI Agents SDK session (``SessionABC``)."""

from __future__ import annotations

import inspect
from typing import Any, Final, Unpack

from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings

from mediastash._checks import non_negative_int
from mediastash._lru import BoundedLRU
from mediastash.integrations.kit.host_slots import PayloadRoute
from mediastash.integrations.openai_agents._items import Joined, lean_items, restore_items
from mediastash.reference_keys import ReferenceKey, reference_key_of
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import WalkKeywords, WalkSettings, options_from_keywords

__all__ = ['OffloadingSession']

DEFAULT_RECENT_BYTES: Final = 64 << 20
"""Default budget for payload strings this wrapper wrote or read, so reading them again needs no store read."""


class OffloadingSession(WalkSettings, SessionABC):
    """Wraps an OpenAI Agents SDK session so large payloads of its items live in ``media_store``.

    ``add_items`` moves ``input_image`` / ``input_file`` / ``input_audio``
    base64 and ``data:`` URLs, and large text (message content, text parts,
    tool call outputs), out of the items before ``inner`` stores them;
    ``get_items`` and ``pop_item`` put them back, so a read returns exactly
    the items added. A payload's place holds a visible placeholder naming the
    blob and its host an envelope, so ``inner`` read on its own keeps every
    item. ``clear_session`` is ``inner``'s (blobs stay: ``mediastash.gc``
    collects them with ``SessionRoot`` or ``SQLiteSessionRoot``);
    ``session_id`` and ``session_settings`` are ``inner``'s.

    ``options``: the walk settings as one ``WalkOptions`` (``threshold_bytes``,
    ``known_blobs``, ``max_concurrency`` and ``structured`` as for
    ``externalize_media``). The separate ``threshold_bytes=`` /
    ``known_blobs=`` / ``max_concurrency=`` keywords still work for one
    release, with a ``DeprecationWarning``.
    ``recent_bytes`` bounds a memory of the payload strings this wrapper
    wrote or read (0, or ``known_blobs=False``, turns it off): the runner
    reads the whole history every turn, and takes them from there.

    ``reference_key`` (bytes of at least 32, or a ``ReferenceKey``; ``None``:
    this process's random key) seals every envelope written. ``add_items``
    keeps an envelope it is handed (a plain read of ``inner`` written back,
    or an item a client sent) only if this key sealed it for
    ``media_store``'s namespace, else it raises ``UnvouchedEnvelopeError``
    and adds nothing (``docs/security.md``).
    """

    def __init__(
        self,
        inner: SessionABC,
        *,
        media_store: MediaStore,
        options: WalkOptions | None = None,
        recent_bytes: int = DEFAULT_RECENT_BYTES,
        reference_key: ReferenceKey | bytes | None = None,
        **walk_keywords: Unpack[WalkKeywords],
    ) -> None:
        if not all(callable(getattr(inner, name, None)) for name in _METHODS):
            raise TypeError(f'inner must be an OpenAI Agents session (SessionABC), got a {type(inner).__name__}')
        self._walk_options = options_from_keywords('OffloadingSession', options, walk_keywords)
        non_negative_int('recent_bytes', recent_bytes)
        self.reference_key = reference_key_of(reference_key)
        """Seals the envelopes written; an envelope handed to ``add_items`` must carry its seal."""
        self.recent_bytes = recent_bytes
        self._joined: Joined | None = (
            BoundedLRU(max_cost=recent_bytes) if recent_bytes and self.known_blobs is not False else None
        )
        self.inner = inner
        self.media_store = media_store

    @property
    def session_id(self) -> str:
        session_id: str = self.inner.session_id
        return session_id

    @session_id.setter
    def session_id(self, value: str) -> None:
        self.inner.session_id = value

    @property
    def session_settings(self) -> SessionSettings | None:
        settings: SessionSettings | None = self.inner.session_settings
        return settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | None) -> None:
        self.inner.session_settings = value

    def _route(self) -> PayloadRoute:
        return PayloadRoute(self.media_store, self._walk_options, self._joined, self.reference_key)

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[TResponseInputItem]:
        """``inner``'s items (its ``limit`` rule: the latest N in order), payloads read back."""
        found = await _call(self.inner.get_items, wrapper, limit)
        return await restore_items(found, self._route())

    async def add_items(self, items: list[TResponseInputItem], *, wrapper: Any = None) -> None:
        """Store the payloads of ``items`` and give ``inner`` the lean items (the caller's are never changed)."""
        lean = await lean_items(items, self._route())
        await _call(self.inner.add_items, wrapper, lean)

    async def pop_item(self, *, wrapper: Any = None) -> TResponseInputItem | None:
        """Remove ``inner``'s most recent item and return it with its payloads read back (its blobs stay)."""
        found = await _call(self.inner.pop_item, wrapper)
        if found is None:
            return None
        (item,) = await restore_items([found], self._route())
        restored: TResponseInputItem = item
        return restored

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """``inner``'s ``clear_session`` (blobs stay: they may be shared; garbage collection removes them)."""
        await _call(self.inner.clear_session, wrapper)


_METHODS: Final = ('get_items', 'add_items', 'pop_item', 'clear_session')


async def _call(method: Any, wrapper: Any, *args: Any) -> Any:
    """``method(*args)``, passing the run context ``wrapper`` on only when the SDK gave one and ``method`` takes it."""
    takes = wrapper is not None and _takes_wrapper(method)
    result = method(*args, wrapper=wrapper) if takes else method(*args)
    return await result if inspect.isawaitable(result) else result


def _takes_wrapper(method: Any) -> bool:
    try:
        parameter = inspect.signature(method).parameters.get('wrapper')
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
