"""Typed store options (issue 33): one frozen options class per backend that ``__init__``, ``options=`` and
``from_url`` all go through, the one URL-query mapper, and the older plug-in hook.

Nothing here talks to a server: options are checked when made, and a URL is
read into options without opening anything. The stores' own test modules run
every backend on real storage through ``from_url`` and the constructors.
"""

from __future__ import annotations

import dataclasses
import inspect
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mediastash import InvalidStoreConfiguration, open_store
from mediastash.stores import (
    BaseMediaStore,
    DiskMediaStore,
    DiskOptions,
    SqliteMediaStore,
    SqliteOptions,
    StoreOptions,
    StorePlan,
)
from mediastash.stores.mongo import MongoMediaStore, MongoOptions
from mediastash.stores.postgres import PostgresMediaStore, PostgresOptions
from mediastash.stores.s3 import PresignedUrls, S3MediaStore, S3Options

PAIRS: list[tuple[type[BaseMediaStore], type[StoreOptions]]] = [
    (DiskMediaStore, DiskOptions),
    (SqliteMediaStore, SqliteOptions),
    (S3MediaStore, S3Options),
    (MongoMediaStore, MongoOptions),
    (PostgresMediaStore, PostgresOptions),
]


@pytest.mark.parametrize(('store', 'options'), PAIRS, ids=lambda kind: kind.__name__)
def test_each_store_takes_exactly_its_options_fields_with_the_same_defaults(
    store: type[BaseMediaStore], options: type[StoreOptions]
) -> None:
    """The keywords a store takes are its options' fields (plus ``options``), default for default: the
    store reads only the options object, so a keyword default that drifted would be silently wrong."""
    assert store.options_class is options
    parameters = dict(inspect.signature(store.__init__).parameters)
    parameters.pop('self')
    assert parameters.pop('options').default is None
    fields = {field.name: field for field in dataclasses.fields(options)}
    assert list(parameters) == list(fields)
    for name, parameter in parameters.items():
        default = fields[name].default
        if default is dataclasses.MISSING:  # required in the options, optional beside options= in the store
            assert parameter.default is None, name
        else:
            assert parameter.default is default or parameter.default == default, name


