"""A local model-provider HTTP endpoint on 127.0.0.1 that records what the SDK sends and answers with a canned reply.

It speaks just enough of two APIs for pydantic-ai's real model classes and SDKs:

- OpenAI chat completions (``POST .../chat/completions``): point
  ``OpenAIProvider(base_url=endpoint.openai_base_url, api_key='test')`` at it.
- Anthropic messages (``POST .../messages``): point
  ``AnthropicProvider(base_url=endpoint.anthropic_base_url, api_key='test')`` at it.
- OpenAI Responses (``POST .../responses``), and the OpenAI and Anthropic
  Files APIs (``POST/GET/DELETE /v1/files``, told apart by Anthropic's
  ``anthropic-version`` header): uploads are kept in ``files`` and listed in
  ``uploads``; a message request naming a file id the endpoint does not hold
  (never uploaded, deleted, or dropped with ``lose_file``) is answered 404
  with the id in the error, as a provider that lost a file does.
- Bedrock Converse (``POST /model/<id>/converse``): point a boto3
  ``bedrock-runtime`` client's ``endpoint_url`` at ``root_url``.
- Gemini API ``generateContent`` and its Files API (google-genai's resumable
  upload, get, delete): ``GoogleProvider(api_key='test', base_url=endpoint.root_url)``.
  A file's id is its ``uri`` (``GEMINI_FILE_BASE`` + name).

Every request is kept (raw body bytes and parsed JSON) in ``requests``, so a
test can check the exact bytes a provider would have received. The server
runs in the event loop that calls ``start`` (``async with ProviderEndpoint()
as endpoint``), which suits both a pytest async fixture and a benchmark's one
loop. Used by ``tests/test_media_urls_provider.py`` and ``benchmarks/model_urls.py``.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import socket
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

__all__ = ['CapturedRequest', 'ProviderEndpoint', 'StoredFile', 'file_references']

HOST = '127.0.0.1'
_MESSAGE_APIS = ('openai', 'openai-responses', 'anthropic', 'bedrock', 'gemini')
GEMINI_FILE_BASE = 'https://gemini-files.test/v1beta/'
"""What a Gemini file's ``uri`` starts with here (pydantic-ai wants an ``https://`` URI; it is never fetched)."""


@dataclass(frozen=True)
class CapturedRequest:
    """One request as the endpoint received it."""

    method: str
    path: str
    body: bytes
    json: Any

    headers: dict[str, str] | None = None

    @property
    def api(self) -> str:
        """``'openai'``, ``'openai-responses'``, ``'anthropic'``, ``'bedrock'``, ``'files'`` or ``'other'``."""
        if self.path.endswith('/chat/completions'):
            return 'openai'
        if self.path.endswith('/responses'):
            return 'openai-responses'
        if self.path.endswith('/messages'):
            return 'anthropic'
        if self.path.endswith('/converse'):
            return 'bedrock'
        if self.path.endswith((':generateContent', ':streamGenerateContent')):
            return 'gemini'
        if self.path.startswith('/upload/') or (
            '/files' in self.path and any(name.lower() == 'x-goog-api-key' for name in self.headers or ())
        ):
            return 'gemini-files'
        if '/files' in self.path:
            return 'files'
        return 'other'


