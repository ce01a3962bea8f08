"""Payload-site recognisers: which strings of a JSON dict are payloads, for any framework integration.

A *site* is one payload string inside a *host* dict (a content block, a
message, a session item): its keys from the host, the ``data:`` URL head kept
in place, and what the store is told. A *recogniser* looks at one dict and
adds the sites it knows to a ``PayloadSites`` (nothing for a dict it does not
know); ``RECOGNISERS`` names the built-in ones, one per payload shape:

* ``pydantic-ai``: pydantic-ai parts as JSON (``kind: binary`` ``data``; the
  string ``content`` of a part or of ``TextContent``);
* ``langchain``: LangChain standard content blocks (``base64`` of a media
  block, ``data`` of a ``source_type: base64`` block, ``text`` of a text block);
* ``langchain-messages``: a LangChain message dict's string ``content``;
* ``chat-messages``: a ``role`` message's string ``content`` (any chat API);
* ``openai-chat``: Chat Completions parts (``image_url`` as a ``data:`` URL,
  ``input_audio`` data, ``file.file_data``);
* ``openai-responses``: Responses input items (``input_image`` /
  ``computer_screenshot`` ``image_url``, ``input_file`` ``file_data``,
  ``input_audio`` data, ``input_text`` / ``output_text`` text, a ``*_output``
  item's string ``output``);
* ``anthropic``: a block whose ``source`` is ``{type: base64, media_type, data}``;
* ``google``: ``inline_data`` / ``inlineData`` ``{mime_type | mimeType, data}``;
* ``data-url``: any string value that is a base64 ``data:`` URL.

An integration composes the ones its framework meets (``compose``), adding
its own recognisers as plain functions. Whether a candidate is large enough,
and whether its base64 is canonical, is decided by the walker's payload route
(``Site.synthetic`` is what it gets). ``docs/adding-a-framework.md`` shows a
composition end to end. Nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from mediastash.errors import InvalidArgumentError
from mediastash.markers import TEXT_CONTENT_KINDS, TEXT_MEDIA_TYPE

__all__ = [
    'LANGCHAIN_MESSAGE_TYPES',
    'RECOGNISERS',
    'PayloadSites',
    'Recogniser',
    'Recognisers',
    'Site',
    'compose',
    'payload_size',
]

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


def payload_size(site: Site) -> int:
    """The payload's size in bytes: UTF-8 text, or decoded base64."""
    if site.text:
        return len(site.payload.encode('utf-8', 'surrogatepass'))
    padding = 2 if site.payload.endswith('==') else 1 if site.payload.endswith('=') else 0
    return len(site.payload) // 4 * 3 - padding


def _could_be_large(payload: str, text: bool, threshold: int) -> bool:
    """A cheap upper bound: can ``payload`` reach ``threshold`` bytes (UTF-8 text, decoded base64)?"""
    return len(payload) * (4 if text else 1) >= threshold


