"""The walker's interface for typed pydantic-ai messages: internal to mediastash, for ``mediastash.integrations``.

Not public API (no stability promise, no API page); it exists so the
integrations adapt a framework's objects and never drive a walk step by step,
and never import the walker's private modules. Importing it needs pydantic-ai.

What it offers, and to whom:

* ``TypedWalker`` (``integrations._typed``, behind ``OffloadingStepStore``):
  ``externalize(messages)`` stores a message list's payloads and returns
  ``LeanMessages`` (each message's lean JSON, whether it changed, the stored
  payload sizes by URI) in one call; ``restore(leans)`` turns lean message
  JSON back into typed messages in one call.
* ``typed_payloads``, ``TypedPayload``, ``with_replaced_contents`` and
  ``TypedBinaries`` (``integrations.media_urls``, ``MediaUrls``): find
  the large payloads of typed messages by the walker's own rule, store the
  binary ones through the one payload route, and build a message list with
  some of them replaced.
* ``IdentifierMemo`` (``MediaUrls``; the typed walk keeps its own):
  ``BinaryContent.identifier`` remembered by blob URI.
* ``binary_marker``, ``known_urlsafe``, ``urlsafe_of`` and ``read_blobs``
  (``integrations._references``, reference parts for zero-download resume):
  the marker a stored ``BinaryContent`` gets, built by the save's own code;
  the URL-safe flag that marker needs; blobs read as a restore reads them.
"""

from mediastash.walker._identifiers import IdentifierMemo
from mediastash.walker._recognise import TypedPayload, typed_payloads, with_replaced_contents
from mediastash.walker._typed import (
    LeanMessages,
    TypedBinaries,
    TypedWalker,
    binary_marker,
    known_urlsafe,
    read_blobs,
    urlsafe_of,
)

__all__ = [
    'IdentifierMemo',
    'LeanMessages',
    'TypedBinaries',
    'TypedPayload',
    'TypedWalker',
    'binary_marker',
    'known_urlsafe',
    'read_blobs',
    'typed_payloads',
    'urlsafe_of',
    'with_replaced_contents',
]
