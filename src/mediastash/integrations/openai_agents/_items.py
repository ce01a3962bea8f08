"""Session items to lean items and back: OpenAI Responses payloads through the walker's one payload route.

Session items are JSON (``TResponseInputItem`` dicts). A synchronous pass
finds the hosts, dicts at any depth of an item, whose payloads may move, with
the kit's recognisers (``SITES``, from ``integrations.kit.recognisers``):

* ``input_image`` (and ``computer_screenshot``) ``image_url`` as a ``data:`` URL;
* ``input_file`` ``file_data``, a ``data:`` URL or bare base64;
* ``input_audio`` ``input_audio.data`` (base64, media type from ``format``);
* ``input_text`` / ``output_text`` ``text``, a message's string ``content``
  and a tool call output's string ``output`` (``function_call_output`` and
  the other ``*_output`` items), as text;
* Anthropic ``source: {type: base64}`` and Google ``inline_data`` /
  ``inlineData`` blocks, and a ``data:`` URL under any key.

Every candidate goes into one ``externalize_with`` call (inline-or-store
decided once per distinct payload, each stored once); the items are rebuilt
copy-on-write with a placeholder in each moved payload's place and a host
envelope (``integrations.kit.envelope``). Nothing here imports the SDK.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mediastash.errors import InvalidArgumentError, MalformedMarker, TreeDepthError, UnsupportedMarkerFormat
from mediastash.integrations.kit.envelope import ENVELOPE_KEY, Slot, Step, is_envelope, make_envelope, parse_envelope
from mediastash.integrations.kit.host_slots import Joined, Seals, joined_key, read_back
from mediastash.integrations.kit.host_slots import where as _where
from mediastash.integrations.kit.placeholders import how_to_open, is_placeholder, placeholder_text
from mediastash.integrations.kit.recognisers import Site, compose, payload_size
from mediastash.markers import MARKER_KEY
from mediastash.reference_keys import ReferenceKey
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import externalize_with

__all__ = ['HOW_TO_OPEN', 'Joined', 'item_markers', 'lean_items', 'restore_items']

MAX_DEPTH: Final = 200
"""Containers nested deeper than this in an item raise ``TreeDepthError`` (a cycle ends here too)."""

HOW_TO_OPEN: Final = how_to_open('session', 'OffloadingSession', to_get_it=False)


@dataclass(slots=True)
class _Host:
    path: tuple[Step, ...]
    sites: list[Site] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    """Saving: the live slots of an envelope written back (kept); restoring: the envelope's slots."""
    rewrite: bool = False
    """Saving: the host's envelope named a slot whose place was edited, so it is rewritten without it."""


def _holds_placeholder(slot: Slot, value: object) -> bool:
    """Whether ``value`` (the string now at the slot's place) is still the slot's placeholder, not an edit."""
    return is_placeholder(value, slot.what, slot.uri, HOW_TO_OPEN)


SITES: Final = compose('openai-responses', 'chat-messages', 'anthropic', 'google', 'data-url')
"""The recognisers of a session item's dicts, in order (the first one to name a string wins)."""


def _sites(node: dict[str, Any], threshold: int) -> list[Site]:
    """The payload sites of one dict of a session item (empty for a dict that holds none)."""
    return SITES.sites(node, threshold)


