"""The integration kit: one envelope format (written), the older host formats (read), one placeholder rule."""

from __future__ import annotations

from typing import Any

import pytest

from mediastash.errors import MalformedMarker, UnsupportedMarkerFormat
from mediastash.integrations.kit import ENVELOPE_FORMAT, READ_FORMATS, Slot, is_placeholder, placeholder_text
from mediastash.integrations.kit.envelope import is_envelope, make_envelope, parse_envelope
from mediastash.integrations.kit.placeholders import how_to_open, part_placeholder_text

URI = 'media+sha256://' + 'ab' * 32
MARKER = {'kind': 'binary', 'media_type': 'image/png', '__harness_external_media__': True, 'uri': URI}
CLOSING = how_to_open('session', 'OffloadingSession', to_get_it=False)


def sealed(envelope: dict[str, Any]) -> str:
    return 'ms1.test'


def test_the_written_format_round_trips_and_leaves_out_an_empty_prefix() -> None:
    slots = [Slot(('image_url',), MARKER, 'data:image/png;base64,'), Slot(('parts', 2), {'content': 'x'})]
    envelope = make_envelope(slots, sealed)
    assert envelope['format'] == ENVELOPE_FORMAT == 'mediastash-envelope-v2' and envelope['seal'] == 'ms1.test'
    assert envelope['slots'][1] == {'path': ['parts', 2], 'lean': {'content': 'x'}}
    assert parse_envelope(envelope, '$', markers=False) == slots
    with pytest.raises(MalformedMarker, match='path is a non-empty list of keys'):
        parse_envelope(envelope, '$', markers=True)  # a host envelope's slots hold markers at dict keys


@pytest.mark.parametrize('old', ['mediastash-envelope-v1', 'mediastash-langgraph-v1'])
def test_the_older_host_formats_are_read(old: str) -> None:
    assert old in READ_FORMATS
    value = {'format': old, 'slots': [{'path': ['base64'], 'prefix': '', 'marker': MARKER}], 'seal': 'ms1.x'}
    (slot,) = parse_envelope(value, '$', markers=True)
    assert slot == Slot(('base64',), MARKER, '') and slot.uri == URI and slot.what == 'image/png'
    with pytest.raises(MalformedMarker, match='path, prefix and marker'):
        parse_envelope({**value, 'slots': [{'path': ['base64'], 'lean': MARKER}]}, '$', markers=True)


@pytest.mark.parametrize(
    ('value', 'error'),
    [
        ({'format': 'mediastash-envelope-v3', 'slots': []}, UnsupportedMarkerFormat),
        ({'format': 'mediastash-langgraph-v2', 'slots': []}, UnsupportedMarkerFormat),
        ({'format': ENVELOPE_FORMAT, 'slots': []}, MalformedMarker),
        ({'format': ENVELOPE_FORMAT, 'slots': [{'path': ['a']}]}, MalformedMarker),
        ({'format': ENVELOPE_FORMAT, 'slots': [{'path': 'a', 'lean': 1}]}, MalformedMarker),
        ({'format': ENVELOPE_FORMAT, 'slots': [{'path': [True], 'lean': 1}]}, MalformedMarker),
        ({'format': ENVELOPE_FORMAT, 'slots': [{'path': ['a'], 'lean': 1, 'prefix': 5}]}, MalformedMarker),
        ({'format': ENVELOPE_FORMAT, 'slots': [{'path': ['a'], 'lean': 1}], 'extra': 1}, MalformedMarker),
        ({'format': 'something else', 'slots': [{'path': ['a'], 'lean': 1}]}, MalformedMarker),
    ],
)
def test_anything_else_is_refused_naming_where(value: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error, match=r"\$\['x'\]"):
        parse_envelope(value, "$['x']", markers=False)


def test_only_a_dict_stamped_with_a_known_family_claims_to_be_an_envelope() -> None:
    assert is_envelope({'format': 'mediastash-envelope-v9'}) and is_envelope({'format': 'mediastash-langgraph-v1'})
    assert not is_envelope({'format': 'other'}) and not is_envelope('mediastash-envelope-v2')


def test_a_placeholder_matches_with_any_size_label_and_nothing_else() -> None:
    text = placeholder_text('image/png', URI, 2048, CLOSING)
    assert text == f'[mediastash placeholder: image/png, 2.0 KiB stored as {URI}; {CLOSING}]'
    assert CLOSING == "not included here: read this session through mediastash's OffloadingSession"
    assert is_placeholder(text, 'image/png', URI, CLOSING)
    assert is_placeholder(placeholder_text('image/png', URI, None, CLOSING), 'image/png', URI, CLOSING)
    assert is_placeholder(text.replace('2.0 KiB', '17 B'), 'image/png', URI, CLOSING)
    assert not is_placeholder(text.replace('2.0 KiB', 'big'), 'image/png', URI, CLOSING)
    assert not is_placeholder(text[:-1] + ' (seen)]', 'image/png', URI, CLOSING)
    assert not is_placeholder(text, 'image/jpeg', URI, CLOSING)
    assert not is_placeholder(text, 'image/png', URI, how_to_open('history', 'OffloadingStepStore'))
    whole = part_placeholder_text('file', [URI, URI], CLOSING)
    assert whole == f'[mediastash placeholder: a file part holding stored media ({URI}); {CLOSING}]'
