"""Hypothesis strategies for adversarial JSON-shaped message trees (not collected as tests)."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from mediastash import media_uri_for
from mediastash.markers import (
    ESCAPED_KEYS,
    FORMAT_KEY,
    LITERAL_KEY,
    MARKER_KEY,
    TEXT_KEY,
    URI_KEY,
    URLSAFE_KEY,
    URLSAFE_STAMP,
)

RESERVED = [MARKER_KEY, TEXT_KEY, URI_KEY, URLSAFE_KEY, FORMAT_KEY, ESCAPED_KEYS, LITERAL_KEY]
COMMON = ['kind', 'data', 'content', 'part_kind', 'uri', 'media_type', 'identifier', 'metadata', 'value']

# Characters include unpaired surrogates (category Cs), which JSON strings can carry.
any_text = st.text(st.characters(exclude_categories=()), max_size=40)
keys = st.one_of(st.sampled_from(RESERVED + COMMON), any_text)
stamps = st.sampled_from(
    ['literal-v1', 'escaped-keys-v1', URLSAFE_STAMP, 'other', '', 'literal', 'escaped-keys', 'base64-urlsafe-v2']
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False),
    any_text,
    stamps,
)


@st.composite
def base64_payload(draw: st.DrawFn) -> str:
    raw = draw(st.binary(max_size=64))
    style = draw(st.sampled_from(['standard', 'urlsafe', 'noncanonical', 'junk', 'mixed']))
    if style == 'standard':
        return base64.b64encode(raw).decode()
    if style == 'urlsafe':
        return base64.urlsafe_b64encode(raw).decode()
    if style == 'noncanonical':
        return base64.b64encode(raw).decode() + 'QR=='
    if style == 'mixed':
        return base64.b64encode(raw).decode() + '-_+/'
    return draw(any_text)


KNOWN_PAYLOADS = (b'', b'hello', 'h\u00e9\ud800'.encode('utf-8', 'surrogatepass'), b'\xff\x00\xfe')
"""Blobs a test can put in its store first, so marker-like dicts that reference them really resolve."""

KNOWN_URIS = [media_uri_for(payload) for payload in KNOWN_PAYLOADS]
_SHAPE_KEYS = ('kind', 'part_kind', 'data', 'content', MARKER_KEY, TEXT_KEY, URI_KEY, 'uri', URLSAFE_KEY)


@st.composite
def marker_likes(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    """Flagged dicts near the marker shape: binary and text markers over known blobs, and near misses."""
    node: dict[str, Any] = draw(st.dictionaries(keys, children, max_size=2))
    for key in _SHAPE_KEYS:
        node.pop(key, None)
    target = draw(st.sampled_from(['binary', 'text', 'near miss']))
    if target == 'binary':
        node['kind'] = 'binary'
        maybe: dict[str, st.SearchStrategy[Any]] = {'part_kind': st.just('text'), 'content': any_text}
        maybe[URLSAFE_KEY] = st.just(URLSAFE_STAMP)
        maybe[TEXT_KEY] = st.sampled_from(['true', False])
    elif target == 'text':
        node[TEXT_KEY] = True
        if draw(st.booleans()):
            node['part_kind'] = draw(st.sampled_from(['text', 'thinking', 'tool-return']))
        else:
            node['kind'] = draw(st.sampled_from(['text-content', 'structured-content']))
        maybe = {'kind': st.sampled_from(['binary', 'text-content', None]), 'data': any_text}
    else:
        maybe = {
            'kind': st.sampled_from(['binary', 'text-content', 'structured-content', 'image', None, ['binary']]),
            'part_kind': st.sampled_from(['text', 5, None]),
            'data': any_text,
            'content': any_text,
            TEXT_KEY: st.sampled_from([True, 'true']),
            URLSAFE_KEY: st.just(URLSAFE_STAMP),
        }
    for key, values in maybe.items():
        if key not in node and draw(st.booleans()):
            node[key] = draw(values)
    reference = st.one_of(st.sampled_from(KNOWN_URIS), st.sampled_from(KNOWN_URIS), any_text, st.integers())
    where = draw(st.sampled_from(['authoritative', 'mirrored', 'own uri', 'legacy', 'none']))
    if where != 'legacy' and where != 'none':
        node[URI_KEY] = draw(reference)
    if where == 'mirrored':
        node['uri'] = node[URI_KEY]
    elif where in ('own uri', 'legacy'):
        node['uri'] = draw(reference)
    if draw(st.booleans()):
        node[FORMAT_KEY] = draw(stamps)
        node[ESCAPED_KEYS] = {MARKER_KEY: draw(children)}
    node[MARKER_KEY] = True
    return node


def special_nodes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    extra = st.dictionaries(keys, children, max_size=3)
    binary = st.builds(
        lambda data, media_type, rest: {**rest, 'kind': 'binary', 'data': data, 'media_type': media_type},
        base64_payload(),
        st.one_of(st.just('image/png'), st.none(), st.integers()),
        extra,
    )
    text_part = st.builds(
        lambda content, kind, rest: {**rest, 'part_kind': kind, 'content': content},
        any_text,
        st.sampled_from(['text', 'thinking', 'tool-return', 'user-prompt']),
        extra,
    )
    text_content = st.builds(
        lambda content, kind, rest: {**rest, 'kind': kind, 'content': content},
        any_text,
        st.sampled_from(['text-content', 'structured-content']),
        extra,
    )
    lookalike = st.builds(
        lambda flag, uri, rest: {**rest, MARKER_KEY: flag, 'uri': uri},
        st.one_of(st.booleans(), st.just('true'), st.integers(0, 1)),
        any_text,
        extra,
    )
    literal_like = st.builds(
        lambda payload, stamp: {LITERAL_KEY: payload, FORMAT_KEY: stamp},
        st.one_of(extra, children),
        stamps,
    )
    escape_like = st.builds(
        lambda stash, stamp, rest: {**rest, ESCAPED_KEYS: stash, FORMAT_KEY: stamp},
        st.one_of(st.dictionaries(st.sampled_from(RESERVED), children, max_size=3), children),
        stamps,
        extra,
    )
    return st.one_of(binary, text_part, text_content, lookalike, marker_likes(children), literal_like, escape_like)


json_trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(keys, children, max_size=5),
        special_nodes(children),
    ),
    max_leaves=30,
)
