"""Store operations: ``stats``, ``verify``, ``ls``, ``externalize``, ``restore``."""

from __future__ import annotations

import argparse

__all__ = ['register']


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """Add this module's commands (not written yet)."""
