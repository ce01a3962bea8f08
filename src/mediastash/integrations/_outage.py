"""``StoreOutage``: remembers that the media store failed, so ``MediaUrls`` stops waiting for it on every request.

An unreachable store costs each call the SDK's retries and timeouts (seconds).
After a failure, requests go inline at once for ``cooldown`` seconds; then one
request (never several at once) probes the store again. One WARNING per
outage, a DEBUG line for each later failure, an INFO line when the store
answers again. Only the error's type is logged, never its message (a driver's
message can hold an endpoint, a bucket or a presigned URL).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Final, Literal

from mediastash.errors import InvalidArgumentError

__all__ = ['DEFAULT_STORE_COOLDOWN', 'Gate', 'StoreOutage', 'cooldown_seconds']

DEFAULT_STORE_COOLDOWN: Final = 30.0
"""Seconds requests skip a store that just failed before one request tries it again."""

Gate = Literal['use', 'probe', 'skip']
"""What a request does with the store: use it, use it as the one probe after a cool-down, or skip it."""


def cooldown_seconds(value: object) -> float:
    """``store_cooldown`` as seconds: a finite non-negative number or a ``timedelta``, else a typed error."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or not seconds >= 0
    ):
        raise InvalidArgumentError('store_cooldown', 'a finite non-negative number of seconds or a timedelta', value)
    return float(seconds)


class StoreOutage:
    """The state of one ``MediaUrlSwapper``'s store: answering, cooling down after a failure, or being probed."""

    def __init__(self, cooldown: float, clock: Callable[[], float], logger: logging.Logger) -> None:
        self.cooldown = cooldown
        self.clock = clock
        self.logger = logger
        self.since: float | None = None
        """When the outage began (``None``: the store is answering)."""
        self.retry_at = 0.0
        self.probing = False

    @property
    def down(self) -> bool:
        return self.since is not None

    def gate(self) -> Gate:
        """Whether the next request may call the store (``'probe'``: it is the one that tries after the cool-down)."""
        if self.since is None:
            return 'use'
        if self.probing or self.clock() < self.retry_at:
            return 'skip'
        self.probing = True
        return 'probe'

    def probe_done(self) -> None:
        self.probing = False

    def failed(self, operation: str, error: str, count: int) -> None:
        """A store call failed (``error``: the error's type name) and the request goes inline: the outage starts
        (WARNING) or goes on (DEBUG)."""
        now = self.clock()
        self.retry_at = now + self.cooldown
        if self.since is not None:
            self.logger.debug(
                'MediaUrls: the media store still fails (%s during %s); inline for another %g s',
                error,
                operation,
                self.cooldown,
            )
            return
        self.since = now
        self.logger.warning(
            'MediaUrls: the media store failed during %s (%s); this model request carries its %d media part(s) '
            'inline, and so do the requests of the next %g s, after which one request tries the store again',
            operation,
            error,
            count,
            self.cooldown,
        )

    def answered(self) -> None:
        """A store call succeeded: an outage in progress ends (INFO)."""
        if self.since is None:
            return
        self.logger.info(
            'MediaUrls: the media store answers again after %.1f s; requests use it again', self.clock() - self.since
        )
        self.since = None
