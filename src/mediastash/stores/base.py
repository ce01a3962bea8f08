"""``BaseMediaStore``: the rules every mediastash store keeps, in one place.

A backend supplies raw primitives over a validated hex digest (``_write``,
``_read`` or ``_raw_chunks``, ``_contains``, ``_read_metadata``, and optionally
``_delete``, ``_list_digests``, ``_write_stream``, ``_aclose``). The base does
the rest, so no backend can forget it: URI parsing, context checks, the closed
state, hashing, verification of every read, deletion bookkeeping for the
known-blob cache, and which optional capabilities the store advertises.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import inspect
import itertools
import logging
import os
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Self, TypeVar

from mediastash._lru import BoundedLRU
from mediastash.context import EMPTY_CONTEXT, MediaContextLike, context_metadata
from mediastash.errors import (
    IntegrityError,
    InvalidArgumentError,
    InvalidStoreConfiguration,
    MediaNotFoundError,
    MediaStashError,
    NamespaceUnsupportedError,
    StoreOperationError,
    StorePermissionError,
    StoreUnavailableError,
)
from mediastash.known_blobs import deletion_generation, note_deletion
from mediastash.stores._blob import OFFLOAD_BYTES, as_bytes, sha256_hex, verified_stream, verify_digest
from mediastash.stores._namespaces import EraseReport, check_namespace_name, erase_all
from mediastash.stores._options import StoreOptions
from mediastash.stores._plan import StorePlan
from mediastash.stores._range import DigestRange
from mediastash.stores._rules import AsyncClosing, StoreRules
from mediastash.stores.capabilities import StoreCapabilities, as_class_declares
from mediastash.stores.protocols import BlobCheck, BlobInfo, BlobStat
from mediastash.stores.verify import VerifyReport, verify_store
from mediastash.uri import MEDIA_URI_SCHEME, media_uri
from mediastash.urls import PublicUrlResolver, resolve_public_url

if TYPE_CHECKING:
    UrlPlanner = Callable[[Any, Any, bool, dict[str, Any]], StorePlan[Any]]
    """``planner(cls, url, create, overrides)``: a backend's URL parser (see ``plan_from_url``)."""

__all__ = [
    'DEFAULT_EXISTS_CONCURRENCY',
    'TOUCH_AFTER_SECONDS',
    'VERIFY_ON_PUT_BYTES',
    'AsyncClosing',
    'BaseMediaStore',
    'BlobInfo',
    'BlobStat',
    'DriverError',
    'EraseReport',
    'driver_errors_mapped',
    'Ingest',
    'owning_view',
]

DEFAULT_EXISTS_CONCURRENCY: Final = 16
"""How many existence checks ``exists_many`` keeps in flight by default."""

VERIFY_ON_PUT_BYTES: Final = 1 << 20
"""A ``put`` of a blob already stored re-reads and re-hashes the stored copy when it is at most this large.

A stored copy of another size is always replaced; one of the same size is
hashed only up to this bound, so a fresh process heals a corrupted small blob
on the next ``put`` of its bytes at the cost of one extra read (a 1 MiB read
and sha256 takes about 1 ms on a local disk, less than a network round trip).
Larger same-size corruption is healed by ``verify(repair=True)`` or by a
``put`` in an instance that saw the blob fail verification."""

_SUSPECT_LIMIT: Final = 65536
"""How many digests that failed verification one store instance remembers."""

_instances = itertools.count()
_log = logging.getLogger(__name__)


def _started() -> float | None:
    """A start time when DEBUG records are wanted, else ``None`` (the common path pays one level check)."""
    return time.perf_counter() if _log.isEnabledFor(logging.DEBUG) else None


_T = TypeVar('_T')
_Method = TypeVar('_Method', bound=Callable[..., Any])

_FROM_CALLER: Final = '_mediastash_from_caller'
"""Attribute ``Ingest`` sets on an error the caller's own chunk iterator raised: it is not the store's."""


@dataclass(frozen=True, slots=True)
class DriverError:
    """How a backend reads an error its driver raised (see ``BaseMediaStore._classify_error``).

    ``kind``: the ``StoreOperationError`` class it becomes; ``reason``: a short,
    secret-free code (an S3 error code, an errno or exception class name), never
    the driver's message, which can quote a URL with credentials; ``status``:
    the HTTP status or server error code, when there is one.
    """

    kind: type[StoreOperationError]
    reason: str
    status: int | None = None


_MAPPED_MARK: Final = '__mediastash_maps_driver_errors__'