def _media_type(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class PayloadSites:
    """Collects the sites of one host that may reach ``threshold`` bytes, in ``found``."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.found: list[Site] = []

    def binary(self, path: tuple[str, ...], payload: object, media_type: object) -> None:
        """A base64 string, or a ``data:`` URL holding one."""
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

    def distinct(self) -> list[Site]:
        """The sites found, the first one at each path only (two recognisers may name the same string)."""
        seen: set[tuple[str, ...]] = set()
        out: list[Site] = []
        for site in self.found:
            if site.path not in seen:
                seen.add(site.path)
                out.append(site)
        return out


Recogniser = Callable[[Mapping[Any, Any], PayloadSites], None]
"""``recogniser(node, sites)``: adds the payload sites of the dict ``node`` it knows to ``sites``."""


# -- the built-in recognisers, one per payload shape -------------------------------------------------------------

LANGCHAIN_MEDIA_BLOCKS: Final = frozenset({'image', 'audio', 'video', 'file', 'text-plain'})
"""``type`` of standard content blocks that carry base64 in ``base64`` (v1) or ``data`` (``source_type: base64``)."""

LANGCHAIN_TEXT_BLOCKS: Final = frozenset({'text', 'text-plain'})
"""``type`` of LangChain blocks whose ``text`` is the payload."""

LANGCHAIN_MESSAGE_TYPES: Final = frozenset(
    {'human', 'ai', 'system', 'tool', 'function', 'chat', 'developer', 'HumanMessageChunk', 'AIMessageChunk'}
)
"""``type`` of LangChain message dicts (``message.model_dump()``, ``messages_to_dict``'s ``data``)."""

_RESPONSES_IMAGES: Final = frozenset({'input_image', 'computer_screenshot'})
_RESPONSES_TEXTS: Final = frozenset({'input_text', 'output_text'})
_GOOGLE_BLOBS: Final = (('inline_data', 'mime_type'), ('inlineData', 'mimeType'))


def pydantic_ai_parts(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """pydantic-ai parts as JSON: a ``kind: binary`` dict's base64 ``data``; the string ``content`` of a part
    (it has a ``part_kind``) or of ``TextContent`` / ``StructuredContent``. The shapes ``externalize_media`` walks."""
    kind = node.get('kind')
    if kind == 'binary':
        sites.binary(('data',), node.get('data'), node.get('media_type'))
    elif isinstance(node.get('part_kind'), str) or kind in TEXT_CONTENT_KINDS:
        sites.text(('content',), node.get('content'))


def langchain_blocks(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """LangChain standard content blocks: ``base64`` (v1), ``data`` of a ``source_type: base64`` block (v0),
    the ``text`` of a text block."""
    kind = node.get('type')
    if not isinstance(kind, str):
        return
    if kind in LANGCHAIN_MEDIA_BLOCKS and 'base64' in node:
        sites.binary(('base64',), node['base64'], node.get('mime_type'))
    if node.get('source_type') == 'base64' and 'data' in node:
        sites.binary(('data',), node['data'], node.get('mime_type'))
    if kind in LANGCHAIN_TEXT_BLOCKS:
        sites.text(('text',), node.get('text'))


def langchain_messages(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """A LangChain message dict's string ``content``."""
    if node.get('type') in LANGCHAIN_MESSAGE_TYPES and 'content' in node:
        sites.text(('content',), node['content'])


def chat_messages(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """A chat message (a dict with a string ``role``): its string ``content``."""
    if isinstance(node.get('role'), str):
        sites.text(('content',), node.get('content'))


def _input_audio(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """``input_audio: {data, format}`` (Chat Completions and Responses alike); the media type from ``format``."""
    audio = node.get('input_audio')
    if isinstance(audio, dict):
        audio_format = audio.get('format')
        media_type = f'audio/{audio_format}' if isinstance(audio_format, str) and audio_format else None
        sites.binary(('input_audio', 'data'), audio.get('data'), media_type)


def openai_chat(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """OpenAI Chat Completions content parts: ``image_url`` (a string or ``{url}``) as a ``data:`` URL,
    ``input_audio`` data, ``file.file_data`` (a ``data:`` URL or bare base64)."""
    kind = node.get('type')
    if kind == 'image_url':
        url = node.get('image_url')
        if isinstance(url, dict):
            sites.data_url(('image_url', 'url'), url.get('url'))
        else:
            sites.data_url(('image_url',), url)
    elif kind == 'input_audio':
        _input_audio(node, sites)
    elif kind == 'file':
        file = node.get('file')
        if isinstance(file, dict):
            sites.binary(('file', 'file_data'), file.get('file_data'), None)


def openai_responses(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """OpenAI Responses input items: ``input_image`` / ``computer_screenshot`` ``image_url`` as a ``data:`` URL,
    ``input_file`` ``file_data`` (a ``data:`` URL or bare base64), ``input_audio`` data, the ``text`` of
    ``input_text`` / ``output_text``, and a tool call output's string ``output`` (``function_call_output``
    and the other ``*_output`` items)."""
    kind = node.get('type')
    if kind in _RESPONSES_IMAGES:
        sites.data_url(('image_url',), node.get('image_url'))
    elif kind == 'input_file':
        sites.binary(('file_data',), node.get('file_data'), None)
    elif kind == 'input_audio':
        _input_audio(node, sites)
    elif kind in _RESPONSES_TEXTS:
        sites.text(('text',), node.get('text'))
    elif isinstance(kind, str) and kind.endswith('_output'):
        sites.text(('output',), node.get('output'))


def anthropic_blocks(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """An Anthropic block (``image``, ``document``) whose ``source`` is ``{type: base64, media_type, data}``."""
    source = node.get('source')
    if isinstance(source, dict) and source.get('type') == 'base64':
        sites.binary(('source', 'data'), source.get('data'), source.get('media_type'))


def google_parts(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """A Google Gemini part's inline blob: ``inline_data: {mime_type, data}`` (the Python SDK's field names)
    or ``inlineData: {mimeType, data}`` (the REST API's)."""
    for key, media_key in _GOOGLE_BLOBS:
        blob = node.get(key)
        if isinstance(blob, dict):
            sites.binary((key, 'data'), blob.get('data'), blob.get(media_key))


def data_urls(node: Mapping[Any, Any], sites: PayloadSites) -> None:
    """Any string value of the dict that is a base64 ``data:`` URL, whatever its key."""
    for key, value in node.items():
        if type(key) is str and type(value) is str and value.startswith('data:'):
            sites.data_url((key,), value)


RECOGNISERS: Final[Mapping[str, Recogniser]] = MappingProxyType(
    {
        'pydantic-ai': pydantic_ai_parts,
        'langchain': langchain_blocks,
        'langchain-messages': langchain_messages,
        'chat-messages': chat_messages,
        'openai-chat': openai_chat,
        'openai-responses': openai_responses,
        'anthropic': anthropic_blocks,
        'google': google_parts,
        'data-url': data_urls,
    }
)
"""The built-in recognisers by name (read-only: an integration passes its own to ``compose`` as functions)."""


@dataclass(frozen=True, slots=True)
class Recognisers:
    """Recognisers composed in order: the payload sites of a dict are what each one finds, first one at a path."""

    recognisers: tuple[Recogniser, ...]

    def sites(self, node: Mapping[Any, Any], threshold: int) -> list[Site]:
        """The sites of ``node`` whose payload may reach ``threshold`` bytes (empty for a dict none knows)."""
        found = PayloadSites(threshold)
        for recognise in self.recognisers:
            recognise(node, found)
        return found.distinct()


def compose(*recognisers: str | Recogniser) -> Recognisers:
    """The recognisers named (keys of ``RECOGNISERS``) or given (functions), in this order.

    Raises ``InvalidArgumentError`` for a name that is not a built-in one (the
    message lists the names, never the one given).
    """
    chosen: list[Recogniser] = []
    for item in recognisers:
        if isinstance(item, str):
            found = RECOGNISERS.get(item)
            if found is None:
                raise InvalidArgumentError('recognisers', f'names from {sorted(RECOGNISERS)} or functions', item)
            chosen.append(found)
        elif callable(item):
            chosen.append(item)
        else:
            raise InvalidArgumentError('recognisers', 'recogniser names or functions', item)
    return Recognisers(tuple(chosen))
