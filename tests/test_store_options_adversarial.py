"""Typed store options attacked like a careless user and a hostile one would (issue 33 follow-up).

Every field and URL parameter of every backend is given a wrong type, an out-of-range number, an empty string,
control characters, a lone surrogate, an unknown or repeated name and malformed URLs: each must be refused with a
typed error that names the setting and never carries the value (not in the message, the args, nor the chained
errors), and a refused call must create nothing. Credentials given to a store never show in a ``repr``, an error
or a log. Keywords beside ``options=``, ``from_url`` overrides and ``replace`` keep the precedence
``docs/stores.md`` describes. Nothing here contacts a server.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mediastash import InvalidStoreConfiguration, open_store
from mediastash.errors import MediaStashError
from mediastash.stores import DiskMediaStore, DiskOptions, SqliteMediaStore, SqliteOptions, StoreOptions
from mediastash.stores.mongo import MongoMediaStore, MongoOptions
from mediastash.stores.postgres import PostgresMediaStore, PostgresOptions
from mediastash.stores.s3 import S3MediaStore, S3Options

MARK = 'Zq7319secret'
"""Put in every refused value: it must never come back in an error."""
SECRET = 'wJalrXUtnFEMI7K7MDENGbPxRfiCY3EXAMPLEKEY'
TOKEN = 'FwoGZXIvYXdzEJr8SESSIONTOKEN42'


def _texts(error: BaseException) -> str:
    """Everything an error carries that a handler or a logger could print: message, args, chained errors."""
    found: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found += [str(current), repr(current.args)]
        found += [repr(value) for value in vars(current).values()] if hasattr(current, '__dict__') else []
        current = current.__cause__ or current.__context__
    return '\n'.join(found)


def _refused(call: Any, *secrets: str) -> MediaStashError:
    """Run ``call``: it must raise a typed ``ValueError``/``LookupError`` carrying none of ``secrets``."""
    with pytest.raises(MediaStashError) as raised:
        call()
    for secret in (MARK, *secrets):
        assert secret not in _texts(raised.value)
    return raised.value


def _outcome(call: Any) -> MediaStashError | None:
    """The typed error ``call`` raises, or ``None`` when it succeeds (anything else propagates: a test failure)."""
    try:
        call()
    except MediaStashError as error:
        return error
    return None


# -- fields ---------------------------------------------------------------------------------------------------

S3_BASE: dict[str, Any] = {'bucket': 'b'}
DISK_BASE: dict[str, Any] = {'directory': 'unused-folder'}
SQLITE_BASE: dict[str, Any] = {'database': ':memory:'}
MONGO_BASE: dict[str, Any] = {'db_url': 'mongodb://127.0.0.1:1/db'}
POSTGRES_BASE: dict[str, Any] = {'dsn': 'postgresql://127.0.0.1:1/db'}

BAD_FIELDS: list[tuple[type[StoreOptions], dict[str, Any], str, object]] = [
    *[
        (S3Options, S3_BASE, 'bucket', value)
        for value in (5, '', f'a\x00{MARK}', f'has space{MARK}', f'\udcff{MARK}', f'{MARK}/x', 'b' * 256, None)
    ],
    *[(S3Options, S3_BASE, 'region_name', value) for value in (5, '', f'x\n{MARK}', f'\udcff{MARK}', f'{MARK} x')],
    *[
        (S3Options, S3_BASE, 'endpoint_url', value)
        for value in (5, '', f'ftp://{MARK}', f'http://{MARK}:99999', f'http://h/\udcff{MARK}', f'http://h\x00{MARK}')
    ],
    *[(S3Options, S3_BASE, 'endpoint_url', value) for value in (f'http://h?{MARK}=1', f'https://h#{MARK}', 'http://')],
    *[
        (S3Options, S3_BASE, name, value)
        for name in ('aws_access_key_id', 'aws_secret_access_key', 'aws_session_token')
        for value in (5, '', f'{MARK}\n', f'{MARK}\udcff', b'bytes')
    ],
    *[(S3Options, S3_BASE, 'put_check', value) for value in (5, 'HEAD', '', [MARK], None)],
    *[(S3Options, S3_BASE, 'conditional_writes', value) for value in ('no', 1, None)],
    *[
        (S3Options, S3_BASE, name, value)
        for name in ('part_size', 'multipart_threshold')
        for value in ('16MiB', None, 0, -1, 1.5e7, True, (5 << 30) + 1, 10**30)
    ],
    *[
        (S3Options, S3_BASE, name, value)
        for name in ('max_concurrency', 'max_attempts', 'read_attempts')
        for value in (0, -1, True, 2.0, '3', 10**9)
    ],
    *[(S3Options, S3_BASE, 'known_ttl', value) for value in ('x', True, 0, -1, float('nan'), float('inf'), 86_401)],
    *[(S3Options, S3_BASE, 'retry_max_backoff', value) for value in ('x', True, -1, 61, float('nan'))],
    *[(S3Options, S3_BASE, 'spool_directory', value) for value in (5, '', f'a\x00{MARK}', b'bytes')],
    *[(S3Options, S3_BASE, 'key_prefix', value) for value in (5, f'/{MARK}', f'a\x00{MARK}', f'\udcff{MARK}')],
    (S3Options, S3_BASE, 'key_strategy', 5),
    (S3Options, S3_BASE, 'public_url', 'https://cdn.example/'),
    (S3Options, S3_BASE, 'config', {'retries': 3}),
    *[(DiskOptions, DISK_BASE, 'directory', value) for value in ('', f'a\x00{MARK}', 5, b'x', None)],
    *[(DiskOptions, DISK_BASE, 'fsync', value) for value in (1, 'true', None)],
    (DiskOptions, DISK_BASE, 'key_strategy', 'flat'),
    (DiskOptions, DISK_BASE, 'public_url', 'https://cdn.example/'),
    *[(SqliteOptions, SQLITE_BASE, 'database', value) for value in (5, '', f'a\x00{MARK}', b'x', f'\udcff{MARK}.db')],
    *[(SqliteOptions, SQLITE_BASE, 'table', value) for value in (5, '', f'x-{MARK}', 'sqlite_x', 'a' * 64)],
    (SqliteOptions, {}, 'connection', 'media.db'),
    (SqliteOptions, SQLITE_BASE, 'public_url', 'https://cdn.example/'),
    *[
        (MongoOptions, MONGO_BASE, 'db_url', value)
        for value in (5, '', f'http://u:{MARK}@h/db', f'mongodb://u:{MARK}@h/db\x00', f'mongodb://u:{MARK}@h/\udcff')
    ],
    *[(MongoOptions, MONGO_BASE, 'database', value) for value in ('', 5, f'a.{MARK}', f'\udcff{MARK}', 'd' * 64)],
    *[(MongoOptions, MONGO_BASE, 'collection', value) for value in ('', 5, f'x-{MARK}', 'c' * 101)],
    *[(MongoOptions, MONGO_BASE, 'chunk_size_bytes', value) for value in (0, -1, True, '4MiB', 10**12)],
    (MongoOptions, MONGO_BASE, 'public_url', 'https://cdn.example/'),
    *[
        (PostgresOptions, POSTGRES_BASE, 'dsn', value)
        for value in (
            5,
            '',
            f'mysql://u:{MARK}@h/db',
            f'postgresql://u:{MARK}@h:99999/db',
            f'postgresql://h/\udcff{MARK}',
        )
    ],
    (PostgresOptions, POSTGRES_BASE, 'dsn', f'postgresql://u:{MARK}@h/db\x00'),
    *[
        (PostgresOptions, POSTGRES_BASE, name, value)
        for name in ('table', 'schema')
        for value in (5, '', 'Upper', MARK)
    ],
    *[(PostgresOptions, POSTGRES_BASE, 'chunk_size_bytes', value) for value in (0, -1, True, '4MiB', 1 << 40)],
    *[(PostgresOptions, POSTGRES_BASE, 'max_connections', value) for value in (0, -1, True, '10')],
    (PostgresOptions, POSTGRES_BASE, 'public_url', 'https://cdn.example/'),
]


@pytest.mark.parametrize(
    ('kind', 'base', 'field', 'value'),
    BAD_FIELDS,
    ids=[f'{kind.__name__}-{field}-{index}' for index, (kind, _, field, _) in enumerate(BAD_FIELDS)],
)
def test_a_bad_field_is_refused_naming_it_without_its_value(
    kind: type[StoreOptions], base: dict[str, Any], field: str, value: object
) -> None:
    error = _refused(lambda: kind(**{**base, field: value}))
    assert isinstance(error, ValueError)
    names = ('dsn', 'PostgreSQL port') if field == 'dsn' else (field, field.replace('_', ' '))
    assert any(name in str(error) for name in names), str(error)
    if base:  # replace() checks the same way
        kept = kind(**base)
        _refused(lambda: kept.replace(**{field: value}))


def test_a_refused_field_names_itself_even_for_shared_checks() -> None:
    """The Postgres table/schema and Mongo names share checkers: each error still says which setting it was."""
    assert 'schema' in str(_refused(lambda: PostgresOptions(dsn='postgresql://h/db', schema='Upper')))
    assert 'collection' in str(_refused(lambda: MongoOptions(db_url='mongodb://h/db', collection='a-b')))


# -- URLs -----------------------------------------------------------------------------------------------------

BAD_URLS: list[tuple[str, str]] = [
    # s3://
    ('s3://', 'bucket'),
    ('s3:///prefix', 'bucket'),
    (f's3://{"b" * 256}', 'bucket'),
    (f's3://{MARK}$x', 'bucket'),
    (f's3://b?region=\udcff{MARK}', 'surrogate'),
    (f's3://b/\udcff{MARK}', 'surrogate'),
    (f's3://b?region=a%0a{MARK}', 'region'),
    (f's3://b?region=%01{MARK}', 'region'),
    ('s3://b?region=x&region=y', "'region' twice"),
    ('s3://b?region', 'region='),
    (f's3://b?max_attempts=%D9%A5{MARK}', 'max_attempts='),
    ('s3://b?max_attempts=0', 'max_attempts'),
    ('s3://b?max_attempts=99999999999999999999', 'max_attempts'),
    ('s3://b?max_concurrency=100000', 'max_concurrency'),
    ('s3://b?read_attempts=-1', 'read_attempts'),
    ('s3://b?part_size=6GiB', 'part_size'),
    ('s3://b?multipart_threshold=99999999999GiB', 'multipart_threshold'),
    ('s3://b?multipart_threshold=1KiB', 'multipart_threshold'),
    (f's3://b?part_size={MARK}', 'part_size='),
    ('s3://b?known_ttl=0', 'known_ttl'),
    ('s3://b?known_ttl=25h', 'known_ttl'),
    ('s3://b?retry_max_backoff=61s', 'retry_max_backoff'),
    (f's3://b?conditional_writes={MARK}', 'conditional_writes='),
    ('s3://b?put_check=HEAD', 'put_check'),
    (f's3://b?endpoint_url=http://h:99999/{MARK}', 'endpoint_url='),
    (f's3://b?endpoint_url=ftp://{MARK}', 'endpoint_url='),
    (f's3://b?endpoint_url=http://AKID:{SECRET}@h', 'endpoint_url='),
    (f's3://b?aws_secret_access_key={SECRET}', 'aws_secret_access_key'),
    (f's3://b?X-Amz-Security-Token={TOKEN}', 'credentials'),
    (f's3://AKID:{SECRET}@b', 'credentials'),
    (f's3://b:{MARK}', 'bucket'),
    (f's3://b#{MARK}', 'fragment'),
    (f's3://b?colour={MARK}', "'colour'"),
    # mongodb://
    ('mongodb://', 'host'),
    ('mongodb://h', 'database'),
    (f'mongodb://u:{SECRET}@h/', 'database'),
    (f'mongodb://u:{SECRET}@h/db\udcff', 'surrogate'),
    (f'mongodb://u:{SECRET}@h/db#{MARK}', 'fragment'),
    (f'mongodb://u:{SECRET}@h/db?collection=a&collection=b', "'collection' twice"),
    (f'mongodb://u:{SECRET}@h/db?collection=x-{MARK}', 'collection'),
    (f'mongodb://u:{SECRET}@h/db?chunk_size_bytes=0', 'chunk_size_bytes'),
    (f'mongodb://u:{SECRET}@h/db?chunk_size_bytes=1GiB', 'chunk_size_bytes'),
    (f'mongodb://u:{SECRET}@h/db?tls={MARK}', "'tls'"),
    (f'mongodb://u:{SECRET}@h/db?colour={MARK}', "'colour'"),
    (f'mongodb://u:{SECRET}@h/d.b', 'database'),
    (f'mongodb://u:{SECRET}@h:99999/db', 'db_url'),
    # postgresql://
    ('postgresql://', 'host'),
    ('postgresql://h', 'database'),
    (f'postgresql://u:{SECRET}@h/db', 'password'),
    (f'postgresql://u:p/{SECRET}@h/db', 'password'),
    (f'postgresql://h/db?password={SECRET}', "'password'"),
    (f'postgresql://h/db?sslmode=\udcff{SECRET}', 'surrogate'),
    ('postgresql://h/d%00b', 'NUL'),
    ('postgresql://h:99999/db', 'port'),
    ('postgresql://h:0/db', 'port'),
    ('postgresql://[::1/db', 'cannot be parsed'),
    ('postgresql://h/db?max_connections=0', 'max_connections'),
    ('postgresql://h/db?chunk_size_bytes=1TiB', 'chunk_size_bytes='),
    ('postgresql://h/db?table=a&table=b', "'table' twice"),
    (f'postgresql://h/db#{MARK}', 'fragment'),
    (f'postgresql://h/db?schema=Upper{MARK}', 'schema'),
    # sqlite:// and file://
    ('sqlite://', 'database'),
    ('sqlite://h/x.db', 'host'),
    ('sqlite:///x.db?table=a&table=b', "'table' twice"),
    ('sqlite:///a%00b.db', 'database'),
    (f'sqlite:///\udcff{MARK}.db', 'surrogate'),
    (f'sqlite:///x.db?table=sqlite_{MARK}', 'table'),
    ('file://', 'folder'),
    ('file://h/x', 'host'),
    ('file:///a%00b', 'directory'),
    ('\x00', 'directory'),
    ('file:///x?fsync=1&fsync=0', "'fsync' twice"),
    (f'file:///x?fsync={MARK}', 'fsync='),
    (f'file://u:{SECRET}@localhost/x', 'credentials'),
    # parameter names that are pasted secrets are never quoted back
    ('s3://b?ghp_16C7e42F292c6912E7710c838347Ae178B4a=1', 'parameter'),
    ('s3://b?sk_live_4eC39HqLyjWDarjtT1zdp7dc=1', 'parameter'),
    (f'sqlite:///x.db?wjalrxutnfemik7mdengbpxrficy{MARK}=1', 'parameter'),
    (f'postgresql://h/db?k{MARK}=1', 'parameter'),
]


@pytest.mark.parametrize(('url', 'named'), BAD_URLS, ids=[str(index) for index in range(len(BAD_URLS))])
@pytest.mark.parametrize('create', [False, True], ids=['create=False', 'create=True'])
def test_a_bad_url_is_refused_naming_the_part_without_its_value_and_creates_nothing(
    url: str, named: str, create: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    error = _refused(lambda: open_store(url, create=create), SECRET, TOKEN)
    assert isinstance(error, ValueError)
    assert named in str(error), str(error)
    for secret_part in ('ghp_16C7', 'sk_live_4e', 'wjalrxutnfemik'):
        assert secret_part not in str(error)
    assert list(tmp_path.iterdir()) == []


_PARAMETERS = {
    's3://b?{}={}': [
        'endpoint_url',
        'region',
        'put_check',
        'conditional_writes',
        'multipart_threshold',
        'part_size',
        'max_concurrency',
        'max_attempts',
        'read_attempts',
        'known_ttl',
        'retry_max_backoff',
    ],
    'postgresql://h/db?{}={}': ['table', 'schema', 'chunk_size_bytes', 'max_connections', 'sslmode'],
    'mongodb://h/db?{}={}': ['collection', 'chunk_size_bytes', 'appname', 'w'],
    'sqlite:///:memory:?{}={}': ['table'],
    'file:///unused-x?{}={}': ['fsync'],
}
_CASES = [(form, name) for form, names in _PARAMETERS.items() for name in names]


@pytest.mark.parametrize(('form', 'name'), _CASES, ids=[f'{form[:5]}-{name}' for form, name in _CASES])
@settings(max_examples=40, deadline=None)
@given(noise=st.text(alphabet=st.characters(codec=None, exclude_categories=('Cs',)), max_size=12))
def test_any_text_in_a_url_parameter_is_read_or_refused_without_echo(form: str, name: str, noise: str) -> None:
    """Arbitrary text (control characters, non-ASCII, percent signs) after the mark: accepted, or refused by name."""
    value = f'{MARK}{noise}'
    for char, escaped in (('%', '%25'), ('&', '%26'), ('#', '%23'), ('+', '%2B'), (';', '%3B')):
        value = value.replace(char, escaped)
    url = form.format(name, value)
    if url.startswith('file:'):
        error = _outcome(lambda: DiskOptions.from_url(url, create=True))
    else:
        error = _outcome(lambda: open_store(url, create=False))
    if error is not None:
        assert isinstance(error, ValueError | LookupError)
        assert MARK not in _texts(error)
        assert name in str(error) or 'surrogate' in str(error), str(error)


@settings(max_examples=60, deadline=None)
@given(junk=st.text(alphabet=string.printable + '\x00\x7f\u00e9\u2028', max_size=30))
def test_any_url_after_a_scheme_is_read_or_refused_typed(junk: str) -> None:
    calls = [
        lambda: S3Options.from_url(f's3://{junk}'),
        lambda: MongoOptions.from_url(f'mongodb://{junk}'),
        lambda: PostgresOptions.from_url(f'postgresql://{junk}'),
        lambda: SqliteOptions.from_url(f'sqlite:///:memory:?{junk}'),
    ]
    for call in calls:
        error = _outcome(call)
        assert error is None or isinstance(error, ValueError | LookupError)


# -- secrets --------------------------------------------------------------------------------------------------


def test_s3_credentials_never_show_in_reprs_errors_or_replace_errors() -> None:
    options = S3Options(
        bucket='b',
        aws_access_key_id='AKIDEXAMPLE7319',
        aws_secret_access_key=SECRET,
        aws_session_token=TOKEN,
        endpoint_url=f'http://user:{SECRET}@127.0.0.1:9000',
        region_name='us-east-1',
    )
    plan = S3MediaStore.plan_from_url(
        's3://b', aws_secret_access_key=SECRET, aws_session_token=TOKEN, endpoint_url=f'http://u:{SECRET}@h:1'
    )
    with pytest.warns(UserWarning, match='ignores the user-info'):
        store = S3MediaStore(options=options)
    for shown in (repr(options), str(options), repr(plan), repr(store), str(store), store._describe()):
        assert SECRET not in shown and TOKEN not in shown and 'AKIDEXAMPLE7319' not in shown
    assert "endpoint_url='http://127.0.0.1:9000'" in repr(options)
    bad_changes: list[dict[str, Any]] = [
        {'part_size': 1},
        {'colour': SECRET},
        {'client': object()},
        {'bucket': ''},
        {'region_name': f'{SECRET} '},
    ]
    for bad in bad_changes:
        _refused(lambda bad=bad: options.replace(**bad), SECRET, TOKEN)
    _refused(lambda: S3Options(bucket='b', aws_secret_access_key=f'{SECRET}\n'), SECRET)
    _refused(lambda: S3MediaStore.from_url(f's3://b?aws_session_token={TOKEN}'), TOKEN)


def test_mongo_and_postgres_passwords_never_show(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    mongo_url = f'mongodb://app:{SECRET}@127.0.0.1:1/agents?collection=blobs&serverSelectionTimeoutMS=50'
    mongo_options = MongoOptions.from_url(mongo_url)
    mongo_plan = MongoMediaStore.plan_from_url(mongo_url)
    mongo = MongoMediaStore(options=mongo_options)
    dsn = f'postgresql://app:{SECRET}@127.0.0.1:1/agents'
    postgres_options = PostgresOptions(dsn=dsn, table='blobs')
    postgres = PostgresMediaStore(options=postgres_options)
    postgres_plan = PostgresMediaStore.plan_from_url('postgresql://app@127.0.0.1:1/agents', dsn=dsn)
    for thing in (mongo_options, mongo_plan, mongo, postgres_options, postgres, postgres_plan):
        assert SECRET not in repr(thing) and SECRET not in str(thing)
    for call in (
        lambda: mongo_options.replace(collection='no-dashes'),
        lambda: mongo_options.replace(chunk_size_bytes=0),
        lambda: MongoOptions.from_url(f'{mongo_url}&collection=again'),
        lambda: MongoOptions.from_url(f'{mongo_url}&tls=maybe'),
        lambda: MongoOptions.from_url(mongo_url.replace('/agents', '/a.b')),
        lambda: postgres_options.replace(table='No'),
        lambda: postgres_options.replace(pool=object()),
        lambda: PostgresOptions.from_url(dsn),
        lambda: PostgresOptions.from_url(f'postgresql://app@h/db?passwd={SECRET}'),
        lambda: PostgresMediaStore(dsn=dsn.replace(':1/', ':x/')),
    ):
        _refused(call, SECRET)
    assert SECRET not in caplog.text


def test_a_url_error_keeps_no_chained_error_holding_the_url() -> None:
    """``raise ... from None`` hides the cause from tracebacks but keeps ``__context__``: a parse error there
    (``UnicodeEncodeError.object``) would still hold the whole URL."""
    for url in (f'postgresql://h/db?sslmode=\udcff{SECRET}', f's3://b/\udcff{SECRET}', f'mongodb://h/\udcff{SECRET}'):
        error = _refused(lambda url=url: open_store(url, create=False), SECRET)
        assert error.__context__ is None or SECRET not in repr(vars(error.__context__))


# -- precedence -----------------------------------------------------------------------------------------------


async def test_keywords_beside_options_replace_their_fields_in_every_store(tmp_path: Path) -> None:
    """A keyword that differs from its default replaces that field; one equal to its default (or None) leaves the
    options' value, since a store cannot tell a keyword left out from one given as its default."""
    disk = DiskOptions(directory=tmp_path / 'a', fsync=True)
    assert DiskMediaStore(options=disk, directory=tmp_path / 'b')._options.directory == tmp_path / 'b'
    assert DiskMediaStore(options=disk, fsync=False)._options.fsync is True  # the default: not a change
    sqlite = SqliteOptions(database=str(tmp_path / 'x.db'), table='first')
    assert SqliteMediaStore(options=sqlite, table='second').table == 'second'
    s3 = S3Options(bucket='b', max_attempts=3, region_name='us-east-1', known_ttl=60)
    changed = S3MediaStore(options=s3, bucket='c', max_attempts=7, known_ttl=None)._options
    assert (changed.bucket, changed.max_attempts, changed.region_name, changed.known_ttl) == ('c', 7, 'us-east-1', 60)
    assert S3MediaStore(options=s3, max_attempts=5)._options.max_attempts == 3
    mongo = MongoOptions(db_url='mongodb://127.0.0.1:1/db', database='db', collection='one')
    assert MongoMediaStore(options=mongo, collection='two')._options.collection == 'two'
    postgres = PostgresOptions(dsn='postgresql://127.0.0.1:1/db', table='one', max_connections=3)
    replaced = PostgresMediaStore(options=postgres, table='two', max_connections=4)._options
    assert (replaced.table, replaced.max_connections, replaced.dsn) == ('two', 4, postgres.dsn)
    with pytest.raises(InvalidStoreConfiguration, match='max_attempts'):
        S3MediaStore(options=s3, max_attempts=0)
    with pytest.raises(InvalidStoreConfiguration, match='table'):
        PostgresMediaStore(options=postgres, table='Bad')


