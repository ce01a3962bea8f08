"""Small stores and trees the walker tests share (not collected as tests)."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from mediastash import MediaContextLike, MemoryMediaStore
from mediastash.context import EMPTY_CONTEXT
from mediastash.testing import CountingMediaStore


class CountingStore(CountingMediaStore):
    """A ``MemoryMediaStore`` behind a counting wrapper that also lists URIs and tracks how many calls run at once."""

    def __init__(self, *, delay: float = 0.0) -> None:
        self.memory = MemoryMediaStore()
        super().__init__(self.memory)
        self.puts: list[str] = []
        self.gets: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = delay

    @asynccontextmanager
    async def _tracked(self) -> AsyncIterator[None]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield
        finally:
            self.in_flight -= 1

    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        async with self._tracked():
            uri = await super().put(data, context=context)
        self.puts.append(uri)
        return uri

    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        async with self._tracked():
            data = await super().get(uri, context=context)
        self.gets.append(uri)
        return data

    def media_type_of(self, uri: str) -> str | None:
        return self.memory.media_type_of(uri)


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
