"""``MongoMediaStore``: content-addressed blobs in MongoDB, split into chunk documents.

A manifest document per blob, keyed by its sha256 hex, records size, media
type, user metadata and where the bytes are: inline in the manifest for a blob
no larger than one chunk, otherwise in a set of chunk documents in
``<collection>_chunks``. Every write uses a fresh chunk set and writes it before
the manifest, so a manifest never points at chunks that are missing or that
another writer (or a garbage collector) owns. The layout is in ``docs/mongo.md``.

For garbage collection each manifest carries ``written_at``, refreshed by a
``put`` of stored bytes (or ``touch_many``) once it is older than
``TOUCH_AFTER_SECONDS``; ``delete_unless_touched`` deletes with the age
condition in the filter, so a manifest touched meanwhile is not matched.

Blobs written by pydantic-ai-harness's ``MongoMediaStore`` into the same
collections (chunks keyed by digest, JSON-text metadata) are read, listed and
deleted too; new writes always use this layout.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Iterable, Mapping
from typing import Any, Final

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    DuplicateKeyError,
    OperationFailure,
    PyMongoError,
)

from mediastash.context import EMPTY_CONTEXT, MediaContextLike
from mediastash.errors import (
    InvalidStoreConfiguration,
    StoreOperationError,
    StorePermissionError,
    StoreUnavailableError,
)
from mediastash.stores._range import DigestRange
from mediastash.stores._tokens import ObjectToken, token_for
from mediastash.stores.base import (
    TOUCH_AFTER_SECONDS,
    VERIFY_ON_PUT_BYTES,
    BaseMediaStore,
    DriverError,
    Ingest,
)
from mediastash.stores.mongo._layout import (
    DEFAULT_CHUNK_SIZE_BYTES,
    MAX_CHUNK_SIZE_BYTES,
    WRITTEN_AT,
    Document,
    ManifestFacts,
    bson_time,
    check_database,
    chunk_document,
    chunk_filter,
    chunk_id,
    chunk_sets_before,
    chunk_span,
    manifest_size,
    manifest_written_at,
    new_chunk_set,
    not_written_since,
    parse_metadata,
    stored_bytes,
    written_before,
)
from mediastash.stores.mongo._options import MongoOptions
from mediastash.stores.protocols import BlobInfo, BlobStat
from mediastash.uri import is_digest, media_uri, parse_media_uri
from mediastash.urls import PublicUrlResolver

__all__ = ['DEFAULT_CHUNK_SIZE_BYTES', 'MAX_CHUNK_SIZE_BYTES', 'MongoMediaStore']

_logger = logging.getLogger(__name__)

_DUPLICATE_KEY = 11000
_WRITE_BATCH_BYTES = 8 << 20
"""Chunk bytes sent per ``insert_many``. pymongo encodes a batch into a growing buffer, so a
streaming put peaks near three times this much; 8 MiB keeps it well under 64 MiB."""
_READ_BATCH_BYTES = 16 << 20
"""Chunk bytes a streaming read asks the server for per batch."""
_LIST_PAGE = 1000
_DELETE_CONCURRENCY = 8
_CHUNK_INDEX = 'mediastash_set_n'
_INDEX_EXISTS_OTHERWISE = frozenset({85, 86})
"""IndexOptionsConflict, IndexKeySpecsConflict: an index of that name exists with other options."""
_MANIFEST_SET_INDEX = 'mediastash_chunk_set'
_DEFAULT_SWEEP_GRACE_SECONDS = 24 * 3600.0
_AGE_FIELDS: Final = {WRITTEN_AT: 1, 'created_at': 1}
_INFO_FIELDS: Final = {'size': 1, 'size_bytes': 1, **_AGE_FIELDS}
"""What a listing reads of each manifest: its size and age."""
_CHUNK_FIELDS: Final = {'chunk_set': 1, 'chunk_size': 1, 'chunk_count': 1}
_INLINE_SIZE = 'mediastash_inline_size'
_CHECK_FIELDS: Final = {**_AGE_FIELDS, **_CHUNK_FIELDS, _INLINE_SIZE: {'$binarySize': '$data'}}
"""A manifest's age, chunk fields and the size of its inline bytes (``None`` when it has none), no bytes read."""
_CHECK_FIELDS_WITH_DATA: Final = {**_AGE_FIELDS, **_CHUNK_FIELDS, 'data': 1}
"""The same facts for a server or test double without ``$binarySize``: the inline bytes are read and measured."""
_INVALID_PIPELINE_OPERATOR = 168
_DENIED_CODES = frozenset({13, 18})
"""Unauthorized, AuthenticationFailed."""
_NAMESPACE_INFIX: Final = '.ns.'
"""Between a store's collection names and a namespace's name. A store's own collection names have no dot, so no
namespace's collection is a store's, and the name comes last, so two namespaces never share a collection."""


