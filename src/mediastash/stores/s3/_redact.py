"""Keep credentials out of the SDK's debug logs.

At DEBUG level botocore logs every request's headers and canonical request,
which include the session token (``X-Amz-Security-Token``): it must be sent,
so it cannot be kept from the SDK. The store registers the secrets it was
given, and a filter on the SDK's loggers replaces them with ``***`` before any
handler sees the record. (A password in ``endpoint_url`` needs no filter: the
store strips it before the SDK sees the endpoint.)
"""

from __future__ import annotations

import logging
import threading

__all__ = ['REDACTED', 'redact_in_sdk_logs']

REDACTED = '***'
_SDK_LOGGERS = (
    'botocore.auth',
    'botocore.client',
    'botocore.credentials',
    'botocore.endpoint',
    'botocore.hooks',
    'botocore.httpsession',
    'botocore.parsers',
    'botocore.retryhandler',
    'botocore.utils',
    'aiobotocore.endpoint',
    'aiobotocore.httpsession',
    'aiobotocore.credentials',
)


class _RedactSecrets(logging.Filter):
    """Rewrites a record's message with every registered secret replaced by ``***``."""

    def __init__(self) -> None:
        super().__init__('mediastash-redact')
        self.secrets: set[str] = set()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        with self.lock:
            secrets = tuple(self.secrets)
        if not secrets:
            return True
        message = record.getMessage()
        redacted = message
        for secret in secrets:
            redacted = redacted.replace(secret, REDACTED)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True


_filter = _RedactSecrets()
_installed = False


def redact_in_sdk_logs(*secrets: str | None) -> None:
    """Register ``secrets`` (empty values ignored) and make sure the filter sits on the SDK's loggers."""
    global _installed
    with _filter.lock:
        _filter.secrets.update(secret for secret in secrets if secret)
        if _installed:
            return
        _installed = True
    for name in _SDK_LOGGERS:
        logging.getLogger(name).addFilter(_filter)
