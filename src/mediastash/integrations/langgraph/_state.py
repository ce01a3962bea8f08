"""Graph state values to lean values and back: LangChain message payloads through the one payload route.

A synchronous pass finds the hosts (``_sites``) in a list of root values:
dicts, lists and tuples at any depth, and ``BaseMessage`` objects (their
``content``). Every candidate payload goes, as the dict the walker's JSON
route recognises, into one ``externalize_with`` call: the walker decides
inline-or-store once per distinct payload, uses the known-blob cache and
stores each new one once. The values are then rebuilt copy-on-write: only the
containers on the way to a host are copied, the caller's objects are never
changed, and a value with nothing moved is returned as it is. Restoring
collects every envelope's markers into one ``restore_collecting`` call.

A host whose envelope names a place that no longer holds its placeholder was
edited after a plain read: the edit is kept (saving drops the stale slot and
looks at the new value like any other; restoring leaves it as it is).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.messages import BaseMessage

from mediastash.errors import InvalidArgumentError, MalformedMarker, TreeDepthError, UnsupportedMarkerFormat
from mediastash.integrations.kit.envelope import ENVELOPE_KEY, Slot, Step, is_envelope, make_envelope, parse_envelope
from mediastash.integrations.kit.host_slots import Joined, Seals, joined_key, read_back
from mediastash.integrations.kit.host_slots import where as _where
from mediastash.integrations.kit.placeholders import how_to_open, is_placeholder, placeholder_text
from mediastash.integrations.kit.recognisers import payload_size
from mediastash.integrations.langgraph._sites import Site, dict_sites, message_text_site
from mediastash.markers import MARKER_KEY
from mediastash.reference_keys import ReferenceKey
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import externalize_with

__all__ = ['Joined', 'envelope_markers', 'lean_values', 'restore_values']

MAX_DEPTH: Final = 200
"""Containers nested deeper than this in a state value raise ``TreeDepthError`` (a cycle ends here too)."""

HOW_TO_OPEN: Final = how_to_open('checkpoint', 'OffloadingCheckpointSaver', to_get_it=False)

Transform = Callable[[Any], Any]


class _Here:
    """The trie key of a host's own change (never a dict key, list index or attribute name)."""


_HERE: Final = _Here()


@dataclass(slots=True)
class _Host:
    path: tuple[Step, ...]
    node: Any
    sites: list[Site] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    """Saving: the live slots the host keeps; restoring: the slots to read back."""
    rewrite: bool = False
    """The host's envelope must be rewritten even if nothing new moves (it named a stale slot)."""


class _Finder:
    """Finds hosts: payload sites when saving, envelopes when restoring."""

    def __init__(self, threshold: int, *, saving: bool, every_slot: bool = False, seals: Seals | None = None) -> None:
        self.threshold = threshold
        self.saving = saving
        self.seals = seals
        """Saving: checks that every envelope met in the input was sealed by this wrapper (else it raises)."""
        self.every_slot = every_slot
        """Restoring: keep stale slots too (``envelope_markers``: gc keeps every blob an envelope names)."""
        self.hosts: list[_Host] = []

    def roots(self, values: Sequence[object]) -> list[_Host]:
        for index, value in enumerate(values):
            try:
                self.visit(value, (index,))
            except RecursionError:  # a recursion limit set lower than the walk needs
                raise TreeDepthError(limit=None, path=_where((index,)), serializer='the Python stack') from None
        return self.hosts

    def visit(self, node: object, path: tuple[Step, ...]) -> None:
        if len(path) > MAX_DEPTH:
            raise TreeDepthError(limit=MAX_DEPTH, path=_where(path[:-1]))
        if isinstance(node, BaseMessage):
            self.message(node, path)
        elif isinstance(node, dict):
            self.mapping(node, path)
        elif isinstance(node, list | tuple):
            for index, item in enumerate(node):
                if isinstance(item, dict | list | tuple | BaseMessage):
                    self.visit(item, (*path, index))

    def message(self, message: BaseMessage, path: tuple[Step, ...]) -> None:
        kwargs = message.additional_kwargs
        stale = False
        if isinstance(kwargs, dict) and ENVELOPE_KEY in kwargs:
            found = self.enveloped(message, kwargs[ENVELOPE_KEY], path, ('additional_kwargs', ENVELOPE_KEY))
            if found is None or found[0]:
                return  # passed on as it is, or its content is still the placeholder
            stale = True  # the content was edited: the envelope goes, the content is looked at afresh
        content = message.content
        if self.saving:
            site = message_text_site(content, self.threshold)
            if site is not None or stale:
                self.hosts.append(_Host(path, message, [] if site is None else [site], rewrite=stale))
        if isinstance(content, list):
            self.visit(content, (*path, 'content'))

    def mapping(self, node: dict[Any, Any], path: tuple[Step, ...]) -> None:
        skip: set[object] = set()
        if ENVELOPE_KEY in node:
            skip.add(ENVELOPE_KEY)
            found = self.enveloped(node, node[ENVELOPE_KEY], path, (ENVELOPE_KEY,))
            if found is not None and self.saving:
                live, stale = found
                kept = {slot.path for slot in live}
                sites = [site for site in dict_sites(node, self.threshold) if site.path not in kept]
                if sites or stale:
                    self.hosts.append(_Host(path, node, sites, live, rewrite=stale))
                skip.update(site.path[0] for site in sites)
        elif self.saving:
            sites = dict_sites(node, self.threshold)
            if sites:
                self.hosts.append(_Host(path, node, sites))
                skip.update(site.path[0] for site in sites)
        for key, value in node.items():
            if key not in skip and isinstance(value, dict | list | tuple | BaseMessage):
                self.visit(value, (*path, key))

    def enveloped(
        self, host: object, envelope: object, path: tuple[Step, ...], at: tuple[str, ...]
    ) -> tuple[list[Slot], bool] | None:
        """A host that already carries an envelope: its live slots, and whether any slot was stale.

        Saving, ``None`` means the host is passed on as it is: an envelope this
        reader cannot parse (a read refuses it loudly). Restoring, a damaged or
        unknown envelope raises, and the host is recorded with the slots to read.
        """
        where = _where((*path, *at))
        if self.saving:
            if not is_envelope(envelope):
                raise InvalidArgumentError(
                    f'the state value at {where}',
                    f'free of the key {ENVELOPE_KEY!r}, which mediastash reserves for its envelopes',
                    envelope,
                )
            try:
                slots = _checked_slots(host, envelope, where)
            except (MalformedMarker, UnsupportedMarkerFormat):
                return None
            if self.seals is not None:
                self.seals.vouch(envelope, where)
        else:
            slots = _checked_slots(host, envelope, where)
        live = [slot for slot in slots if self.every_slot or _holds_placeholder(slot, _value_at(host, slot.path))]
        if not self.saving:
            self.hosts.append(_Host(path, host, slots=live))
        return live, len(live) < len(slots)