def _maps_driver_errors(operation: str) -> Callable[[_Method], _Method]:
    """Decorate a public store method so an error from the backend's driver leaves it as a ``StoreOperationError``.

    The one place this mapping lives: the backend only classifies (``_classify_error``). The driver's error is the
    ``__cause__``. ``MediaStashError``, ``FileNotFoundError`` (a missing blob), errors the backend does not
    classify and errors of the caller's own input are raised unchanged; cancellation is never caught.
    """

    def decorate(method: _Method) -> _Method:
        if inspect.isasyncgenfunction(method):

            @functools.wraps(method)
            async def stream(self: BaseMediaStore, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                async with contextlib.aclosing(method(self, *args, **kwargs)) as items:
                    with driver_errors_mapped(self, operation):
                        async for item in items:
                            yield item

            setattr(stream, _MAPPED_MARK, True)
            return stream  # type: ignore[return-value]

        @functools.wraps(method)
        async def call(self: BaseMediaStore, *args: Any, **kwargs: Any) -> Any:
            with driver_errors_mapped(self, operation):
                return await method(self, *args, **kwargs)

        setattr(call, _MAPPED_MARK, True)
        return call  # type: ignore[return-value]

    return decorate


@contextlib.contextmanager
def driver_errors_mapped(store: BaseMediaStore, operation: str) -> Iterator[None]:
    """Raise the ``StoreOperationError`` ``store`` maps an error of the block to (the error as its cause).

    What ``_maps_driver_errors`` puts around every public method; a backend
    uses it for driver work outside them (opening its storage in ``__init__``).
    """
    try:
        yield
    except Exception as exc:
        mapped = store._store_error(operation, exc)
        if mapped is None:
            raise
        raise mapped from exc


_NAMES_NAMESPACE: Final = '__mediastash_names_namespace__'


def _naming_namespace(describe: Callable[[Any], str]) -> Callable[[Any], str]:
    """A backend's ``_describe`` that also names the namespace of a view (what every error and ``repr`` shows)."""

    @functools.wraps(describe)
    def described(self: BaseMediaStore) -> str:
        text = describe(self)
        name = self._namespace_name
        suffix = '' if name is None else f' (namespace {name!r})'
        return text if suffix in text else text + suffix  # once, even through a subclass's super() call

    setattr(described, _NAMES_NAMESPACE, True)
    return described


# Each flag a backend may declare -> the primitives that provide it and the public methods it turns on.
# A subclass that does not supply the primitives (and did not write the public methods itself) has the
# methods set to ``None`` on its class, which is how ``typing`` protocols are told a method is absent:
# ``isinstance(store, DeletableMediaStore)`` is then False.
_DECLARABLE: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    'supports_listing': (('_list_digests',), ('iter_uris',)),
    'supports_deletes': (('_delete',), ('delete', 'delete_many')),
    'supports_stream_writes': (('_write_stream',), ('put_stream',)),
    'supports_stream_reads': (('_raw_chunks',), ('get_stream',)),
    'supports_blob_listing': (('_list_blobs',), ('iter_blobs', 'iter_blobs_in_range')),
    'supports_guarded_deletes': (('_delete_unless_touched',), ('delete_unless_touched',)),
    'supports_namespaces': (('_open_namespace',), ()),
}
_COMPUTED: Final = ('supports_streaming', 'supports_collection')
_ALWAYS: Final = {'touch': True, 'exists_many': True, 'stat': True, 'check': True, 'require_storage': True}
"""The capabilities every ``BaseMediaStore`` has, whatever primitives the backend writes (the base supplies them)."""
_EXPLICIT: Final = '_mediastash_declared_flags'
"""Class attribute: the flags a class body declared itself and a parent's ``False``; they win over the primitives."""


def _declare_capabilities(cls: type[BaseMediaStore]) -> None:
    """Set ``cls``'s ``supports_*`` flags, its optional public methods and its ``capabilities`` (class creation).

    A flag follows the primitives the class supplies unless the class body
    declares it: ``False`` turns the methods off although the primitives are
    there; ``True`` without them is an ``InvalidStoreConfiguration`` naming the
    flag and the primitive to write. A class body that sets one of a flag's
    public methods to ``None`` (how plug-ins said "absent" before the flags)
    declares the flag ``False``; one that writes a public method its flag
    turns off, or sets it to ``None`` beside the flag declared ``True``, is
    refused naming both.
    """
    own = dict(vars(cls))  # the class body, before the flags and methods below are set on the class
    for flag in _COMPUTED:
        if flag in own:
            raise InvalidStoreConfiguration(
                f'{cls.__name__} declares {flag}, which follows from other flags: declare '
                + ', '.join(name for name in _DECLARABLE if name != 'supports_namespaces')
            )
    # A parent's False stays (a subclass of a read-only store is read-only); a parent's True is followed
    # from the primitives again, so a subclass that takes a primitive away loses the capability.
    explicit: dict[str, bool] = {}
    for klass in reversed(cls.__mro__[1:]):
        explicit.update({flag: False for flag, value in vars(klass).get(_EXPLICIT, {}).items() if not value})
    for flag, (_, methods) in _DECLARABLE.items():
        absent = [method for method in methods if method in own and own[method] is None]
        if flag in own:
            value = own[flag]
            if not isinstance(value, bool):
                raise InvalidStoreConfiguration(f'{cls.__name__}.{flag} must be True or False')
            if value and absent:
                raise InvalidStoreConfiguration(
                    f'{cls.__name__} declares {flag} = True but sets {absent[0]} = None: '
                    f'drop one (declare {flag} = False to turn the capability off)'
                )
            explicit[flag] = value
        elif absent:
            explicit[flag] = False  # the old way of saying "absent", kept as the declaration it means
        written = [method for method in methods if own.get(method) is not None]
        if explicit.get(flag) is False and written:
            where = 'declares' if flag in own or absent else 'inherits'
            raise InvalidStoreConfiguration(
                f'{cls.__name__} {where} {flag} = False but defines {written[0]}, which that flag turns off: '
                f'declare {flag} = True to keep it, or drop {written[0]}'
            )
    setattr(cls, _EXPLICIT, {flag: value for flag, value in explicit.items() if flag in own or not value})
    for flag, (primitives, methods) in _DECLARABLE.items():
        supplied = all(getattr(cls, name) is not getattr(BaseMediaStore, name) for name in primitives)
        wanted = explicit.get(flag)
        present = supplied
        for method in methods:
            defined = next(vars(klass)[method] for klass in cls.__mro__ if method in vars(klass))
            standard = vars(BaseMediaStore)[method]
            if wanted is False:
                setattr(cls, method, None)
            elif defined is not None and defined is not standard:
                present = True  # the backend wrote the public method itself
            else:
                setattr(cls, method, standard if supplied else None)
        if methods:
            present = all(getattr(cls, method) is not None for method in methods)
        if wanted is True and not present:
            raise InvalidStoreConfiguration(
                f'{cls.__name__} declares {flag} = True but does not supply '
                + ' and '.join(name for name in primitives if getattr(cls, name) is getattr(BaseMediaStore, name))
                + ': write it, or drop the declaration'
            )
        setattr(cls, flag, present and wanted is not False)
    cls.supports_streaming = cls.supports_stream_writes and cls.supports_stream_reads
    cls.supports_collection = cls.supports_blob_listing and cls.supports_guarded_deletes
    declared = {flag.removeprefix('supports_'): getattr(cls, flag) for flag in _DECLARABLE}  # same names
    cls.capabilities = as_class_declares(  # without what a class sets to None, e.g. an old plug-in's ``stat = None``
        StoreCapabilities(
            **_ALWAYS,
            **declared,
            ranged_listing=cls.supports_blob_listing,
            erase=cls.supports_namespaces and cls.supports_blob_listing and cls.supports_deletes,
            media_types=callable(getattr(cls, 'media_type_of', None)),
            temp_sweep=callable(getattr(cls, 'sweep_temp_files', None)),
            verifies_reads=cls.verifies_reads is True,
        ),
        cls,
    )


