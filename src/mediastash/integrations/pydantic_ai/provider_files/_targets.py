"""Which model takes which media as a provider file reference, and how a blob gets one.

A ``Target`` is what ``ProviderFiles`` needs from the request's model: the
``UploadedFile.provider_name`` to write, the account the files belong to
(endpoint plus a fingerprint of the credentials, never the credentials),
which media it takes by file reference, and either an ``Uploader`` (the
model's own SDK client: OpenAI Files, Anthropic Files, Gemini Files) or, for
Bedrock, the blob's ``s3://`` address in an S3 media store. The table
follows pydantic-ai-slim's model classes (``docs/model-urls.md`` lists it).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from mediastash.integrations.pydantic_ai._model_kinds import MediaKind
from mediastash.stores.capabilities import wrapped_store_of
from mediastash.stores.protocols import S3AddressableMediaStore

__all__ = ['FILE_GONE_STATUSES', 'GEMINI_FILE_LIFETIME', 'Target', 'Uploader', 'target_for']

GEMINI_FILE_LIFETIME: Final = 48 * 3600.0
"""Seconds a Gemini Files API upload lives when the answer names no expiry."""

_PDF: Final = frozenset({'application/pdf'})
_OPENAI_IMAGES: Final = frozenset({'image/png', 'image/jpeg', 'image/gif', 'image/webp'})
_ANTHROPIC_IMAGES: Final = _OPENAI_IMAGES
_ANTHROPIC_DOCUMENTS: Final = frozenset({'application/pdf', 'text/plain'})


class Uploader(Protocol):
    """Uploads a blob to one provider account and deletes it again, through the model's own SDK client."""

    async def upload(self, data: bytes, media_type: str, filename: str) -> tuple[str, float | None]:
        """The new file's id and its expiry (Unix time; ``None``: kept until deleted)."""
        ...

    async def delete(self, file_id: str) -> None: ...

    async def exists(self, file_id: str) -> bool:
        """Whether the provider still has the file (``False`` for its "not found" answer)."""
        ...


FILE_GONE_STATUSES: Final = frozenset({403, 404})
"""Statuses a provider answers for a file it does not have (the Gemini API: 403, 'or it may not exist')."""


async def _answers_gone(call: Any) -> bool:
    """Whether awaiting ``call`` fails with a not-found status (``True``), else ``False``; other errors propagate."""
    try:
        await call
    except Exception as error:
        if getattr(error, 'status_code', getattr(error, 'code', None)) in FILE_GONE_STATUSES:
            return True
        raise
    return False


@dataclass(frozen=True, slots=True)
class Target:
    """Where the request's model takes file references: ``uploader`` or ``s3`` (Bedrock) says how to get one."""

    provider: str
    account: str
    accepts: Callable[[MediaKind, str], bool]
    uploader: Uploader | None = None
    s3: S3AddressableMediaStore | None = None
    """The S3 media store whose objects Bedrock reads as ``s3://bucket/key`` (Bedrock only)."""


def _fingerprint(*secrets: object) -> str:
    """A short, non-reversible tag telling credentials apart (files belong to the key's project or account)."""
    joined = '\x00'.join('' if s is None else str(s) for s in secrets)
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def _class_names(obj: object) -> set[str]:
    return {cls.__name__ for cls in type(obj).__mro__}


def _unwrapped(model: Any) -> Any:
    while 'WrapperModel' in _class_names(model) and getattr(model, 'wrapped', None) is not None:
        model = model.wrapped
    return model


def target_for(model: Any, media_store: Any) -> Target | None:
    """The provider-file target of ``model``, or ``None`` when it takes no file references we can make.

    A ``FallbackModel`` gets none: a file id is only valid at one provider, and which
    member answers is decided after the request is built.
    """
    if model is None:
        return None
    model = _unwrapped(model)
    names = _class_names(model)
    system = getattr(model, 'system', None)
    client: Any = getattr(model, 'client', None)
    if 'OpenAIResponsesModel' in names or 'OpenAIChatModel' in names:
        if system != 'openai' or not hasattr(getattr(client, 'files', None), 'create'):
            return None
        account = f'{client.base_url}#{_fingerprint(client.api_key, client.organization, client.project)}'
        # Chat completions take an uploaded file only as a document; Responses also as an image.
        accepts = _media_types(_OPENAI_IMAGES | _PDF if 'OpenAIResponsesModel' in names else _PDF)
        return Target('openai', account, accepts, uploader=_OpenAIUploader(client))
    if 'AnthropicModel' in names:
        files = getattr(getattr(client, 'beta', None), 'files', None)
        if system != 'anthropic' or not hasattr(files, 'upload'):
            return None
        account = f'{client.base_url}#{_fingerprint(client.api_key, client.auth_token)}'
        return Target(
            'anthropic', account, _media_types(_ANTHROPIC_IMAGES | _ANTHROPIC_DOCUMENTS), _AnthropicUploader(client)
        )
    if 'GoogleModel' in names:
        api = getattr(client, '_api_client', None)
        if getattr(model, '_is_google_cloud', True) or api is None or getattr(api, 'vertexai', True):
            return None  # Google Cloud takes gs:// URIs only, and no Files API
        base_url = getattr(getattr(api, '_http_options', None), 'base_url', None)
        account = f'{base_url}#{_fingerprint(getattr(api, "api_key", None))}'
        return Target(str(system), account, _every_kind, _GeminiUploader(client))
    if 'BedrockConverseModel' in names:
        s3 = _s3_store_of(media_store)
        if s3 is None:
            return None
        meta = getattr(client, 'meta', None)
        account = f'{getattr(meta, "endpoint_url", None)}#{getattr(meta, "region_name", None)}'
        return Target('bedrock', account, _bedrock_accepts, s3=s3)
    return None


