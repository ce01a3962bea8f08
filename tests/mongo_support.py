"""Where the MongoDB tests find their server, and direct (store-bypassing) access to its collections.

``MEDIASTASH_MONGO_URI`` names the server (``scripts/test`` starts SecantusDB
and sets it; point it at a real ``mongod`` to test against MongoDB itself).
When it is unset, the ``mongo_uri`` session fixture starts a private server
with ``scripts/mongo-server`` and stops it at the end of the session. A server
that cannot be started fails the tests; they are never skipped.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import AsyncMongoClient

URI_VARIABLE = 'MEDIASTASH_MONGO_URI'
SERVER_SCRIPT = Path(__file__).resolve().parent.parent / 'scripts' / 'mongo-server'
TEST_DATABASE = 'mediastash_tests'

Document = dict[str, Any]


@pytest.fixture(scope='session')
def mongo_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's URI: ``$MEDIASTASH_MONGO_URI``, or a SecantusDB started for this session."""
    configured = os.environ.get(URI_VARIABLE)
    if configured:
        yield configured
        return
    env = {**os.environ, 'MEDIASTASH_MONGO_STATE_DIR': str(tmp_path_factory.mktemp('mongo-server-state'))}
    started = subprocess.run([str(SERVER_SCRIPT), 'start'], env=env, capture_output=True, text=True, check=False)
    if started.returncode != 0:
        pytest.fail(
            f'{URI_VARIABLE} is unset and scripts/mongo-server could not start a test server:\n{started.stderr}',
            pytrace=False,
        )
    uri = started.stdout.strip().removeprefix(f'export {URI_VARIABLE}=')
    try:
        yield uri
    finally:
        subprocess.run([str(SERVER_SCRIPT), 'stop'], env=env, capture_output=True, check=False)


def unique_name(prefix: str = 't') -> str:
    """A collection name no other test uses."""
    return f'{prefix}_{uuid.uuid4().hex[:16]}'


def raw_client(uri: str) -> AsyncMongoClient[Document]:
    """A client of the test's own, independent of any store's."""
    return AsyncMongoClient[Document](uri)


def digest_of(uri: str) -> str:
    return uri.removeprefix('media+sha256://')


class RawCollections:
    """The two collections of one store, reached through a separate client (the "backend bypass")."""

    def __init__(self, client: AsyncMongoClient[Document], database: str, collection: str) -> None:
        self.manifests = client[database][collection]
        self.chunks = client[database][f'{collection}_chunks']

    async def manifest(self, uri: str) -> Document | None:
        return await self.manifests.find_one({'_id': digest_of(uri)})

    async def chunk_docs(self, chunk_set: str) -> list[Document]:
        return [doc async for doc in self.chunks.find({'set': chunk_set}).sort('n', 1)]

    async def read(self, uri: str) -> bytes | None:
        """The blob's bytes as stored: inline ``data`` or its chunks joined in order."""
        manifest = await self.manifest(uri)
        if manifest is None:
            return None
        if 'data' in manifest:
            return bytes(manifest['data'])
        return b''.join(bytes(doc['data']) for doc in await self.chunk_docs(manifest['chunk_set']))

    async def overwrite(self, uri: str, data: bytes) -> None:
        """Replace the stored bytes, keeping the manifest's recorded size and chunk count."""
        manifest = await self.manifest(uri)
        assert manifest is not None, uri
        if 'data' in manifest:
            await self.manifests.update_one({'_id': manifest['_id']}, {'$set': {'data': data}})
            return
        chunk_set, size = manifest['chunk_set'], manifest['chunk_size']
        await self.chunks.delete_many({'set': chunk_set})
        pieces = [data[start : start + size] for start in range(0, len(data), size)]
        await self.chunks.insert_many(
            [{'_id': f'{chunk_set}:{n}', 'set': chunk_set, 'n': n, 'data': piece} for n, piece in enumerate(pieces)]
        )

    async def delete(self, uri: str) -> None:
        """Remove the manifest and its chunks."""
        manifest = await self.manifests.find_one_and_delete({'_id': digest_of(uri)})
        if manifest is not None and 'chunk_set' in manifest:
            await self.chunks.delete_many({'set': manifest['chunk_set']})

    async def count(self) -> int:
        return await self.manifests.count_documents({})

    async def chunk_sets(self) -> set[str]:
        return {doc['set'] async for doc in self.chunks.find({}, {'set': 1})}

    async def namespace_collections(self) -> list[str]:
        """The collections of the store's namespaces: ``<collection>.ns.<name>``, ``<collection>_chunks.ns.<name>``."""
        heads = (f'{self.manifests.name}.ns.', f'{self.chunks.name}.ns.')
        names = await self.manifests.database.list_collection_names()
        return sorted(name for name in names if name.startswith(heads))

    async def drop(self) -> None:
        """Drop both collections and those of every namespace of the store."""
        for name in await self.namespace_collections():
            await self.manifests.database.drop_collection(name)
        await self.manifests.drop()
        await self.chunks.drop()