TOUCH_AFTER_SECONDS: Final = 3600.0
"""A confirmation (a ``put`` of stored bytes, a re-check of a known blob) refreshes the blob's
last-write time once it is older than this, so garbage collection sees the blob as in use.
See ``docs/gc.md`` for the rule that makes collection safe against writers in other processes."""


class Ingest:
    """A stream of chunks being hashed as a backend consumes it (the input of ``_write_stream``).

    Iterate it once; each piece is ``bytes`` (``bytearray``/``memoryview``
    accepted and copied, anything else raises ``TypeError``). Large pieces are
    hashed in a worker thread. ``digest`` and ``size`` are known once the
    iteration has finished.
    """

    def __init__(self, chunks: AsyncIterable[bytes]) -> None:
        self._chunks = chunks
        self._hasher = hashlib.sha256()
        self._finished = False
        self.size = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        hasher = self._hasher
        async for chunk in _caller_stream(self._chunks):
            piece = as_bytes(chunk)
            if len(piece) >= OFFLOAD_BYTES:
                await asyncio.to_thread(hasher.update, piece)
            else:
                hasher.update(piece)
            self.size += len(piece)
            yield piece
        self._finished = True

    @property
    def digest(self) -> str:
        """Hex sha256 of everything read (only after the iteration finished)."""
        if not self._finished:
            raise RuntimeError('Ingest.digest is only known after the whole stream was read')
        return self._hasher.hexdigest()

    async def read_all(self) -> bytes:
        """Collect the stream into memory (for backends without native streaming writes)."""
        return b''.join([piece async for piece in self])


