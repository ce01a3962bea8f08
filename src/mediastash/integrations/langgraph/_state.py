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
from typing import Any, Final

from langchain_core.messages import BaseMessage

from mediastash.errors import MalformedMarker
from mediastash.integrations.kit.envelope import ENVELOPE_KEY, Slot, Step, make_envelope
from mediastash.integrations.kit.host_slots import (
    Host,
    HostFinder,
    Joined,
    PayloadRoute,
    moved_hosts,
    read_back,
    set_at,
)
from mediastash.integrations.kit.placeholders import how_to_open, placeholder_text
from mediastash.integrations.kit.recognisers import payload_size
from mediastash.integrations.langgraph._sites import Site, dict_sites, message_text_site

__all__ = ['Joined', 'envelope_markers', 'lean_values', 'restore_values']

HOW_TO_OPEN: Final = how_to_open('checkpoint', 'OffloadingCheckpointSaver', to_get_it=False)

Transform = Callable[[Any], Any]


class _Here:
    """The trie key of a host's own change (never a dict key, list index or attribute name)."""


_HERE: Final = _Here()


class _Finder(HostFinder):
    """Finds hosts in state values: content blocks and message dicts, and ``BaseMessage`` objects."""

    closing = HOW_TO_OPEN
    noun = 'the state value'
    sequences = (list, tuple)
    containers = (dict, list, tuple, BaseMessage)

    def sites(self, node: dict[str, Any]) -> list[Site]:
        return dict_sites(node, self.threshold)

    def other(self, node: object, path: tuple[Step, ...]) -> None:
        if isinstance(node, BaseMessage):
            self.message(node, path)

    def message(self, message: BaseMessage, path: tuple[Step, ...]) -> None:
        kwargs = message.additional_kwargs
        stale = False
        if isinstance(kwargs, dict) and ENVELOPE_KEY in kwargs:
            found = self.enveloped(message, kwargs[ENVELOPE_KEY], path, ('additional_kwargs', ENVELOPE_KEY))
            if found is None:
                return  # passed on as it is
            live, rewrite = found
            if live:  # its content is still the placeholder
                if rewrite and self.saving:  # an envelope of an older format: written again in today's
                    self.hosts.append(Host(path, message, [], live, rewrite=True))
                return
            stale = True  # the content was edited: the envelope goes, the content is looked at afresh
        content = message.content
        if self.saving:
            site = message_text_site(content, self.threshold)
            if site is not None or stale:
                self.hosts.append(Host(path, message, [] if site is None else [site], rewrite=stale))
        if isinstance(content, list):
            self.visit(content, (*path, 'content'))

    def checked_slots(self, host: object, envelope: object, at: str) -> list[Slot]:
        slots = super().checked_slots(host, envelope, at)
        if isinstance(host, BaseMessage) and (len(slots) != 1 or slots[0].path != ('content',)):
            raise MalformedMarker("a message's envelope holds one slot for its own content", path=at)
        return slots

    def value_at(self, host: object, path: tuple[Step, ...]) -> object:
        if isinstance(host, BaseMessage):
            return host.content if path == ('content',) else None
        return super().value_at(host, path)


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
                envelope = make_envelope(kept, seal) if kept else None
                return _with_kwarg(host, host.content, ENVELOPE_KEY, envelope)
            ((site, slot),) = moved
            return _with_kwarg(host, _placeholder(site, slot), ENVELOPE_KEY, make_envelope([slot], seal))
        new = host.copy() if type(host) is dict else copy.copy(host)
        for site, slot in moved:
            set_at(new, site.path, _placeholder(site, slot))
        if slots:
            new[ENVELOPE_KEY] = make_envelope(slots, seal)
        else:
            new.pop(ENVELOPE_KEY, None)
        return new

    return transform


async def lean_values(values: Sequence[object], route: PayloadRoute) -> list[Any]:
    """``values`` with their large message payloads stored in ``route``'s store, replaced by placeholders and envelopes.

    ``route.joined`` learns each moved string (see ``restore_values``). Every
    envelope written is sealed under ``route.reference_key``; an envelope already
    in ``values`` (a plain read written back) must carry such a seal for the
    store's namespace, else ``UnvouchedEnvelopeError`` (nothing moves).
    """
    seals = route.seals()
    finder = _Finder(route.options.threshold_bytes, saving=True, seals=seals)
    trie: dict[Any, Any] = {}
    for host, moved in await moved_hosts(finder, values, route):
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
            set_at(new, slot.path, payload)
        return new

    return transform


async def restore_values(values: Sequence[object], route: PayloadRoute) -> list[Any]:
    """``values`` with every envelope's payloads read back (verified) and put in place, envelopes removed.

    ``route.joined`` remembers each restored string; a slot found there needs no
    store read (its blob was read and verified, or written, by this process).
    """
    hosts = _Finder(route.options.threshold_bytes, saving=False).roots(values)
    if not hosts:
        return list(values)
    payloads = await read_back([(host.path, host.slots) for host in hosts], route)
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