def _media_types(allowed: frozenset[str]) -> Callable[[MediaKind, str], bool]:
    def accepts(kind: MediaKind, media_type: str) -> bool:
        return media_type in allowed

    return accepts


def _every_kind(kind: MediaKind, media_type: str) -> bool:
    return True


def _bedrock_accepts(kind: MediaKind, media_type: str) -> bool:
    """Bedrock reads images, videos and documents from S3, not audio; the format must be one it names."""
    if kind == 'audio':
        return False
    from pydantic_ai.messages import UploadedFile

    try:
        return bool(UploadedFile('s3://b/k', 'bedrock', media_type=media_type).format)
    except ValueError:
        return False


def _s3_store_of(store: Any) -> S3AddressableMediaStore | None:
    """The store holding ``store``'s blobs as S3 objects (it declares ``S3AddressableMediaStore``), else ``None``.

    A wrapper store (``inner``: counting, caching) writes its blobs to the store it wraps.
    """
    for _ in range(8):
        if isinstance(store, S3AddressableMediaStore):
            return store
        store = wrapped_store_of(store)
        if store is None:
            return None
    return None


class _OpenAIUploader:
    """OpenAI Files API: ``purpose='vision'`` for images (Responses ``input_image``), ``'user_data'`` otherwise."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def upload(self, data: bytes, media_type: str, filename: str) -> tuple[str, float | None]:
        purpose = 'vision' if media_type.startswith('image/') else 'user_data'
        created = await self.client.files.create(file=(filename, data, media_type), purpose=purpose)
        expires = getattr(created, 'expires_at', None)
        return str(created.id), None if expires is None else float(expires)

    async def delete(self, file_id: str) -> None:
        await self.client.files.delete(file_id)

    async def exists(self, file_id: str) -> bool:
        return not await _answers_gone(self.client.files.retrieve(file_id))


class _AnthropicUploader:
    """Anthropic Files API (beta): files are kept until deleted."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def upload(self, data: bytes, media_type: str, filename: str) -> tuple[str, float | None]:
        created = await self.client.beta.files.upload(file=(filename, data, media_type))
        return str(created.id), None

    async def delete(self, file_id: str) -> None:
        await self.client.beta.files.delete(file_id)

    async def exists(self, file_id: str) -> bool:
        return not await _answers_gone(self.client.beta.files.retrieve_metadata(file_id))


_GEMINI_ACTIVE_WAIT: Final = 60.0


class _GeminiUploader:
    """Gemini API Files (google-genai): the file id is the file's ``uri``; files expire after 48 hours."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def upload(self, data: bytes, media_type: str, filename: str) -> tuple[str, float | None]:
        started = time.time()
        created = await self.client.aio.files.upload(
            file=io.BytesIO(data), config={'mime_type': media_type, 'display_name': filename}
        )
        deadline = time.monotonic() + _GEMINI_ACTIVE_WAIT
        while str(getattr(created.state, 'value', created.state) or 'ACTIVE') == 'PROCESSING':
            if time.monotonic() > deadline:
                raise TimeoutError('the Gemini Files API did not finish processing an upload within 60 s')
            await asyncio.sleep(1.0)
            created = await self.client.aio.files.get(name=created.name)
        expires = created.expiration_time
        return str(created.uri), started + GEMINI_FILE_LIFETIME if expires is None else expires.timestamp()

    async def delete(self, file_id: str) -> None:
        await self.client.aio.files.delete(name=_gemini_name(file_id))

    async def exists(self, file_id: str) -> bool:
        return not await _answers_gone(self.client.aio.files.get(name=_gemini_name(file_id)))


def _gemini_name(file_id: str) -> str:
    """``files/<id>``, the name the Files API methods take, from a file's URI."""
    return 'files/' + file_id.rstrip('/').rsplit('/', 1)[-1]
