"""How sizes, thresholds and times are written for and read from people.

``parse_size`` is the one reader of sizes: every command-line option and
store URL parameter that takes a byte count goes through it, so ``64KB``
means the same everywhere. Decimal units are powers of 1000 (``KB``, ``MB``,
``GB``), binary units powers of 1024 (``KiB``, ``MiB``, ``GiB``, and the bare
letters ``K``, ``M``, ``G`` as in coreutils); a bare number is bytes.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final

__all__ = [
    'SIZE_FORMS',
    'UNIT_WORDS',
    'SizeSyntaxError',
    'format_bytes',
    'format_seconds',
    'format_threshold',
    'parse_size',
]

_KIB = 1 << 10
_MIB = 1 << 20

SIZE_FORMS: Final = 'a non-negative byte count such as 65536, 64KiB (65,536 bytes) or 64KB (64,000 bytes)'
"""What ``parse_size`` accepts, in the words its errors use."""

_SIZE = re.compile(r'(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)', re.ASCII)
_UNITS: Final = {
    '': 1,
    'b': 1,
    'kb': 1000,
    'mb': 1000**2,
    'gb': 1000**3,
    'k': _KIB,
    'kib': _KIB,
    'm': _MIB,
    'mib': _MIB,
    'g': 1 << 30,
    'gib': 1 << 30,
}
UNIT_WORDS: Final = frozenset(name for name in _UNITS if name)
"""The unit names (lowercase): a command-line word that is only one of these was split from its number."""


class SizeSyntaxError(ValueError):
    """Text that is not a size; the message says what is accepted and never repeats the text."""


def parse_size(text: str) -> int:
    """``'65536'`` -> 65536, ``'64KiB'`` -> 65536, ``'64KB'`` -> 64000, ``'1.5MiB'`` -> 1572864 (see the module doc).

    Case does not matter and a space may separate number and unit (``'4 KiB'``);
    a negative number, an unknown unit or a fraction of a byte raises ``SizeSyntaxError``.
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise SizeSyntaxError(f'expected {SIZE_FORMS}')
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise SizeSyntaxError(
            f'expected {SIZE_FORMS}; the unit is not one of B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB '
            '(powers of 1024)'
        )
    value = Decimal(number) * factor
    if value != value.to_integral_value():
        raise SizeSyntaxError(f'expected {SIZE_FORMS}; the size is not a whole number of bytes')
    return int(value)


def format_threshold(size: int) -> str:
    """A threshold as typed: ``65536`` -> ``'64 KiB'``, ``1048576`` -> ``'1 MiB'``, ``1000`` -> ``'1000 B'``."""
    if size >= _MIB and size % _MIB == 0:
        return f'{size // _MIB} MiB'
    if size >= _KIB and size % _KIB == 0:
        return f'{size // _KIB} KiB'
    return f'{size} B'


def format_bytes(size: float) -> str:
    """An amount of bytes: ``1536`` -> ``'1.5 KiB'`` (binary units, one decimal)."""
    if size < _KIB:
        return f'{int(size)} B'
    value = float(size)
    for unit in ('KiB', 'MiB', 'GiB'):
        value /= _KIB
        if value < _KIB or unit == 'GiB':
            break
    return f'{value:.1f} {unit}'


def format_seconds(seconds: float) -> str:
    """Milliseconds below one second, seconds above."""
    return f'{seconds * 1000:.1f} ms' if seconds < 1 else f'{seconds:.2f} s'