class _Finder:
    """Finds hosts: payload sites when saving, envelopes when restoring."""

    def __init__(self, threshold: int, *, saving: bool, seals: Seals | None = None) -> None:
        self.threshold = threshold
        self.saving = saving
        self.seals = seals
        """Saving: checks that every envelope met in the items was sealed by this wrapper (else it raises)."""
        self.hosts: list[_Host] = []

    def items(self, items: Sequence[object]) -> list[_Host]:
        for index, item in enumerate(items):
            try:
                self.visit(item, (index,))
            except RecursionError:
                raise TreeDepthError(limit=None, path=_where((index,)), serializer='the Python stack') from None
        return self.hosts

    def visit(self, node: object, path: tuple[Step, ...]) -> None:
        if len(path) > MAX_DEPTH:
            raise TreeDepthError(limit=MAX_DEPTH, path=_where(path[:-1]))
        if isinstance(node, dict):
            self.mapping(node, path)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, dict | list):
                    self.visit(value, (*path, index))

    def mapping(self, node: dict[str, Any], path: tuple[Step, ...]) -> None:
        skip: set[object] = set()
        if ENVELOPE_KEY in node:
            skip.add(ENVELOPE_KEY)
            where = _where((*path, ENVELOPE_KEY))
            if not self.saving:
                self.hosts.append(_Host(path, slots=parse_envelope(node[ENVELOPE_KEY], where, markers=True)))
            else:
                found = self.written_back(node, where)
                if found is None:
                    return  # an envelope this reader cannot parse: passed on as it is (a read refuses it loudly)
                live, stale = found
                kept = {slot.path for slot in live}
                sites = [site for site in _sites(node, self.threshold) if site.path not in kept]
                if sites or stale:
                    self.hosts.append(_Host(path, sites=sites, slots=live, rewrite=stale))
                skip.update(site.path[0] for site in sites)
        elif self.saving:
            sites = _sites(node, self.threshold)
            if sites:
                self.hosts.append(_Host(path, sites=sites))
                skip.update(site.path[0] for site in sites)
        for key, value in node.items():
            if key not in skip and isinstance(value, dict | list):
                self.visit(value, (*path, key))

    def written_back(self, node: dict[str, Any], where: str) -> tuple[list[Slot], bool] | None:
        """Saving a host that carries an envelope (a plain read written back): its seal checked, its live
        slots (places still holding exactly their placeholder) and whether any slot is stale (edited).

        ``None`` for an envelope of a version this reader does not know (passed on as it is).
        """
        envelope = node[ENVELOPE_KEY]
        if not is_envelope(envelope):
            raise InvalidArgumentError(
                f'the session item at {where}',
                f'free of the key {ENVELOPE_KEY!r}, which mediastash reserves for its envelopes',
                envelope,
            )
        try:
            slots = parse_envelope(envelope, where, markers=True)
        except (MalformedMarker, UnsupportedMarkerFormat):
            return None
        if self.seals is not None:
            self.seals.vouch(envelope, where)
        live = [slot for slot in slots if _holds_placeholder(slot, _get_at(node, slot.path))]
        return live, len(live) < len(slots)


def _set_at(host: dict[Any, Any], path: tuple[Step, ...], value: str) -> None:
    """Set ``value`` at ``path`` inside a (copied) host, copying the nested dicts on the way."""
    node = host
    for step in path[:-1]:
        inner = node.get(step)
        if type(inner) is not dict:
            raise MalformedMarker(f'an envelope slot path leads through {step!r}, which is not a dict here')
        node[step] = node = dict(inner)
    node[path[-1]] = value


def _get_at(host: dict[Any, Any], path: tuple[Step, ...]) -> object:
    node: object = host
    for step in path:
        if type(node) is not dict:
            return None
        node = node.get(step)
    return node


def _with(container: Any, steps: tuple[Step, ...], value: Any) -> Any:
    """A copy of ``container`` holding ``value`` at ``steps``, each container on the way copied (copy-on-write)."""
    if not steps:
        return value
    copied: Any = dict(container) if isinstance(container, dict) else list(container)
    copied[steps[0]] = _with(container[steps[0]], steps[1:], value)
    return copied


def _replaced(items: Sequence[Any], changes: dict[tuple[Step, ...], Any]) -> list[Any]:
    """``items`` with the host at each path of ``changes`` replaced (paths never nest: see ``_nested_last``)."""
    out = list(items)
    for path, host in changes.items():
        index = int(path[0])
        out[index] = _with(out[index], path[1:], host)
    return out