@dataclass(frozen=True)
class StoredFile:
    """One file uploaded through a Files API route."""

    api: str
    file_id: str
    filename: str
    media_type: str
    data: bytes
    purpose: str | None


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
        self.files: dict[str, StoredFile] = {}
        """Files the endpoint holds, by id (uploads not deleted or lost)."""
        self.uploads: list[StoredFile] = []
        """Every upload received, in order (deleted or lost ones too)."""
        self.deleted: list[str] = []
        """Ids deleted through a ``DELETE`` files route."""
        self._numbers = itertools.count(1)
        self.lose_every_upload = False
        self._gemini_sessions: dict[str, tuple[str, bytearray]] = {}
        """When set, every upload is forgotten at once (a provider that keeps losing files)."""
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

    def model_requests(self, api: str) -> list[CapturedRequest]:
        """The requests received for one message API (``CapturedRequest.api``)."""
        return [request for request in self.requests if request.api == api]

    def lose_file(self, file_id: str) -> None:
        """Drop a file as a provider does when it expires: requests naming it are now answered 404."""
        del self.files[file_id]

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
        captured = CapturedRequest(request.method, request.path, body, parsed, dict(request.headers))
        self.requests.append(captured)
        if captured.api == 'files':
            return await self._files(request, body)
        if captured.api == 'gemini-files':
            return self._gemini_files(request, body)
        if isinstance(parsed, dict) and captured.api in _MESSAGE_APIS:
            lost = self._unknown_file_ids(parsed)
            if lost:
                return self._file_not_found(captured.api, lost[0])
        if captured.api == 'gemini' and isinstance(parsed, dict):
            if request.path.endswith(':streamGenerateContent'):
                return await _sse(request, [(None, self._gemini_reply(parsed))])
            return web.json_response(self._gemini_reply(parsed))
        if captured.api == 'openai-responses' and isinstance(parsed, dict):
            reply = self._responses_reply(parsed, len(self.requests))
            if parsed.get('stream'):
                return await _sse(request, _responses_events(reply))
            return web.json_response(reply)
        if captured.api == 'bedrock' and isinstance(parsed, dict):
            return web.json_response(self._converse_reply())
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

    # -- Files APIs --------------------------------------------------------------------------

    async def _files(self, request: web.Request, body: bytes) -> web.StreamResponse:
        anthropic = 'anthropic-version' in request.headers
        api = 'anthropic' if anthropic else 'openai'
        tail = request.path.rstrip('/').rsplit('/files', 1)[-1].lstrip('/')
        if request.method == 'POST' and not tail:
            return await self._upload(request, body, api)
        stored = self.files.get(tail)
        if stored is None or stored.api != api:
            return self._file_not_found(api, tail)
        if request.method == 'DELETE':
            del self.files[tail]
            self.deleted.append(tail)
            if anthropic:
                return web.json_response({'id': tail, 'type': 'file_deleted'})
            return web.json_response({'id': tail, 'object': 'file', 'deleted': True})
        return web.json_response(self._file_object(stored))

    async def _upload(self, request: web.Request, body: bytes, api: str) -> web.StreamResponse:
        fields = form_fields(request.headers.get('Content-Type', ''), body)
        filename, media_type, data = fields['file']
        purpose = fields['purpose'][2].decode() if 'purpose' in fields else None
        number = next(self._numbers)
        file_id = f'file_{number:06d}' if api == 'anthropic' else f'file-{number:06d}'
        stored = StoredFile(api, file_id, filename or 'upload', media_type or 'application/octet-stream', data, purpose)
        if not self.lose_every_upload:
            self.files[file_id] = stored
        self.uploads.append(stored)
        return web.json_response(self._file_object(stored))

    @staticmethod
    def _file_object(stored: StoredFile) -> dict[str, Any]:
        if stored.api == 'anthropic':
            return {
                'id': stored.file_id,
                'type': 'file',
                'filename': stored.filename,
                'mime_type': stored.media_type,
                'size_bytes': len(stored.data),
                'created_at': '2026-01-01T00:00:00Z',
                'downloadable': False,
            }
        return {
            'id': stored.file_id,
            'object': 'file',
            'bytes': len(stored.data),
            'created_at': 1_700_000_000,
            'filename': stored.filename,
            'purpose': stored.purpose or 'user_data',
            'status': 'processed',
            'expires_at': None,
        }

    def _unknown_file_ids(self, payload: Any) -> list[str]:
        """File references in a message request (``file_id`` values, ``s3://`` locations aside) not held here."""
        return [file_id for file_id in file_references(payload) if file_id not in self.files]

    def _gemini_files(self, request: web.Request, body: bytes) -> web.Response:
        """google-genai's resumable upload (start, then one or more chunks), and files get/delete."""
        path = request.path
        version = path.removeprefix('/upload').split('/')[1]
        if path == f'/upload/{version}/files' and request.method == 'POST':
            meta = json.loads(body or b'{}').get('file', {})
            media_type = request.headers.get('X-Goog-Upload-Header-Content-Type') or meta.get('mimeType')
            session = f'{next(self._numbers):06d}'
            self._gemini_sessions[session] = (str(media_type or 'application/octet-stream'), bytearray())
            headers = {
                'x-goog-upload-url': f'{self.root_url}/upload/{version}/sessions/{session}',
                'x-goog-upload-status': 'active',
            }
            return web.json_response({}, headers=headers)
        if path.startswith(f'/upload/{version}/sessions/'):
            session = path.rsplit('/', 1)[-1]
            media_type, data = self._gemini_sessions[session]
            data.extend(body)
            if 'finalize' not in request.headers.get('X-Goog-Upload-Command', ''):
                return web.json_response({}, headers={'x-goog-upload-status': 'active'})
            del self._gemini_sessions[session]
            file_id = f'{GEMINI_FILE_BASE}files/f{session}'
            stored = StoredFile('gemini', file_id, f'f{session}', media_type, bytes(data), None)
            if not self.lose_every_upload:
                self.files[file_id] = stored
            self.uploads.append(stored)
            return web.json_response({'file': self._gemini_file(stored)}, headers={'x-goog-upload-status': 'final'})
        file_id = GEMINI_FILE_BASE + path.removeprefix(f'/{version}/')
        stored = self.files.get(file_id)
        if stored is None:
            return self._file_not_found('gemini', file_id)
        if request.method == 'DELETE':
            del self.files[file_id]
            self.deleted.append(file_id)
            return web.json_response({})
        return web.json_response(self._gemini_file(stored))

    @staticmethod
    def _gemini_file(stored: StoredFile) -> dict[str, Any]:
        return {
            'name': f'files/{stored.filename}',
            'uri': stored.file_id,
            'mimeType': stored.media_type,
            'sizeBytes': str(len(stored.data)),
            'state': 'ACTIVE',
            'createTime': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
            'expirationTime': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(time.time() + 48 * 3600)),
        }

    def _gemini_reply(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            'candidates': [
                {'content': {'role': 'model', 'parts': [{'text': self.reply}]}, 'finishReason': 'STOP', 'index': 0}
            ],
            'usageMetadata': {'promptTokenCount': 10, 'candidatesTokenCount': 2, 'totalTokenCount': 12},
            'modelVersion': 'gemini-2.5-flash',
            'responseId': f'r{len(self.requests)}',
        }

    @staticmethod
    def _file_not_found(api: str, file_id: str) -> web.Response:
        if api.startswith('gemini'):
            message = f'You do not have permission to access the File {file_id} or it may not exist.'
            return web.json_response(
                {'error': {'code': 403, 'message': message, 'status': 'PERMISSION_DENIED'}}, status=403
            )
        if api == 'anthropic':
            error = {'type': 'error', 'error': {'type': 'not_found_error', 'message': f'File not found: {file_id}'}}
            return web.json_response(error, status=404)
        message = f'No such File object: {file_id}'
        return web.json_response(
            {'error': {'message': message, 'type': 'invalid_request_error', 'param': None, 'code': None}}, status=404
        )

    # -- message APIs --------------------------------------------------------------------------

    def _responses_reply(self, payload: dict[str, Any], number: int) -> dict[str, Any]:
        return {
            'id': f'resp_{number:08d}',
            'object': 'response',
            'created_at': 1_700_000_000,
            'model': str(payload.get('model', 'gpt-5')),
            'status': 'completed',
            'output': [
                {
                    'type': 'message',
                    'id': f'msg_{number:08d}',
                    'role': 'assistant',
                    'status': 'completed',
                    'content': [{'type': 'output_text', 'text': self.reply, 'annotations': []}],
                }
            ],
            'parallel_tool_calls': True,
            'tool_choice': 'auto',
            'tools': [],
            'usage': {
                'input_tokens': 10,
                'input_tokens_details': {'cached_tokens': 0},
                'output_tokens': 2,
                'output_tokens_details': {'reasoning_tokens': 0},
                'total_tokens': 12,
            },
        }

    def _converse_reply(self) -> dict[str, Any]:
        return {
            'output': {'message': {'role': 'assistant', 'content': [{'text': self.reply}]}},
            'stopReason': 'end_turn',
            'usage': {'inputTokens': 10, 'outputTokens': 2, 'totalTokens': 12},
            'metrics': {'latencyMs': 1},
        }

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


