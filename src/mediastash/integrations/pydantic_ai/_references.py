"""Reference parts: stored media as URL parts whose URL is the blob's ``media+sha256://`` URI.

A restore with ``restore='references'`` (``OffloadingStepStore``) reads no
blob for the binary markers a ``BinaryContent`` left in a user prompt or a
tool return: each becomes the matching ``ImageUrl`` / ``AudioUrl`` /
``VideoUrl`` / ``DocumentUrl`` with the URI as ``url`` and the original
``media_type``, ``identifier`` and ``vendor_metadata``. ``MediaUrls``
resolves such parts per request. Saving turns every reference part back into
exactly the marker the original ``BinaryContent`` produced, so a later
``'bytes'`` restore gives the original bytes (``docs/model-urls.md``).

Each reference part's URL carries a seal after its URI
(``media+sha256://<hex>#ms1.<tag>.<mac>``, ``mediastash.reference_keys``): the
restore vouches for it under the reference key, for the store's namespace.
``MediaUrls`` resolves only vouched references, and a save turns only vouched
ones back into markers (the seal never reaches storage); any other
``media+sha256`` URL part is kept as the URL part it is (``docs/security.md``).

The one thing a marker holds that a URL part cannot is the URL-safe stamp;
it depends only on the blob's bytes, so it is remembered here by URI when a
marker is turned into a reference, and found again (known-blob cache, or one
read of the blob) when it is not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeGuard

from pydantic_ai.messages import AudioUrl, DocumentUrl, ImageUrl, ModelMessage, ModelRequest, VideoUrl

from mediastash._lru import BoundedLRU
from mediastash.errors import UnvouchedReferenceError
from mediastash.integrations.pydantic_ai._model_kinds import MediaKind, kind_of_media_type
from mediastash.integrations.pydantic_ai._typed_walk import binary_marker, known_urlsafe, read_blobs, urlsafe_of
from mediastash.markers import MARKER_KEY, URI_KEY, URLSAFE_KEY, URLSAFE_STAMP, marker_shape
from mediastash.reference_keys import ReferenceKey, SealCheck
from mediastash.stores.capabilities import namespace_name_of
from mediastash.stores.protocols import MediaStore
from mediastash.uri import MEDIA_URI_SCHEME, is_media_uri
from mediastash.walker import WalkOptions
from mediastash.walker.internal import TreeCopier

__all__ = [
    'REFERENCE_PART_KINDS',
    'ReferencePart',
    'has_reference_parts',
    'is_reference_part',
    'kind_of_reference',
    'namespace_of',
    'reference_check',
    'reference_items',
    'reference_uri',
    'refuse_unvouched',
    'references_to_markers',
    'split_reference_url',
    'with_reference_parts',
]

ReferencePart = ImageUrl | AudioUrl | VideoUrl | DocumentUrl

REFERENCE_PART_KINDS: Final = frozenset({'user-prompt', 'tool-return'})
"""Request parts whose ``content`` (or an item of its list) becomes a reference part on restore."""

_URL_KIND: Final[dict[MediaKind, str]] = {
    'image': 'image-url',
    'audio': 'audio-url',
    'video': 'video-url',
    'document': 'document-url',
}
_KIND_OF_URL: Final = {url_kind: kind for kind, url_kind in _URL_KIND.items()}
_BINARY_FIELDS: Final = ('media_type', 'vendor_metadata', 'kind', 'identifier')
"""A ``BinaryContent``'s JSON keys without ``data``, in the order pydantic-ai dumps them (the marker keeps it)."""
_MARKER_KEYS: Final = frozenset({*_BINARY_FIELDS, MARKER_KEY, URI_KEY, 'uri', URLSAFE_KEY})
_URL_PART_KEYS: Final = frozenset({'url', 'force_download', 'vendor_metadata', 'kind', 'media_type', 'identifier'})
_URL_CLASSES: Final = (ImageUrl, AudioUrl, VideoUrl, DocumentUrl)

