"""Realistic synthetic agent histories, in the JSON form pydantic-ai persists them (see ``mediastash._histories``).

Re-exported here for tests, benchmarks and users; the demo and tune import the
private module so that production code does not depend on the test kit.
"""

from mediastash import _histories
from mediastash._histories import *  # noqa: F403  (every public name, unchanged)

__all__ = _histories.__all__
