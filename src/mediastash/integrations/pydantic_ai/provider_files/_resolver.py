"""``ProviderFiles``: media a model would receive as bytes go as provider file references instead.

For each large ``BinaryContent`` of a user prompt or tool return that the
request's model takes as an ``UploadedFile`` (``_targets``), the blob is put
in the media store (the payload route: a known blob costs nothing), uploaded
once per provider account through the model's own SDK client, and the part
is replaced, in that request only, by ``UploadedFile(file_id, provider)``.
Bedrock reads an S3 media store's object as ``s3://bucket/key``: no upload.
A reference part (a URL part whose URL is ``media+sha256://...``) is handled
the same way and reads its blob only when it must be uploaded.

Uploads are remembered in an ``UploadRegistry``; one close to expiry is
uploaded again, and a file the provider no longer has (its request failed
naming the file id) is uploaded again once by ``recover``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mimetypes
import time
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Final, Literal

from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, UploadedFile

from mediastash._lru import BoundedLRU
from mediastash.context import MediaContext
from mediastash.errors import InvalidArgumentError, InvalidStoreConfiguration
from mediastash.integrations.pydantic_ai._identifiers import IdentifierMemo
from mediastash.integrations.pydantic_ai._model_kinds import MediaKind, kind_of
from mediastash.integrations.pydantic_ai._references import (
    REFERENCE_PART_KINDS,
    is_reference_part,
    kind_of_reference,
    namespace_of,
    reference_uri,
    refuse_unvouched,
)
from mediastash.integrations.pydantic_ai._typed_payloads import TypedPayload, typed_payloads, with_replaced_contents
from mediastash.integrations.pydantic_ai._typed_walk import TypedBinaries
from mediastash.integrations.pydantic_ai.provider_files._registry import (
    MemoryUploadRegistry,
    UploadRecord,
    UploadRegistry,
)
from mediastash.integrations.pydantic_ai.provider_files._targets import FILE_GONE_STATUSES, Target, target_for
from mediastash.reference_keys import ReferenceKey, reference_key_of
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions

__all__ = ['DEFAULT_FILE_MIN_VALIDITY', 'ProviderFiles']

logger = logging.getLogger('mediastash.integrations.provider_files')

DEFAULT_FILE_MIN_VALIDITY: Final = 3600.0
"""Seconds an uploaded file must still live to be sent again; one closer to expiry is uploaded anew."""

_LOST_FILE_STATUS: Final = frozenset({400, 403, 404, 410})
_STREAMING: ContextVar[bool] = ContextVar('mediastash_provider_files_streaming', default=False)


@contextlib.contextmanager
def streaming_request(streaming: bool) -> Iterator[None]:
    """Marks the ``apply`` calls inside as building a streamed request (``ProviderFiles`` checks reused files).

    pydantic-ai offers no recovery once a streamed response has begun, so a file id this process has
    neither uploaded nor checked is asked about (one ``GET`` per file per process) before it is sent.
    """
    token = _STREAMING.set(streaming)
    try:
        yield
    finally:
        _STREAMING.reset(token)


_NEVER_INLINED: Final = (TypeError, AttributeError, NameError, KeyError, AssertionError, InvalidStoreConfiguration)


@dataclass(slots=True)
class _Candidate:
    """One part to reference: its bytes (a ``BinaryContent``) or a reference part naming its blob."""

    payload: TypedPayload
    kind: MediaKind
    media_type: str
    uri: str | None = None


@dataclass(frozen=True, slots=True)
class _Origin:
    """What a file id sent in a request stands for, so a lost file can be uploaded again."""

    provider: str
    account: str
    uri: str
    media_type: str
    filename: str
    content: weakref.ref[BinaryContent] | None


class ProviderFiles:
    """Replaces media a model would receive inline by provider file references (see the module docstring).

    ``registry``: where uploads are remembered (``MemoryUploadRegistry``, this
    process only, by default; ``KVUploadRegistry`` to share them across
    processes and runs). ``min_validity``: a file with less lifetime left is
    uploaded again. ``on_error``: a failing store or upload sends the bytes
    inline with one WARNING (``'inline'``), or fails the run (``'raise'``).
    ``reference_key`` / ``trust_references``: as for ``MediaUrls``; only
    vouched reference parts are uploaded.
    """

    def __init__(
        self,
        media_store: MediaStore,
        *,
        options: WalkOptions | None = None,
        registry: UploadRegistry | None = None,
        min_validity: float | timedelta = DEFAULT_FILE_MIN_VALIDITY,
        on_error: Literal['inline', 'raise'] = 'inline',
        clock: Callable[[], float] = time.time,
        max_remembered: int = 4096,
        reference_key: ReferenceKey | bytes | None = None,
        trust_references: bool = False,
    ) -> None:
        if registry is not None and not isinstance(registry, UploadRegistry):
            raise InvalidStoreConfiguration('provider_files registry must have get, put, forget and records methods')
        if on_error not in ('inline', 'raise'):
            raise InvalidStoreConfiguration("on_error must be 'inline' or 'raise'")
        if isinstance(min_validity, timedelta):
            min_validity = min_validity.total_seconds()
        if isinstance(min_validity, bool) or not isinstance(min_validity, int | float) or not min_validity >= 0:
            raise InvalidStoreConfiguration('min_validity must be a non-negative number of seconds or a timedelta')
        if not isinstance(trust_references, bool):
            raise InvalidArgumentError('trust_references', 'True or False', trust_references)
        self.reference_key = reference_key_of(reference_key)
        self.trust_references = trust_references
        self.media_store = media_store
        self.options = options or WalkOptions()
        self.registry: UploadRegistry = registry if registry is not None else MemoryUploadRegistry()
        self.min_validity = float(min_validity)
        self.on_error = on_error
        self.clock = clock
        self._inflight: dict[tuple[str, str, str], asyncio.Future[UploadRecord]] = {}
        self._origins: BoundedLRU[str, _Origin] = BoundedLRU(max_items=max_remembered)
        self._identifiers = IdentifierMemo(max_remembered)
        self._seen: BoundedLRU[str, bool] = BoundedLRU(max_items=max_remembered)
        """File ids this object uploaded or found at the provider: a streamed request sends them unchecked."""
        self.uploads = 0
        """Blobs uploaded to a provider by this object (a stable run uploads each blob once per account)."""
        self.reuploads = 0
        """Uploads made because a provider had lost a file (``recover``) or it was about to expire."""
        self.failures = 0
        """Requests that kept some bytes inline because the store or an upload failed."""
        self.store_failures = 0
        """Of those, the ones where storing the bytes (``put``) failed: ``MediaUrls`` then skips the store a while."""
        self.last_store_error = ''
        """The type name of the last error a ``put`` raised."""
        self.store_outages_logged_elsewhere = False
        """``True`` (set by ``MediaUrls``): a failed ``put`` logs nothing here; the owner logs the outage once."""

    # -- per request ---------------------------------------------------------------------

    def accepts(self, model: Any, kind: MediaKind, media_type: str) -> bool:
        """Whether ``model`` would get media of this kind and type as a file reference."""
        target = target_for(model, self.media_store)
        return target is not None and target.accepts(kind, media_type)

    async def apply(
        self,
        messages: list[ModelMessage],
        *,
        model: Any,
        leave: Callable[[MediaKind, str], bool] | None = None,
    ) -> list[ModelMessage]:
        """A new message list where media ``model`` takes by file reference are ``UploadedFile`` parts.

        ``leave(kind, media_type)``: true for media to leave as they are (``MediaUrls``
        leaves what goes by URL). ``messages`` is not changed; without anything to
        replace it is returned as is. A reference part not vouched for
        (``reference_key``, the store's namespace) raises ``UnvouchedReferenceError``
        first, unless ``trust_references``.
        """
        if not self.trust_references:
            refuse_unvouched(messages, self.reference_key, namespace_of(self.media_store))
        target = target_for(model, self.media_store)
        if target is None:
            return messages
        if leave is not None:
            accepts = target.accepts
            target = replace(
                target, accepts=lambda kind, media_type: accepts(kind, media_type) and not leave(kind, media_type)
            )
        binaries, references = self._candidates(messages, target)
        if not binaries and not references:
            return messages
        if binaries:
            try:
                uris = await TypedBinaries(
                    self.media_store, self.options, [c.payload for c in binaries], [None] * len(binaries)
                ).store()
            except Exception as error:
                self._failed(error, 'put', len(binaries))
                binaries = []
            else:
                for candidate, uri in zip(binaries, uris, strict=True):
                    candidate.uri = uri
        chosen = binaries + references
        results = await asyncio.gather(*(self._file_for(c, target) for c in chosen), return_exceptions=True)
        replacements: list[tuple[TypedPayload, object]] = []
        failed: Exception | None = None
        for candidate, result in zip(chosen, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                failed = result
                continue
            replacements.append((candidate.payload, result))
        if failed is not None:
            self._failed(failed, 'upload', len(chosen) - len(replacements))
        return with_replaced_contents(messages, replacements) if replacements else messages

    def _candidates(self, messages: list[ModelMessage], target: Target) -> tuple[list[_Candidate], list[_Candidate]]:
        """Large ``BinaryContent`` and reference parts of prompts and tool returns that ``target`` takes."""
        binaries: list[_Candidate] = []
        references: list[_Candidate] = []
        for item in typed_payloads(messages, self.options.threshold_bytes):
            content = item.original
            if item.text or not isinstance(content, BinaryContent) or not self._in_request_part(messages, item):
                continue
            kind = kind_of(content)
            if kind is not None and target.accepts(kind, content.media_type):
                binaries.append(_Candidate(item, kind, content.media_type))
        for index, message in enumerate(messages):
            if not isinstance(message, ModelRequest):
                continue
            for j, part in enumerate(message.parts):
                if getattr(part, 'part_kind', None) not in REFERENCE_PART_KINDS:
                    continue
                content = getattr(part, 'content', None)
                items = list(enumerate(content)) if isinstance(content, list) else [(None, content)]
                for k, value in items:
                    if not is_reference_part(value):
                        continue
                    kind, media_type, url = kind_of_reference(value), value.media_type, reference_uri(value)
                    if not target.accepts(kind, media_type):
                        continue
                    path = ('parts', j, 'content') if k is None else ('parts', j, 'content', k)
                    payload = TypedPayload(index, path, False, b'', 0, media_type, value)
                    references.append(_Candidate(payload, kind, media_type, url))
        return binaries, references

    @staticmethod
    def _in_request_part(messages: list[ModelMessage], item: TypedPayload) -> bool:
        message = messages[item.message]
        j = item.path[1]
        part = message.parts[j] if isinstance(message, ModelRequest) and isinstance(j, int) else None
        return getattr(part, 'part_kind', None) in REFERENCE_PART_KINDS

    async def _file_for(self, candidate: _Candidate, target: Target) -> UploadedFile:
        uri = candidate.uri
        assert uri is not None
        original = candidate.payload.original
        identifier, filename = self._names(original, uri, candidate.media_type)
        if target.s3 is not None:
            file_id = target.s3.s3_uri(uri, MediaContext(media_type=candidate.media_type))
        else:
            content = original if isinstance(original, BinaryContent) else None
            record = await self._record(target, uri, candidate.media_type, filename, content)
            file_id = record.file_id
            self._origins.put(
                file_id,
                _Origin(
                    target.provider,
                    target.account,
                    uri,
                    candidate.media_type,
                    filename,
                    None if content is None else weakref.ref(content),
                ),
            )
        return UploadedFile(
            file_id,
            target.provider,  # type: ignore[arg-type]
            media_type=candidate.media_type,
            identifier=identifier,
            vendor_metadata=getattr(original, 'vendor_metadata', None),
        )

    def _names(self, original: object, uri: str, media_type: str) -> tuple[str, str]:
        if isinstance(original, BinaryContent):
            identifier = self._identifiers.identifier(original, uri)
            try:
                extension = original.format
            except ValueError:
                extension = 'bin'
        else:
            identifier = str(getattr(original, 'identifier', '')) or uri.rsplit('/', 1)[-1][:12]
            extension = (mimetypes.guess_extension(media_type) or '.bin').lstrip('.')
        return identifier, f'{identifier}.{extension}'

    async def _record(
        self, target: Target, uri: str, media_type: str, filename: str, content: BinaryContent | None
    ) -> UploadRecord:
        """The registry's live record for this blob at ``target``, else one fresh upload (shared by concurrent asks)."""
        key = (target.provider, target.account, uri)
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        known = await self.registry.get(*key)
        live = known is not None and (known.expires_at is None or known.expires_at - self.clock() >= self.min_validity)
        if live and known is not None:
            checked = not _STREAMING.get() or self._seen.get(known.file_id)
            if checked or await self._still_there(target, known):
                return known
        future: asyncio.Future[UploadRecord] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            record = await self._upload(target, uri, media_type, filename, content)
            if known is not None:
                self.reuploads += 1
            future.set_result(record)
            return record
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: a future nobody else awaits must not warn
            raise
        finally:
            del self._inflight[key]

    async def _still_there(self, target: Target, record: UploadRecord) -> bool:
        """Whether the provider still has a reused file (asked once per process), forgetting it if not."""
        assert target.uploader is not None
        if not await target.uploader.exists(record.file_id):
            await self.registry.forget(record.provider, record.account, record.uri)
            return False
        self._seen.put(record.file_id, True)
        return True

    async def _upload(
        self, target: Target, uri: str, media_type: str, filename: str, content: BinaryContent | None
    ) -> UploadRecord:
        assert target.uploader is not None
        data = content.data if content is not None else await self.media_store.get(uri)
        uploaded_at = self.clock()
        file_id, expires_at = await target.uploader.upload(data, media_type, filename)
        self.uploads += 1
        record = UploadRecord(target.provider, target.account, uri, file_id, media_type, uploaded_at, expires_at)
        await self.registry.put(record)
        self._seen.put(file_id, True)
        logger.debug('uploaded one %s blob of %d bytes to %s', media_type, len(data), target.provider)
        return record

    def _failed(self, error: Exception, operation: str, count: int) -> None:
        """Raise (``on_error='raise'`` or a bug), else one WARNING naming the operation and the error type only."""
        if self.on_error == 'raise' or isinstance(error, _NEVER_INLINED):
            raise error
        self.failures += 1
        if operation == 'put':
            self.store_failures += 1
            self.last_store_error = type(error).__name__
            if self.store_outages_logged_elsewhere:
                return  # MediaUrls logs one WARNING per store outage
        logger.warning(
            'MediaUrls provider files: %s failed (%s); %d media part(s) of this model request stay inline',
            operation,
            type(error).__name__,
            count,
        )

    # -- a provider that lost a file -------------------------------------------------------

    async def recover(
        self, error: BaseException, messages: list[ModelMessage], *, model: Any
    ) -> list[ModelMessage] | None:
        """After a failed model request: the messages with every lost file uploaded again, else ``None``.

        A file counts as lost when the provider refused the request (HTTP 400, 403, 404 or
        410) naming the id of a file this object sent. Its record is forgotten and the blob
        uploaded once more; the caller retries the request once with the result.
        """
        target = target_for(model, self.media_store)
        if target is None or target.uploader is None:
            return None
        if getattr(error, 'status_code', None) not in _LOST_FILE_STATUS:
            return None
        text = _error_text(error)
        lost: dict[str, _Origin] = {}
        for file_id in _sent_file_ids(messages, target.provider):
            origin = self._origins.peek(file_id)
            if origin is not None and origin.account == target.account and file_id in text:
                lost[file_id] = origin
        if not lost:
            return None
        renewed: dict[str, UploadedFile] = {}
        for file_id, origin in lost.items():
            await self.registry.forget(origin.provider, origin.account, origin.uri)
            content = origin.content() if origin.content is not None else None
            record = await self._record(target, origin.uri, origin.media_type, origin.filename, content)
            self.reuploads += 1
            self._origins.put(record.file_id, origin)
            renewed[file_id] = record_file(record)
        logger.warning(
            'MediaUrls provider files: %s no longer had %d uploaded file(s); uploaded again, retrying the request once',
            target.provider,
            len(renewed),
        )
        return _with_file_ids(messages, renewed)

    # -- clean-up ----------------------------------------------------------------------------

    async def delete_uploads(self, model: Any) -> int:
        """Delete at the provider every file the registry records for ``model``'s account, and forget them.

        Returns how many were deleted; a file the provider no longer has (404, or the Gemini API's 403)
        counts as deleted.
        """
        target = target_for(model, self.media_store)
        if target is None or target.uploader is None:
            return 0
        deleted = 0
        for record in await self.registry.records(target.provider, target.account):
            try:
                await target.uploader.delete(record.file_id)
            except Exception as error:
                if getattr(error, 'status_code', getattr(error, 'code', None)) not in FILE_GONE_STATUSES:
                    raise
            await self.registry.forget(record.provider, record.account, record.uri)
            self._origins.pop(record.file_id)
            deleted += 1
        return deleted


def record_file(record: UploadRecord) -> UploadedFile:
    return UploadedFile(record.file_id, record.provider, media_type=record.media_type)  # type: ignore[arg-type]


def _error_text(error: BaseException) -> str:
    body = getattr(error, 'body', None)
    if body is None:
        return str(error)
    return body if isinstance(body, str) else json.dumps(body, default=str)


def _sent_file_ids(messages: list[ModelMessage], provider: str) -> list[str]:
    found: list[str] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            content = getattr(part, 'content', None)
            for value in content if isinstance(content, list) else [content]:
                if isinstance(value, UploadedFile) and value.provider_name == provider:
                    found.append(value.file_id)
    return found


def _with_file_ids(messages: list[ModelMessage], renewed: dict[str, UploadedFile]) -> list[ModelMessage]:
    """``messages`` with each ``UploadedFile`` whose id was renewed pointing at its new id."""
    replacements: list[tuple[TypedPayload, object]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        for j, part in enumerate(message.parts):
            content = getattr(part, 'content', None)
            items = list(enumerate(content)) if isinstance(content, list) else [(None, content)]
            for k, value in items:
                if isinstance(value, UploadedFile) and value.file_id in renewed:
                    path = ('parts', j, 'content') if k is None else ('parts', j, 'content', k)
                    payload = TypedPayload(index, path, False, b'', 0, value.media_type, value)
                    replacements.append((payload, _renamed(value, renewed[value.file_id])))
    return with_replaced_contents(messages, replacements)


def _renamed(old: UploadedFile, new: UploadedFile) -> UploadedFile:
    return UploadedFile(
        new.file_id,
        old.provider_name,
        media_type=old.media_type,
        identifier=old.identifier,
        vendor_metadata=old.vendor_metadata,
    )