_URI_CHARS: Final = len(MEDIA_URI_SCHEME) + 64
SEAL_SEPARATOR: Final = '#'
"""Between a reference URL's URI and its seal (a URL fragment: never sent by an HTTP client)."""


def split_reference_url(url: object) -> tuple[str, str | None] | None:
    """``(uri, seal)`` of a reference URL (``seal`` ``None`` when it has none), or ``None`` for any other URL.

    A reference URL is exactly a ``media+sha256://`` URI, optionally followed
    by ``#`` and a seal; the seal's form is checked by ``ReferenceKey.check``.
    """
    if not isinstance(url, str):
        return None
    uri = url[:_URI_CHARS]
    if not is_media_uri(uri):
        return None
    if len(url) == _URI_CHARS:
        return uri, None
    if url[_URI_CHARS] != SEAL_SEPARATOR:
        return None
    return uri, url[_URI_CHARS + 1 :]


def namespace_of(media_store: MediaStore) -> str | None:
    """The namespace a store (or a store's namespace view) is confined to; ``None`` for the whole store."""
    return namespace_name_of(media_store)


def reference_check(url: str, key: ReferenceKey, namespace: str | None) -> SealCheck:
    """Whether a reference URL is vouched for in ``namespace`` under ``key`` (``'invalid'`` for a non-reference)."""
    split = split_reference_url(url)
    if split is None:
        return 'invalid'
    uri, seal = split
    return key.check(uri[len(MEDIA_URI_SCHEME) :], namespace, seal)


_urlsafe_by_uri: BoundedLRU[str, bool] = BoundedLRU(max_items=1 << 16)
_lock = threading.Lock()


def _remember_urlsafe(uri: str, urlsafe: bool) -> None:
    with _lock:
        _urlsafe_by_uri.put(uri, urlsafe)


def _remembered_urlsafe(uri: str) -> bool | None:
    with _lock:
        return _urlsafe_by_uri.get(uri)


# -- restoring: markers to reference parts -------------------------------------------------


def _reference_for(node: object, seal: Callable[[str], str]) -> dict[str, Any] | None:
    """The JSON of the reference part standing for a binary marker, or ``None`` when it cannot stand exactly.

    Only a marker with exactly a ``BinaryContent``'s fields qualifies (its
    URI mirror present, a media type one of pydantic-ai's URL parts takes),
    so that saving the reference back rebuilds the same marker; any other
    marker is restored with its bytes.
    """
    if type(node) is not dict or node.get(MARKER_KEY) is not True or not node.keys() <= _MARKER_KEYS:
        return None
    uri = node.get(URI_KEY)
    media_type = node.get('media_type')
    identifier = node.get('identifier')
    vendor_metadata = node.get('vendor_metadata')
    stamp = node.get(URLSAFE_KEY, None)
    if (
        not is_media_uri(uri)
        or node.get('uri') != uri
        or not isinstance(media_type, str)
        or not isinstance(identifier, str)
        or not (vendor_metadata is None or type(vendor_metadata) is dict)
        or stamp not in (None, URLSAFE_STAMP)
        or marker_shape(node) != 'binary'
    ):
        return None
    kind = kind_of_media_type(media_type)
    if kind is None:
        return None
    assert isinstance(uri, str)
    _remember_urlsafe(uri, stamp is not None)
    # force_download: a model reached without MediaUrls downloads instead of sending the URI on, and
    # pydantic-ai refuses the media+sha256 protocol before any request leaves (see docs/model-urls.md).
    return {
        'url': uri + SEAL_SEPARATOR + seal(uri[len(MEDIA_URI_SCHEME) :]),
        'force_download': True,
        'vendor_metadata': vendor_metadata,
        'kind': _URL_KIND[kind],
        'media_type': media_type,
        'identifier': identifier,
    }