def _responses_events(reply: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """A Responses API event stream that delivers ``reply`` (its one output message) as one text delta."""
    message = reply['output'][0]
    text = message['content'][0]['text']
    started = {**reply, 'status': 'in_progress', 'output': []}
    item_started = {**message, 'status': 'in_progress', 'content': []}
    common = {'item_id': message['id'], 'output_index': 0}
    events: list[dict[str, Any]] = [
        {'type': 'response.created', 'response': started},
        {'type': 'response.output_item.added', 'output_index': 0, 'item': item_started},
        {'type': 'response.output_text.delta', **common, 'content_index': 0, 'delta': text, 'logprobs': []},
        {'type': 'response.output_text.done', **common, 'content_index': 0, 'text': text, 'logprobs': []},
        {'type': 'response.output_item.done', 'output_index': 0, 'item': message},
        {'type': 'response.completed', 'response': reply},
    ]
    return [(event['type'], {**event, 'sequence_number': number}) for number, event in enumerate(events)]


def file_references(payload: Any) -> list[str]:
    """Every provider file reference of a message request's JSON (``file_id``, Gemini's ``file_uri``), in order."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ('file_id', 'file_uri', 'fileUri') and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(payload)
    return found


def form_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, str | None, bytes]]:
    """The fields of a ``multipart/form-data`` body: name -> (file name, content type, bytes)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f'Content-Type: {content_type}\r\n\r\n'.encode() + body
    )
    fields: dict[str, tuple[str | None, str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param('name', header='content-disposition')
        payload = part.get_payload(decode=True)
        content_type_of = part.get('Content-Type')
        fields[str(name)] = (part.get_filename(), None if content_type_of is None else str(content_type_of), payload)
    return fields


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
