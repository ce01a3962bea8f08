"""Where LangChain message payloads sit: the kit's recognisers the LangGraph wrapper composes.

A *site* is one payload string inside a *host*: a content block, a message
dict, or (in ``_state``) a ``BaseMessage`` whose own content is a string.
``dict_sites`` names the sites of one dict with the kit's recognisers
(``integrations.kit.recognisers``): LangChain standard blocks and message
dicts, the OpenAI, Anthropic and Google block shapes LangChain passes
through, and ``data:`` URLs anywhere. Nothing here imports LangChain;
``docs/langgraph.md`` lists the shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mediastash.integrations.kit.recognisers import PayloadSites, Site, compose

__all__ = ['SITES', 'Site', 'dict_sites', 'message_text_site']

SITES: Final = compose(
    'langchain', 'openai-chat', 'anthropic', 'google', 'langchain-messages', 'chat-messages', 'data-url'
)
"""The recognisers of a LangGraph state dict, in order (the first one to name a string wins)."""


def dict_sites(node: Mapping[Any, Any], threshold: int) -> list[Site]:
    """The payload sites of a content block or message dict (empty for any other dict)."""
    return SITES.sites(node, threshold)


def message_text_site(content: object, threshold: int) -> Site | None:
    """The site of a ``BaseMessage``'s own string ``content``, when it may be large enough."""
    sites = PayloadSites(threshold)
    sites.text(('content',), content)
    return sites.found[0] if sites.found else None