def _part_with_references(part: object, seal: Callable[[str], str]) -> object:
    if type(part) is not dict or part.get('part_kind') not in REFERENCE_PART_KINDS:
        return part
    content = part.get('content')
    if type(content) is list:
        items = [_reference_for(item, seal) or item for item in content]
        if all(new is old for new, old in zip(items, content, strict=True)):
            return part
        return {**part, 'content': items}
    reference = _reference_for(content, seal)
    return part if reference is None else {**part, 'content': reference}


def with_reference_parts(
    leans: list[dict[str, Any]], *, media_store: MediaStore, reference_key: ReferenceKey
) -> list[dict[str, Any]]:
    """The lean request messages with each qualifying binary marker of a part's content made a reference part.

    Each reference is sealed under ``reference_key`` for ``media_store``'s
    namespace: only the application's own restores vouch. Containers on the
    way are copied; ``leans`` is not changed. Markers anywhere else (response
    ``FilePart``s, text, nested deeper) stay, and the restore reads their blobs.
    """
    namespace = namespace_of(media_store)

    def seal(digest: str) -> str:
        return reference_key.seal(digest, namespace)

    out: list[dict[str, Any]] = []
    for lean in leans:
        parts = lean.get('parts')
        if lean.get('kind') != 'request' or type(parts) is not list:
            out.append(lean)
            continue
        new_parts = [_part_with_references(part, seal) for part in parts]
        changed = any(new is not old for new, old in zip(new_parts, parts, strict=True))
        out.append({**lean, 'parts': new_parts} if changed else lean)
    return out


# -- saving: reference parts to markers ----------------------------------------------------


def is_reference_part(item: object) -> TypeGuard[ReferencePart]:
    """Whether ``item`` is a URL part whose URL is a ``media+sha256://`` URI (sealed or not: vouching is separate)."""
    return _is_url_class(type(item)) and split_reference_url(item.url) is not None  # type: ignore[attr-defined]


_IS_URL_CLASS: dict[type, bool] = {}


def reference_uri(part: ReferencePart) -> str:
    """The ``media+sha256://`` URI a reference part names (its URL without the seal)."""
    return part.url[:_URI_CHARS]


def kind_of_reference(part: ReferencePart) -> MediaKind:
    """The media kind a reference part's class stands for."""
    return _KIND_OF_URL[part.kind]


def has_reference_parts(message: ModelMessage) -> bool:
    """Whether a request part's ``content`` (or an item of its list) is a reference part."""
    if not isinstance(message, ModelRequest):
        return False
    for part in message.parts:
        content = getattr(part, 'content', None)
        if is_reference_part(content):
            return True
        if isinstance(content, list) and _holds_url_class(content) and any(map(is_reference_part, content)):
            return True
    return False


def _holds_url_class(items: list[Any]) -> bool:
    """Whether any item of ``items`` is a URL part: its distinct types are looked at, not every item (a tool
    output may be a list of thousands of dicts, and every save asks this of the whole history)."""
    return any(_is_url_class(cls) for cls in set(map(type, items)))


def _is_url_class(cls: type) -> bool:
    url_class = _IS_URL_CLASS.get(cls)
    if url_class is None:  # one subclass check per type: the URL parts are ABCs, slow to isinstance
        url_class = _IS_URL_CLASS[cls] = issubclass(cls, _URL_CLASSES)
    return url_class


def refuse_unvouched(messages: list[ModelMessage], key: ReferenceKey, namespace: str | None) -> int:
    """Raise ``UnvouchedReferenceError`` for the first reference part ``key`` does not vouch for in ``namespace``.

    Looks where ``MediaUrls`` resolves references (a user prompt's or tool
    return's ``content``, or an item of its list); returns how many it checked.
    """
    checked = 0
    for index, j, k, item in reference_items(messages):
        checked += 1
        found = reference_check(item.url, key, namespace)
        if found != 'vouched':
            raise UnvouchedReferenceError(message_index=index, part_index=j, item_index=k, reason=found)
    return checked


