"""Small stores and trees the walker tests share (not collected as tests)."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Mapping
from typing import Any

from mediastash import MediaContextLike, MemoryMediaStore
from mediastash.context import EMPTY_CONTEXT


class CountingStore(MemoryMediaStore):
    """A MemoryMediaStore that counts calls and tracks how many run at once."""

    def __init__(self, *, delay: float = 0.0) -> None:
        super().__init__()
        self.puts: list[str] = []
        self.gets: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = delay

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            uri = await super().put(data, context=context)
        finally:
            self.in_flight -= 1
        self.puts.append(uri)
        return uri

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            data = await super().get(uri, context=context)
        finally:
            self.in_flight -= 1
        self.gets.append(uri)
        return data


class UntouchableStore:
    """A store that fails the test if the walker ever calls it."""

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        raise AssertionError('put must not be called')

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        raise AssertionError(f'get must not be called (asked for {uri})')

    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        raise AssertionError('exists must not be called')

    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        return None

    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        raise AssertionError('get_metadata must not be called')


class LyingStore(UntouchableStore):
    """A third-party-style store that does not verify reads and returns wrong bytes."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        return self.answer


def b64(data: bytes, *, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode(data) if urlsafe else base64.b64encode(data)).decode('ascii')


def image_part(size: int, *, urlsafe: bool = True, seed: bytes | None = None) -> dict[str, Any]:
    data = seed if seed is not None else os.urandom(size)
    return {'kind': 'binary', 'data': b64(data, urlsafe=urlsafe), 'media_type': 'image/png', 'identifier': 'img'}


def history(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{'kind': 'request', 'parts': [{'part_kind': 'user-prompt', 'content': ['look', *parts]}]}]
