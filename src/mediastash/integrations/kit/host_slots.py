"""What every host-envelope integration does with hosts and slots: find them, seal them, read them back.

LangGraph state values and OpenAI Agents session items differ in which dicts
hold payloads (``HostFinder.sites``) and how a host is rebuilt, not in this:
one pass finds the hosts at any depth (payload sites when saving, envelopes
when restoring), a slot counts only while its place holds exactly its
placeholder (``kit.placeholders``); envelopes written are sealed under the
wrapper's reference key for the store's namespace and an envelope met in input
is honoured only when its seal verifies (``Seals``); a restore reads every live
slot's payload in one ``restore_collecting`` call, each string remembered in a
bounded cache so a repeated read needs no store round trip (``read_back``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from mediastash._lru import BoundedLRU
from mediastash.errors import InvalidArgumentError, MalformedMarker, TreeDepthError, UnsupportedMarkerFormat
from mediastash.integrations._envelope_seal import SEAL_KEY, refuse_unvouched, seal_envelope, store_namespace
from mediastash.integrations.kit.envelope import ENVELOPE_FORMAT, ENVELOPE_KEY, Slot, Step, is_envelope, parse_envelope
from mediastash.integrations.kit.placeholders import is_placeholder
from mediastash.integrations.kit.recognisers import Site
from mediastash.markers import MARKER_KEY, URLSAFE_KEY, URLSAFE_STAMP
from mediastash.reference_keys import ReferenceKey
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import externalize_with, restore_collecting

__all__ = [
    'MAX_DEPTH',
    'Host',
    'HostFinder',
    'Joined',
    'PayloadRoute',
    'Seals',
    'joined_key',
    'moved_hosts',
    'read_back',
    'set_at',
    'where',
]

MAX_DEPTH: Final = 200
"""Containers nested deeper than this in a root value raise ``TreeDepthError`` (a cycle ends here too)."""

Joined = BoundedLRU[tuple[str, str, str], str]
"""Restored payload strings (``data:`` head included) by ``joined_key``: a repeated read skips the store."""


def where(path: tuple[Step, ...]) -> str:
    """A path from the root values, as errors name it: ``$[0]['content'][1]``."""
    return '$' + ''.join(f'[{step}]' if isinstance(step, int) else f'[{step!r}]' for step in path)


def joined_key(slot: Slot) -> tuple[str, str, str]:
    """The cache key of a slot's restored string: its URI, kept head, and form (text, standard or URL-safe base64)."""
    if slot.text:
        return slot.uri, slot.prefix, 'text'
    urlsafe = slot.marker.get(URLSAFE_KEY) == URLSAFE_STAMP
    return slot.uri, slot.prefix, 'urlsafe' if urlsafe else 'standard'


@dataclass(frozen=True, slots=True)
class Seals:
    """Seals envelopes written under ``key`` for a store's namespace, and checks those met in data to save."""

    key: ReferenceKey
    namespace: str | None

    @classmethod
    def for_store(cls, key: ReferenceKey, media_store: MediaStore) -> Seals:
        return cls(key, store_namespace(media_store))

    def seal(self, envelope: dict[str, Any]) -> str:
        return seal_envelope(self.key, envelope, self.namespace)

    def vouch(self, envelope: object, at: str) -> None:
        """Raise ``UnvouchedEnvelopeError`` at ``at`` unless this key sealed ``envelope``."""
        assert isinstance(envelope, dict)
        named = {k: v for k, v in envelope.items() if k != SEAL_KEY}
        refuse_unvouched(self.key, named, self.namespace, envelope.get(SEAL_KEY), at)


@dataclass(frozen=True, slots=True)
class PayloadRoute:
    """What a host-envelope wrapper's saves and restores go through: its store, its walk options, the recent
    strings it remembers (``joined``, ``None`` for none) and the key sealing its envelopes.

    Built for each call from the wrapper's current settings, so one set later is honoured.
    """

    media_store: MediaStore
    options: WalkOptions
    joined: Joined | None
    reference_key: ReferenceKey

    def seals(self) -> Seals:
        """The seals of envelopes written to (and vouched for from) this route's store namespace."""
        return Seals.for_store(self.reference_key, self.media_store)


