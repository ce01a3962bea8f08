"""``mediastash tune``: choose ``threshold_bytes`` on your own histories and store."""

from __future__ import annotations

import argparse

__all__ = ['register']


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add this module's commands (not written yet)."""
