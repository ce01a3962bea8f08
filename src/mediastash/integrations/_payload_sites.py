"""Payload sites: the strings of a host dict that may move to the store, whatever framework the host is from.

A *site* is one payload string inside a *host* (a content block, a message, a
session item): its keys from the host, the ``data:`` URL head kept in place,
and what the store is told. ``PayloadSites`` collects the sites of one host:
base64 strings, ``data:<media type>;base64,`` URLs anywhere, and text. Each
integration names where its framework's payloads sit and composes these;
whether a candidate is large enough, and whether its base64 is canonical, is
decided by the walker's payload route (``Site.synthetic`` is what it gets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from mediastash.markers import TEXT_MEDIA_TYPE

__all__ = ['PayloadSites', 'Site', 'payload_size']

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
