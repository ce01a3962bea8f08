"""Typed errors raised by mediastash.

Every error names the offending URI, key or value, and never carries
credentials. Several also subclass a built-in so code written against the
pydantic-ai-harness contract (``FileNotFoundError`` / ``ValueError``) keeps
working unchanged.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    'CorruptMetadataError',
    'EmptySourceError',
    'IntegrityError',
    'InvalidArgumentError',
    'InvalidMediaType',
    'InvalidMediaURI',
    'InvalidNamespaceError',
    'InvalidStoreConfiguration',
    'MalformedMarker',
    'MediaNotFoundError',
    'MediaStashError',
    'MetadataTooLargeError',
    'NamespaceCleanupError',
    'NamespaceUnsupportedError',
    'NotARegularFileError',
    'RootReadError',
    'StoreClosedError',
    'StoreNotFoundError',
    'StoreOperationError',
    'StorePermissionError',
    'StoreUnavailableError',
    'UnsafeKeyError',
    'UnsupportedMarkerFormat',
    'TreeDepthError',
    'UnvouchedEnvelopeError',
    'UnvouchedReferenceError',
]


class MediaStashError(Exception):
    """Base class of every error mediastash raises on purpose."""


def _placed(preposition: str, place: str | None) -> str:
    """`` in <place>`` / `` at <path>`` for a message, or nothing when the place is not known."""
    return f' {preposition} {place}' if place else ''


class MediaNotFoundError(MediaStashError, FileNotFoundError):
    """No blob is stored under the requested URI."""

    def __init__(self, uri: str, *, where: str | None = None) -> None:
        self.uri = uri
        self.where = where
        suffix = _placed('in', where)
        super().__init__(f'no media stored for {uri}{suffix}')

    def __str__(self) -> str:
        return str(self.args[0])


class IntegrityError(MediaStashError):
    """Stored bytes do not hash to the URI they were read under."""

    def __init__(self, uri: str, *, actual_digest: str, where: str | None = None) -> None:
        self.uri = uri
        self.actual_digest = actual_digest
        self.where = where
        super().__init__(
            f'stored bytes for {uri}{_placed("in", where)} hash to sha256 {actual_digest}; '
            'the blob is corrupt or truncated and was not returned'
        )


class InvalidMediaURI(MediaStashError, ValueError):
    """A string is not a ``media+sha256://<64 lowercase hex>`` URI."""

    def __init__(self, value: object, reason: str) -> None:
        self.value = value
        shape = f'a str of {len(value)} characters' if isinstance(value, str) else f'a {type(value).__name__}'
        # The value is never shown: a presigned URL or a token pasted in the wrong place can carry a secret.
        super().__init__(f'invalid media URI ({shape}): {reason}')


class InvalidMediaType(MediaStashError, ValueError):
    """A ``put`` carried a media type the store cannot record (too long, control characters); nothing was stored."""


class UnsupportedMarkerFormat(MediaStashError, ValueError):
    """A marker or literal wrapper carries a format version this reader does not know."""

    def __init__(self, what: str, version: object, *, path: str = '') -> None:
        self.what = what
        self.version = version
        self.path = path
        super().__init__(
            f'{what}{_placed("at", path)} is stamped with unsupported format version {version!r}; '
            'upgrade mediastash to read it (nothing was restored)'
        )


class MalformedMarker(MediaStashError, ValueError):
    """A marker-shaped dict cannot be restored (for example its reference is not a string)."""

    def __init__(self, reason: str, *, path: str = '') -> None:
        self.path = path
        where = _placed('at', path)
        super().__init__(f'malformed media marker{where}: {reason}')


class UnsafeKeyError(MediaStashError, ValueError):
    """A key strategy produced a storage key that would escape the store's root."""

    def __init__(self, key: object, reason: str) -> None:
        self.key = key
        super().__init__(f'refusing storage key {key!r}: {reason}')


class InvalidArgumentError(MediaStashError, ValueError):
    """An argument has the wrong type or range; the message names it and what it accepts, never its value."""

    def __init__(self, name: str, accepts: str, value: object) -> None:
        self.name = name
        super().__init__(f'{name} must be {accepts} (got {_kind_of(value)})')


