"""A local model-provider HTTP endpoint on 127.0.0.1 that records what the SDK sends and answers with a canned reply.

It speaks just enough of two APIs for pydantic-ai's real model classes and SDKs:

- OpenAI chat completions (``POST .../chat/completions``): point
  ``OpenAIProvider(base_url=endpoint.openai_base_url, api_key='test')`` at it.
- Anthropic messages (``POST .../messages``): point
  ``AnthropicProvider(base_url=endpoint.anthropic_base_url, api_key='test')`` at it.

Every request is kept (raw body bytes and parsed JSON) in ``requests``, so a
test can check the exact bytes a provider would have received. The server
runs in the event loop that calls ``start`` (``async with ProviderEndpoint()
as endpoint``), which suits both a pytest async fixture and a benchmark's one
loop. Used by ``tests/test_media_urls_provider.py`` and ``benchmarks/model_urls.py``.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

__all__ = ['CapturedRequest', 'ProviderEndpoint']

HOST = '127.0.0.1'


@dataclass(frozen=True)
class CapturedRequest:
    """One request as the endpoint received it."""

    method: str
    path: str
    body: bytes
    json: Any

    @property
    def api(self) -> str:
        """``'openai'``, ``'anthropic'`` or ``'other'``, from the path."""
        if self.path.endswith('/chat/completions'):
            return 'openai'
        if self.path.endswith('/messages'):
            return 'anthropic'
        return 'other'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class ProviderEndpoint:
    """An aiohttp server answering OpenAI chat-completion and Anthropic message requests with ``reply``."""

    def __init__(self, reply: str = 'Noted.') -> None:
        self.reply = reply
        self.port = _free_port()
        self.requests: list[CapturedRequest] = []
        self._runner: web.AppRunner | None = None

    @property
    def root_url(self) -> str:
        return f'http://{HOST}:{self.port}'

    @property
    def openai_base_url(self) -> str:
        """``base_url`` for the OpenAI SDK (it appends ``/chat/completions``)."""
        return f'{self.root_url}/v1'

    @property
    def anthropic_base_url(self) -> str:
        """``base_url`` for the Anthropic SDK (it appends ``/v1/messages``)."""
        return self.root_url

    @property
    def bytes_received(self) -> int:
        """Request-body bytes received so far."""
        return sum(len(request.body) for request in self.requests)

    def clear(self) -> None:
        """Forget the requests received so far."""
        self.requests.clear()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route('*', '/{tail:.*}', self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ProviderEndpoint:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.stop()

    # -- the API -----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        captured = CapturedRequest(request.method, request.path, body, parsed)
        self.requests.append(captured)
        if request.method != 'POST' or not isinstance(parsed, dict):
            return web.json_response({'error': {'message': 'not found', 'type': 'not_found'}}, status=404)
        number = len(self.requests)
        streamed = parsed.get('stream') is True
        if captured.api == 'openai':
            if streamed:
                return await _sse(request, self._openai_chunks(parsed, number))
            return web.json_response(self._openai_reply(parsed, number))
        if captured.api == 'anthropic':
            if streamed:
                return await _sse(request, self._anthropic_events(parsed, number))
            return web.json_response(self._anthropic_reply(parsed, number))
        return web.json_response({'error': {'message': f'unknown path {request.path}'}}, status=404)

    def _openai_reply(self, payload: dict[str, Any], number: int) -> dict[str, Any]:
        return {
            'id': f'chatcmpl-{number}',
            'object': 'chat.completion',
            'created': 1_700_000_000,
            'model': str(payload.get('model', 'gpt-4o')),
            'choices': [
                {
                    'index': 0,
                    'message': {'role': 'assistant', 'content': self.reply},
                    'finish_reason': 'stop',
                    'logprobs': None,
                }
            ],
            'usage': {'prompt_tokens': 10, 'completion_tokens': 2, 'total_tokens': 12},
        }

    def _openai_chunks(self, payload: dict[str, Any], number: int) -> list[tuple[str | None, Any]]:
        head = {
            'id': f'chatcmpl-{number}',
            'object': 'chat.completion.chunk',
            'created': 1_700_000_000,
            'model': str(payload.get('model', 'gpt-4o')),
        }
        return [
            (None, {**head, 'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': self.reply}}]}),
            (
                None,
                {
                    **head,
                    'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}],
                    'usage': {'prompt_tokens': 10, 'completion_tokens': 2, 'total_tokens': 12},
                },
            ),
            (None, '[DONE]'),
        ]

    def _anthropic_reply(self, payload: dict[str, Any], number: int) -> dict[str, Any]:
        return {
            'id': f'msg_{number:08d}',
            'type': 'message',
            'role': 'assistant',
            'model': str(payload.get('model', 'claude-sonnet-4-5')),
            'content': [{'type': 'text', 'text': self.reply}],
            'stop_reason': 'end_turn',
            'stop_sequence': None,
            'usage': {'input_tokens': 10, 'output_tokens': 2},
        }

    def _anthropic_events(self, payload: dict[str, Any], number: int) -> list[tuple[str | None, Any]]:
        message = {**self._anthropic_reply(payload, number), 'content': [], 'stop_reason': None}
        message['usage'] = {'input_tokens': 10, 'output_tokens': 1}
        events: list[dict[str, Any]] = [
            {'type': 'message_start', 'message': message},
            {'type': 'content_block_start', 'index': 0, 'content_block': {'type': 'text', 'text': ''}},
            {'type': 'content_block_delta', 'index': 0, 'delta': {'type': 'text_delta', 'text': self.reply}},
            {'type': 'content_block_stop', 'index': 0},
            {
                'type': 'message_delta',
                'delta': {'stop_reason': 'end_turn', 'stop_sequence': None},
                'usage': {'output_tokens': 2},
            },
            {'type': 'message_stop'},
        ]
        return [(event['type'], event) for event in events]


async def _sse(request: web.Request, events: list[tuple[str | None, Any]]) -> web.StreamResponse:
    """Send ``events`` (name, JSON data or a raw string) as a server-sent event stream."""
    response = web.StreamResponse(headers={'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'})
    await response.prepare(request)
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        prefix = f'event: {name}\n' if name else ''
        await response.write(f'{prefix}data: {text}\n\n'.encode())
    await response.write_eof()
    return response