def reference_items(messages: list[ModelMessage]) -> Iterator[tuple[int, int, int | None, ReferencePart]]:
    """Every reference part that is a user prompt's or tool return's ``content`` (``k`` is ``None``) or an item
    of its list (``k``, its index), as ``(message index, part index, k, part)``: where ``MediaUrls`` resolves."""
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        for j, part in enumerate(message.parts):
            if part.part_kind not in REFERENCE_PART_KINDS:
                continue
            content = getattr(part, 'content', None)
            if is_reference_part(content):
                yield index, j, None, content
            elif isinstance(content, list):
                for k, item in enumerate(content):
                    if is_reference_part(item):
                        yield index, j, k, item


def _is_reference_json(node: dict[str, Any]) -> bool:
    return (
        node.get('kind') in _KIND_OF_URL
        and node.keys() == _URL_PART_KEYS
        and split_reference_url(node.get('url')) is not None
        and isinstance(node.get('media_type'), str)
        and isinstance(node.get('identifier'), str)
    )


class _ToMarkers(TreeCopier):
    """Copies lean JSON; each vouched reference part's JSON becomes an empty dict to hold its marker (filled later).

    A reference the key does not vouch for (unsealed, forged, another
    namespace's) stays the URL part it is: a save must not turn a name
    someone typed into a marker that a later restore would read.
    """

    def __init__(self, key: ReferenceKey, namespace: str | None) -> None:
        self.waiting: list[tuple[dict[str, Any], str, dict[str, Any]]] = []
        self.key = key
        self.namespace = namespace

    def walk_dict(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        if not _is_reference_json(node) or reference_check(node['url'], self.key, self.namespace) != 'vouched':
            return self.copy_fields(node, depth)
        fields = {
            'media_type': node['media_type'],
            'vendor_metadata': node['vendor_metadata'],
            'kind': 'binary',
            'identifier': node['identifier'],
        }
        slot: dict[str, Any] = {}
        self.waiting.append((slot, node['url'][:_URI_CHARS], self.copy_fields(fields, depth)))
        return slot


async def _urlsafe_flags(uris: set[str], media_store: MediaStore, options: WalkOptions) -> dict[str, bool]:
    """Each URI's URL-safe stamp: remembered, in the known-blob cache, or found by reading the blob once."""
    flags: dict[str, bool] = {}
    unknown: dict[str, str | None] = {}
    for uri in uris:
        flag = _remembered_urlsafe(uri)
        if flag is None:
            flag = known_urlsafe(media_store, options, uri)
        if flag is None:
            unknown[uri] = None
        else:
            flags[uri] = flag
    if unknown:
        for uri, raw in (await read_blobs(media_store, options, unknown)).items():
            flags[uri] = urlsafe_of(raw)
            _remember_urlsafe(uri, flags[uri])
    return flags


async def references_to_markers(
    tree: Any, media_store: MediaStore, options: WalkOptions, reference_key: ReferenceKey
) -> tuple[Any, int]:
    """A copy of lean JSON with every vouched reference part's JSON replaced by the marker its bytes would have got.

    Returns the copy and how many parts were replaced (``tree`` itself when
    none). The marker is built by the walker's own code from the part's
    fields, so it equals the marker of the original ``BinaryContent`` (the
    seal is dropped); no blob is read unless its URL-safe stamp is unknown
    in this process. References not vouched for under ``reference_key`` in
    ``media_store``'s namespace stay URL parts.
    """
    walker = _ToMarkers(reference_key, namespace_of(media_store))
    out = walker.walk(tree)
    if not walker.waiting:
        return tree, 0
    flags = await _urlsafe_flags({uri for _, uri, _ in walker.waiting}, media_store, options)
    for slot, uri, fields in walker.waiting:
        slot.update(binary_marker(fields, uri, flags[uri]))
    return out, len(walker.waiting)