async def read_back(hosts: Sequence[tuple[tuple[Step, ...], Sequence[Slot]]], route: PayloadRoute) -> list[list[str]]:
    """The payload string (``data:`` head included) of every slot of each ``(host path, live slots)``.

    Slots found in ``joined`` need no store read (their blob was read and
    verified, or written, by this process); the others are restored in one
    batch, verified, and remembered.
    """
    joined = route.joined
    keys = [joined_key(slot) for _, slots in hosts for slot in slots]
    known = [None if joined is None else joined.get(key) for key in keys]
    markers = [slot.marker for _, slots in hosts for slot in slots]
    wanted = [marker for marker, hit in zip(markers, known, strict=True) if hit is None]
    restored: list[Any] = []
    if wanted:
        restored, _ = await restore_collecting(wanted, route.media_store, route.options)
    results = iter(restored)
    found = iter(zip(keys, known, strict=True))
    out: list[list[str]] = []
    for path, slots in hosts:
        payloads: list[str] = []
        for slot in slots:
            key, hit = next(found)
            if hit is None:
                payload = next(results).get('content' if slot.text else 'data')
                if not isinstance(payload, str):
                    raise MalformedMarker('an envelope slot marker did not restore to a payload', path=where(path))
                hit = slot.prefix + payload
                if joined is not None:
                    joined.put(key, hit, len(hit))
            payloads.append(hit)
        out.append(payloads)
    return out


@dataclass(slots=True)
class Host:
    """A dict (or message) whose payloads move, or whose envelope is read, at ``path`` from the root values."""

    path: tuple[Step, ...]
    node: Any
    sites: list[Site] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    """Saving: the live slots of an envelope written back (kept); restoring: the slots to read back."""
    rewrite: bool = False
    """Saving: the host's envelope named a slot whose place was edited, so it is rewritten without it."""


