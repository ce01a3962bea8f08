"""Cap the SDK's retry backoff without replacing its retry logic.

botocore's standard retry mode decides *whether* to retry (5xx, SlowDown,
connection resets, lost responses) and waits up to 20 s between attempts; its
config has no knob for the wait. ``cap_retry_backoff`` re-installs the SDK's own
standard retry handler on the client's event hooks and clips the delay it
returns, so a store can retry quickly where that is wanted (tests, low-latency
private endpoints) while every retry decision stays the SDK's.
"""

from __future__ import annotations

from typing import Any

__all__ = ['cap_retry_backoff']

_NEEDS_RETRY = 'needs-retry.s3'
_UNIQUE_ID = 'retry-config-s3'


def cap_retry_backoff(client: Any, *, max_attempts: int, max_backoff: float) -> None:
    """Make ``client`` (an aiobotocore S3 client in standard retry mode) wait at most ``max_backoff`` s per retry."""
    from aiobotocore.retries import standard

    events = client.meta.events
    events.unregister(_NEEDS_RETRY, unique_id=_UNIQUE_ID)
    handler = standard.register_retry_handler(client, max_attempts=max_attempts)
    events.unregister(_NEEDS_RETRY, unique_id=_UNIQUE_ID)

    async def needs_retry(**kwargs: Any) -> float | None:
        delay: float | None = await handler.needs_retry(**kwargs)
        return None if delay is None else min(delay, max_backoff)

    events.register(_NEEDS_RETRY, needs_retry, unique_id=_UNIQUE_ID)
