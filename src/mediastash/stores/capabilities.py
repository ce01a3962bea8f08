"""What a store can do, declared once: ``StoreCapabilities`` and ``capabilities_of``.

Callers never probe a store with ``getattr``: they ask ``capabilities_of(store)``
and read the optional attributes through the accessors below. This module (and
``BaseMediaStore``, which declares its flags from the primitives a backend
supplies) is the one place that looks at what an object has. A store derived
from ``BaseMediaStore`` or ``WrapperMediaStore`` answers with its own
``capabilities``; a plug-in that only follows the ``MediaStore`` protocol gets
its capabilities derived once per class from the methods it has.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    'CAPABILITY_METHODS',
    'as_class_declares',
    'StoreCapabilities',
    'capabilities_of',
    'class_capabilities',
    'close_store',
    'deletion_generation_of',
    'media_type_of',
    'namespace_name_of',
    'public_url_lifetime_of',
    'require_storage',
    'storage_key_or_none',
    'sweep_temp_files',
    'taken_keywords',
    'unknown_media_type_reason_of',
    'url_planner_of',
    'wrapped_store_of',
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreCapabilities:
    """The optional parts of the store contract one store has (every flag defaults to False).

    Each flag names the methods it promises (``CAPABILITY_METHODS``): a store
    that declares it has them and they work; one that does not may lack them
    (on ``BaseMediaStore`` they are ``None``). ``verifies_reads``: ``get``
    already checks sha256, so the walks do not hash again.
    """

    listing: bool = False
    """``iter_uris``: every stored URI."""
    deletes: bool = False
    """``delete`` and ``delete_many``."""
    stream_writes: bool = False
    """``put_stream``: a blob written from chunks, never whole in memory."""
    stream_reads: bool = False
    """``get_stream``: a blob read in verified chunks."""
    blob_listing: bool = False
    """``iter_blobs``: every blob with its size and age, no bytes read."""
    ranged_listing: bool = False
    """``iter_blobs_in_range``: one digest shard of ``iter_blobs``."""
    guarded_deletes: bool = False
    """``delete_unless_touched``: delete only blobs still older than a time (garbage collection)."""
    touch: bool = False
    """``touch_many``: existence check that also refreshes the age of what it finds."""
    exists_many: bool = False
    """``exists_many``: one batched existence check."""
    stat: bool = False
    """``stat``: size, media type and age of one blob."""
    check: bool = False
    """``check_blob``: one blob and every further copy kept of it checked (what ``verify`` asks per blob)."""
    namespaces: bool = False
    """``namespace(name)`` works (a view confined to one namespace)."""
    erase: bool = False
    """``erase()`` empties a namespace view."""
    media_types: bool = False
    """``media_type_of(uri)`` (sync or async): the recorded media type, for a store without ``stat``."""
    require_storage: bool = False
    """``require_storage()``: refuse storage that does not exist, creating nothing."""
    temp_sweep: bool = False
    """``sweep_temp_files()``: remove old crash leftovers (a disk store's temporary files)."""
    verifies_reads: bool = False
    """``get`` checks sha256 itself."""

    @property
    def streaming(self) -> bool:
        """Both streaming directions (the ``StreamingMediaStore`` protocol)."""
        return self.stream_writes and self.stream_reads

    @property
    def collection(self) -> bool:
        """What garbage collection needs (the ``CollectableMediaStore`` protocol)."""
        return self.blob_listing and self.guarded_deletes and self.touch


CAPABILITY_METHODS: Final[dict[str, tuple[str, ...]]] = {
    'listing': ('iter_uris',),
    'deletes': ('delete', 'delete_many'),
    'stream_writes': ('put_stream',),
    'stream_reads': ('get_stream',),
    'blob_listing': ('iter_blobs',),
    'ranged_listing': ('iter_blobs_in_range',),
    'guarded_deletes': ('delete_unless_touched',),
    'touch': ('touch_many',),
    'exists_many': ('exists_many',),
    'stat': ('stat',),
    'check': ('check_blob',),
    'namespaces': ('namespace',),
    'erase': ('erase',),
    'media_types': ('media_type_of',),
    'require_storage': ('require_storage',),
    'temp_sweep': ('sweep_temp_files',),
}
"""Each capability flag -> the store methods it promises."""

_derived: weakref.WeakKeyDictionary[type, StoreCapabilities] = weakref.WeakKeyDictionary()
"""Capabilities derived per plug-in class; weak, so a class made at run time (a test's, a factory's) is not kept."""
_derived_lock = threading.Lock()


def _has_method(owner: object, name: str) -> bool:
    return callable(getattr(owner, name, None))


def _derive(cls: type) -> StoreCapabilities:
    """The capabilities the methods of ``cls`` show (for a store class that declares none)."""
    flags = {flag: all(_has_method(cls, method) for method in methods) for flag, methods in CAPABILITY_METHODS.items()}
    declared_namespaces = inspect.getattr_static(cls, 'supports_namespaces', None)
    if isinstance(declared_namespaces, bool):
        flags['namespaces'] = flags['namespaces'] and declared_namespaces
    verifies = inspect.getattr_static(cls, 'verifies_reads', None)
    return StoreCapabilities(**flags, verifies_reads=verifies is True)


def _derived_for(cls: type) -> StoreCapabilities:
    found = _derived.get(cls)
    if found is None:
        with _derived_lock:
            found = _derived[cls] = _derive(cls)
    return found


def class_capabilities(cls: type) -> StoreCapabilities:
    """The capabilities of the stores of class ``cls`` (a wrapper's depend on what it wraps: ask the instance)."""
    declared = inspect.getattr_static(cls, 'capabilities', None)
    if isinstance(declared, StoreCapabilities):
        return declared
    return _derived_for(cls)


def capabilities_of(store: object) -> StoreCapabilities:
    """What ``store`` can do: its own ``capabilities`` when it declares them, else derived from its class.

    Every mediastash store (``BaseMediaStore``, ``WrapperMediaStore``)
    declares them; a plug-in following only the ``MediaStore`` protocol gets
    them derived once per class from the methods it has (a value such as
    ``verifies_reads`` or ``supports_namespaces`` read from the instance).
    """
    declared = getattr(store, 'capabilities', None)
    if isinstance(declared, StoreCapabilities):
        return declared
    found = _derived_for(type(store))
    verifies = getattr(store, 'verifies_reads', False) is True
    namespaces = found.namespaces and getattr(store, 'supports_namespaces', True) is True
    if verifies != found.verifies_reads or namespaces != found.namespaces:
        found = dataclasses.replace(found, verifies_reads=verifies, namespaces=namespaces)
    return found


def as_class_declares(capabilities: StoreCapabilities, cls: type) -> StoreCapabilities:
    """``capabilities`` (a wrapper's, from what it wraps) as a subclass ``cls`` changes them: without the flags
    whose methods it sets to ``None`` (how stores said "absent" before flags were declared), and with the
    ``verifies_reads`` it sets (``False`` for a wrapper that changes the bytes ``get`` returns)."""
    changed: dict[str, bool] = {
        flag: False
        for flag, methods in CAPABILITY_METHODS.items()
        if getattr(capabilities, flag) and any(inspect.getattr_static(cls, name, True) is None for name in methods)
    }
    verifies = inspect.getattr_static(cls, 'verifies_reads', None)
    if isinstance(verifies, bool) and verifies != capabilities.verifies_reads:
        changed['verifies_reads'] = verifies
    return dataclasses.replace(capabilities, **changed) if changed else capabilities


# -- the optional attributes callers read --------------------------------------------------


def storage_key_or_none(store: object) -> Hashable | None:
    """``store.storage_key`` when it declares one (see ``known_blobs.storage_key_of``), else ``None``."""
    key: Hashable | None = getattr(store, 'storage_key', None)
    return key


def deletion_generation_of(store: object) -> object:
    """``store.deletion_generation`` (changes whenever a blob of its storage is deleted), else ``None``."""
    generation: object = getattr(store, 'deletion_generation', None)
    return generation


def public_url_lifetime_of(store: object) -> float | None:
    """Seconds a URL from ``store.public_url`` stays valid; ``None`` when it does not expire or is not said."""
    lifetime = _said(store, 'public_url_lifetime')
    return float(lifetime) if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) else None