def _placeholder(site: Site, uri: str) -> str:
    what = 'text' if site.text else site.media_type or 'binary data'
    return placeholder_text(what, uri, payload_size(site), HOW_TO_OPEN)


async def lean_items(
    items: Sequence[Any],
    media_store: MediaStore,
    options: WalkOptions,
    joined: Joined | None = None,
    *,
    reference_key: ReferenceKey,
) -> list[Any]:
    """``items`` with their large payloads stored, replaced by placeholders and envelopes (``joined`` learns each).

    Every envelope written is sealed under ``reference_key``. An envelope
    already in ``items`` (a plain read written back) must carry such a seal
    for ``media_store``'s namespace, else ``UnvouchedEnvelopeError`` and
    nothing moves; its slots whose place still holds exactly their
    placeholder are kept, edited ones dropped, and a large payload the edit
    put in moves out like any other.
    """
    seals = Seals.for_store(reference_key, media_store)
    hosts = _Finder(options.threshold_bytes, saving=True, seals=seals).items(items)
    if not hosts:
        return list(items)
    lean = await externalize_with([site.synthetic() for host in hosts for site in host.sites], media_store, options)
    results = iter(lean)
    changes: dict[tuple[Step, ...], dict[str, Any]] = {}
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
            new = dict(_host_at(items, host.path))
            for site, slot in moved:
                _set_at(new, site.path, _placeholder(site, slot.uri))
            slots = [*host.slots, *(slot for _, slot in moved)]
            if slots:
                new[ENVELOPE_KEY] = make_envelope(slots, seals.seal)
            else:
                new.pop(ENVELOPE_KEY, None)
            changes[host.path] = new
    return _replaced(items, _nested_last(changes))


async def restore_items(
    items: Sequence[Any], media_store: MediaStore, options: WalkOptions, joined: Joined | None = None
) -> list[Any]:
    """``items`` with every envelope's payloads read back (verified) and put in place, envelopes removed.

    A slot whose place a plain reader edited keeps the edit. ``joined`` remembers each restored string; a
    slot found there needs no store read (its blob was read and verified, or written, by this process).
    """
    hosts = _Finder(options.threshold_bytes, saving=False).items(items)
    if not hosts:
        return list(items)
    live = [
        (
            host.path,
            [slot for slot in host.slots if _holds_placeholder(slot, _get_at(_host_at(items, host.path), slot.path))],
        )
        for host in hosts
    ]
    payloads = await read_back(live, media_store, options, joined)
    changes: dict[tuple[Step, ...], dict[str, Any]] = {}
    for (path, slots), strings in zip(live, payloads, strict=True):
        new = dict(_host_at(items, path))
        del new[ENVELOPE_KEY]
        for slot, string in zip(slots, strings, strict=True):
            _set_at(new, slot.path, string)
        changes[path] = new
    return _replaced(items, _nested_last(changes))


def item_markers(items: Sequence[Any]) -> Iterator[dict[str, Any]]:
    """Every marker the envelopes in ``items`` hold, checked like a restore checks them (for ``mediastash.gc``)."""
    for host in _Finder(0, saving=False).items(items):
        for slot in host.slots:
            yield slot.marker


def _host_at(items: Sequence[Any], path: tuple[Step, ...]) -> dict[str, Any]:
    node: Any = items
    for step in path:
        node = node[step]
    assert isinstance(node, dict)
    return node


def _nested_last(changes: dict[tuple[Step, ...], dict[str, Any]]) -> dict[tuple[Step, ...], Any]:
    """``changes`` merged so a host inside another changed host is set in that host's new copy."""
    merged: dict[tuple[Step, ...], Any] = {}
    for path in sorted(changes, key=len):
        outer = next((other for other in merged if path[: len(other)] == other), None)
        if outer is None:
            merged[path] = changes[path]
        else:
            merged[outer] = _with(merged[outer], path[len(outer) :], changes[path])
    return merged
