"""Where uploads to a model provider are remembered: one record per (provider, account, blob).

A record names the provider's file id for one stored blob, so a later request
(or another process, with a persistent registry) sends the id again instead
of uploading the bytes. ``MemoryUploadRegistry`` lives as long as the
process; ``KVUploadRegistry`` keeps records in any pydantic-ai-persistence
``AsyncKV``. A record holds no credential: the account is a fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Final, Protocol, runtime_checkable

from mediastash.errors import InvalidArgumentError, MediaStashError
from mediastash.uri import parse_media_uri

__all__ = [
    'DEFAULT_REGISTRY_PARTITION',
    'KVUploadRegistry',
    'MemoryUploadRegistry',
    'UploadRecord',
    'UploadRegistry',
    'UploadRegistryError',
]

DEFAULT_REGISTRY_PARTITION: Final = 'mediastash-provider-files'
"""The ``AsyncKV`` partition key ``KVUploadRegistry`` writes its records under by default."""

_RECORD_VERSION: Final = 1


class UploadRegistryError(MediaStashError, ValueError):
    """A registry record cannot be read back (a newer version, or not a record): refused, never guessed."""


@dataclass(frozen=True, slots=True)
class UploadRecord:
    """One blob uploaded to one provider account.

    ``account`` identifies the endpoint and the credentials' owner without
    holding any credential; ``expires_at`` is a Unix time (``None``: kept
    until deleted).
    """

    provider: str
    account: str
    uri: str
    file_id: str
    media_type: str
    uploaded_at: float
    expires_at: float | None = None

    def to_json(self) -> str:
        return json.dumps({'v': _RECORD_VERSION, **asdict(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> UploadRecord:
        try:
            raw = json.loads(text)
        except ValueError:
            raise UploadRegistryError('an upload registry record is not JSON') from None
        if not isinstance(raw, dict) or raw.get('v') != _RECORD_VERSION:
            raise UploadRegistryError(f'an upload registry record is not of version {_RECORD_VERSION}')
        try:
            record = cls(
                provider=_text(raw, 'provider'),
                account=_text(raw, 'account'),
                uri=_text(raw, 'uri'),
                file_id=_text(raw, 'file_id'),
                media_type=_text(raw, 'media_type'),
                uploaded_at=_number(raw, 'uploaded_at'),
                expires_at=None if raw.get('expires_at') is None else _number(raw, 'expires_at'),
            )
            parse_media_uri(record.uri)
        except (KeyError, TypeError, ValueError) as error:
            raise UploadRegistryError(f'an upload registry record has a bad field ({error})') from None
        return record


def _text(raw: dict[str, Any], name: str) -> str:
    value = raw[name]
    if not isinstance(value, str) or not value:
        raise TypeError(f'{name} must be a non-empty string')
    return value


def _number(raw: dict[str, Any], name: str) -> float:
    value = raw[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f'{name} must be a number')
    return float(value)


@runtime_checkable
class UploadRegistry(Protocol):
    """What ``ProviderFiles`` needs to remember uploads; implement it for any database."""

    async def get(self, provider: str, account: str, uri: str) -> UploadRecord | None: ...

    async def put(self, record: UploadRecord) -> None: ...

    async def forget(self, provider: str, account: str, uri: str) -> None: ...

    async def records(self, provider: str, account: str) -> list[UploadRecord]: ...


class MemoryUploadRegistry:
    """Uploads remembered by this process only (the default)."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str, str], UploadRecord] = {}

    async def get(self, provider: str, account: str, uri: str) -> UploadRecord | None:
        return self._records.get((provider, account, uri))

    async def put(self, record: UploadRecord) -> None:
        self._records[(record.provider, record.account, record.uri)] = record

    async def forget(self, provider: str, account: str, uri: str) -> None:
        self._records.pop((provider, account, uri), None)

    async def records(self, provider: str, account: str) -> list[UploadRecord]:
        return [r for (p, a, _), r in self._records.items() if p == provider and a == account]

    def __len__(self) -> int:
        return len(self._records)


class KVUploadRegistry:
    """Uploads remembered in an ``AsyncKV`` (``put``/``get``/``query``/``delete``), shared by every process using it.

    Records live under one partition key (``partition``); the sort key is
    ``<provider>|<sha256 of the account, 32 hex>|<blob digest>``, so the
    records of one account list with one ``query``.
    """

    def __init__(self, kv: Any, *, partition: str = DEFAULT_REGISTRY_PARTITION) -> None:
        if not all(callable(getattr(kv, method, None)) for method in ('put', 'get', 'query', 'delete')):
            raise InvalidArgumentError('kv', 'an AsyncKV (with put, get, query and delete)', kv)
        if not isinstance(partition, str) or not partition:
            raise InvalidArgumentError('partition', 'a non-empty string', partition)
        self.kv = kv
        self.partition = partition

    @staticmethod
    def _prefix(provider: str, account: str) -> str:
        return f'{provider}|{hashlib.sha256(account.encode()).hexdigest()[:32]}|'

    def _key(self, provider: str, account: str, uri: str) -> str:
        return self._prefix(provider, account) + parse_media_uri(uri)

    async def get(self, provider: str, account: str, uri: str) -> UploadRecord | None:
        text = await self.kv.get(self.partition, self._key(provider, account, uri))
        if text is None:
            return None
        record = UploadRecord.from_json(text)
        if (record.provider, record.account, record.uri) != (provider, account, uri):
            return None  # an account whose fingerprint collides: not ours
        return record

    async def put(self, record: UploadRecord) -> None:
        await self.kv.put(self.partition, self._key(record.provider, record.account, record.uri), record.to_json())

    async def forget(self, provider: str, account: str, uri: str) -> None:
        await self.kv.delete(self.partition, self._key(provider, account, uri))

    async def records(self, provider: str, account: str) -> list[UploadRecord]:
        rows = await self.kv.query(self.partition, self._prefix(provider, account))
        found = [UploadRecord.from_json(text) for _, text in rows]
        return [r for r in found if r.provider == provider and r.account == account]