async def _caller_stream(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """``chunks``, with any error they raise tagged as the caller's (so the store does not report it as its own)."""
    source = aiter(chunks)
    while True:
        try:
            chunk = await anext(source)
        except StopAsyncIteration:
            return
        except Exception as exc:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(exc, _FROM_CALLER, True)
            raise
        yield chunk


class BaseMediaStore(StoreRules, ABC):
    """Template for content-addressed stores (see the module docstring for what a backend supplies).

    Every public method raises ``StoreClosedError`` after ``aclose``; every
    ``get`` is checked against the digest (``IntegrityError`` on mismatch);
    every deletion is noted for the store's storage identity before and after
    it happens, so known-blob caches of every store instance on the same
    storage forget what they knew.
    """

    verifies_reads: ClassVar[bool] = True
    """Tells the walker that ``get`` already checks sha256, so it need not hash again."""

    options_class: ClassVar[type[StoreOptions] | None] = None
    """The backend's typed options (``DiskOptions``, ...): ``from_url`` reads a URL into them and builds
    ``cls(options=...)``. ``None`` for a store that reads its URL itself."""

    _url_planner: ClassVar[UrlPlanner | None] = None
    """The older hook ``plan_from_url`` calls when there is no ``options_class``: the ``url_planner=`` class keyword."""

    # Declared capabilities. Each follows the primitives the backend supplies; a class body may declare
    # one itself (False turns it off; True without the primitive fails at class creation). Callers read
    # them through ``capabilities_of(store)`` (``StoreCapabilities``), never by probing methods.
    supports_listing: ClassVar[bool] = False
    """``iter_uris`` works: the backend supplies ``_list_digests``."""
    supports_deletes: ClassVar[bool] = False
    """``delete`` / ``delete_many`` work: the backend supplies ``_delete``."""
    supports_stream_writes: ClassVar[bool] = False
    """``put_stream`` works: the backend supplies ``_write_stream``."""
    supports_stream_reads: ClassVar[bool] = False
    """``get_stream`` works: the backend supplies ``_raw_chunks``."""
    supports_streaming: ClassVar[bool] = False
    """Both streaming directions (follows from the two above; not declared)."""
    supports_blob_listing: ClassVar[bool] = False
    """``iter_blobs`` / ``iter_blobs_in_range`` work: the backend supplies ``_list_blobs``."""
    supports_guarded_deletes: ClassVar[bool] = False
    """``delete_unless_touched`` works: the backend supplies ``_delete_unless_touched``."""
    supports_collection: ClassVar[bool] = False
    """Garbage collection works (blob listing and guarded deletes; follows from them, not declared)."""
    supports_namespaces: ClassVar[bool] = False
    """``namespace()`` works: the backend supplies ``_open_namespace``."""
    capabilities: ClassVar[StoreCapabilities] = StoreCapabilities(**_ALWAYS, verifies_reads=True)
    """All of the class's capabilities in one value (what ``capabilities_of`` answers), set at class creation."""

    _namespace_name: str | None = None
    _namespace_parent: BaseMediaStore | None = None  # set on a view: the store it was made from

    def __init__(self, *, public_url: PublicUrlResolver | None = None) -> None:
        self._public_url = public_url
        self._instance_key: Hashable = ('instance', type(self).__name__, next(_instances))
        self._suspects: BoundedLRU[str, bool] = BoundedLRU(max_items=_SUSPECT_LIMIT)

    @classmethod
    def from_url(cls, url: str, *, create: bool = True, **overrides: Any) -> Self:
        """The store ``url`` names; ``overrides`` (constructor arguments) win over it.

        Opens ``plan_from_url``, which reads the URL through the class's
        ``options_class``; a backend that can create nothing half-way may
        override this instead.
        """
        return cls.plan_from_url(url, create=create, **overrides).open()

    @classmethod
    def plan_from_url(cls, url: str, *, create: bool = True, **overrides: Any) -> StorePlan[Self]:
        """``from_url`` checked but not opened: nothing exists yet (see ``StorePlan``).

        A backend declares its options class (``options_class = S3Options``):
        its ``from_store_url`` reads the URL into options, and the plan builds
        ``cls(options=...)``. A plug-in written before options classes may name a
        module-level parser instead (``class S(BaseMediaStore, url_planner=plan_s)``,
        called as ``plan_s(cls, url, create, overrides)``), or override this.
        """
        if cls.options_class is not None:
            options = cls.options_class.from_store_url(url, create=create, overrides=overrides, owner=cls.__name__)
            return StorePlan(functools.partial(_built, cls, options), options.folders())
        planner = cls._url_planner
        if planner is None:
            raise InvalidStoreConfiguration(
                f'{cls.__name__} cannot be opened from a URL: it declares no options_class and defines no from_url'
            )
        plan: StorePlan[Self] = planner(cls, url, create, overrides)
        return plan

    def __init_subclass__(cls, *, url_planner: UrlPlanner | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if url_planner is not None:
            cls._url_planner = url_planner
        own_describe = vars(cls).get('_describe')
        if own_describe is not None and not getattr(own_describe, _NAMES_NAMESPACE, False):
            cls._describe = _naming_namespace(own_describe)  # type: ignore[method-assign]
        _declare_capabilities(cls)
        # A backend's own public async methods (an override of ``put``, or extras such as a disk store's
        # ``sweep_temp_files``) map driver errors too: a rule no backend has to remember.
        for name, value in list(vars(cls).items()):
            if name.startswith('_') or getattr(value, _MAPPED_MARK, False):
                continue
            if inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value):
                setattr(cls, name, _maps_driver_errors(name)(value))

    # -- primitives a backend provides -------------------------------------------------

    @abstractmethod
    async def _write(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Store ``data`` (already known to hash to ``digest``) idempotently.

        When a blob is already stored under ``digest`` the write may be skipped
        only after the cheap checks of ``_stored_copy_is_sound`` pass (another
        size, or a small blob that hashes wrong, is replaced).
        """

    async def _rewrite(self, digest: str, data: bytes, context: MediaContextLike) -> None:
        """Replace whatever is stored under ``digest`` with ``data`` unconditionally (healing a corrupt blob).

        Default: ``_delete`` (when the backend has it), then ``_write``. Backends
        override it with an atomic replace where they can, so a reader never
        finds the blob missing meanwhile. A backend with neither can only try
        ``_write`` and check the result: ``IntegrityError`` when the corrupt copy
        stayed, rather than a URI whose ``get`` fails.
        """
        if type(self)._delete is not BaseMediaStore._delete:
            await self._noting_deletion(self._delete(digest, context))
            await self._write(digest, data, context)
            return
        await self._write(digest, data, context)
        await self._read_verified(digest, context)

    async def _read(self, digest: str, context: MediaContextLike) -> bytes:
        """The raw stored bytes, or raise ``MediaNotFoundError``. No verification here.

        Default: join ``_raw_chunks``; a backend supplies one or the other.
        """
        if type(self)._raw_chunks is BaseMediaStore._raw_chunks:
            raise NotImplementedError(f'{type(self).__name__} must implement _read or _raw_chunks')
        chunks = self._raw_chunks(digest, context, 1 << 20)
        try:
            return b''.join([chunk async for chunk in chunks])
        finally:
            await chunks.aclose()

    @abstractmethod
    async def _contains(self, digest: str, context: MediaContextLike) -> bool:
        """True when a blob is stored under ``digest``."""

    @abstractmethod
    async def _read_metadata(self, digest: str, context: MediaContextLike) -> Mapping[str, str]:
        """The user metadata stored with the blob, or raise ``MediaNotFoundError``."""

    async def _read_verified(self, digest: str, context: MediaContextLike) -> bytes:
        """``_read`` checked against ``digest``. Override only to verify while reading (never to skip it)."""
        data = await self._read(digest, context)
        return await verify_digest(digest, data, where=self._describe())

    def _trusts_stored(self, digest: str) -> bool:
        """False when this instance saw the blob under ``digest`` fail verification: a write must replace it."""
        return digest not in self._suspects

    def _stored_copy_is_sound(self, digest: str, size: int, stored_size: int, read: Callable[[], bytes]) -> bool:
        """The cheap check a backend runs before skipping a write of a blob it already holds (sync, any thread).

        ``stored_size`` is the stored copy's size; ``read`` returns its bytes and
        is called only for a blob of at most ``VERIFY_ON_PUT_BYTES``. False means
        the stored copy must be replaced (also when it vanished before ``read``:
        ``MediaNotFoundError`` is a ``FileNotFoundError``).
        """
        if stored_size != size or not self._trusts_stored(digest):
            return False
        if size > VERIFY_ON_PUT_BYTES:
            return True
        try:
            return hashlib.sha256(read()).hexdigest() == digest
        except FileNotFoundError:  # gone since the backend looked (a collector): write it again
            return False

    async def _stored_copy_is_sound_async(
        self, digest: str, size: int, stored_size: int, read: Callable[[], Awaitable[bytes]]
    ) -> bool:
        """``_stored_copy_is_sound`` for backends that read asynchronously (a small blob is hashed off the loop)."""
        if stored_size != size or not self._trusts_stored(digest):
            return False
        if size > VERIFY_ON_PUT_BYTES:
            return True
        try:
            return await sha256_hex(await read()) == digest
        except FileNotFoundError:  # gone since the backend looked (a collector): write it again
            return False

    def _mark_suspect(self, digest: str) -> None:
        """Remember that ``digest`` failed verification here, and make known-blob caches forget the storage."""
        self._suspects.put(digest, True)
        note_deletion(self.storage_key)

    async def _contains_many(self, digests: list[str], max_concurrency: int) -> set[str]:
        """The subset of ``digests`` that is stored. Default: ``_contains`` calls, concurrently under a bound."""
        gate = asyncio.Semaphore(max_concurrency)

        async def one(digest: str) -> str | None:
            async with gate:
                return digest if await self._contains(digest, EMPTY_CONTEXT) else None

        found = await asyncio.gather(*(one(digest) for digest in digests))
        return {digest for digest in found if digest is not None}

    async def _stat(self, digest: str, context: MediaContextLike) -> BlobStat:
        """Size, recorded media type and last-write time of the blob, or raise ``MediaNotFoundError``.

        Backends answer from what they keep beside the bytes (a file's ``stat``,
        a row, an object's headers, a manifest) and never read the blob. This
        default is for backends that do not: it READS the whole blob (verified,
        streamed when the backend streams) to learn its size, asks
        ``media_type_of`` when the store has it, and knows no ``written_at``.
        """
        if type(self)._raw_chunks is BaseMediaStore._raw_chunks:
            size = len(await self._read_verified(digest, context))
        else:
            size = 0
            raw = self._raw_chunks(digest, context, 1 << 20)
            verified = verified_stream(digest, raw, where=self._describe())
            try:
                async for chunk in verified:
                    size += len(chunk)
            finally:
                await verified.aclose()
                await raw.aclose()
        media_type: str | None = None
        media_type_of = getattr(self, 'media_type_of', None)
        if callable(media_type_of):
            answer = media_type_of(media_uri(digest))
            media_type = await answer if inspect.isawaitable(answer) else answer
        return BlobStat(size, media_type if isinstance(media_type, str) else None, None)

    async def _check_extra_copies(self, digest: str, remove: bool) -> tuple[int, int]:
        """Check the copies of a blob a read does not necessarily meet, after a read of it verified.

        For a backend that may keep a blob more than once (PostgreSQL: an inline
        row and a chunked copy); default ``(0, 0)``, one copy per blob. Returns
        how many copies fail verification and how many of those were removed:
        only with ``remove``, and only while a sound copy stays. Without
        ``remove`` it changes nothing.
        """
        return 0, 0

    # Optional primitives: supplying one turns on the matching public capability.

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        """Remove the blob; ``False`` when it was not stored."""
        raise NotImplementedError

    async def _delete_many(self, digests: list[str]) -> int:
        """Remove several blobs; how many were removed. Default: ``_delete`` one by one."""
        removed = 0
        for digest in digests:
            if await self._delete(digest, EMPTY_CONTEXT):
                removed += 1
        return removed

    def _list_blobs(self) -> AsyncIterator[BlobInfo]:
        """Yield every stored blob with its size and last-write time, reading no blob's bytes."""
        raise NotImplementedError

    async def _list_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        """The blobs of ``_list_blobs`` whose digest is in ``digest_range``.

        Default: the whole listing, filtered. Backends whose layout orders or
        groups blobs by digest (an index, a key prefix) override it to read only
        the range, which is what makes a shard of a large store cheap to list.
        """
        start = len(MEDIA_URI_SCHEME)
        async for info in self._list_blobs():
            if info.uri[start:] in digest_range:
                yield info

    async def _touch_many(self, digests: list[str], touch_before: float, max_concurrency: int) -> set[str]:
        """The subset of ``digests`` that is stored; refresh the last-write time of those written before
        ``touch_before`` (Unix time) to now. Default: ``_contains_many`` without touching (a store that
        cannot be collected has no timestamps to keep fresh)."""
        return await self._contains_many(digests, max_concurrency)

    async def _delete_unless_touched(self, digests: list[str], written_before: float) -> list[str]:
        """Delete each blob whose last-write time is still before ``written_before`` (Unix time), checked
        atomically with the delete where the backend can; return the digests deleted. Blobs of unknown
        age are never deleted here."""
        raise NotImplementedError

    def _list_digests(self) -> AsyncIterator[str]:
        """Yield the digest of every stored blob."""
        raise NotImplementedError

    async def _write_stream(self, ingest: Ingest, context: MediaContextLike) -> None:
        """Consume ``ingest`` and store it under ``ingest.digest`` (known once consumed); leave nothing on failure."""
        raise NotImplementedError

    def _raw_chunks(self, digest: str, context: MediaContextLike, chunk_size: int) -> AsyncGenerator[bytes, None]:
        """Yield the stored bytes unverified, at most ``chunk_size`` at a time; raise ``MediaNotFoundError``."""
        raise NotImplementedError

    def _storage_identity(self) -> Hashable | None:
        """The storage this instance points at (folder, database, bucket and prefix, collection).

        Two instances with equal identities share known-blob bookkeeping, so a
        deletion through one is seen by the other. ``None``: the storage is
        private to this instance (an in-memory dict, a ``:memory:`` database).
        """
        return None

    def _classify_error(self, exc: Exception) -> DriverError | None:
        """What an error raised inside a store call means; ``None`` leaves it as it is.

        Backends extend this for their driver's exceptions and call ``super()``
        for the rest. Default: a connection failure, a timeout or a host name
        that does not resolve (``socket.gaierror``, which is no
        ``ConnectionError``) is ``StoreUnavailableError``, a ``PermissionError``
        ``StorePermissionError``. Never asked about ``MediaStashError``,
        ``FileNotFoundError`` (a missing blob keeps its meaning) or errors of the
        caller's own input stream.
        """
        if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror):
            return DriverError(StoreUnavailableError, errno_name(exc))
        if isinstance(exc, PermissionError):
            return DriverError(StorePermissionError, errno_name(exc))
        return None

    def _store_error(self, operation: str, exc: Exception) -> StoreOperationError | None:
        """The ``StoreOperationError`` a caller of ``operation`` sees for ``exc``; ``None``: raise ``exc`` as is."""
        if isinstance(exc, MediaStashError | FileNotFoundError) or getattr(exc, _FROM_CALLER, False):
            return None
        found = self._classify_error(exc)
        if found is None:
            return None
        return found.kind(operation, self._describe(), found.reason, status=found.status)

    # -- identity and lifecycle --------------------------------------------------------

    @property
    def storage_key(self) -> Hashable:
        """Hashable identity of the storage behind this store (see ``_storage_identity``).

        A namespace view's is its store's key plus the namespace name: never
        equal to the store's or another namespace's.
        """
        parent = self._namespace_parent
        if parent is not None:
            return ('namespace', parent.storage_key, self._namespace_name)
        identity = self._storage_identity()
        return self._instance_key if identity is None else identity

    @property
    def deletion_generation(self) -> int:
        """How many deletions were noted for this store's storage in this process."""
        return deletion_generation(self.storage_key)

    @property
    def public_url_lifetime(self) -> float | None:
        """Seconds a URL from ``public_url`` stays valid; ``None`` when it does not expire.

        Taken from the resolver's ``expires_in`` attribute when it has one (a
        static base URL has none). ``MediaUrls`` uses it to re-issue a URL
        before it runs out.
        """
        lifetime = getattr(self._public_url, 'expires_in', None)
        return float(lifetime) if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) else None

    @_maps_driver_errors('aclose')
    async def aclose(self) -> None:
        """Close the store and release what it owns (``_aclose``, called once). Safe to call twice.

        A namespace view owns nothing: closing it only makes calls through it
        refuse; its store's connection stays open for the store and its other
        views. A driver's error while closing leaves as a ``StoreOperationError``,
        as from every other call.
        """
        if self._namespace_parent is not None:
            if not self._closed:
                self._closed = True
                await self._close_owned_store()
            return
        await super().aclose()

    # -- namespaces ----------------------------------------------------------------------

    @_naming_namespace
    def _describe(self) -> str:
        return type(self).__name__

    @property
    def namespace_name(self) -> str | None:
        """The namespace this store is confined to; ``None`` for the store itself."""
        return self._namespace_name

    def namespace(self, name: str) -> Self:
        """A view of this store that sees only the blobs of namespace ``name`` (see ``docs/stores.md``).

        Every call through the view (``put``, ``get``, listing, deletion, GC,
        ``verify``, ``erase``) touches that namespace only; the store itself
        sees none of them. The view shares the store's connection: closing the
        view leaves the store open, closing the store closes the view. Each
        call returns a new view; views of one name see the same blobs.
        ``InvalidNamespaceError`` for a bad name (never shown),
        ``NamespaceUnsupportedError`` when the backend has no namespaces or
        this store is a view already (namespaces do not nest).
        """
        check_namespace_name(name)
        self._check_open()
        if self._namespace_parent is not None:
            raise NamespaceUnsupportedError(
                f'{self._describe()} is a namespace view; namespaces do not nest (call namespace() on its store)'
            )
        if not self.supports_namespaces:
            raise NamespaceUnsupportedError(f'{type(self).__name__} has no namespaces')
        view = self._open_namespace(name)
        if view is self or type(view) is not type(self):
            raise TypeError(f'{type(self).__name__}._open_namespace must return a new {type(self).__name__}')
        if view._public_url is self._public_url:
            view._public_url = None  # a resolver of the store's own layout would name another namespace's blob
        view._namespace_name = name
        view._namespace_parent = self
        return view

    def _open_namespace(self, name: str) -> Self:
        """A new instance of this backend confined to namespace ``name`` (``name`` is already validated).

        How a backend implements namespaces: supply this hook and nothing else.
        Return a fresh instance (never ``self``) that shares this instance's
        connection or client and reads and writes only the namespace's part of
        the storage: a key prefix, a sub-folder, a column value, a table. Two
        rules the layout must keep: the store itself (no namespace) keeps its
        layout unchanged and never lists, collects or verifies a namespace's
        blobs; and no valid name can reach another namespace's part (names
        are ``[A-Za-z0-9._-]{1,64}``, never only dots).

        The base does the rest: it checks the name, refuses nesting, gives the
        view its ``storage_key`` (the store's key plus the name, so known-blob
        caches and deletion notes are per namespace whatever the backend's
        ``_storage_identity`` says), ties the view's closed state to the store's
        and keeps the view's ``aclose`` from touching the shared connection
        (``_aclose`` runs for the store only). A public URL resolver the view
        inherits unchanged from the store is dropped (it would name the store's
        own layout); a view that builds its own (presigning bound to the view)
        keeps it. A backend without this hook refuses ``namespace()`` with
        ``NamespaceUnsupportedError`` and ``supports_namespaces`` is False.
        """
        raise NamespaceUnsupportedError(f'{type(self).__name__} has no namespaces')

    async def erase(
        self, *, progress: Callable[[int, int], None] | None = None, exclusive: bool = False
    ) -> EraseReport:
        """Delete every blob of this namespace view and report how many and how many bytes (``EraseReport``).

        Only on a view (``store.namespace(name).erase()``); the store itself
        refuses with ``NamespaceUnsupportedError``. Other namespaces and the
        store's own blobs are untouched. Deletions are noted for the known-blob
        cache like any other; an interrupted erase is finished by running it
        again. Then what is left of the namespace's storage is removed when it
        is empty (a disk folder, a SQLite table), so not even the tenant's name
        stays. ``exclusive=True`` says no other process uses the namespace (a
        ``tune`` run's own): storage a backend otherwise keeps for such users
        goes too (PostgreSQL's tables). ``progress(count, bytes)`` is called
        after each batch. Needs a backend that lists and deletes.
        """
        self._check_open()
        name = self._namespace_name
        if name is None:
            raise NamespaceUnsupportedError(
                f'{self._describe()} is not a namespace view; erase() empties one: store.namespace(name).erase()'
            )
        if self.iter_blobs is None or self.delete_many is None:
            raise NamespaceUnsupportedError(f'{type(self).__name__} cannot list and delete blobs, so it cannot erase')

        async def delete_batch(uris: list[str]) -> list[str]:
            removed = await self.delete_many(uris)
            if removed == len(uris):
                return uris
            left = await self.exists_many(uris)
            return [uri for uri in uris if uri not in left]

        report = await erase_all(name, self.iter_blobs, delete_batch, where=self._describe(), progress=progress)
        await self._remove_namespace_storage()
        if exclusive:
            await self._remove_kept_namespace_storage()
        return report

    async def _remove_namespace_storage(self) -> None:
        """Remove what is left of this namespace's storage once ``erase`` emptied it (a folder, a table).

        Called on a view only, after a listing found no blob. Remove only what
        is empty, so a blob a writer put meanwhile survives and the namespace's
        next write makes the storage again. Default: nothing to remove (a key
        prefix leaves nothing behind).
        """

    async def _remove_kept_namespace_storage(self) -> None:
        """Remove what ``_remove_namespace_storage`` keeps because other processes may still use it.

        Called by ``erase(exclusive=True)`` only, after the namespace was
        emptied: the caller vouches that nobody else uses it. Default: nothing
        is kept, nothing to do.
        """

    def __repr__(self) -> str:
        described = self._describe()  # secret-free by contract; a bare class name gets its parentheses
        return described if described.endswith(')') else f'{described}()'

    # -- the MediaStore protocol -------------------------------------------------------

    @_maps_driver_errors('put')
    async def put(self, data: bytes, *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        """Store ``data`` and return its ``media+sha256://`` URI (a no-op write when already stored)."""
        self._check_open()
        payload = as_bytes(data)
        context_metadata(context)
        started = _started()
        digest = await sha256_hex(payload)
        if self._trusts_stored(digest):
            await self._write(digest, payload, context)
        else:
            await self._rewrite(digest, payload, context)
            self._suspects.pop(digest)
        if started is not None:
            self._debug('put', started, digest, f'{len(payload)} bytes')
        return media_uri(digest)

    @_maps_driver_errors('get')
    async def get(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bytes:
        """Return the bytes stored under ``uri``, verified against its sha256.

        A blob that fails verification is remembered: the next ``put`` of its
        bytes through this instance replaces the stored copy.
        """
        digest = self._open_digest(uri)
        started = _started()
        try:
            data = await self._read_verified(digest, context)
        except IntegrityError:
            self._mark_suspect(digest)
            raise
        if started is not None:
            self._debug('get', started, digest, f'{len(data)} bytes')
        return data

    @_maps_driver_errors('exists')
    async def exists(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        """True when a blob is stored under ``uri``."""
        digest = self._open_digest(uri)
        started = _started()
        found = await self._contains(digest, context)
        if started is not None:
            self._debug('exists', started, digest, 'stored' if found else 'absent')
        return found

    @_maps_driver_errors('exists_many')
    async def exists_many(
        self, uris: Iterable[str], *, max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY
    ) -> frozenset[str]:
        """The subset of ``uris`` that is stored, in one batched check (every URI validated first)."""
        digests = self._open_digests(uris)
        if not digests:
            return frozenset()
        started = _started()
        found = await self._contains_many(list(digests), max_concurrency)
        if started is not None:
            self._debug('exists_many', started, None, f'{len(found)} of {len(digests)} stored')
        return frozenset(digests[digest] for digest in found)

    @_maps_driver_errors('public_url')
    async def public_url(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> str | None:
        """A URL a model provider can fetch, from the configured resolver, or ``None``."""
        self._open_digest(uri)
        return await resolve_public_url(self._public_url, uri, context)

    @_maps_driver_errors('get_metadata')
    async def get_metadata(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> Mapping[str, str]:
        """The user metadata stored with the blob (what a repeated ``put`` does to it is the backend's to declare)."""
        digest = self._open_digest(uri)
        started = _started()
        metadata = await self._read_metadata(digest, context)
        if started is not None:
            self._debug('get_metadata', started, digest, f'{len(metadata)} keys')
        return metadata

    @_maps_driver_errors('stat')
    async def stat(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> BlobStat:
        """Size, recorded media type and last-write time of the blob under ``uri`` (see ``BlobStat``).

        Answered without reading the bytes on every built-in backend; raises
        ``MediaNotFoundError`` (a ``FileNotFoundError``) when nothing is stored.
        """
        digest = self._open_digest(uri)
        started = _started()
        try:
            found = await self._stat(digest, context)
        except IntegrityError:  # only the reading default can meet a corrupt blob
            self._mark_suspect(digest)
            raise
        if started is not None:
            self._debug('stat', started, digest, f'{found.size} bytes')
        return found

    @property
    def unknown_media_type_reason(self) -> str:
        """Why a blob of this store may have no recorded media type (``stat`` answered ``None``).

        ``mediastash stats`` and ``ls --long`` print it under their tables.
        Backends whose reason differs (a file layout that records none for
        another writer's blobs, an upload without a Content-Type) override it.
        """
        if type(self)._stat is BaseMediaStore._stat and not self.capabilities.media_types:
            return f'{self!r} does not record media types'
        return 'they were put without a media type'

    async def require_storage(self) -> None:
        """Raise ``StoreNotFoundError`` when the storage this store points at does not exist, creating nothing.

        Read-only callers (``mediastash stats``, ``ls``, ``verify``, ``gc``)
        call it after opening with ``create=False``. Default: nothing more to
        check (``open_store`` already refused a missing folder or file).
        """
        self._check_open()

    # -- optional capabilities (present only when the backend supplies the primitive) ---

    @_maps_driver_errors('delete')
    async def delete(self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT) -> bool:
        """Remove the blob; ``False`` when it was not stored. Only garbage collection should call this."""
        digest = self._open_digest(uri)
        started = _started()
        removed = await self._noting_deletion(self._delete(digest, context))
        if started is not None:
            self._debug('delete', started, digest, 'removed' if removed else 'was not stored')
        return removed

    @_maps_driver_errors('delete_many')
    async def delete_many(self, uris: Iterable[str]) -> int:
        """Delete several blobs (every URI validated before anything is removed); how many were removed."""
        digests = list(self._open_digests(uris))
        if not digests:
            return 0
        started = _started()
        removed = await self._noting_deletion(self._delete_many(digests))
        if started is not None:
            self._debug('delete_many', started, None, f'{removed} of {len(digests)} removed')
        return removed

    async def _noting_deletion(self, deletion: Coroutine[Any, Any, _T]) -> _T:
        """Run a deletion primitive with the storage's deletion noted before and after it."""
        key = self.storage_key
        note_deletion(key)
        try:
            return await deletion
        finally:
            note_deletion(key)

    @_maps_driver_errors('touch_many')
    async def touch_many(
        self,
        uris: Iterable[str],
        *,
        touch_after: float = TOUCH_AFTER_SECONDS,
        max_concurrency: int = DEFAULT_EXISTS_CONCURRENCY,
    ) -> frozenset[str]:
        """``exists_many`` that also marks the found blobs as in use: a blob last written more than
        ``touch_after`` seconds ago gets its last-write time set to now (see ``docs/gc.md``)."""
        digests = self._open_digests(uris)
        if not digests:
            return frozenset()
        found = await self._touch_many(list(digests), time.time() - touch_after, max_concurrency)
        return frozenset(digests[digest] for digest in found)

    @_maps_driver_errors('iter_blobs')
    async def iter_blobs(self) -> AsyncIterator[BlobInfo]:
        """Every stored blob with its size and last-write time (no bytes read); for garbage collection."""
        self._check_open()
        async for info in self._list_blobs():
            yield info

    @_maps_driver_errors('iter_blobs_in_range')
    async def iter_blobs_in_range(self, digest_range: DigestRange) -> AsyncIterator[BlobInfo]:
        """The blobs ``iter_blobs`` lists whose digest is in ``digest_range`` (one shard of the store)."""
        self._check_open()
        if not isinstance(digest_range, DigestRange):
            raise InvalidArgumentError('digest_range', 'a DigestRange', digest_range)
        async for info in self._list_blobs_in_range(digest_range):
            yield info

    @_maps_driver_errors('delete_unless_touched')
    async def delete_unless_touched(self, uris: Iterable[str], *, written_before: float) -> frozenset[str]:
        """Delete the blobs among ``uris`` not written or touched since ``written_before`` (Unix time).

        The check and the delete are one atomic step where the backend allows
        it (SQLite, MongoDB, disk); see ``docs/gc.md`` for S3. Returns the URIs
        deleted. Only garbage collection should call this.
        """
        digests = list(self._open_digests(uris))
        if not digests:
            return frozenset()
        deleted = await self._noting_deletion(self._delete_unless_touched(digests, written_before))
        return frozenset(media_uri(digest) for digest in deleted)

    @_maps_driver_errors('iter_uris')
    async def iter_uris(self) -> AsyncIterator[str]:
        """Every stored URI."""
        self._check_open()
        async for digest in self._list_digests():
            yield media_uri(digest)

    @_maps_driver_errors('put_stream')
    async def put_stream(self, chunks: AsyncIterable[bytes], *, context: MediaContextLike = EMPTY_CONTEXT) -> str:
        """Store a blob given as an async iterable of byte chunks, without holding it whole in memory."""
        self._check_open()
        context_metadata(context)
        ingest = Ingest(chunks)
        started = _started()
        await self._write_stream(ingest, context)
        self._suspects.pop(ingest.digest)
        if started is not None:
            self._debug('put_stream', started, ingest.digest, f'{ingest.size} bytes')
        return media_uri(ingest.digest)

    @_maps_driver_errors('get_stream')
    async def get_stream(
        self, uri: str, *, context: MediaContextLike = EMPTY_CONTEXT, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        """Yield the blob in pieces of at most ``chunk_size`` bytes, verified (see ``StreamingMediaStore``)."""
        digest = self._open_stream(uri, chunk_size)
        raw = self._raw_chunks(digest, context, chunk_size)
        verified = verified_stream(digest, raw, where=self._describe())
        try:
            async for chunk in verified:
                yield chunk
        except IntegrityError:
            self._mark_suspect(digest)
            raise
        finally:
            await verified.aclose()
            await raw.aclose()

    @_maps_driver_errors('check_blob')
    async def check_blob(self, uri: str, *, repair: bool = False) -> BlobCheck:
        """Read the blob whole (verified, streamed when the store streams) and check every other copy kept of it.

        What ``verify`` does per blob. ``IntegrityError`` when no copy is sound,
        ``MediaNotFoundError`` when none is stored. A further copy that fails
        verification is counted in ``damaged_copies``; ``repair=True`` removes
        it while the sound copy stays. One left in place is remembered like a
        failed read: the next ``put`` of the bytes through this instance
        rewrites the blob. Without ``repair`` nothing is changed in the storage.
        """
        digest = self._open_digest(uri)
        size = 0
        if self.get_stream is not None:
            async for chunk in self.get_stream(uri, chunk_size=1 << 20):
                size += len(chunk)
        else:
            size = len(await self.get(uri))
        damaged, removed = await self._check_extra_copies(digest, repair)
        if damaged > removed:
            self._mark_suspect(digest)
        elif damaged:
            self._suspects.pop(digest)  # every damaged copy is gone: what is stored is sound
        return BlobCheck(size, damaged, removed)

    async def verify(
        self, uris: Iterable[str] | None = None, *, repair: bool = False, max_concurrency: int = 4
    ) -> VerifyReport:
        """Re-hash every blob (or only ``uris``) and report the corrupt and missing ones (``check_blob`` each).

        ``repair=True`` deletes each corrupt blob (it needs ``delete``), so the
        next ``put`` of the right bytes stores them fresh: repair can only
        remove, never recover bytes. A damaged extra copy of a blob that reads
        sound from another copy is reported in ``damaged_copies`` and removed
        by a repair (``healed``); the blob stays.
        """
        self._check_open()
        return await verify_store(self, uris, repair=repair, max_concurrency=max_concurrency)

    def _debug(self, operation: str, started: float, digest: str | None, outcome: str) -> None:
        """One DEBUG record for a store call: the store (secret-free), the call, the URI, what happened, how long."""
        elapsed_ms = (time.perf_counter() - started) * 1000
        uri = '' if digest is None else f' {media_uri(digest)}'
        _log.debug('%s %s%s: %s in %.1f ms', self._describe(), operation, uri, outcome, elapsed_ms)

    # -- helpers for backends ----------------------------------------------------------

    def _not_found(self, digest: str) -> MediaNotFoundError:
        return MediaNotFoundError(media_uri(digest), where=self._describe())


def _built(store: Callable[..., _T], options: StoreOptions) -> _T:
    """``store(options=options)``, then the folders the options name (the store checked its options first, so a
    refused one makes no folder; a store that makes its folder itself finds it there)."""
    built = store(options=options)
    for folder in options.folders():
        os.makedirs(folder, exist_ok=True)
    return built


def owning_view(store: Any, name: str) -> Any:
    """``store.namespace(name)``, made to close ``store`` when it is closed (the view is all the caller keeps).

    What ``open_store(url, namespace=...)`` returns. A view of a store that
    does not follow the mediastash rules (``StoreRules``) is returned as it is.
    """
    view = store.namespace(name)
    if isinstance(view, StoreRules) and view._namespace_parent is store:
        view._closes_store = True
    return view


def errno_name(exc: BaseException) -> str:
    """A short, secret-free name for ``exc``: its errno's symbol (``EACCES``) when it has one, else its class name."""
    code = getattr(exc, 'errno', None)
    if isinstance(code, int) and code in errno.errorcode:
        return errno.errorcode[code]
    return type(exc).__name__
