"""Where LangChain message payloads sit: the block and message shapes the LangGraph wrapper recognises.

A *site* is one payload string inside a *host*: a content block, a message
dict, or (in ``_state``) a ``BaseMessage`` whose own content is a string.
``dict_sites`` names the sites of one dict; nothing here imports LangChain.
``docs/langgraph.md`` lists the shapes. Whether a candidate is large enough,
and whether its base64 is canonical, is decided by the walker's payload route.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from mediastash.markers import TEXT_MEDIA_TYPE

__all__ = ['MESSAGE_TYPES', 'Site', 'dict_sites', 'message_text_site']

MEDIA_BLOCK_TYPES: Final = frozenset({'image', 'audio', 'video', 'file', 'text-plain'})
"""``type`` of standard content blocks that carry base64 in ``base64`` (v1) or ``data`` (``source_type: base64``)."""

TEXT_BLOCK_TYPES: Final = frozenset({'text', 'text-plain'})
"""``type`` of blocks whose ``text`` is the payload."""

MESSAGE_TYPES: Final = frozenset(
    {'human', 'ai', 'system', 'tool', 'function', 'chat', 'developer', 'HumanMessageChunk', 'AIMessageChunk'}
)
"""``type`` of LangChain message dicts (``message.model_dump()``, ``messages_to_dict``'s ``data``)."""

_DATA_URL_HEAD: Final = 512
"""How far a ``data:`` URL's comma is looked for (media types and parameters are short)."""


@dataclass(slots=True)
class Site:
    """One payload of a host: its place, the kept ``data:`` URL head, and what the store is told."""

    path: tuple[str, ...]
    """Keys from the host to the payload string (``('content',)`` for a message's own string)."""
    prefix: str
    """The ``data:...;base64,`` head the payload string starts with, kept in place ('' when none)."""
    text: bool
    payload: str
    media_type: str | None
    whole: str = ''
    """The string at ``path`` (``prefix + payload``)."""

    def __post_init__(self) -> None:
        if not self.whole:
            self.whole = self.prefix + self.payload

    def synthetic(self) -> dict[str, Any]:
        """The payload as the dict the walker's JSON route recognises (binary part or text content)."""
        if self.text:
            return {'kind': 'text-content', 'content': self.payload}
        node: dict[str, Any] = {'kind': 'binary', 'data': self.payload}
        if self.media_type is not None:
            node['media_type'] = self.media_type
        return node


def _could_be_large(payload: str, text: bool, threshold: int) -> bool:
    """A cheap upper bound: can ``payload`` reach ``threshold`` bytes (UTF-8 text, decoded base64)?"""
    return len(payload) * (4 if text else 1) >= threshold


def _media_type(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class _Sites:
    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.found: list[Site] = []

    def binary(self, path: tuple[str, ...], payload: object, media_type: object) -> None:
        if isinstance(payload, str) and _could_be_large(payload, False, self.threshold):
            if payload.startswith('data:'):
                self.data_url(path, payload)
            else:
                self.found.append(Site(path, '', False, payload, _media_type(media_type)))

    def data_url(self, path: tuple[str, ...], url: object) -> None:
        """A ``data:<media type>[;params];base64,<payload>`` URL: the payload after the comma."""
        if not isinstance(url, str) or not url.startswith('data:'):
            return
        comma = url.find(',', 0, _DATA_URL_HEAD)
        if comma < 0:
            return
        head = url[5:comma]
        if not head.endswith(';base64'):
            return
        payload = url[comma + 1 :]
        if _could_be_large(payload, False, self.threshold):
            media_type = head[: -len(';base64')].split(';', 1)[0]
            self.found.append(Site(path, url[: comma + 1], False, payload, _media_type(media_type), url))

    def text(self, path: tuple[str, ...], payload: object) -> None:
        if isinstance(payload, str) and _could_be_large(payload, True, self.threshold):
            self.found.append(Site(path, '', True, payload, TEXT_MEDIA_TYPE))


def dict_sites(node: dict[str, Any], threshold: int) -> list[Site]:
    """The payload sites of a content block or message dict (empty for any other dict)."""
    sites = _Sites(threshold)
    kind = node.get('type')
    if isinstance(kind, str):
        if kind in MEDIA_BLOCK_TYPES and 'base64' in node:
            sites.binary(('base64',), node['base64'], node.get('mime_type'))
        if node.get('source_type') == 'base64' and 'data' in node:
            sites.binary(('data',), node['data'], node.get('mime_type'))
        if kind == 'image_url':
            url = node.get('image_url')
            if isinstance(url, dict):
                sites.data_url(('image_url', 'url'), url.get('url'))
            else:
                sites.data_url(('image_url',), url)
        elif kind == 'input_audio':
            audio = node.get('input_audio')
            if isinstance(audio, dict):
                audio_format = audio.get('format')
                media_type = f'audio/{audio_format}' if isinstance(audio_format, str) and audio_format else None
                sites.binary(('input_audio', 'data'), audio.get('data'), media_type)
        elif kind == 'file':
            file = node.get('file')
            if isinstance(file, dict):
                sites.binary(('file', 'file_data'), file.get('file_data'), None)
        source = node.get('source')
        if isinstance(source, dict) and source.get('type') == 'base64':
            sites.binary(('source', 'data'), source.get('data'), source.get('media_type'))
        if kind in TEXT_BLOCK_TYPES:
            sites.text(('text',), node.get('text'))
    if 'content' in node and (isinstance(node.get('role'), str) or kind in MESSAGE_TYPES):
        sites.text(('content',), node['content'])
    return sites.found


def message_text_site(content: object, threshold: int) -> Site | None:
    """The site of a ``BaseMessage``'s own string ``content``, when it may be large enough."""
    sites = _Sites(threshold)
    sites.text(('content',), content)
    return sites.found[0] if sites.found else None
