"""``mediastash gc``: collect blobs no root references (dry run by default)."""

from __future__ import annotations

import argparse

__all__ = ['register']


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add the ``gc`` command (not written yet)."""