def test_from_url_overrides_win_over_the_url_for_every_backend(tmp_path: Path) -> None:
    s3 = S3Options.from_url('s3://b/p?region=eu-west-1&max_attempts=3', region_name='us-east-1', key_prefix='q/')
    assert (s3.region_name, s3.key_prefix, s3.max_attempts) == ('us-east-1', 'q/', 3)
    mongo = MongoOptions.from_url('mongodb://127.0.0.1:1/db?collection=one', collection='two', database='other')
    assert (mongo.collection, mongo.database) == ('two', 'other')
    postgres = PostgresOptions.from_url('postgresql://127.0.0.1:1/db?table=one', table='two')
    assert postgres.table == 'two'
    sqlite = SqliteOptions.from_url(f'sqlite:///{tmp_path}/a.db?table=one', table='two')
    assert sqlite.table == 'two'
    disk = DiskOptions.from_url(f'file://{tmp_path}/a?fsync=true', fsync=False, directory=str(tmp_path / 'b'))
    assert (disk.fsync, disk.directory) == (False, str(tmp_path / 'b'))
    with pytest.raises(InvalidStoreConfiguration, match='max_attempts'):
        S3Options.from_url('s3://b', max_attempts=0)
    with pytest.raises(InvalidStoreConfiguration, match='pass either client= or connection settings'):
        S3Options.from_url('s3://b', client=object(), region_name='us-east-1')
    assert list(tmp_path.iterdir()) == []


def test_replace_rechecks_every_backend(tmp_path: Path) -> None:
    connection = sqlite3.connect(':memory:', check_same_thread=False)
    try:
        cases: list[tuple[StoreOptions, dict[str, Any]]] = [
            (DiskOptions(directory=tmp_path), {'directory': ''}),
            (SqliteOptions(connection=connection), {'database': 'x.db'}),
            (S3Options(bucket='b'), {'known_ttl': 0}),
            (MongoOptions(db_url='mongodb://h/db'), {'db_url': None}),
            (PostgresOptions(dsn='postgresql://h/db'), {'max_connections': 0}),
        ]
        for options, change in cases:
            with pytest.raises(MediaStashError):
                options.replace(**change)
            name = dataclasses.fields(options)[0].name
            assert options.replace() == options and getattr(options.replace(), name) == getattr(options, name)
    finally:
        connection.close()
    assert os.listdir(tmp_path) == []