def unknown_media_type_reason_of(store: object) -> str:
    """Why a blob of ``store`` may have no recorded media type (its ``unknown_media_type_reason``)."""
    reason = _said(store, 'unknown_media_type_reason')
    return reason if isinstance(reason, str) else f'{store!r} does not record media types'


def _said(store: object, name: str) -> object:
    """``store.<name>``: a property or attribute, or what a plain method of that name returns (how a plug-in not
    derived from the base may have written it)."""
    value: object = getattr(store, name, None)
    if inspect.ismethod(value):
        value = value()
    return value


_keywords: weakref.WeakKeyDictionary[type, dict[str, frozenset[str] | None]] = weakref.WeakKeyDictionary()
"""Per store class and method: the keywords the method takes (``None``: any, it has ``**kwargs``)."""


def taken_keywords(store: object, method: str, **keywords: Any) -> dict[str, Any]:
    """``keywords`` without those ``store.<method>`` does not take.

    A plug-in written before a keyword was passed (``touch_many(uris)``
    before ``touch_after`` and ``max_concurrency``) is called as it was then,
    without it, rather than failing with a ``TypeError``. Every mediastash
    store takes them all.
    """
    per_class = _keywords.setdefault(type(store), {})
    if method not in per_class:
        per_class[method] = _keywords_of(getattr(store, method))
    names = per_class[method]
    return keywords if names is None else {name: value for name, value in keywords.items() if name in names}


