"""``MediaUrls``: send stored media to the model as URLs instead of base64, in the request only.

Before each model request, every large ``BinaryContent`` of a user prompt or
tool return is stored (through the payload route, so a payload already stored
costs no put and no hash) and replaced, in that request's messages only, by
the matching ``ImageUrl`` / ``AudioUrl`` / ``VideoUrl`` / ``DocumentUrl``. The
run's history keeps the bytes. URLs are reused while they have at least
``min_validity`` seconds left, so repeated requests carry identical bytes and
providers' prompt caches keep working. When the store fails, that request
goes out with its bytes inline (one WARNING per outage), and so do the requests
of the next ``store_cooldown`` seconds before one tries the store again, unless
``on_store_error='raise'``. Reference parts (URL parts whose URL is a
blob's ``media+sha256://`` URI, from ``restore='references'``) are resolved
in each request: a URL, or their bytes read once (``resolve_blob``, the
per-blob step). ``docs/model-urls.md`` has the details.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import weakref
from collections.abc import Callable, Collection
from datetime import timedelta
from typing import Any, Final, Literal, Unpack

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext

from mediastash._lru import BoundedLRU
from mediastash._tasks import for_each
from mediastash.context import MediaContext
from mediastash.errors import InvalidArgumentError, InvalidStoreConfiguration, StoreClosedError, UnsafeKeyError
from mediastash.integrations._outage import DEFAULT_STORE_COOLDOWN, StoreOutage, cooldown_seconds
from mediastash.integrations.pydantic_ai._identifiers import IdentifierMemo
from mediastash.integrations.pydantic_ai._model_kinds import ALL_KINDS, URL_CLASS, MediaKind, fetches_by_url, kind_of
from mediastash.integrations.pydantic_ai._references import (
    REFERENCE_PART_KINDS,
    ReferencePart,
    namespace_of,
    refuse_unvouched,
)
from mediastash.integrations.pydantic_ai._sent_parts import BlobAnswer, BlobKey, Place, StoredBlob, reference_places
from mediastash.integrations.pydantic_ai._typed_payloads import TypedPayload, typed_payloads, with_replaced_contents
from mediastash.integrations.pydantic_ai._typed_walk import TypedBinaries, read_blobs
from mediastash.integrations.pydantic_ai.provider_files import ProviderFiles, UploadRegistry, streaming_request
from mediastash.known_blobs import fingerprint_bytes
from mediastash.reference_keys import ReferenceKey, reference_key_of
from mediastash.stores.capabilities import public_url_lifetime_of
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import WalkKeywords, WalkSettings, options_from_keywords

__all__ = [
    'DEFAULT_MIN_VALIDITY',
    'DEFAULT_STORE_COOLDOWN',
    'BlobAnswer',
    'MediaKind',
    'MediaUrlSwapper',
    'MediaUrls',
    'OnStoreError',
    'StoredBlob',
]

logger = logging.getLogger('mediastash.integrations.media_urls')  # the name docs/logging.md gives

DEFAULT_MIN_VALIDITY: Final = 600.0
"""Seconds a reused URL must still be valid for; a URL with less left is replaced by a fresh one."""

DEFAULT_MAX_URLS: Final = 4096
"""URLs remembered for reuse (least recently used go first)."""

UrlLifetime = float | timedelta | Literal['store'] | None

OnStoreError = Literal['inline', 'raise']
"""What a failing store does to a model request: ``'inline'`` sends its bytes as they are, ``'raise'`` fails the run."""

_ON_STORE_ERROR: Final = ('inline', 'raise')
_NEVER_INLINED: Final = (
    TypeError,
    AttributeError,
    NameError,
    KeyError,
    IndexError,
    AssertionError,
    NotImplementedError,
    RecursionError,
    MemoryError,
    InvalidStoreConfiguration,
    StoreClosedError,
    UnsafeKeyError,
)
"""Errors that are bugs or configuration mistakes, not an unavailable store: raised whatever ``on_store_error``.

