"""Which media kinds a pydantic-ai model hands to its provider as a URL, rather than downloading it first.

A URL part is only worth sending when the provider fetches it: where
pydantic-ai downloads the URL itself to inline the bytes, swapping would add
a download and save nothing. The table follows the model classes of
pydantic-ai-slim 1.x (``docs/model-urls.md`` lists it); a model class it does
not know is assumed to fetch images only, the one kind every URL-capable
provider takes.
"""

from __future__ import annotations

import functools
from typing import Any, Final, Literal

from pydantic_ai.messages import AudioUrl, BinaryContent, DocumentUrl, ImageUrl, VideoUrl

__all__ = ['ALL_KINDS', 'URL_CLASS', 'MediaKind', 'fetches_by_url', 'kind_of', 'kind_of_media_type']

MediaKind = Literal['image', 'audio', 'video', 'document']
ALL_KINDS: Final[frozenset[MediaKind]] = frozenset({'image', 'audio', 'video', 'document'})
_IMAGES: Final[frozenset[MediaKind]] = frozenset({'image'})
_NONE: Final[frozenset[MediaKind]] = frozenset()

URL_CLASS: Final[dict[MediaKind, type[ImageUrl | AudioUrl | VideoUrl | DocumentUrl]]] = {
    'image': ImageUrl,
    'audio': AudioUrl,
    'video': VideoUrl,
    'document': DocumentUrl,
}
"""The URL part pydantic-ai has for each kind."""


def kind_of(content: BinaryContent) -> MediaKind | None:
    """The kind of a ``BinaryContent`` by pydantic-ai's own ``is_*`` rules (``None``: no URL part fits it)."""
    if content.is_image:
        return 'image'
    if content.is_audio:
        return 'audio'
    if content.is_video:
        return 'video'
    if content.is_document:
        return 'document'
    return None


@functools.lru_cache(maxsize=256)
def kind_of_media_type(media_type: str) -> MediaKind | None:
    """``kind_of`` for the ``BinaryContent`` a media type would have (no bytes needed)."""
    return kind_of(BinaryContent(data=b'', media_type=media_type))


# Models that never send a request anywhere: the URL part reaches the function as is.
_LOCAL_MODELS: Final = frozenset({'FunctionModel', 'TestModel'})


def fetches_by_url(model: Any, kind: MediaKind, media_type: str) -> bool:
    """Whether ``model`` passes a URL part of ``kind`` / ``media_type`` on to its provider."""
    if model is None:
        return kind in _IMAGES
    wrapped = getattr(model, 'wrapped', None)
    if wrapped is not None and _has_class(model, 'WrapperModel'):
        return fetches_by_url(wrapped, kind, media_type)
    members = getattr(model, 'models', None)
    if members and _has_class(model, 'FallbackModel'):
        return all(fetches_by_url(member, kind, media_type) for member in members)
    return kind in _kinds_of(model, media_type)


def _kinds_of(model: Any, media_type: str) -> frozenset[MediaKind]:
    names = {cls.__name__ for cls in type(model).__mro__}
    if names & _LOCAL_MODELS:
        return ALL_KINDS
    if 'OpenAIResponsesModel' in names:
        return frozenset({'image', 'document'})
    if 'OpenAIChatModel' in names:
        lookup = getattr(getattr(model, 'profile', None), 'get', None)
        file_urls = bool(lookup('openai_chat_supports_file_urls', False)) if callable(lookup) else False
        return frozenset({'image', 'document'}) if file_urls else _IMAGES
    if 'AnthropicModel' in names:
        # PDFs go by URL; a text/plain DocumentUrl is downloaded and inlined.
        return frozenset({'image', 'document'}) if media_type == 'application/pdf' else _IMAGES
    if 'GoogleModel' in names:
        # Vertex AI fetches file URLs itself; the Gemini API path downloads anything but its own Files API URLs.
        return ALL_KINDS if getattr(model, 'system', None) == 'google-vertex' else _NONE
    if 'BedrockConverseModel' in names:
        return _NONE  # only s3:// URIs are passed on
    return _IMAGES


def _has_class(obj: Any, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(obj).__mro__)