# -- slots and their places ----------------------------------------------------------------------


def _holds_placeholder(slot: Slot, value: object) -> bool:
    """Whether ``value`` (the string now at the slot's place) is still the slot's placeholder, not an edit."""
    return is_placeholder(value, slot.what, slot.uri, HOW_TO_OPEN)


def _checked_slots(host: object, envelope: object, where: str) -> list[Slot]:
    slots = parse_envelope(envelope, where, markers=True)
    if isinstance(host, BaseMessage) and (len(slots) != 1 or slots[0].path != ('content',)):
        raise MalformedMarker("a message's envelope holds one slot for its own content", path=where)
    return slots


def _value_at(host: object, path: tuple[Step, ...]) -> object:
    """The value at a slot's ``path`` inside ``host`` (``None`` where the path no longer leads)."""
    if isinstance(host, BaseMessage):
        return host.content if path == ('content',) else None
    node = host
    for step in path:
        if type(node) is not dict:
            return None
        node = node.get(step)
    return node


# -- rebuilding copy-on-write ------------------------------------------------------------------


def _plant(trie: dict[Any, Any], path: tuple[Step, ...], transform: Transform) -> None:
    node = trie
    for step in path:
        node = node.setdefault(step, {})
    node[_HERE] = transform


def _rebuild(node: Any, trie: dict[Any, Any]) -> Any:
    """``node`` with every change of ``trie`` applied (children first, then the node's own)."""
    new = node
    children = [(step, sub) for step, sub in trie.items() if step is not _HERE]
    if children:
        if isinstance(node, BaseMessage):
            new = node.model_copy(update={step: _rebuild(getattr(node, step), sub) for step, sub in children})
        elif isinstance(node, dict):
            new = node.copy() if type(node) is dict else copy.copy(node)
            for step, sub in children:
                new[step] = _rebuild(node[step], sub)
        else:
            items = list(node)
            for step, sub in children:
                items[step] = _rebuild(node[step], sub)
            if type(node) is list:
                new = items
            elif isinstance(node, list):
                new = copy.copy(node)
                new[:] = items
            elif type(node) is tuple:
                new = tuple(items)
            else:
                new = type(node)(*items)  # a named tuple
    transform = trie.get(_HERE)
    return new if transform is None else transform(new)


def _apply(values: Sequence[object], trie: dict[Any, Any]) -> list[Any]:
    out = list(values)
    for index, sub in trie.items():
        out[index] = _rebuild(values[index], sub)
    return out


def _set_at(host: dict[Any, Any], path: tuple[Step, ...], value: object) -> None:
    """Set ``value`` at ``path`` inside a (copied) host, copying the nested dicts on the way."""
    node = host
    for step in path[:-1]:
        inner = node.get(step)
        if type(inner) is not dict:
            raise MalformedMarker(f'an envelope slot path leads through {step!r}, which is not a dict here')
        node[step] = node = dict(inner)
    if not isinstance(node.get(path[-1]), str):
        raise MalformedMarker(f'an envelope slot path ends at {path[-1]!r}, which holds no placeholder text')
    node[path[-1]] = value