Everything else an ``Exception`` (driver and network errors, ``OSError``, other ``MediaStashError``s such as a
missing bucket) sends the request inline; ``BaseException`` (cancellation, ``KeyboardInterrupt``) is never caught.
"""


def _seconds(value: object, name: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f'{name} must be a non-negative number of seconds or a timedelta')
    return float(value)


@dataclasses.dataclass(slots=True)
class _IssuedUrl:
    """A URL handed out for one blob and when it expires (monotonic clock; ``None``: never)."""

    url: str
    expires_at: float | None
    answer: BlobAnswer = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.answer = BlobAnswer(url=self.url)


@dataclasses.dataclass(slots=True)
class _BuiltPart:
    """The last URL part built for a URL, with the identifier and metadata it was built with."""

    part: ReferencePart
    identifier: str
    vendor_metadata: dict[str, Any] | None


class _StoreCallFailed(Exception):
    """Internal: a store call failed in a way ``on_store_error='inline'`` covers (``error`` is the store's)."""

    def __init__(self, operation: str, error: Exception) -> None:
        super().__init__(operation)
        self.operation = operation
        self.error = error


class MediaUrlSwapper(WalkSettings):
    """The request rewrite behind ``MediaUrls``, usable on its own (see ``swap`` and ``__call__``).

    ``kinds``: ``'auto'`` swaps the kinds the request's model passes on to its
    provider as URLs (images for every URL-capable provider; documents,
    audio and video where the model class does); or give the kinds to swap
    whatever the model. ``url_lifetime``: ``'store'`` reads it from the
    store (``public_url_lifetime``, e.g. ``PresignedUrls.expires_in``),
    ``None`` means URLs never expire (a static base URL), or give seconds.
    ``on_store_error``: when a store call fails (``put``, ``public_url``, an
    existence check), ``'inline'`` (the default) sends that request with its
    bytes as they are and logs one WARNING naming the operation and the
    error type; the requests of the next ``store_cooldown`` seconds (default
    30, a number or a ``timedelta``) go inline at once without calling the
    store, then one request tries it again (one WARNING per outage, an INFO
    when the store answers again; ``store_down``, ``store_skips``). ``'raise'``
    lets the error fail the run. Cancellation, programming errors
    (``TypeError``, ``AttributeError``, ``KeyError``, ...) and configuration
    or lifecycle errors (``InvalidStoreConfiguration``, ``StoreClosedError``,
    ``UnsafeKeyError``) are raised either way (``docs/model-urls.md``).
    ``options``: the walk settings as one ``WalkOptions`` (``threshold_bytes``,
    ``known_blobs`` and ``max_concurrency`` as for ``externalize_media``). The
    separate ``threshold_bytes=`` / ``known_blobs=`` / ``max_concurrency=``
    keywords still work for one release, with a ``DeprecationWarning``.
    ``provider_files``: ``True`` (uploads remembered in this process) or an
    ``UploadRegistry`` (e.g. ``KVUploadRegistry``, shared across processes)
    sends media the model would otherwise get as bytes as provider file
    references (``UploadedFile``), uploading each blob once per provider
    account; ``False`` (the default) never uploads (``docs/model-urls.md``,
    "Provider file references").

    Reference parts (``OffloadingStepStore(restore='references')``: URL parts
    whose URL is a blob's ``media+sha256://`` URI) are resolved whatever
    their size: a URL where the model takes their kind by URL and the store
    gives one, else their bytes, read once through the known-blob cache. A
    failing store cannot leave them as they are: under
    ``on_store_error='inline'`` their bytes are read, and a store that cannot
    serve them either fails the request. Each distinct blob is one
    ``resolve_blob`` call, the per-blob step to extend.

    Only references mediastash vouches for are resolved: sealed by a restore
    under ``reference_key`` (bytes of at least 32, or a ``ReferenceKey``;
    ``None``: this process's random key, as the wrappers use by default) for
    the namespace of ``media_store``. Any other (typed into a prompt, sent by
    a client, forged, altered, another namespace's) raises
    ``UnvouchedReferenceError`` before any store call or request.
    ``trust_references=True`` resolves every reference: only for trusted
    single-user tools (``docs/security.md``).
    """

    def __init__(
        self,
        media_store: MediaStore,
        *,
        min_validity: float | timedelta = DEFAULT_MIN_VALIDITY,
        kinds: Collection[MediaKind] | Literal['auto'] = 'auto',
        url_lifetime: UrlLifetime = 'store',
        max_urls: int = DEFAULT_MAX_URLS,
        on_store_error: OnStoreError = 'inline',
        clock: Callable[[], float] = time.monotonic,
        options: WalkOptions | None = None,
        provider_files: bool | UploadRegistry = False,
        reference_key: ReferenceKey | bytes | None = None,
        trust_references: bool = False,
        store_cooldown: float | timedelta = DEFAULT_STORE_COOLDOWN,
        **walk_keywords: Unpack[WalkKeywords],
    ) -> None:
        self._outage = StoreOutage(cooldown_seconds(store_cooldown), lambda: self.clock(), logger)
        if not isinstance(trust_references, bool):
            raise InvalidArgumentError('trust_references', 'True or False', trust_references)
        self.reference_key = reference_key_of(reference_key)
        """Vouches for reference parts: one of its keys must have sealed them for this store's namespace."""
        self.trust_references = trust_references
        """``True``: resolve every reference part, sealed or not (trusted single-user tools only)."""
        if not isinstance(on_store_error, str) or on_store_error not in _ON_STORE_ERROR:
            raise InvalidStoreConfiguration("on_store_error must be 'inline' or 'raise'")
        if not isinstance(provider_files, bool | UploadRegistry):
            raise InvalidStoreConfiguration('provider_files must be True, False or an UploadRegistry')
        self.on_store_error: OnStoreError = on_store_error
        self.media_store = media_store
        self._walk_options = options_from_keywords('MediaUrlSwapper', options, walk_keywords)
        self.min_validity = _seconds(min_validity, 'min_validity')
        if kinds == 'auto':
            self.kinds: frozenset[MediaKind] | None = None
        else:
            chosen = frozenset(kinds)
            unknown = chosen - ALL_KINDS
            if isinstance(kinds, str) or unknown:
                raise ValueError(f"kinds must be 'auto' or a collection of {sorted(ALL_KINDS)}")
            self.kinds = chosen
        self._url_lifetime: float | Literal['store'] | None
        if url_lifetime is None:
            self._url_lifetime = None
        elif url_lifetime == 'store':
            self._url_lifetime = 'store'
        else:
            self._url_lifetime = _seconds(url_lifetime, 'url_lifetime')
        self.clock = clock
        self._urls: BoundedLRU[tuple[str, str], _IssuedUrl] = BoundedLRU(max_items=max_urls)
        self._parts: BoundedLRU[tuple[str, str], _BuiltPart] = BoundedLRU(max_items=max_urls)
        self._identifiers = IdentifierMemo(max_urls)
        # Fingerprints by content object (with the id of the bytes they were taken of), so a history
        # sent again costs no fingerprint; the fingerprint only nominates, the cache still compares.
        self._fingerprints: BoundedLRU[int, tuple[weakref.ref[BinaryContent], int, int]] = BoundedLRU(
            max_items=max_urls
        )
        self.urls_issued = 0
        """How many URLs the store was asked for (a stable run asks once per blob per lifetime)."""
        self.store_failures = 0
        """How many requests went out with their bytes inline because a store call failed."""
        self.store_skips = 0
        """How many requests went out inline without calling the store, during a cool-down (``store_cooldown``)."""
        self.provider_files: ProviderFiles | None = None
        """The provider-file rewrite (``provider_files=``): its ``uploads`` count and ``delete_uploads``."""
        if provider_files is not False:
            self.provider_files = ProviderFiles(
                media_store,
                options=self._walk_options,
                registry=None if provider_files is True else provider_files,
                on_error=on_store_error,
                reference_key=self.reference_key,
                trust_references=trust_references,
            )
            self.provider_files.store_outages_logged_elsewhere = True

    @property
    def url_lifetime(self) -> float | None:
        """Seconds a URL stays valid (``None``: never expires)."""
        if self._url_lifetime == 'store':
            return public_url_lifetime_of(self.media_store)
        return self._url_lifetime

    def issued_url(self, uri: str, media_type: str) -> str | None:
        """The URL last handed out for ``uri`` served as ``media_type`` (``None`` if none is remembered)."""
        issued = self._urls.peek((uri, media_type))
        return None if issued is None else issued.url

    def _wanted(self, kind: MediaKind, media_type: str, model: Any) -> bool:
        if self.kinds is not None:
            return kind in self.kinds
        return fetches_by_url(model, kind, media_type)

    async def swap(self, messages: list[ModelMessage], *, model: Any = None) -> list[ModelMessage]:
        """A new message list with large media of requests replaced by URL parts (``messages`` is not changed).

        Each swapped payload is in the store before its URL is handed out.
        Where the store gives no URL the bytes stay (a reference part gets its
        bytes); where a store call fails, see ``on_store_error``. ``model`` is the model the request goes to
        (for ``kinds='auto'``). With ``provider_files``, media the model would
        get as bytes become provider file references.

        Before anything else, every reference part must be vouched for
        (``reference_key``, this store's namespace) unless ``trust_references``:
        the first that is not raises ``UnvouchedReferenceError``, and no store
        call, upload or request is made.
        """
        if not self.trust_references:
            refuse_unvouched(messages, self.reference_key, namespace_of(self.media_store))
        gate = self._outage.gate()
        if gate == 'skip':
            return await self._without_store(messages)
        try:
            return await self._swap_with_store(messages, model)
        finally:
            if gate == 'probe':
                self._outage.probe_done()

    @property
    def store_down(self) -> bool:
        """Whether the store failed and has not answered since (requests skip it during ``store_cooldown``)."""
        return self._outage.down

    async def _swap_with_store(self, messages: list[ModelMessage], model: Any) -> list[ModelMessage]:
        files = self.provider_files
        if files is None:
            return await self._swap_urls(messages, model=model)
        # First what the model does not take by URL, then what got no URL (a store without public URLs).
        by_url = functools.partial(self._wanted, model=model)
        put_failures = files.store_failures
        messages = await files.apply(messages, model=model, leave=by_url)
        if files.store_failures != put_failures:  # the store failed there: no second wait for it
            self.store_failures += 1
            self._outage.failed('put', files.last_store_error, 1)
            return await self._without_store(messages, counted=False)
        failures = self.store_failures
        swapped = await self._swap_urls(messages, model=model)
        return swapped if self.store_failures != failures else await files.apply(swapped, model=model)

    async def _without_store(self, messages: list[ModelMessage], *, counted: bool = True) -> list[ModelMessage]:
        """The request with its bytes as they are, without any store call but the reads reference parts need."""
        if counted:
            self.store_skips += 1
            logger.debug('MediaUrls: the media store is cooling down after a failure; this request goes inline')
        references = reference_places(messages)
        return await self._inlined_references(messages, references) if references else messages

    async def _swap_urls(self, messages: list[ModelMessage], *, model: Any = None) -> list[ModelMessage]:
        """``swap`` without provider files: URL parts for what the model takes by URL."""
        binaries = self._binaries_to_send(messages, model)
        references = reference_places(messages)
        if not binaries and not references:
            return messages
        lifetime = self.url_lifetime
        if lifetime is not None and self.min_validity >= lifetime:
            raise InvalidStoreConfiguration(
                f'min_validity ({self.min_validity:g} s) must be shorter than the URL lifetime ({lifetime:g} s), '
                'or every request would need a fresh URL'
            )
        count = len(binaries) + len(references)
        try:
            uris = await self._stored_uris(binaries)
        except Exception as error:
            if not self._inlines(error):
                raise
            return await self._inline(messages, references, 'put', error, count)
        places = [
            Place(item, kind, uri, item.original)
            for (item, kind), uri in zip(binaries, uris, strict=True)
            if isinstance(item.original, BinaryContent)
        ]
        places += references
        issued = self.urls_issued
        try:
            sent = await self._resolve_places(places, model, lifetime)
        except _StoreCallFailed as failed:
            return await self._inline(messages, references, failed.operation, failed.error, count)
        if binaries or self.urls_issued != issued:
            self._outage.answered()
        replacements = [(place.item, part) for place, part in zip(places, sent, strict=True) if part is not None]
        logger.debug('swapped %d of %d media parts (%d reference parts)', len(replacements), count, len(references))
        return with_replaced_contents(messages, replacements) if replacements else messages

    def _binaries_to_send(self, messages: list[ModelMessage], model: Any) -> list[tuple[TypedPayload, MediaKind]]:
        """The large ``BinaryContent``s of user prompts and tool returns that go to ``model`` by URL."""
        found: list[tuple[TypedPayload, MediaKind]] = []
        decided: dict[tuple[MediaKind, str], bool] = {}
        for item in typed_payloads(messages, self._walk_options.threshold_bytes):
            content = item.original
            if item.text or not isinstance(content, BinaryContent):
                continue
            message = messages[item.message]
            j = item.path[1]
            part = message.parts[j] if isinstance(message, ModelRequest) and isinstance(j, int) else None
            if getattr(part, 'part_kind', None) not in REFERENCE_PART_KINDS:
                continue
            kind = kind_of(content)
            if kind is None:
                continue
            key = (kind, content.media_type)
            wanted = decided.get(key)
            if wanted is None:
                wanted = decided[key] = self._wanted(kind, content.media_type, model)
            if wanted:
                found.append((item, kind))
        return found

    async def _stored_uris(self, binaries: list[tuple[TypedPayload, MediaKind]]) -> list[str]:
        """Each binary's URI, storing (through the payload route) what the store does not hold yet."""
        if not binaries:
            return []
        items = [item for item, _ in binaries]
        stored = TypedBinaries(self.media_store, self._walk_options, items, [self._fingerprint(item) for item in items])
        return await stored.store()

    async def _resolve_places(
        self, places: list[Place], model: Any, lifetime: float | None
    ) -> list[BinaryContent | ReferencePart | None]:
        """What each place sends: ``resolve_blob`` once per distinct blob, then each place's part from the answer.

        A blob the model takes by URL whose URL is still valid for ``min_validity`` is answered here, without a
        ``resolve_blob`` call (a history sent again costs no task and no allocation per part).
        """
        keys: list[BlobKey] = []
        answers: dict[BlobKey, BlobAnswer | None] = {}
        pending: dict[BlobKey, StoredBlob] = {}
        wanted: dict[tuple[MediaKind, str], bool] = {}
        now = self.clock()
        for place in places:
            media_type = place.source.media_type
            key = (place.uri, media_type, place.kind, isinstance(place.source, BinaryContent))
            keys.append(key)
            if key in answers or key in pending:
                continue
            by_url = wanted.get((place.kind, media_type))
            if by_url is None:
                by_url = wanted[(place.kind, media_type)] = self._wanted(place.kind, media_type, model)
            known = self._urls.get((place.uri, media_type)) if by_url else None
            if known is not None and (known.expires_at is None or known.expires_at - now >= self.min_validity):
                answers[key] = known.answer
            else:
                pending[key] = place.blob(self._identifiers)

        async def resolve(key: BlobKey) -> None:
            answers[key] = await self.resolve_blob(pending[key], model, lifetime)

        if pending:
            await for_each(list(pending), self.max_concurrency, resolve)
        return [
            place.sent(answers[key], self._identifiers, self._url_part) for place, key in zip(places, keys, strict=True)
        ]

    async def resolve_blob(self, blob: StoredBlob, model: Any, lifetime: float | None) -> BlobAnswer | None:
        """How one stored blob goes to ``model`` in this request: the per-blob step of ``swap``.

        ``blob`` names the blob (URI, media type, kind) and says whether the
        request holds its bytes (a ``BinaryContent``) or only a reference part.
        The answer is a URL (``BlobAnswer(url=...)``) when the model takes the
        kind by URL and the store hands one out (reused while it has
        ``min_validity`` left); the verified bytes (``BlobAnswer(data=...)``,
        read once, through the known-blob cache) for a reference part that
        cannot go by URL; or ``None``: the part stays as it is. A failing
        store call that ``on_store_error='inline'`` covers raises
        ``_StoreCallFailed``; ``swap`` then sends the request inline.
        """
        if self._wanted(blob.kind, blob.media_type, model):
            url = await self._url_for(blob, lifetime)
            if url is not None:
                return BlobAnswer(url=url)
        if blob.has_bytes:
            return None
        return BlobAnswer(data=(await self._read({blob.uri: blob.media_type}))[blob.uri])

    async def _read(self, wanted: dict[str, str | None]) -> dict[str, bytes]:
        """The verified bytes of stored blobs, each read once (not at all when the known-blob cache holds it)."""
        return await read_blobs(self.media_store, self._walk_options, wanted)

    async def _url_for(self, blob: StoredBlob, lifetime: float | None) -> str | None:
        """A URL for the blob with at least ``min_validity`` left: the one handed out before, else a fresh one."""
        key = (blob.uri, blob.media_type)
        known = self._urls.get(key)
        started = self.clock()
        if known is not None and (known.expires_at is None or known.expires_at - started >= self.min_validity):
            return known.url
        context = MediaContext(media_type=blob.media_type, filename=blob.filename)
        try:
            url = await self.media_store.public_url(blob.uri, context=context)
        except Exception as error:
            if not self._inlines(error):
                raise
            raise _StoreCallFailed('public_url', error) from error
        self.urls_issued += 1
        if url is None:
            return None
        self._urls.put(key, _IssuedUrl(url, None if lifetime is None else started + lifetime))
        return url

    def _inlines(self, error: Exception) -> bool:
        """Whether a failed store call leaves the request inline (else the error is raised)."""
        return self.on_store_error == 'inline' and not isinstance(error, _NEVER_INLINED)

    async def _inline(
        self, messages: list[ModelMessage], references: list[Place], operation: str, error: Exception, count: int
    ) -> list[ModelMessage]:
        """The request with its bytes as they are; the outage is remembered (``StoreOutage``: one WARNING per outage).

        A driver's message can hold the endpoint, the bucket or a URL (a presigned URL is a credential),
        so only the class name is logged, and no traceback. Reference parts hold no bytes: theirs are
        read (a store that cannot serve them fails the request with its own error).
        """
        self.store_failures += 1
        self._outage.failed(operation, type(error).__name__, count)
        if not references:
            return messages
        return await self._inlined_references(messages, references)

    async def _inlined_references(self, messages: list[ModelMessage], references: list[Place]) -> list[ModelMessage]:
        """``messages`` with each reference part replaced by its blob's bytes (read once, through the cache)."""
        data = await self._read({place.uri: place.source.media_type for place in references})
        inlined = [
            (place.item, place.inline(data[place.uri], place.identifier(self._identifiers))) for place in references
        ]
        return with_replaced_contents(messages, inlined)

    def _fingerprint(self, item: TypedPayload) -> int | None:
        """The remembered fingerprint of this content object's current bytes, else a fresh one (remembered)."""
        content = item.original
        assert isinstance(content, BinaryContent)
        data = content.data
        known = self._fingerprints.get(id(content))
        if known is not None and known[0]() is content and known[1] == id(data):
            return known[2]
        fp = fingerprint_bytes(data)
        self._fingerprints.put(id(content), (weakref.ref(content), id(data), fp))
        return fp

    def _url_part(
        self, url: str, kind: MediaKind, media_type: str, identifier: str, vendor_metadata: dict[str, Any] | None
    ) -> ReferencePart:
        """The URL part sent for a blob: the one built last time when URL, kind, identifier and metadata agree.

        Reusing the very part keeps repeated requests identical (providers' prompt caches).
        """
        built = self._parts.peek((url, media_type))  # no reordering: a part evicted early is only rebuilt
        if (
            built is not None
            and type(built.part) is URL_CLASS[kind]
            and built.identifier == identifier
            and built.vendor_metadata == vendor_metadata
        ):
            return built.part
        part = URL_CLASS[kind](url=url, media_type=media_type, identifier=identifier, vendor_metadata=vendor_metadata)
        copied = None if vendor_metadata is None else dict(vendor_metadata)
        self._parts.put((url, media_type), _BuiltPart(part, identifier, copied))
        return part

    async def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """Use as a pydantic-ai history processor (``ProcessHistory`` / ``history_processors=``).

        A history processor's result becomes the run's history, so the URLs
        would be saved with it: this form refuses stores whose URLs expire
        (use the ``MediaUrls`` capability there, which changes the request only),
        and ``provider_files`` (file ids are for requests, never for storage).
        """
        if self.provider_files is not None:
            raise InvalidStoreConfiguration(
                'provider_files would put provider file ids in the run history, which a history processor saves; '
                'use the MediaUrls capability, which changes only the request'
            )
        lifetime = self.url_lifetime
        if lifetime is not None:
            raise InvalidStoreConfiguration(
                f'the store hands out URLs that expire after {lifetime:g} s, and a history processor would save them '
                'in the run history; use the MediaUrls capability, which changes only the request'
            )
        return await self.swap(messages, model=ctx.model)


class MediaUrlSettings(WalkKeywords, total=False):
    """The keywords ``MediaUrls`` hands on to its ``MediaUrlSwapper`` (all of the swapper's but ``clock``)."""

    min_validity: float | timedelta
    kinds: Collection[MediaKind] | Literal['auto']
    url_lifetime: UrlLifetime
    max_urls: int
    on_store_error: OnStoreError
    provider_files: bool | UploadRegistry
    reference_key: ReferenceKey | bytes | None
    trust_references: bool
    store_cooldown: float | timedelta


class MediaUrls(AbstractCapability[Any]):
    """A pydantic-ai capability: large media go to the model as URLs from ``media_store``, not as base64.

    Acts in ``before_model_request`` on that request's messages only; the
    run's history, ``result.all_messages()`` and what ``StepPersistence``
    saves keep ``BinaryContent``. A failing store costs that request its
    URLs, not the run (``on_store_error``). Only reference parts mediastash
    vouches for are resolved (``reference_key``, ``trust_references``;
    ``docs/security.md``). ``options`` and the other keywords
    (``MediaUrlSettings``) are those of ``MediaUrlSwapper``.
    """

    def __init__(
        self, media_store: MediaStore, *, options: WalkOptions | None = None, **settings: Unpack[MediaUrlSettings]
    ) -> None:
        unknown = [name for name in settings if name not in MediaUrlSettings.__annotations__]
        if unknown:
            raise TypeError(f"MediaUrls() got an unexpected keyword argument '{unknown[0]}'")
        walk = {name: value for name, value in settings.items() if name in WalkKeywords.__annotations__}
        rest: dict[str, Any] = {name: value for name, value in settings.items() if name not in walk}
        self.swapper = MediaUrlSwapper(media_store, options=options_from_keywords('MediaUrls', options, walk), **rest)

    @property
    def media_store(self) -> MediaStore:
        return self.swapper.media_store

    @property
    def provider_files(self) -> ProviderFiles | None:
        """The provider-file rewrite (``None`` unless ``provider_files=`` was given)."""
        return self.swapper.provider_files

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        """A request refused because the provider lost a file we sent: upload it again, retry once."""
        files = self.swapper.provider_files
        if files is not None:
            messages = await files.recover(error, request_context.messages, model=request_context.model)
            if messages is not None:
                request_context.messages = messages
                return await request_context.model.request(
                    messages, request_context.model_settings, request_context.model_request_parameters
                )
        raise error

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        with streaming_request(request_context.streaming):  # provider files: no recovery once a stream began
            request_context.messages = await self.swapper.swap(request_context.messages, model=request_context.model)
        return request_context

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # takes a store object: not buildable from a YAML/JSON spec

    def __repr__(self) -> str:
        return f'MediaUrls({self.media_store!r}, threshold_bytes={self.swapper.threshold_bytes})'
