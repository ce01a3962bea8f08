"""Media stores, inner stores and message histories the integration tests share (not collected)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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

# One entry per media store every integration test runs against. The S3 (moto server) and
# MongoDB stores join this list once their modules land: add e.g. `'s3': make_s3_store` here
# (a factory taking the test's tmp_path and returning a ready store) and every test picks it up.
MEDIA_STORES: dict[str, MediaFactory] = {
    'memory': lambda tmp: MemoryMediaStore(),
    'disk': lambda tmp: DiskMediaStore(tmp / 'media'),
    'sqlite': lambda tmp: SqliteMediaStore(database=tmp / 'media.db'),
}


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