class HostFinder:
    """Finds hosts in root values: payload sites when saving, envelopes when restoring.

    A subclass names the payload sites of a dict (``sites``), the closing words
    of its placeholders, what errors call a root value, and which containers
    the walk enters; ``other`` handles any other container (a LangChain message).
    """

    closing: ClassVar[str]
    """The placeholders' closing words (``placeholders.how_to_open``)."""
    noun: ClassVar[str]
    """What an error calls a root value: ``'the state value'``, ``'the session item'``."""
    sequences: ClassVar[tuple[type, ...]] = (list,)
    """The sequence types entered."""
    containers: ClassVar[tuple[type, ...]] = (dict, list)
    """The types of values the walk enters (dicts, ``sequences`` and those ``other`` handles)."""

    def __init__(self, threshold: int, *, saving: bool, every_slot: bool = False, seals: Seals | None = None) -> None:
        self.threshold = threshold
        self.saving = saving
        self.seals = seals
        """Saving: checks that every envelope met in the input was sealed by this wrapper (else it raises)."""
        self.every_slot = every_slot
        """Restoring: keep stale slots too (gc keeps every blob an envelope names)."""
        self.hosts: list[Host] = []

    def sites(self, node: dict[str, Any]) -> list[Site]:
        """The payload sites of one dict (empty for a dict that holds none)."""
        raise NotImplementedError

    def other(self, node: object, path: tuple[Step, ...]) -> None:
        """A value of ``containers`` that is neither a dict nor one of ``sequences``."""

    def roots(self, values: Sequence[object]) -> list[Host]:
        for index, value in enumerate(values):
            try:
                self.visit(value, (index,))
            except RecursionError:  # a recursion limit set lower than the walk needs
                raise TreeDepthError(limit=None, path=where((index,)), serializer='the Python stack') from None
        return self.hosts

    def visit(self, node: object, path: tuple[Step, ...]) -> None:
        if len(path) > MAX_DEPTH:
            raise TreeDepthError(limit=MAX_DEPTH, path=where(path[:-1]))
        if isinstance(node, dict):
            self.mapping(node, path)
        elif isinstance(node, self.sequences):
            assert isinstance(node, list | tuple)
            for index, item in enumerate(node):
                if isinstance(item, self.containers):
                    self.visit(item, (*path, index))
        else:
            self.other(node, path)

    def mapping(self, node: dict[Any, Any], path: tuple[Step, ...]) -> None:
        skip: set[object] = set()
        if ENVELOPE_KEY in node:
            skip.add(ENVELOPE_KEY)
            found = self.enveloped(node, node[ENVELOPE_KEY], path, (ENVELOPE_KEY,))
            if found is not None and self.saving:
                live, rewrite = found
                kept = {slot.path for slot in live}
                sites = [site for site in self.sites(node) if site.path not in kept]
                if sites or rewrite:
                    self.hosts.append(Host(path, node, sites, live, rewrite=rewrite))
                skip.update(site.path[0] for site in sites)
        elif self.saving:
            sites = self.sites(node)
            if sites:
                self.hosts.append(Host(path, node, sites))
                skip.update(site.path[0] for site in sites)
        for key, value in node.items():
            if key not in skip and isinstance(value, self.containers):
                self.visit(value, (*path, key))

    def enveloped(
        self, host: object, envelope: object, path: tuple[Step, ...], at: tuple[str, ...]
    ) -> tuple[list[Slot], bool] | None:
        """A host that already carries an envelope: its live slots, and whether the envelope must be rewritten
        (a slot was stale, or it is of an older format: what is saved is written in today's).

        Saving, ``None`` means the host is passed on as it is: an envelope this
        reader cannot parse (a read refuses it loudly); a sealed envelope is
        required. Restoring, a damaged or unknown envelope raises, and the host
        is recorded with the slots to read.
        """
        at_where = where((*path, *at))
        if self.saving:
            if not is_envelope(envelope):
                raise InvalidArgumentError(
                    f'{self.noun} at {at_where}',
                    f'free of the key {ENVELOPE_KEY!r}, which mediastash reserves for its envelopes',
                    envelope,
                )
            try:
                slots = self.checked_slots(host, envelope, at_where)
            except (MalformedMarker, UnsupportedMarkerFormat):
                return None
            if self.seals is not None:
                self.seals.vouch(envelope, at_where)
        else:
            slots = self.checked_slots(host, envelope, at_where)
        live = [
            slot for slot in slots if self.every_slot or self.holds_placeholder(slot, self.value_at(host, slot.path))
        ]
        if not self.saving:
            self.hosts.append(Host(path, host, slots=live))
        older = isinstance(envelope, dict) and envelope.get('format') != ENVELOPE_FORMAT
        return live, older or len(live) < len(slots)

    def checked_slots(self, host: object, envelope: object, at: str) -> list[Slot]:
        """The slots of a host's envelope (each one payload's marker at dict keys), or an error naming ``at``."""
        return parse_envelope(envelope, at, markers=True)

    def value_at(self, host: object, path: tuple[Step, ...]) -> object:
        """The value at a slot's ``path`` inside ``host`` (``None`` where the path no longer leads)."""
        node = host
        for step in path:
            if type(node) is not dict:
                return None
            node = node.get(step)
        return node

    def holds_placeholder(self, slot: Slot, value: object) -> bool:
        """Whether ``value`` (the string now at the slot's place) is still its placeholder, not an edit."""
        return is_placeholder(value, slot.what, slot.uri, self.closing)


def set_at(host: dict[Any, Any], path: tuple[Step, ...], value: object) -> None:
    """Set ``value`` at a slot's ``path`` inside a (copied) host, copying the nested dicts on the way."""
    node = host
    for step in path[:-1]:
        inner = node.get(step)
        if type(inner) is not dict:
            raise MalformedMarker(f'an envelope slot path leads through {step!r}, which is not a dict here')
        node[step] = node = dict(inner)
    if not isinstance(node.get(path[-1]), str):
        raise MalformedMarker(f'an envelope slot path ends at {path[-1]!r}, which holds no placeholder text')
    node[path[-1]] = value


async def moved_hosts(
    finder: HostFinder, values: Sequence[object], route: PayloadRoute
) -> list[tuple[Host, list[tuple[Site, Slot]]]]:
    """The hosts of ``values`` to rebuild when saving, each with the sites the walker moved and their new slots.

    Every candidate of every host goes into one ``externalize_with`` call;
    ``joined`` learns each moved string, so the next read of it needs no store
    read. A host with an envelope to rewrite (a stale slot) is listed even if
    nothing moved.
    """
    hosts = finder.roots(values)
    if not hosts:
        return []
    sites = [site.synthetic() for host in hosts for site in host.sites]
    results = iter(await externalize_with(sites, route.media_store, route.options))
    joined = route.joined
    out: list[tuple[Host, list[tuple[Site, Slot]]]] = []
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
            out.append((host, moved))
    return out