def _kind_of(value: object) -> str:
    """What ``value`` is, without its value: its type with an article, and for a number its sign."""
    if value is None:
        return 'None'
    kind = type(value).__name__
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            return f'a negative {kind}'
        if value == 0:
            return 'zero'
    return f'an {kind}' if kind[:1].lower() in 'aeiou' else f'a {kind}'


class InvalidNamespaceError(InvalidArgumentError):
    """A namespace name is not 1 to 64 of ``A-Z a-z 0-9 . _ -`` (or is only dots); the name is never shown.

    A subclass of ``InvalidArgumentError`` (so a ``ValueError``); ``name`` is
    the parameter that carried it (``namespace``, ``--namespace``).
    """

    def __init__(self, name: str, value: object) -> None:
        super().__init__(name, 'a namespace name: 1 to 64 of A-Z a-z 0-9 . _ - and not only dots', value)


class NamespaceUnsupportedError(MediaStashError, TypeError):
    """A namespace operation this store cannot do.

    Raised by ``namespace()`` on a store whose backend has no namespaces or on a
    view that already is one (namespaces do not nest), and by ``erase()`` on a
    store that is not a namespace view (erasing everything is not what it does).
    """


class InvalidStoreConfiguration(MediaStashError, ValueError):
    """A store was constructed with an invalid option (table name, size, ...)."""


class StoreClosedError(MediaStashError, RuntimeError):
    """The store was closed and cannot serve further calls."""


class StoreNotFoundError(MediaStashError, LookupError):
    """The storage a store points at does not exist: an S3 bucket, or a folder or database opened without creating it.

    Not a ``FileNotFoundError``: code that reads a missing blob as "not
    stored" must not read a missing bucket or folder the same way.
    """

    def __init__(self, what: str, name: str, *, hint: str = '') -> None:
        self.what = what
        self.name = name
        suffix = f'; {hint}' if hint else ''
        super().__init__(f'{what} {name!r} does not exist{suffix}')


class CorruptMetadataError(MediaStashError, ValueError):
    """The metadata stored with a blob cannot be read back as a ``str -> str`` mapping."""

    def __init__(self, uri: str, reason: str, *, where: str | None = None) -> None:
        self.uri = uri
        self.where = where
        suffix = _placed('in', where)
        super().__init__(f'stored metadata for {uri}{suffix} is unreadable: {reason}')


class MetadataTooLargeError(MediaStashError, ValueError):
    """A ``put`` carried more user metadata than every store accepts (nothing was stored).

    The message gives the sizes only, never the metadata (it may hold secrets).
    """

    def __init__(self, *, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f'context.metadata takes {size} bytes as JSON; a store accepts at most {limit} bytes of metadata '
            '(METADATA_LIMIT_BYTES); nothing was stored'
        )


class TreeDepthError(MediaStashError, ValueError):
    """A JSON tree is nested deeper than the walker's limit, or contains itself (a cycle).

    Raised instead of ``RecursionError``; ``path`` locates the container (shortened when long);
    ``limit`` is ``None`` when a serializer (``json``, pydantic-core), not the walker, reached its limit.
    """

    def __init__(
        self, *, limit: int | None, path: str, cycle: bool = False, serializer: str = 'the json module'
    ) -> None:
        self.limit = limit
        self.path = path
        self.cycle = cycle
        if cycle:
            message = f'the tree contains itself: the container at {path} is one of its own ancestors (a cycle)'
        elif limit is None:
            message = f'the tree is nested deeper than {serializer} can parse or dump here, at {path}'
        else:
            message = f'the tree is nested deeper than {limit} levels at {path}'
        super().__init__(message)


class NotARegularFileError(MediaStashError):
    """A disk store found something other than a regular file (a FIFO, device or directory) where a blob or
    sidecar belongs; it is refused instead of read, so a planted FIFO cannot block a reader."""

    def __init__(self, path: str, kind: str, *, uri: str | None = None) -> None:
        self.path = path
        self.kind = kind
        self.uri = uri
        named = f' (for {uri})' if uri else ''
        super().__init__(f'{path!r}{named} is a {kind}, not a regular file; refusing to read it')


class RootReadError(MediaStashError):
    """A garbage-collection root could not be read completely, so the collector deleted nothing."""


