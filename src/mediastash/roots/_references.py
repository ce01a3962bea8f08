"""``referenced_uris``: the blobs a lean JSON tree refers to, found without any store."""

from __future__ import annotations

from mediastash.errors import UnsupportedMarkerFormat
from mediastash.markers import LITERAL_KEY, MARKER_KEY, URI_KEY, literal_payload, marker_shape
from mediastash.uri import is_media_uri

__all__ = ['add_references', 'referenced_uris']


def referenced_uris(tree: object, *, inside_literals: bool = False) -> set[str]:
    """Every ``media+sha256://`` URI the markers of ``tree`` refer to.

    A marker is what ``restore_media`` would fetch: a dict ``markers.marker_shape``
    accepts. Its authoritative ``URI_KEY`` counts, and so does its plain ``uri``
    when that is a media URI too (a caller's own ``uri`` kept beside the
    reference; keeping its blob is the safe side). Envelopes of
    ``OffloadingStepStore`` are found as they are: their lean JSON sits in the
    message's ``metadata``. A caller dict kept inside a literal wrapper is data,
    not a reference, unless ``inside_literals=True``: then it counts too, which
    is right for data that passed through two marker layers (an inner store that
    externalizes on its own wraps the outer layer's markers). Walks iteratively,
    so any nesting depth works; touches no store.
    """
    found: set[str] = set()
    add_references(tree, found, inside_literals=inside_literals)
    return found


def add_references(tree: object, found: set[str], *, inside_literals: bool = False) -> None:
    """Add the URIs ``tree`` refers to to ``found`` (see ``referenced_uris``)."""
    stack: list[object] = [tree]
    pop = stack.pop
    extend = stack.extend
    add = found.add
    while stack:
        node = pop()
        if isinstance(node, dict):
            if len(node) == 2 and LITERAL_KEY in node:
                try:
                    payload = literal_payload(node)
                except UnsupportedMarkerFormat:
                    payload = None  # a wrapper from a newer format: walk all of it, markers included
                if payload is not None:
                    if inside_literals:
                        stack.append(payload)
                    else:
                        extend(payload.values())
                    continue
            if node.get(MARKER_KEY) is True and marker_shape(node) is not None:
                reference = node.get(URI_KEY)
                if isinstance(reference, str) and is_media_uri(reference):
                    add(reference)
                mirror = node.get('uri')
                if isinstance(mirror, str) and mirror != reference and is_media_uri(mirror):
                    add(mirror)
            extend(node.values())
        elif isinstance(node, list | tuple):
            extend(node)