class MongoMediaStore(BaseMediaStore):
    """Content-addressed blobs in the MongoDB collections ``collection`` and ``<collection>_chunks``.

    Pass exactly one of ``client`` (your ``AsyncMongoClient``; never closed by
    the store) or ``db_url`` (the store creates the client and closes it in
    ``aclose`` / ``async with``). ``database`` defaults to the one the
    connection string names (``mongodb://host/<database>``). ``chunk_size_bytes``
    (default 4 MiB, at most 16 MiB minus 64 KiB) is the largest piece a chunk
    document holds; blobs up to that size are stored inside their manifest.

    The first ``put`` of a blob fixes its media type and metadata; a later
    ``put`` of the same bytes is a single lookup (plus an update once an hour,
    to mark the blob in use). Capabilities: listing, deleting, streaming,
    garbage collection. Server and network errors surface as ``StoreOperationError``
    (``StoreUnavailableError``, ``StorePermissionError``) with pymongo's exception as
    the ``__cause__``.
    """

    options_class = MongoOptions

    def __init__(
        self,
        *,
        client: AsyncMongoClient[Document] | None = None,
        db_url: str | None = None,
        database: str | None = None,
        collection: str = 'media',
        chunk_size_bytes: int = DEFAULT_CHUNK_SIZE_BYTES,
        public_url: PublicUrlResolver | None = None,
        options: MongoOptions | None = None,
    ) -> None:
        self._options = options = MongoOptions.settled(options, locals())  # the keywords above, by name
        super().__init__(public_url=options.public_url)
        client, db_url, database = options.client, options.db_url, options.database
        self._collection_name = options.collection
        self._chunk_size = options.chunk_size_bytes
        if client is None:
            made: AsyncMongoClient[Document] | type[Exception]
            try:
                made = AsyncMongoClient[Document](db_url)
            except (ConfigurationError, ValueError) as exc:  # the message may quote the URL and credentials
                made = type(exc)  # refused outside the handler, so that the error keeps no __context__
            if isinstance(made, type):
                raise InvalidStoreConfiguration(f'db_url= is not a usable MongoDB connection string ({made.__name__})')
            client = made
            self._owns_client = True
        else:
            self._owns_client = False
        self._database_name = check_database(database if database is not None else _default_database(client))
        self._client = client
        database_handle = client[self._database_name]
        self._manifests: AsyncCollection[Document] = database_handle[self._collection_name]
        self._chunks: AsyncCollection[Document] = database_handle[f'{self._collection_name}_chunks']
        self._indexes_ready = False
        self._index_lock = asyncio.Lock()
        self._measures_on_server = True
        hosts, self._client_token = _client_identity(client)
        self._identity = ('mongo', hosts, self._database_name, self._collection_name)

    def _open_namespace(self, name: str) -> MongoMediaStore:
        """A store on the namespace's own two collections, ``<collection>.ns.<name>`` and
        ``<collection>_chunks.ns.<name>``, in the same database and on the same client (which stays this store's
        to close). MongoDB creates them at the first write; a store's own collections never hold a namespace's
        blobs, so its listing, collection and verification never meet them (see ``docs/mongo.md``)."""
        view = type(self)(options=self._options.replace(client=self._client, db_url=None, database=self._database_name))
        database = self._client[self._database_name]
        view._collection_name = f'{self._collection_name}{_NAMESPACE_INFIX}{name}'
        view._manifests = database[view._collection_name]
        view._chunks = database[f'{self._chunks.name}{_NAMESPACE_INFIX}{name}']
        view._identity = ('mongo', self._identity[1], self._database_name, view._collection_name)
        view._measures_on_server = self._measures_on_server
        return view

    async def _remove_namespace_storage(self) -> None:
        """Drop the emptied namespace's two collections (their names carry the tenant's name): the chunk
        collection first, with any chunks no manifest names (left by an interrupted write), then the manifest
        collection. Only when no manifest is left, so a blob put meanwhile keeps both; the next write makes them
        again, with their indexes."""
        if await self._manifests.find_one({}, {'_id': 1}) is not None:
            return
        self._indexes_ready = False
        await self._chunks.drop()
        if await self._manifests.find_one({}, {'_id': 1}) is None:
            await self._manifests.drop()

    @property
    def database(self) -> str:
        """The database holding both collections."""
        return self._database_name

    @property
    def collection(self) -> str:
        """The manifest collection's name."""
        return self._collection_name

    @property
    def chunks_collection(self) -> str:
        """The chunk collection's name (``<collection>_chunks``)."""
        return self._chunks.name

    @property
    def chunk_size_bytes(self) -> int:
        """The largest piece one chunk document holds (new writes only)."""
        return self._chunk_size

    def _describe(self) -> str:
        return f'MongoMediaStore(database={self._database_name!r}, collection={self._collection_name!r})'

    def _storage_identity(self) -> Hashable:
        """``('mongo', (host:port, ...), database, collection)``: the client's seed hosts, never credentials
        (for a client that is not pymongo's, ``('client', n)`` in place of the hosts: see ``_client_identity``)."""
        return self._identity

    def _classify_error(self, exc: Exception) -> DriverError | None:
        """pymongo's errors: no server reachable (or a dropped connection) is unavailable, an authorization
        failure a permission error, any other server answer a failed operation carrying its error code."""
        if isinstance(exc, ConnectionFailure):
            return DriverError(StoreUnavailableError, type(exc).__name__)
        if isinstance(exc, OperationFailure):
            details = exc.details if isinstance(exc.details, Mapping) else {}
            name = details.get('codeName')
            reason = name if isinstance(name, str) and name else type(exc).__name__
            kind = StorePermissionError if exc.code in _DENIED_CODES else StoreOperationError
            return DriverError(kind, reason, exc.code if isinstance(exc.code, int) else None)
        if isinstance(exc, PyMongoError):
            return DriverError(StoreOperationError, type(exc).__name__)
        return super()._classify_error(exc)

    async def _ensure_indexes(self) -> None:
        """Create the two indexes once per store, on the first write that needs chunks."""
        if self._indexes_ready:
            return
        async with self._index_lock:
            if not self._indexes_ready:
                try:
                    # Partial: chunks pydantic-ai-harness wrote have no ``set``, and two of them (null, n)
                    # would make a plain unique index impossible to build on a collection it filled.
                    await self._chunks.create_index(
                        [('set', 1), ('n', 1)],
                        unique=True,
                        name=_CHUNK_INDEX,
                        partialFilterExpression={'set': {'$exists': True}},
                    )
                except OperationFailure as exc:
                    if exc.code not in _INDEX_EXISTS_OTHERWISE:
                        raise
                    # Built by an earlier release without the filter: it serves the same queries.
                await self._manifests.create_index('chunk_set', sparse=True, name=_MANIFEST_SET_INDEX)
                self._indexes_ready = True

    # -- primitives --------------------------------------------------------------------

    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        facts = ManifestFacts.of(context)
        found = await self._confirm_stored(digest, len(data))
        if found is None:
            await self._store_new(digest, data, facts)
        elif not found:
            await self._store_new(digest, data, facts, replace=True)

    async def _rewrite(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Write fresh bytes, then swap the manifest to them (readers see old or new bytes), then drop the old."""
        await self._store_new(digest, data, ManifestFacts.of(context), replace=True)

    async def _confirm_stored(self, digest: str, size: int) -> bool | None:
        """Whether the blob is stored soundly: ``None`` when absent, ``False`` when the stored copy fails the base's
        cheap check (another size, or a small blob hashing wrong), ``True`` when sound. A sound blob whose last
        write is older than ``TOUCH_AFTER_SECONDS`` or unknown is marked in use (``None`` if it vanished)."""
        found = await self._check_facts(digest, read_inline=size <= VERIFY_ON_PUT_BYTES)
        if found is None:
            return None
        manifest, inline = found
        stored_size = await self._stored_size(digest, manifest)
        read = (lambda: _ready(inline)) if inline is not None else (lambda: self._read(digest, EMPTY_CONTEXT))
        if not await self._stored_copy_is_sound_async(digest, size, stored_size, read):
            return False
        now = time.time()
        written_at = manifest_written_at(manifest)
        if written_at is not None and written_at >= now - TOUCH_AFTER_SECONDS:
            return True
        touched = await self._manifests.update_one(
            {'_id': digest, **not_written_since(now - TOUCH_AFTER_SECONDS)},
            {'$set': {WRITTEN_AT: bson_time(now, round_up=True)}},
        )
        return True if touched.matched_count > 0 or await self._contains(digest, EMPTY_CONTEXT) else None

    async def _check_facts(self, digest: str, *, read_inline: bool = False) -> tuple[Document, bytes | None] | None:
        """The manifest fields ``_confirm_stored`` needs, and its inline bytes when they were read.

        ``read_inline``: the bytes will be hashed (a blob the base verifies on
        put), so the one lookup reads them too instead of a second command.
        Otherwise the inline bytes are measured on the server; a server or
        client that does not know ``$binarySize`` (MongoDB before 4.4, an
        in-memory test double such as mongomock-motor) is asked for the bytes
        instead, from then on, for this store.
        """
        if self._measures_on_server and not read_inline:
            try:
                manifest = await self._manifests.find_one({'_id': digest}, _CHECK_FIELDS)
            except Exception as exc:
                if not _lacks_binary_size(exc):
                    raise
                self._measures_on_server = False
            else:
                return None if manifest is None else (manifest, None)
        manifest = await self._manifests.find_one({'_id': digest}, _CHECK_FIELDS_WITH_DATA)
        if manifest is None:
            return None
        if 'data' not in manifest:
            return manifest, None
        data = stored_bytes(manifest.pop('data'))
        manifest[_INLINE_SIZE] = -1 if data is None else len(data)
        return manifest, data

    async def _stored_size(self, digest: str, manifest: Document) -> int:
        """The bytes really stored for a manifest (inline, or summed over its chunks on the server)."""
        inline = manifest.get(_INLINE_SIZE)
        if isinstance(inline, int):
            return inline
        span = chunk_span(manifest)
        if span is None:
            query = chunk_filter(digest, manifest)
            return 0 if query is None else await self._chunk_bytes_matching(query)
        chunk_set, count = span
        total = 0
        # Chunks by ``_id`` (see ``_chunk_data``), one past the count so an extra chunk changes the size.
        for start in range(0, count + 1, _LIST_PAGE):
            ids = [chunk_id(chunk_set, n) for n in range(start, min(start + _LIST_PAGE, count + 1))]
            size = await self._chunk_bytes_matching({'_id': {'$in': ids}})
            if size < 0:
                return size
            total += size
        return total

    async def _chunk_bytes_matching(self, query: Document) -> int:
        """The bytes of the chunks ``query`` selects, summed on the server where it can (-1: one is not bytes)."""
        if self._measures_on_server:
            pipeline: list[Document] = [
                {'$match': query},
                {'$group': {'_id': None, 'size': {'$sum': {'$binarySize': '$data'}}}},
            ]
            try:
                groups = [group async for group in await _awaited(self._chunks.aggregate(pipeline))]
            except Exception as exc:
                if not _lacks_binary_size(exc):
                    raise
                self._measures_on_server = False
            else:
                size = groups[0].get('size') if groups else 0
                return size if isinstance(size, int) else -1
        total = 0
        async for chunk in self._chunks.find(query, {'data': 1, '_id': 0}):
            data = stored_bytes(chunk.get('data'))
            if data is None:
                return -1
            total += len(data)
        return total

    async def _store_new(self, digest: str, data: bytes, facts: ManifestFacts, *, replace: bool = False) -> None:
        """Write a blob known to be absent a moment ago: inline, or chunks first and then the manifest.

        ``replace``: a stored copy failed verification; the new manifest replaces it and its old chunks go.
        """
        if facts.fits_inline(len(data), self._chunk_size):
            manifest = facts.inline_manifest(digest, data, self._chunk_size)
            await (self._replace_manifest(manifest) if replace else self._insert_manifest(manifest))
            return
        await self._ensure_indexes()
        chunk_set = new_chunk_set()
        size = self._chunk_size
        async with self._owned_chunk_set(chunk_set) as owned:
            batch: list[Document] = []
            batch_bytes = 0
            count = 0
            for count, start in enumerate(range(0, len(data), size), start=1):
                piece = data[start : start + size]
                batch.append(chunk_document(chunk_set, count - 1, piece))
                batch_bytes += len(piece)
                if batch_bytes >= _WRITE_BATCH_BYTES:
                    await self._insert_chunks(batch)
                    batch, batch_bytes = [], 0
            await self._insert_chunks(batch)
            manifest = facts.chunked_manifest(digest, len(data), size, chunk_set, count)
            owned.keep = await (self._replace_manifest(manifest) if replace else self._insert_manifest(manifest))

    async def _replace_manifest(self, manifest: Document) -> bool:
        """Put ``manifest`` in place of the stored one (keeping its metadata and media type), then delete the
        chunks the old one named. Always ``True``: the new manifest is stored."""
        digest = manifest['_id']
        old = await self._manifests.find_one_and_replace(
            {'_id': digest}, manifest, projection={**_CHUNK_FIELDS, 'metadata': 1, 'media_type': 1}, upsert=True
        )
        if old is None:
            return True
        kept = {field: old[field] for field in ('metadata', 'media_type') if field in old}
        if kept:
            await self._manifests.update_one({'_id': digest}, {'$set': kept})
        query = chunk_filter(digest, old)
        if query is not None and query.get('set') != manifest.get('chunk_set'):
            await self._delete_chunks([(digest, old)])
        return True

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        manifest = await self._manifests.find_one({'_id': digest}, {'metadata': 0, 'created_at': 0, WRITTEN_AT: 0})
        if manifest is None:
            raise self._not_found(digest)
        if 'data' in manifest:
            return stored_bytes(manifest['data']) or b''
        # A manifest without bytes, or chunks with a gap, give short bytes: verification reports them.
        return b''.join([chunk async for chunk in self._chunk_data(digest, manifest)])

    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        return await self._manifests.find_one({'_id': digest}, {'_id': 1}) is not None

    async def _contains_many(self, digests: list[str], max_concurrency: int) -> set[str]:
        """One ``$in`` query per page of digests, at most ``max_concurrency`` pages at a time."""
        gate = asyncio.Semaphore(max_concurrency)

        async def page(batch: list[str]) -> set[str]:
            async with gate:
                cursor = self._manifests.find({'_id': {'$in': batch}}, {'_id': 1})
                found = {document['_id'] async for document in cursor}
            return found.intersection(batch)

        pages = [digests[start : start + _LIST_PAGE] for start in range(0, len(digests), _LIST_PAGE)]
        return set().union(*await asyncio.gather(*map(page, pages)))

    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        manifest = await self._manifests.find_one({'_id': digest}, {'metadata': 1})
        if manifest is None:
            raise self._not_found(digest)
        return parse_metadata(media_uri(digest), manifest.get('metadata'), self._describe())

    async def media_type_of(self, uri: str) -> str | None:
        """The media type recorded at the first ``put`` (``None`` when unknown or not stored)."""
        digest = parse_media_uri(uri)
        self._check_open()
        manifest = await self._manifests.find_one({'_id': digest}, {'media_type': 1})
        value = None if manifest is None else manifest.get('media_type')
        return value if isinstance(value, str) else None

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        """The manifest's size, media type and age fields; no chunk read. A manifest without a recorded size
        (written behind our back) has its blob read to measure it."""
        fields = {'size': 1, 'size_bytes': 1, 'media_type': 1, **_AGE_FIELDS}
        manifest = await self._manifests.find_one({'_id': digest}, fields)
        if manifest is None:
            raise self._not_found(digest)
        recorded = [manifest.get(name) for name in ('size', 'size_bytes')]
        if any(isinstance(value, int) and not isinstance(value, bool) for value in recorded):
            size = manifest_size(manifest)
        else:
            size = len(await self._read_verified(digest, context))
        media_type = manifest.get('media_type')
        return BlobStat(size, media_type if isinstance(media_type, str) else None, manifest_written_at(manifest))

    # -- writing helpers ---------------------------------------------------------------

    async def _insert_chunks(self, batch: list[Document]) -> None:
        """Insert chunk documents; duplicates (a retried batch) are fine, anything else raises."""
        if not batch:
            return
        try:
            await self._chunks.insert_many(batch, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get('writeErrors', [])
            if not errors or any(error.get('code') != _DUPLICATE_KEY for error in errors):
                raise

    async def _insert_manifest(self, manifest: Document) -> bool:
        """Insert a manifest; ``False`` when a concurrent writer stored the blob first."""
        try:
            await self._manifests.insert_one(manifest)
        except DuplicateKeyError:
            return False
        return True

    def _owned_chunk_set(self, chunk_set: str) -> _OwnedChunkSet:
        return _OwnedChunkSet(self._chunks, chunk_set)

    # -- optional capabilities ---------------------------------------------------------

    async def _manifests_in_order(
        self, fields: Mapping[str, Any], bounds: Mapping[str, str] | None = None
    ) -> AsyncIterator[Document]:
        """The manifests whose ``_id`` is within ``bounds`` (``fields`` of each), in ``_id`` order, one query of
        ``_LIST_PAGE`` per page resuming after the last ``_id`` seen (no long-lived cursor)."""
        after = ''
        while True:
            query = {'_id': {**(bounds or {}), '$gt': after}}
            cursor = self._manifests.find(query, fields).sort('_id', 1).limit(_LIST_PAGE)
            page = [document async for document in cursor]
            if not page:
                return
            for document in page:
                yield document
            last = page[-1]['_id']
            if not isinstance(last, str):
                return
            after = last

    async def _blob_infos(self, bounds: Mapping[str, str] | None = None) -> AsyncIterator[BlobInfo]:
        """The blobs whose digest is within ``bounds``, in digest order (size and age fields only)."""
        async for manifest in self._manifests_in_order(_INFO_FIELDS, bounds):
            digest = manifest['_id']
            if is_digest(digest):
                yield BlobInfo(media_uri(digest), manifest_size(manifest), manifest_written_at(manifest))

    async def _list_digests(self) -> AsyncIterator[str]:
        """Every stored digest in order, a page of manifests at a time."""
        async for manifest in self._manifests_in_order({'_id': 1}):
            if is_digest(manifest['_id']):
                yield manifest['_id']

    async def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        """Every stored blob in digest order, a page of manifests at a time."""
        async for info in self._blob_infos():
            yield info

    async def _list_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        """The blobs of one digest range in digest order, read from the ``_id`` index a page at a time."""
        bounds: dict[str, str] = {'$gte': digest_range.start}
        if digest_range.end is not None:
            bounds['$lt'] = digest_range.end
        async for info in self._blob_infos(bounds):
            yield info

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        """Per page of 1,000 digests: one ``update_many`` dating the old manifests, then one ``find`` of the present."""
        gate = asyncio.Semaphore(max_concurrency)

        async def page(batch: list[str]) -> set[str]:
            async with gate:
                await self._manifests.update_many(
                    {'_id': {'$in': batch}, **not_written_since(touch_before)},
                    {'$set': {WRITTEN_AT: bson_time(time.time(), round_up=True)}},
                )
                cursor = self._manifests.find({'_id': {'$in': batch}}, {'_id': 1})
                found = {document['_id'] async for document in cursor}
            return found.intersection(batch)

        pages = [digests[start : start + _LIST_PAGE] for start in range(0, len(digests), _LIST_PAGE)]
        return set().union(*await asyncio.gather(*map(page, pages)))

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        """Delete the manifests still older than ``written_before`` (the age condition is in the delete's
        filter), then the chunk sets of those that are really gone."""
        deleted: list[str] = []
        for start in range(0, len(digests), _LIST_PAGE):
            deleted.extend(await self._delete_old_page(digests[start : start + _LIST_PAGE], written_before))
        return deleted

    async def _delete_old_page(self, batch: list[str], when: float) -> list[str]:
        candidates = await self._old_manifests(batch, when)
        if not candidates:
            return []
        await self._manifests.delete_many({'_id': {'$in': list(candidates)}, **written_before(when)})
        return await self._drop_chunks_of_gone(candidates)

    async def _old_manifests(self, batch: list[str], when: float) -> dict[str, Document]:
        """The manifests among ``batch`` last written before ``when``, with the fields naming their chunks."""
        cursor = self._manifests.find({'_id': {'$in': batch}, **written_before(when)}, _CHUNK_FIELDS)
        return {document['_id']: document async for document in cursor}

    async def _drop_chunks_of_gone(self, candidates: dict[str, Document]) -> list[str]:
        """After the age-filtered delete: which candidates are gone, and delete exactly their chunks.

        A candidate whose manifest is still there with the same chunk set was
        touched meanwhile and keeps its chunks; one stored again under another
        chunk set was deleted, so its old set goes.
        """
        cursor = self._manifests.find({'_id': {'$in': list(candidates)}}, {'chunk_set': 1})
        remaining = {document['_id']: document async for document in cursor}
        deleted: list[str] = []
        for digest, manifest in candidates.items():
            survivor = remaining.get(digest)
            if survivor is not None and survivor.get('chunk_set') == manifest.get('chunk_set'):
                continue  # touched between the lookup and the delete: kept, with its chunks
            # Gone (or gone and stored again under a new chunk set): its old chunks go.
            deleted.append(digest)
        await self._delete_chunks([(digest, candidates[digest]) for digest in deleted])
        return deleted

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        """Remove the manifest first (so no reader finds the blob), then its chunks."""
        manifest = await self._manifests.find_one_and_delete({'_id': digest}, projection=_CHUNK_FIELDS)
        if manifest is None:
            return False
        await self._delete_chunks([(digest, manifest)])
        return True

    async def _delete_chunks(self, manifests: list[tuple[str, Document]]) -> None:
        """Delete the chunks of manifests already gone (each with its digest).

        Ours by chunk ``_id`` (the count and one past it, as reads look), the
        index every server plans on: a query on ``set`` needs the partial
        ``(set, n)`` index, which the test server's planner never picks, so each
        delete scanned the whole chunk collection. An inline blob (no chunk set,
        a count of 0) has none to delete; it was asked for by ``files_id``, which
        no index of ours covers. Chunks pydantic-ai-harness wrote go by
        ``chunk_filter``.
        """
        ids: list[str] = []
        for digest, manifest in manifests:
            count = manifest.get('chunk_count')
            if 'chunk_set' not in manifest and count == 0 and type(count) is int:
                continue  # inline (or empty): no chunk was ever written for it, none to look for
            span = chunk_span(manifest)
            if span is not None:
                chunk_set, count = span
                ids.extend(chunk_id(chunk_set, n) for n in range(count + 1))
                continue
            query = chunk_filter(digest, manifest)
            if query is not None:
                await self._chunks.delete_many(query)
        for start in range(0, len(ids), _LIST_PAGE):
            await self._chunks.delete_many({'_id': {'$in': ids[start : start + _LIST_PAGE]}})

    async def _delete_many(self, digests: list[str]) -> int:
        """Delete several blobs, a few at a time."""
        limit = asyncio.Semaphore(_DELETE_CONCURRENCY)

        async def one(digest: str) -> bool:
            async with limit:
                return await self._delete(digest, EMPTY_CONTEXT)

        return sum(await asyncio.gather(*map(one, digests)))

    async def sweep_orphan_chunks(self, *, older_than_seconds: float = _DEFAULT_SWEEP_GRACE_SECONDS) -> int:
        """Delete chunk sets no manifest names that are older than the grace period; returns how many.

        Such sets are left by writers that died between their chunks and their
        manifest. They are never read, so this only reclaims space. The grace
        period (default one day) must exceed the longest upload in progress.
        """
        if not older_than_seconds >= 0:
            raise ValueError(f'older_than_seconds must be >= 0, got {older_than_seconds!r}')
        self._check_open()
        await self._ensure_indexes()
        pipeline: list[Document] = [
            {'$match': chunk_sets_before(time.time() - older_than_seconds)},
            {'$group': {'_id': '$set'}},
        ]
        candidates = [group['_id'] async for group in await _awaited(self._chunks.aggregate(pipeline))]
        candidates = [chunk_set for chunk_set in candidates if isinstance(chunk_set, str)]
        removed = 0
        for start in range(0, len(candidates), _LIST_PAGE):
            batch = candidates[start : start + _LIST_PAGE]
            cursor = self._manifests.find({'chunk_set': {'$in': batch}}, {'chunk_set': 1, '_id': 0})
            named = {document.get('chunk_set') async for document in cursor}
            orphans = [chunk_set for chunk_set in batch if chunk_set not in named]
            if orphans:
                await self._chunks.delete_many({'set': {'$in': orphans}})
                removed += len(orphans)
        return removed

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        """Write chunk documents as soon as they fill, then the manifest once the digest is known.

        The chunks go under a fresh chunk set no manifest names yet, so a failed
        or cancelled stream leaves nothing readable (and removes its chunks).
        Memory stays around a few write batches (8 MiB each) plus one chunk.
        """
        facts = ManifestFacts.of(context)
        size = self._chunk_size
        buffer = bytearray()
        chunk_set: str | None = None
        owned: _OwnedChunkSet | None = None
        count = 0
        batch: list[Document] = []
        batch_bytes = 0
        try:
            async for piece in ingest:
                buffer += piece
                # Keep up to one chunk buffered so a blob that ends within it can still go inline.
                if len(buffer) <= size:
                    continue
                if owned is None:
                    await self._ensure_indexes()
                    chunk_set = new_chunk_set()
                    owned = self._owned_chunk_set(chunk_set)
                assert chunk_set is not None
                taken = 0
                while len(buffer) - taken > size:
                    with memoryview(buffer) as view:
                        batch.append(chunk_document(chunk_set, count, bytes(view[taken : taken + size])))
                    taken += size
                    count += 1
                    batch_bytes += size
                    if batch_bytes >= _WRITE_BATCH_BYTES:
                        await self._insert_chunks(batch)
                        batch, batch_bytes = [], 0
                del buffer[:taken]
            digest = ingest.digest
            if owned is None:
                data = bytes(buffer)
                found = await self._confirm_stored(digest, len(data))
                if not found:
                    await self._store_new(digest, data, facts, replace=found is False)
                return
            assert chunk_set is not None
            if buffer:
                batch.append(chunk_document(chunk_set, count, bytes(buffer)))
                count += 1
                buffer.clear()
            await self._insert_chunks(batch)
            batch = []
            manifest = facts.chunked_manifest(digest, ingest.size, size, chunk_set, count)
            owned.keep = await self._insert_manifest(manifest)
            if not owned.keep:
                found = await self._confirm_stored(digest, ingest.size)
                if found is None:  # collected in between: ours goes in after all
                    owned.keep = await self._insert_manifest(manifest)
                elif not found:  # the stored copy is unsound: ours replaces it
                    owned.keep = await self._replace_manifest(manifest)
        finally:
            if owned is not None:
                await owned.discard()

    def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        """Stored chunks one after another; a missing chunk ends the stream, so verification fails before a gap."""
        return self._stored_pieces(digest, chunk_size)

    async def _stored_pieces(self, digest: str, piece_size: int) -> AsyncGenerator[bytes, None]:
        manifest = await self._manifests.find_one({'_id': digest}, {'metadata': 0, 'created_at': 0, WRITTEN_AT: 0})
        if manifest is None:
            raise self._not_found(digest)
        if 'data' in manifest:
            for piece in _split(stored_bytes(manifest['data']) or b'', piece_size):
                yield piece
            return
        async for chunk in self._chunk_data(digest, manifest):
            for piece in _split(chunk, piece_size):
                yield piece

    async def _chunk_data(self, digest: str, manifest: Document) -> AsyncGenerator[bytes, None]:
        """A chunked manifest's chunk bytes in order, about 16 MiB per round trip; ends at the first gap.

        Our chunks are looked up by ``_id`` (the primary key, which every server
        answers from its index), one batch of numbers per ``find``, and put in
        order here, so the server neither scans nor sorts. The numbers run one
        past ``chunk_count``: an extra chunk stored behind our back is read and
        fails verification, as a missing one does. The harness's chunks are
        found by ``files_id`` and sorted by ``n`` (its index serves that).
        """
        stored_chunk_size = manifest.get('chunk_size')
        per_batch = _READ_BATCH_BYTES // stored_chunk_size if isinstance(stored_chunk_size, int) else 1
        per_batch = max(1, min(per_batch, _LIST_PAGE))
        span = chunk_span(manifest)
        if span is None:
            async for chunk in self._filtered_chunk_data(digest, manifest, per_batch):
                yield chunk
            return
        chunk_set, count = span
        for start in range(0, count + 1, per_batch):
            numbers = range(start, min(start + per_batch, count + 1))
            cursor = self._chunks.find(
                {'_id': {'$in': [chunk_id(chunk_set, n) for n in numbers]}}, {'data': 1, 'n': 1, '_id': 0}
            ).batch_size(len(numbers))
            found = {chunk.get('n'): chunk.get('data') async for chunk in cursor}
            for n in numbers:
                if n not in found:
                    return  # a gap (or the end): the digest check judges the bytes so far
                yield stored_bytes(found.pop(n)) or b''

    async def _filtered_chunk_data(
        self, digest: str, manifest: Document, per_batch: int
    ) -> AsyncGenerator[bytes, None]:
        """Chunks found by ``chunk_filter`` (the harness's layout), sorted by ``n``; ends at the first gap."""
        query = chunk_filter(digest, manifest)
        if query is None:
            return
        cursor = self._chunks.find(query, {'data': 1, 'n': 1, '_id': 0}).sort('n', 1).batch_size(per_batch)
        try:
            expected = 0
            async for chunk in cursor:
                if chunk.get('n') != expected:
                    return  # a gap: stop so the digest check fails on the bytes so far
                expected += 1
                yield stored_bytes(chunk.get('data')) or b''
        finally:
            await cursor.close()

    # -- lifecycle ---------------------------------------------------------------------

    async def _aclose(self) -> None:
        """Close the client if the store created it (``db_url=``); a caller's client stays open."""
        if self._owns_client:
            await self._client.close()


class _OwnedChunkSet:
    """The chunk set of one write: removed on exit unless ``keep`` was set (the manifest names it)."""

    def __init__(self, chunks: AsyncCollection[Document], chunk_set: str) -> None:
        self._chunks = chunks
        self.chunk_set = chunk_set
        self.keep = False
        self._done = False

    async def __aenter__(self) -> _OwnedChunkSet:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.discard()

    async def discard(self) -> None:
        """Delete the set unless it is kept; shielded so a cancelled put still cleans up."""
        if self.keep or self._done:
            return
        self._done = True
        try:
            await asyncio.shield(self._chunks.delete_many({'set': self.chunk_set}))
        except asyncio.CancelledError:
            raise
        except Exception:  # the write already failed or lost the race; leave the orphan for a sweep
            _logger.warning('could not remove unused chunk set %s', self.chunk_set, exc_info=True)


async def _awaited(result: Any) -> Any:
    """``aggregate``'s cursor: pymongo's async client returns it from a coroutine, motor-style clients directly."""
    return await result if inspect.isawaitable(result) else result


async def _ready(data: bytes) -> bytes:
    """``data``, as the awaitable read ``_stored_copy_is_sound_async`` takes (the bytes are already here)."""
    return data


def _lacks_binary_size(exc: Exception) -> bool:
    """True when ``exc`` says the server or client does not know the ``$binarySize`` operator.

    A server before 4.4 answers with code 168 (InvalidPipelineOperator); an in-memory
    test double raises ``ValueError`` or ``NotImplementedError`` naming the operator.
    """
    if isinstance(exc, OperationFailure):
        return exc.code == _INVALID_PIPELINE_OPERATOR or '$binarySize' in str(exc)
    return isinstance(exc, ValueError | NotImplementedError) and '$binarySize' in str(exc)


def _split(data: bytes, size: int) -> Iterable[bytes]:
    if len(data) <= size:
        if data:
            yield data
        return
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def _default_database(client: AsyncMongoClient[Document]) -> str:
    """The database the client's connection string names; ``InvalidStoreConfiguration`` when it names none.

    Read from the parsed connection string, without contacting the server.
    """
    try:
        return client.get_default_database().name
    except Exception:  # pymongo's ConfigurationError, or a client that cannot tell (a test double)
        raise InvalidStoreConfiguration(
            'MongoMediaStore needs database= or a connection string that names one (mongodb://host:port/<database>)'
        ) from None


def _client_identity(client: object) -> tuple[Hashable, ObjectToken | None]:
    """Where the client connects, for the storage key; and the token the store must keep alive, if any.

    A pymongo ``AsyncMongoClient``: its seed list as sorted ``host:port``
    strings (from its public ``eq_props()``, the seeds its ``==`` compares),
    read without contacting the server. Seeds come from the connection string
    or ``host=`` argument (for ``mongodb+srv://`` the SRV name, unresolved);
    they hold no credentials and, unlike the discovered topology, do not
    change while the client runs. Any other client with the async collection
    methods (a test double such as mongomock-motor's) has no host list to
    trust: it is named by a number unique to the client object, so stores
    sharing that client share the key and no other storage can take it.
    """
    hosts = _pymongo_seeds(client)
    if hosts is not None:
        return hosts, None
    token = token_for(client)
    return ('client', token.number), token


def _pymongo_seeds(client: object) -> tuple[str, ...] | None:
    """A pymongo client's seeds as sorted ``host:port`` strings; ``None`` for anything else."""
    if not isinstance(client, AsyncMongoClient):
        return None
    try:
        seeds = client.eq_props()[0]
        hosts = {_host_port(host, port) for host, port in seeds}
    except Exception:  # a pymongo without eq_props, or seeds of another shape: fall back to the object
        return None
    return tuple(sorted(hosts)) or None


def _host_port(host: str, port: int | None) -> str:
    name = host if host.endswith('.sock') else host.lower()  # a Unix socket path keeps its case
    if ':' in name and not name.startswith('['):
        name = f'[{name}]'  # IPv6
    return name if port is None else f'{name}:{port}'
