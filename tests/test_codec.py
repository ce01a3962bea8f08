"""The canonical-base64 check agrees with the obvious (slow) definition."""

from __future__ import annotations

import base64
import binascii

from hypothesis import given, settings
from hypothesis import strategies as st

from mediastash.codec import bytes_to_text, decode_canonical_base64, encode_base64, text_to_bytes


def reference(data: str) -> tuple[bytes, bool] | None:
    """Decode with the standard library, then require that re-encoding gives the same string."""
    urlsafe = '-' in data or '_' in data
    if urlsafe and ('+' in data or '/' in data):
        return None
    try:
        raw = base64.b64decode(data, altchars=b'-_' if urlsafe else None, validate=True)
    except (binascii.Error, ValueError):
        return None
    encoded = base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)
    return (raw, urlsafe) if encoded.decode() == data else None


base64ish = st.text(alphabet='ABCQRYZabz019+/-_=', max_size=24)
mutated = st.builds(
    lambda raw, urlsafe, cut, extra: (
        (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()[: cut or None] + extra
    ),
    st.binary(max_size=40),
    st.booleans(),
    st.integers(-3, 0),
    st.sampled_from(['', '=', '==', 'Q', 'QR==', 'A===', ' ', '\n', 'é']),
)


@settings(max_examples=2000, deadline=None)
@given(st.one_of(base64ish, mutated, st.text(max_size=12)))
def test_matches_the_reference_definition(data: str) -> None:
    assert decode_canonical_base64(data) == reference(data)


@given(st.binary(max_size=200), st.booleans())
def test_encode_decode_round_trip(raw: bytes, urlsafe: bool) -> None:
    encoded = encode_base64(raw, urlsafe=urlsafe)
    assert encoded == (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()
    decoded = decode_canonical_base64(encoded)
    assert decoded is not None
    assert decoded[0] == raw


@given(st.text(st.characters(exclude_categories=())))
def test_text_round_trip_with_surrogates(text: str) -> None:
    assert bytes_to_text(text_to_bytes(text)) == text
