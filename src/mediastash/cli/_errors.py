"""The CLI's own error: a problem the user can fix, shown as one line."""

from __future__ import annotations

__all__ = ['UserError']


class UserError(Exception):
    """A problem the user can fix (bad URL, missing file, server down): printed as one line, exit code 1."""
