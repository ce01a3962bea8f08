"""How sizes, thresholds and times are written for people (CLI tables, the tune rule text and plot, the demo)."""

from __future__ import annotations

__all__ = ['format_bytes', 'format_seconds', 'format_threshold']

_KIB = 1 << 10
_MIB = 1 << 20


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
