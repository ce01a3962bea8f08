"""Hypothesis strategies for adversarial JSON-shaped message trees (not collected as tests)."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

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
    return st.one_of(binary, text_part, text_content, lookalike, literal_like, escape_like)


json_trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(keys, children, max_size=5),
        special_nodes(children),
    ),
    max_leaves=30,
)