def _with_kwarg(message: BaseMessage, content: object, key: str, value: object) -> BaseMessage:
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != key}
    if value is not None:
        kwargs[key] = value
    return message.model_copy(update={'content': content, 'additional_kwargs': kwargs})


# -- saving --------------------------------------------------------------------------------------


def _placeholder(site: Site, slot: Slot) -> str:
    return placeholder_text(slot.what, slot.uri, payload_size(site), HOW_TO_OPEN)


def _lean_host(moved: list[tuple[Site, Slot]], kept: list[Slot], seal: Callable[[dict[str, Any]], str]) -> Transform:
    """The host with ``moved`` payloads replaced by placeholders, enveloped with ``kept`` and their slots."""

    def transform(host: Any) -> Any:
        slots = [*kept, *(slot for _, slot in moved)]
        if isinstance(host, BaseMessage):
            if not moved:
                return _with_kwarg(host, host.content, ENVELOPE_KEY, None)
            ((site, slot),) = moved
            return _with_kwarg(host, _placeholder(site, slot), ENVELOPE_KEY, make_envelope([slot], seal))
        new = host.copy() if type(host) is dict else copy.copy(host)
        for site, slot in moved:
            _set_at(new, site.path, _placeholder(site, slot))
        if slots:
            new[ENVELOPE_KEY] = make_envelope(slots, seal)
        else:
            new.pop(ENVELOPE_KEY, None)
        return new

    return transform


async def lean_values(
    values: Sequence[object],
    media_store: MediaStore,
    options: WalkOptions,
    joined: Joined | None = None,
    *,
    reference_key: ReferenceKey,
) -> list[Any]:
    """``values`` with their large message payloads stored and replaced by placeholders and envelopes.

    ``joined`` learns each moved string (see ``restore_values``). Every
    envelope written is sealed under ``reference_key``; an envelope already
    in ``values`` (a plain read written back) must carry such a seal for
    ``media_store``'s namespace, else ``UnvouchedEnvelopeError`` (nothing moves).
    """
    seals = Seals.for_store(reference_key, media_store)
    hosts = _Finder(options.threshold_bytes, saving=True, seals=seals).roots(values)
    if not hosts:
        return list(values)
    lean = await externalize_with([site.synthetic() for host in hosts for site in host.sites], media_store, options)
    results = iter(lean)
    trie: dict[Any, Any] = {}
    for host in hosts:
        moved: list[tuple[Site, Slot]] = []
        for site in host.sites:
            marker = next(results)
            if marker.get(MARKER_KEY) is True:  # else the walker kept it inline (small, or not canonical base64)
                slot = Slot(site.path, marker, site.prefix)
                moved.append((site, slot))
                if joined is not None:
                    joined.put(joined_key(slot), site.whole, len(site.whole))
        if moved or host.rewrite:
            _plant(trie, host.path, _lean_host(moved, host.slots, seals.seal))
    return _apply(values, trie) if trie else list(values)


# -- restoring -----------------------------------------------------------------------------------


def _full_host(slots: list[Slot], payloads: list[str]) -> Transform:
    def transform(host: Any) -> Any:
        if isinstance(host, BaseMessage):
            content = payloads[0] if slots else host.content  # no live slot: the edited content stays
            return _with_kwarg(host, content, ENVELOPE_KEY, None)
        new = host.copy() if type(host) is dict else copy.copy(host)
        del new[ENVELOPE_KEY]
        for slot, payload in zip(slots, payloads, strict=True):
            _set_at(new, slot.path, payload)
        return new

    return transform


async def restore_values(
    values: Sequence[object], media_store: MediaStore, options: WalkOptions, joined: Joined | None = None
) -> list[Any]:
    """``values`` with every envelope's payloads read back (verified) and put in place, envelopes removed.

    ``joined`` remembers each restored string; a slot found there needs no
    store read (its blob was read and verified, or written, by this process).
    """
    hosts = _Finder(options.threshold_bytes, saving=False).roots(values)
    if not hosts:
        return list(values)
    payloads = await read_back([(host.path, host.slots) for host in hosts], media_store, options, joined)
    trie: dict[Any, Any] = {}
    for host, strings in zip(hosts, payloads, strict=True):
        _plant(trie, host.path, _full_host(host.slots, strings))
    return _apply(values, trie)


def envelope_markers(value: object) -> Iterator[dict[str, Any]]:
    """Every marker the envelopes in ``value`` hold, checked like a restore checks them (for ``mediastash.gc``).

    Stale slots count too: gc keeps every blob an envelope names.
    """
    for host in _Finder(0, saving=False, every_slot=True).roots([value]):
        for slot in host.slots:
            yield slot.marker