def _keywords_of(function: Callable[..., Any]) -> frozenset[str] | None:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read: pass everything, as before
        return None
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return None
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(parameter.name for parameter in parameters if parameter.kind in named)


def namespace_name_of(store: object) -> str | None:
    """The namespace ``store`` is confined to; ``None`` for a whole store (or one without namespaces)."""
    name = getattr(store, 'namespace_name', None)
    return name if isinstance(name, str) else None


def wrapped_store_of(store: object) -> object | None:
    """The store a wrapper (counting, caching) hands its calls to (its ``inner``); ``None`` for a backend."""
    inner: object | None = getattr(store, 'inner', None)
    return inner


def url_planner_of(cls: type) -> Callable[..., Any] | None:
    """``cls.plan_from_url`` when the store class has one (every ``BaseMediaStore`` does)."""
    planner = getattr(cls, 'plan_from_url', None)
    return planner if callable(planner) else None


async def close_store(store: object) -> None:
    """``await store.aclose()`` when the store can be closed (the ``MediaStore`` protocol does not require it)."""
    close = getattr(store, 'aclose', None)
    if close is not None:
        await close()


async def require_storage(store: object) -> None:
    """``store.require_storage()`` when it has it: ``StoreNotFoundError`` for storage that does not exist."""
    if capabilities_of(store).require_storage:
        await _call(store, 'require_storage')


async def sweep_temp_files(store: object) -> None:
    """``store.sweep_temp_files()`` (its default age) when the store keeps crash leftovers; else nothing."""
    if capabilities_of(store).temp_sweep:
        await _call(store, 'sweep_temp_files')


async def media_type_of(store: object, uri: str) -> str | None:
    """``store.media_type_of(uri)`` (sync or async) when the store has it; ``None`` otherwise or when unknown."""
    if not capabilities_of(store).media_types:
        return None
    recording: Any = store
    value = recording.media_type_of(uri)
    if inspect.isawaitable(value):
        value = await value
    return value if isinstance(value, str) else None


async def _call(store: object, name: str) -> object:
    method: Callable[[], Awaitable[object]] = getattr(store, name)
    return await method()
