"""Media stores, inner stores and message histories the integration tests share (not collected)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    FilePart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from mediastash import DiskMediaStore, MediaStore, MemoryMediaStore, SqliteMediaStore

THRESHOLD = 64 * 1024

MediaFactory = Callable[[Path], MediaStore]

# One entry per media store every integration test runs against. Local stores are built
# from the test's tmp_path; the S3 (moto server) and MongoDB stores also need the session
# servers, which `make_media_store` asks pytest for.
MEDIA_STORES: dict[str, MediaFactory] = {
    'memory': lambda tmp: MemoryMediaStore(),
    'disk': lambda tmp: DiskMediaStore(tmp / 'media'),
    'sqlite': lambda tmp: SqliteMediaStore(database=tmp / 'media.db'),
}
SERVER_MEDIA_STORES = ('mongo', 's3')
ALL_MEDIA_STORES = sorted([*MEDIA_STORES, *SERVER_MEDIA_STORES])


async def make_media_store(name: str, tmp: Path, request: pytest.FixtureRequest) -> MediaStore:
    """A fresh media store of kind ``name``; S3 gets its own bucket, MongoDB its own collection."""
    if name in MEDIA_STORES:
        return MEDIA_STORES[name](tmp)
    if name == 's3':
        from aiobotocore.session import get_session

        from mediastash import S3MediaStore
        from tests.s3_servers import S3Endpoint, unique_bucket

        endpoint: S3Endpoint = request.getfixturevalue('moto_server')
        bucket = unique_bucket('integration')
        async with get_session().create_client('s3', **endpoint.client_options()) as client:
            await client.create_bucket(Bucket=bucket)
        return S3MediaStore(bucket=bucket, **endpoint.client_options())
    if name == 'mongo':
        from mediastash import MongoMediaStore
        from tests.mongo_support import unique_name

        uri: str = request.getfixturevalue('mongo_uri')
        return MongoMediaStore(db_url=uri, database='mediastash_integration', collection=unique_name('media'))
    raise ValueError(f'unknown media store kind {name!r}')


async def close_store(store: object) -> None:
    aclose: Callable[[], Awaitable[None]] | None = getattr(store, 'aclose', None)
    if aclose is not None:
        await aclose()


def roundtrip(messages: list[ModelMessage]) -> list[ModelMessage]:
    """What any JSON-backed store gives back: pydantic-ai narrows e.g. image `BinaryContent` to `BinaryImage`."""
    return ModelMessagesTypeAdapter.validate_python(ModelMessagesTypeAdapter.dump_python(messages, mode='json'))


def history(*, seed: int = 0) -> list[ModelMessage]:
    """A small history touching every place the typed path handles, plus things it leaves alone."""
    rng = __import__('random').Random(seed)
    image = rng.randbytes(150_000)
    return [
        ModelRequest(
            parts=[
                UserPromptPart(
                    content=[
                        'what is in these?',
                        BinaryImage(data=image, media_type='image/png', identifier='photo-1'),
                        BinaryContent(data=b'\x00' * 70_000, media_type='application/pdf'),
                        TextContent(content='long context ' * 6000, metadata={'source': 'doc'}),
                        BinaryImage(data=b'tiny', media_type='image/png'),
                    ]
                )
            ]
        ),
        ModelResponse(parts=[ToolCallPart(tool_name='fetch', args={'url': 'x'}, tool_call_id='call-1')]),
        ModelRequest(
            parts=[ToolReturnPart(tool_name='fetch', content='é' * 40_000 + 'ok', tool_call_id='call-1')],
            metadata={'note': 'tool output'},
        ),
        ModelResponse(
            parts=[
                TextPart('here is an image'),
                FilePart(content=BinaryImage(data=image, media_type='image/png', vendor_metadata={'detail': 'high'})),
            ]
        ),
        ModelRequest(parts=[UserPromptPart(content='thanks')]),
    ]


def big_strings(value: Any, limit: int = 10_000) -> list[int]:
    """Lengths of JSON strings longer than ``limit`` anywhere in ``value`` (to prove nothing big stayed)."""
    found: list[int] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str) and len(node) > limit:
            found.append(len(node))
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob('*') if f.is_file())


def random_bytes(n: int) -> bytes:
    return os.urandom(n)
