"""Where LangChain message payloads sit: the block and message shapes the LangGraph wrapper recognises.

A *site* is one payload string inside a *host*: a content block, a message
dict, or (in ``_state``) a ``BaseMessage`` whose own content is a string.
``dict_sites`` names the sites of one dict; nothing here imports LangChain.
``docs/langgraph.md`` lists the shapes. Whether a candidate is large enough,
and whether its base64 is canonical, is decided by the walker's payload route; ``Site`` and the
``data:`` URL recognition are the shared ones (``integrations._payload_sites``).
"""

from __future__ import annotations

from typing import Any, Final

from mediastash.integrations._payload_sites import PayloadSites, Site

__all__ = ['MESSAGE_TYPES', 'Site', 'dict_sites', 'message_text_site']

MEDIA_BLOCK_TYPES: Final = frozenset({'image', 'audio', 'video', 'file', 'text-plain'})
"""``type`` of standard content blocks that carry base64 in ``base64`` (v1) or ``data`` (``source_type: base64``)."""

TEXT_BLOCK_TYPES: Final = frozenset({'text', 'text-plain'})
"""``type`` of blocks whose ``text`` is the payload."""

MESSAGE_TYPES: Final = frozenset(
    {'human', 'ai', 'system', 'tool', 'function', 'chat', 'developer', 'HumanMessageChunk', 'AIMessageChunk'}
)
"""``type`` of LangChain message dicts (``message.model_dump()``, ``messages_to_dict``'s ``data``)."""


def dict_sites(node: dict[str, Any], threshold: int) -> list[Site]:
    """The payload sites of a content block or message dict (empty for any other dict)."""
    sites = PayloadSites(threshold)
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
    sites = PayloadSites(threshold)
    sites.text(('content',), content)
    return sites.found[0] if sites.found else None
