"""What one model request sends for each stored blob, for ``MediaUrlSwapper``.

A request's media are *places*: a large ``BinaryContent`` (bytes in hand) or a
reference part (a URL part whose URL is the blob's ``media+sha256://`` URI,
from ``restore='references'``). Each distinct blob is one ``StoredBlob``,
the question ``MediaUrlSwapper.resolve_blob`` answers with a ``BlobAnswer``
(a URL, the bytes, or nothing to change); each place then builds the part it
sends from that answer, keeping its own identifier and vendor metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import BinaryContent, ModelMessage

from mediastash.integrations.pydantic_ai._identifiers import IdentifierMemo
from mediastash.integrations.pydantic_ai._model_kinds import MediaKind
from mediastash.integrations.pydantic_ai._references import (
    ReferencePart,
    kind_of_reference,
    reference_items,
    reference_uri,
)
from mediastash.integrations.pydantic_ai._typed_payloads import TypedPayload

__all__ = ['BlobAnswer', 'BlobKey', 'Place', 'StoredBlob', 'UrlPartMaker', 'reference_places']

BlobKey = tuple[str, str, MediaKind, bool]
"""``(uri, media_type, kind, has_bytes)``: what makes two places the same question."""

UrlPartMaker = Callable[[str, MediaKind, str, str, dict[str, Any] | None], ReferencePart]
"""``(url, kind, media_type, identifier, vendor_metadata)`` to the URL part sent (``MediaUrlSwapper.url_part``)."""


@dataclass(frozen=True, slots=True)
class StoredBlob:
    """One stored blob a request is about to carry: the input of ``MediaUrlSwapper.resolve_blob``."""

    uri: str
    """The blob's ``media+sha256://`` URI (it is in the media store)."""
    media_type: str
    kind: MediaKind
    has_bytes: bool
    """``True``: the request holds the bytes (a ``BinaryContent``); ``False``: only a reference part."""
    filename: str
    """A file name for the store's URL (``Content-Disposition``): identifier and extension."""

    @property
    def key(self) -> BlobKey:
        return (self.uri, self.media_type, self.kind, self.has_bytes)


@dataclass(frozen=True, slots=True)
class BlobAnswer:
    """How a blob goes to the model: by ``url``, or inline as ``data`` (its verified bytes)."""

    url: str | None = None
    data: bytes | None = None


@dataclass(slots=True)
class Place:
    """Where one medium sits in the request, with its blob's URI and the object found there."""

    item: TypedPayload
    kind: MediaKind
    uri: str
    source: BinaryContent | ReferencePart

    def blob(self, identifiers: IdentifierMemo) -> StoredBlob:
        has_bytes = isinstance(self.source, BinaryContent)
        identifier = self.identifier(identifiers)
        return StoredBlob(self.uri, self.source.media_type, self.kind, has_bytes, _filename(identifier, self.source))

    def identifier(self, identifiers: IdentifierMemo) -> str:
        source = self.source
        if isinstance(source, BinaryContent):
            return identifiers.identifier(source, self.uri)  # hashing a payload once per URI, not per request
        return source.identifier

    def sent(
        self, answer: BlobAnswer | None, identifiers: IdentifierMemo, url_part: UrlPartMaker
    ) -> BinaryContent | ReferencePart | None:
        """The part this place sends for ``answer`` (``None``: leave it as it is)."""
        if answer is None:
            return None
        identifier = self.identifier(identifiers)
        if answer.url is not None:
            return url_part(answer.url, self.kind, self.source.media_type, identifier, self.source.vendor_metadata)
        if answer.data is not None:
            return self.inline(answer.data, identifier)
        return None

    def inline(self, data: bytes, identifier: str) -> BinaryContent:
        """A ``BinaryContent`` of ``data`` with this place's media type, identifier and vendor metadata."""
        source = self.source
        return BinaryContent(
            data=data, media_type=source.media_type, identifier=identifier, vendor_metadata=source.vendor_metadata
        )


def _filename(identifier: str, source: BinaryContent | ReferencePart) -> str:
    try:
        return f'{identifier}.{source.format}'
    except (KeyError, ValueError):  # a media type pydantic-ai has no extension for
        return identifier


def reference_places(messages: list[ModelMessage]) -> list[Place]:
    """Every reference part that is a user prompt's or tool return's ``content`` or an item of its list."""
    return [
        _place(index, ('parts', j, 'content') if k is None else ('parts', j, 'content', k), item)
        for index, j, k, item in reference_items(messages)
    ]


def _place(message: int, path: tuple[int | str, ...], part: ReferencePart) -> Place:
    item = TypedPayload(message, path, False, b'', 0, part.media_type, part)
    return Place(item, kind_of_reference(part), reference_uri(part), part)
