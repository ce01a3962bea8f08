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
from typing import Any, Final

from mediastash.integrations.kit.envelope import ENVELOPE_KEY, Step, make_envelope
from mediastash.integrations.kit.host_slots import HostFinder, Joined, PayloadRoute, moved_hosts, read_back, set_at
from mediastash.integrations.kit.placeholders import how_to_open, placeholder_text
from mediastash.integrations.kit.recognisers import Site, compose, payload_size

__all__ = ['HOW_TO_OPEN', 'Joined', 'item_markers', 'lean_items', 'restore_items']

HOW_TO_OPEN: Final = how_to_open('session', 'OffloadingSession', to_get_it=False)


SITES: Final = compose('openai-responses', 'chat-messages', 'anthropic', 'google', 'data-url')
"""The recognisers of a session item's dicts, in order (the first one to name a string wins)."""


def _sites(node: dict[str, Any], threshold: int) -> list[Site]:
    """The payload sites of one dict of a session item (empty for a dict that holds none)."""
    return SITES.sites(node, threshold)


class _Finder(HostFinder):
    """Finds hosts in session items: the dicts, at any depth, that hold payloads or envelopes."""

    closing = HOW_TO_OPEN
    noun = 'the session item'

    def sites(self, node: dict[str, Any]) -> list[Site]:
        return _sites(node, self.threshold)


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


async def lean_items(items: Sequence[Any], route: PayloadRoute) -> list[Any]:
    """``items`` with their large payloads stored in ``route``'s store, replaced by placeholders and envelopes
    (``route.joined`` learns each).

    Every envelope written is sealed under ``route.reference_key``. An envelope
    already in ``items`` (a plain read written back) must carry such a seal
    for the store's namespace, else ``UnvouchedEnvelopeError`` and
    nothing moves; its slots whose place still holds exactly their
    placeholder are kept, edited ones dropped, and a large payload the edit
    put in moves out like any other.
    """
    seals = route.seals()
    finder = _Finder(route.options.threshold_bytes, saving=True, seals=seals)
    changes: dict[tuple[Step, ...], dict[str, Any]] = {}
    for host, moved in await moved_hosts(finder, items, route):
        new = dict(_host_at(items, host.path))
        for site, slot in moved:
            set_at(new, site.path, _placeholder(site, slot.uri))
        slots = [*host.slots, *(slot for _, slot in moved)]
        if slots:
            new[ENVELOPE_KEY] = make_envelope(slots, seals.seal)
        else:
            new.pop(ENVELOPE_KEY, None)
        changes[host.path] = new
    return _replaced(items, _nested_last(changes)) if changes else list(items)


async def restore_items(items: Sequence[Any], route: PayloadRoute) -> list[Any]:
    """``items`` with every envelope's payloads read back (verified) and put in place, envelopes removed.

    A slot whose place a plain reader edited keeps the edit. ``route.joined`` remembers each restored string; a
    slot found there needs no store read (its blob was read and verified, or written, by this process).
    """
    hosts = _Finder(route.options.threshold_bytes, saving=False).roots(items)
    if not hosts:
        return list(items)
    live = [(host.path, host.slots) for host in hosts]
    payloads = await read_back(live, route)
    changes: dict[tuple[Step, ...], dict[str, Any]] = {}
    for (path, slots), strings in zip(live, payloads, strict=True):
        new = dict(_host_at(items, path))
        del new[ENVELOPE_KEY]
        for slot, string in zip(slots, strings, strict=True):
            set_at(new, slot.path, string)
        changes[path] = new
    return _replaced(items, _nested_last(changes))


def item_markers(items: Sequence[Any]) -> Iterator[dict[str, Any]]:
    """Every marker the envelopes in ``items`` hold, checked like a restore checks them (for ``mediastash.gc``)."""
    for host in _Finder(0, saving=False, every_slot=True).roots(items):
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