class StoreOperationError(MediaStashError, RuntimeError):
    """A store's backend failed an operation: a server error, a refusal, an unreachable service.

    Raised by every store's public methods in place of its driver's own
    exception (botocore, pymongo, sqlite3, ``OSError``), which is kept as
    ``__cause__``. A ``RuntimeError``, as pydantic-ai-harness's stores raised
    for a failed request. ``operation`` is the store method (``'put'``,
    ``'get'``, ...); ``store`` the store's secret-free description; ``reason`` a
    short code the driver gave (an S3 error code, an exception class name),
    never its message, which can quote a URL; ``status`` the HTTP status or
    server error code when there is one.
    """

    summary = 'failed'

    def __init__(self, operation: str, store: str, reason: str, *, status: int | None = None) -> None:
        self.operation = operation
        self.store = store
        self.reason = reason
        self.status = status
        code = f', status {status}' if status is not None else ''
        super().__init__(f'{store}: {operation} {self.summary} ({reason}{code})')


class StoreUnavailableError(StoreOperationError):
    """The store could not be reached: a refused or dropped connection, a timeout, a busy or locked database."""

    summary = 'failed: the store could not be reached or the connection was lost'


class StorePermissionError(StoreOperationError):
    """The store refused the operation: denied access, wrong credentials, a read-only database or folder."""

    summary = 'was refused: no permission'


class NamespaceCleanupError(MediaStashError):
    """``tune``'s scratch namespace could not be erased after a threshold (the store failed meanwhile).

    The message names the namespace and the store; the run's record stays in
    the run journal, so the next ``tune`` on the store erases it (``docs/tuning.md``).
    """


class EmptySourceError(MediaStashError, ValueError):
    """A sync asked to delete what the source lacks from a source that holds no blob at all.

    That would empty the destination, and an empty source is far more often a
    wrong path or prefix than an intent, so it is refused unless allowed.
    """


class UnvouchedReferenceError(MediaStashError, ValueError):
    """A model request holds a ``media+sha256://`` reference part that mediastash did not vouch for; nothing was sent.

    Only references a restore of the application's own history sealed under
    its reference key, for the media store's namespace, are resolved
    (``docs/security.md``). The error names the message, the part (and the
    item of a part's content list) and why; never the digest or the seal.
    ``reason`` is ``'unsigned'``, ``'invalid'`` (another key, or altered) or
    ``'other-namespace'``.
    """

    _WHY: ClassVar[dict[str, str]] = {
        'unsigned': 'it carries no seal (it did not come from a mediastash restore)',
        'invalid': 'its seal does not verify under the reference key (another key, or the reference was altered)',
        'other-namespace': "it was sealed for another namespace than the media store's",
    }

    def __init__(self, *, message_index: int, part_index: int, item_index: int | None, reason: str) -> None:
        self.message_index = message_index
        self.part_index = part_index
        self.item_index = item_index
        self.reason = reason
        where = f'message {message_index}, part {part_index}'
        if item_index is not None:
            where += f', content item {item_index}'
        super().__init__(
            f'refusing the media+sha256 reference at {where}: {self._WHY.get(reason, reason)}; '
            'it was not resolved and no model request was sent'
        )


class UnvouchedEnvelopeError(MediaStashError, ValueError):
    """A save was handed a mediastash envelope its reference key did not seal; nothing was saved.

    An envelope names stored blobs, and the next restore reads them: one that
    arrives in data to save (a plain read written back) is honoured only when
    a wrapper sealed it under the reference key, for the media store's
    namespace (``docs/security.md``). ``where`` locates it (message, part or
    item index, or a path of keys); ``reason`` is ``'unsigned'``,
    ``'invalid'`` (another key, or altered) or ``'other-namespace'``. The
    error never shows the URIs or the seal.
    """

    _WHY: ClassVar[dict[str, str]] = {
        'unsigned': 'it carries no seal (mediastash did not write it, or wrote it before envelopes were sealed)',
        'invalid': 'its seal does not verify under the reference key (another key, or the envelope was altered)',
        'other-namespace': "it was sealed for another namespace than the media store's",
    }

    def __init__(self, *, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(
            f'refusing the mediastash envelope at {where}: {self._WHY.get(reason, reason)}; '
            'an envelope names stored blobs, so only one sealed under the reference key is kept. '
            'Nothing was saved (a plain read written back in another process needs the same reference_key=)'
        )