def test_options_are_frozen_and_checked_when_made(tmp_path: Path) -> None:
    options = DiskOptions(directory=tmp_path, fsync=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.fsync = False  # type: ignore[misc]
    with pytest.raises(InvalidStoreConfiguration, match='fsync must be True or False'):
        DiskOptions(directory=tmp_path, fsync='yes')  # type: ignore[arg-type]
    with pytest.raises(InvalidStoreConfiguration, match='max_attempts must be an int from 1 to 100'):
        S3Options(bucket='b', max_attempts=0)
    with pytest.raises(InvalidStoreConfiguration, match='needs exactly one of pool='):
        PostgresOptions()
    with pytest.raises(InvalidStoreConfiguration, match='needs exactly one of client='):
        MongoOptions(client=None, db_url=None)


def test_a_refused_value_is_never_repeated() -> None:
    secret = 'sk-live-0123456789abcdef'
    with pytest.raises(InvalidStoreConfiguration, match='key_prefix must be a str') as raised:
        S3Options(bucket='b', key_prefix=f'/{secret}')
    assert secret not in str(raised.value)
    with pytest.raises(InvalidStoreConfiguration, match='invalid SQLite table name') as raised:
        SqliteOptions(database=':memory:', table=f'x-{secret}')
    assert secret not in str(raised.value)
    with pytest.raises(InvalidStoreConfiguration, match='needs a postgresql://') as raised:
        PostgresOptions(dsn=f'mysql://user:{secret}@host/db')
    assert secret not in str(raised.value)


def test_the_repr_of_options_never_shows_a_credential() -> None:
    secret = 'wJalrXUtnFEMI-K7MDENG-bPxRfiCY'
    shown = repr(
        S3Options(bucket='b', aws_access_key_id='AKIDEXAMPLE', aws_secret_access_key=secret, aws_session_token=secret)
    )
    assert 'bucket=' in shown and secret not in shown and 'AKIDEXAMPLE' not in shown
    assert secret not in repr(MongoOptions(db_url=f'mongodb://user:{secret}@127.0.0.1/db'))
    assert secret not in repr(PostgresOptions(dsn=f'postgresql://user:{secret}@127.0.0.1/db'))


async def test_keywords_options_and_from_url_make_the_same_store(tmp_path: Path) -> None:
    folder = tmp_path / 'blobs'
    by_keywords = DiskMediaStore(folder, fsync=True)
    by_options = DiskMediaStore(options=DiskOptions(directory=folder, fsync=True))
    by_url = DiskMediaStore.from_url(f'file://{folder}?fsync=true')
    for store in (by_keywords, by_options, by_url):
        assert store.directory == folder and store._fsync is True
    uri = await by_options.put(b'one payload')
    assert await by_url.get(uri) == b'one payload'


def test_keywords_given_beside_options_replace_those_fields(tmp_path: Path) -> None:
    base = SqliteOptions(database=str(tmp_path / 'a.db'), table='first')
    store = SqliteMediaStore(options=base, table='second')
    assert (store.database, store.table) == (str(tmp_path / 'a.db'), 'second')
    assert SqliteMediaStore(options=base).table == 'first'
    assert SqliteMediaStore(options=base, table='media').table == 'first'  # a default keyword changes nothing
    with pytest.raises(InvalidStoreConfiguration, match=r'SqliteMediaStore\(options=...\) takes a SqliteOptions'):
        SqliteMediaStore(options=DiskOptions(directory=tmp_path))  # type: ignore[arg-type]


def test_replace_checks_again() -> None:
    options = S3Options(bucket='b')
    assert options.replace(part_size=16 << 20).part_size == 16 << 20
    assert options.part_size == 8 << 20
    with pytest.raises(InvalidStoreConfiguration, match='part_size must be an int of bytes from 5242880'):
        options.replace(part_size=1)
    with pytest.raises(InvalidStoreConfiguration, match="S3MediaStore does not accept the option 'colour'"):
        options.replace(colour='red')


def test_a_url_is_read_into_options_without_opening_anything() -> None:
    options = S3Options.from_url(
        's3://bucket/runs?region=eu-west-1&known_ttl=10m&retry_max_backoff=500ms&part_size=16MiB'
        '&conditional_writes=no&max_attempts=3'
    )
    assert options == S3Options(
        bucket='bucket',
        key_prefix='runs/',
        region_name='eu-west-1',
        known_ttl=600.0,
        retry_max_backoff=0.5,
        part_size=16 << 20,
        conditional_writes=False,
        max_attempts=3,
    )
    assert MongoOptions.from_url('mongodb://127.0.0.1:1/agents?collection=blobs&chunk_size_bytes=1MiB') == MongoOptions(
        db_url='mongodb://127.0.0.1:1/agents', database='agents', collection='blobs', chunk_size_bytes=1 << 20
    )
    assert PostgresOptions.from_url('postgres://app@db.internal/agents?table=blobs&sslmode=require') == PostgresOptions(
        dsn='postgresql://app@db.internal/agents?sslmode=require', table='blobs'
    )


@pytest.mark.parametrize(
    ('url', 'message'),
    [
        ('s3://bucket?colour=red', "unknown s3:// URL parameter 'colour'; accepted: endpoint_url, region, put_check"),
        ('s3://bucket?known_ttl=soon9731', 'URL parameter known_ttl= must be a duration'),
        ('s3://bucket?known_ttl=3d9731', 'URL parameter known_ttl= must be a duration'),
        ('s3://bucket?known_ttl=9731h', 'known_ttl must be None or a number of seconds above 0'),
        ('s3://bucket?region=', 'URL parameter region= is empty'),
        ('postgresql://h/db?colour=9731', "unknown postgresql:// URL parameter 'colour'; accepted: table, schema"),
        ('mongodb://h/db?collection=', 'URL parameter collection= is empty'),
        ('file:///tmp/x?fsync=9731', 'URL parameter fsync= must be true or false'),
        ('sqlite:///x.db?colour=9731', "unknown sqlite:// URL parameter 'colour'; accepted: table"),
    ],
)
def test_a_bad_url_parameter_is_refused_by_name_without_its_value(url: str, message: str) -> None:
    kinds: dict[str, type[StoreOptions]] = {
        's3': S3Options,
        'postgresql': PostgresOptions,
        'mongodb': MongoOptions,
        'file': DiskOptions,
        'sqlite': SqliteOptions,
    }
    with pytest.raises(InvalidStoreConfiguration) as raised:
        kinds[url.partition(':')[0]].from_url(url)
    assert message in str(raised.value)
    assert '9731' not in str(raised.value)


def test_from_url_overrides_are_fields_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    connection = sqlite3.connect(':memory:', check_same_thread=False)
    try:
        options = SqliteOptions.from_url('sqlite:///ignored.db?table=blobs', connection=connection)
        assert (options.database, options.connection, options.table) == (None, connection, 'blobs')
    finally:
        connection.close()
    with pytest.raises(InvalidStoreConfiguration, match="DiskMediaStore does not accept the option 'colour'"):
        DiskMediaStore.from_url(str(tmp_path), colour='red')
    assert list(tmp_path.iterdir()) == []


def test_a_presigned_public_url_survives_the_options(tmp_path: Path) -> None:
    presigned = PresignedUrls(expires_in=60)
    store = S3MediaStore(options=S3Options(bucket='b', public_url=presigned, region_name='us-east-1'))
    assert store._presigned is presigned


# -- plug-ins written before options classes ------------------------------------------------------------


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    from mediastash.stores import registry

    monkeypatch.setattr(registry, '_registered', dict(registry._registered))
    return registry


def _plan_old_style(cls: Any, url: str, create: bool, overrides: dict[str, Any]) -> StorePlan[Any]:
    if url != 'oldstyle://':
        raise InvalidStoreConfiguration('oldstyle:// takes nothing else')
    return StorePlan(lambda: cls(**overrides))


class OldStyleStore(DiskMediaStore, url_planner=_plan_old_style):
    """A plug-in that names a module-level URL parser in its class statement (the hook before options_class)."""

    options_class = None


async def test_a_plug_in_with_a_module_level_url_parser_keeps_working(registry: Any, tmp_path: Path) -> None:
    registry.register_store('oldstyle', OldStyleStore)
    store = open_store('oldstyle://', directory=tmp_path)
    assert type(store) is OldStyleStore and store.directory == tmp_path
    assert await store.get(await store.put(b'still opens')) == b'still opens'
    with pytest.raises(InvalidStoreConfiguration, match='oldstyle:// takes nothing else'):
        open_store('oldstyle://elsewhere', directory=tmp_path)


def test_an_entry_point_naming_a_function_gets_an_error_naming_the_hook(registry: Any) -> None:
    registry.register_store('factory', 'mediastash.open_store:open_store')
    with pytest.raises(InvalidStoreConfiguration) as raised:
        registry.store_class('factory')
    message = str(raised.value)
    assert 'is a function' in message and 'options_class' in message and 'from_url' in message


def test_a_store_class_without_a_url_hook_is_refused_naming_the_hooks(registry: Any) -> None:
    class NoUrl(BaseMediaStore):
        pass

    registry.register_store('nourl', f'{__name__}:NoUrlStore')
    globals()['NoUrlStore'] = NoUrl
    try:
        with pytest.raises(InvalidStoreConfiguration, match='declares no options_class and defines no from_url'):
            registry.store_class('nourl')
    finally:
        del globals()['NoUrlStore']
