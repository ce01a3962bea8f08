"""URIs, errors, MediaContext, key strategies and URL resolvers."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys

import pytest

import mediastash
from mediastash import (
    IntegrityError,
    InvalidMediaURI,
    MediaContext,
    MediaNotFoundError,
    MediaStashError,
    UnsupportedMarkerFormat,
    default_key_strategy,
    make_static_public_url,
    media_uri_for,
    parse_media_uri,
    sharded_key_strategy,
)
from mediastash.context import context_metadata
from mediastash.urls import resolve_public_url

DIGEST = hashlib.sha256(b'hello').hexdigest()
URI = f'media+sha256://{DIGEST}'


def test_media_uri_for_is_the_sha256_of_the_bytes() -> None:
    assert media_uri_for(b'hello') == URI
    assert media_uri_for(bytearray(b'hello')) == URI
    assert media_uri_for(b'') == 'media+sha256://' + hashlib.sha256(b'').hexdigest()


def test_parse_media_uri_returns_the_digest() -> None:
    assert parse_media_uri(URI) == DIGEST


@pytest.mark.parametrize(
    'bad',
    [
        '',
        DIGEST,
        'media+sha256://' + DIGEST.upper(),
        'media+sha256://' + DIGEST[:-1],
        'media+sha256://' + DIGEST + '0',
        'media+sha256://' + DIGEST + '\n',
        'media+sha1://' + DIGEST,
        'MEDIA+SHA256://' + DIGEST,
        'media+sha256://' + 'g' * 64,
        None,
        42,
        b'media+sha256://' + DIGEST.encode(),
    ],
)
def test_parse_media_uri_refuses_anything_else(bad: object) -> None:
    with pytest.raises(InvalidMediaURI) as info:
        parse_media_uri(bad)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, MediaStashError)
    assert str(info.value).startswith('invalid media URI (a ')  # its type (and length), never the value
    assert mediastash.is_media_uri(bad) is False


def test_error_hierarchy_matches_the_harness_contract() -> None:
    missing = MediaNotFoundError(URI, where='DiskMediaStore')
    assert isinstance(missing, FileNotFoundError)
    assert URI in str(missing)
    assert 'DiskMediaStore' in str(missing)
    corrupt = IntegrityError(URI, actual_digest='0' * 64)
    assert URI in str(corrupt)
    assert not isinstance(corrupt, ValueError)
    assert isinstance(UnsupportedMarkerFormat('literal wrapper', 'literal-v9'), ValueError)


def test_media_context_is_frozen_with_defaults() -> None:
    context = MediaContext(media_type='image/png')
    assert context.filename is None
    assert dict(context.metadata) == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.media_type = 'x'  # type: ignore[misc]
    with pytest.raises(TypeError):
        MediaContext('image/png')  # type: ignore[misc]


def test_context_metadata_must_be_str_to_str() -> None:
    assert context_metadata(MediaContext(metadata={'a': 'b'})) == {'a': 'b'}
    with pytest.raises(TypeError, match="'n'"):
        context_metadata(MediaContext(metadata={'n': 1}))  # type: ignore[dict-item]
    with pytest.raises(TypeError, match='mapping'):
        context_metadata(MediaContext(metadata=['a']))  # type: ignore[arg-type]


def test_key_strategies() -> None:
    assert default_key_strategy(URI, MediaContext()) == f'{DIGEST}.bin'
    assert sharded_key_strategy(URI) == f'{DIGEST[:2]}/{DIGEST[2:4]}/{DIGEST}.bin'
    with pytest.raises(InvalidMediaURI):
        default_key_strategy('nope', MediaContext())


async def test_static_public_url() -> None:
    resolver = make_static_public_url('https://cdn.test/media/', key_prefix='p/', extension='.png')
    assert resolver(URI, MediaContext()) == f'https://cdn.test/media/p/{DIGEST}.png'
    assert await resolve_public_url(resolver, URI, MediaContext()) == f'https://cdn.test/media/p/{DIGEST}.png'
    assert await resolve_public_url(None, URI, MediaContext()) is None
    with pytest.raises(InvalidMediaURI):
        await resolve_public_url(resolver, 'media+sha256://x', MediaContext())
    with pytest.raises(ValueError, match='base URL'):
        make_static_public_url('  ')


async def test_async_resolver_and_bad_return_type() -> None:
    async def signer(uri: str, context: object) -> str:
        return 'signed:' + uri

    assert await resolve_public_url(signer, URI, MediaContext()) == 'signed:' + URI
    with pytest.raises(TypeError, match='int'):
        await resolve_public_url(lambda uri, context: 5, URI, MediaContext())  # type: ignore[arg-type,return-value]


# -- imports without the optional extras --------------------------------------------

HIDE_PACKAGES = """
import sys
HIDDEN = set(sys.argv[1].split(','))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in HIDDEN:
            raise ModuleNotFoundError(f'No module named {name!r} (hidden by the test)', name=name)
        return None
sys.meta_path.insert(0, Hide())
"""

STAR_IMPORT = """
from mediastash import *
import mediastash
assert 'open_store' in dir() and 'DiskMediaStore' in dir() and 'StoreNotFoundError' in dir()
assert not any(name.split('.')[0] in HIDDEN for name in sys.modules), sorted(sys.modules)
assert {'S3MediaStore', 'MongoMediaStore', 'PresignedUrls'} <= set(dir(mediastash))
for name in ('S3MediaStore', 'PresignedUrls', 'MongoMediaStore'):
    try:
        getattr(mediastash, name)
    except ImportError as error:
        print(name, error)
    else:
        print(name, 'loaded')
"""


def run_hiding(packages: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, '-c', HIDE_PACKAGES + code, packages], capture_output=True, text=True, timeout=120, check=False
    )


def test_star_import_works_without_the_s3_and_mongo_extras() -> None:
    result = run_hiding('aiobotocore,botocore,aiohttp,pymongo,bson', STAR_IMPORT)
    assert result.returncode == 0, result.stderr
    assert 'S3MediaStore needs the \'s3\' extra: pip install "mediastash[s3]"' in result.stdout
    assert 'PresignedUrls needs the \'s3\' extra: pip install "mediastash[s3]"' in result.stdout
    assert 'MongoMediaStore needs the \'mongo\' extra: pip install "mediastash[mongo]"' in result.stdout


def test_star_import_with_the_extras_still_reaches_the_optional_stores() -> None:
    result = run_hiding('nothing', STAR_IMPORT.replace('assert not any', 'any'))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split('\n')[:3] == ['S3MediaStore loaded', 'PresignedUrls loaded', 'MongoMediaStore loaded']


def test_optional_stores_stay_out_of_all_but_importable_by_name() -> None:
    assert {'S3MediaStore', 'MongoMediaStore', 'PresignedUrls'}.isdisjoint(mediastash.__all__)
    from mediastash import MongoMediaStore, PresignedUrls, S3MediaStore
    from mediastash.stores.mongo import MongoMediaStore as mongo_store
    from mediastash.stores.s3 import PresignedUrls as presigned
    from mediastash.stores.s3 import S3MediaStore as s3_store

    assert (S3MediaStore, PresignedUrls, MongoMediaStore) == (s3_store, presigned, mongo_store)


def test_the_root_exports_the_whole_store_api_as_the_same_objects() -> None:
    from mediastash import stores

    assert set(stores.__all__) <= set(mediastash.__all__)
    assert len(mediastash.__all__) == len(set(mediastash.__all__))
    for name in stores.__all__:
        assert getattr(mediastash, name) is getattr(stores, name), name


def test_the_root_loads_every_optional_store_and_its_options_lazily() -> None:
    from mediastash import stores

    for name in ('MongoMediaStore', 'MongoOptions', 'PostgresMediaStore', 'PostgresOptions', 'S3Options'):
        assert name not in mediastash.__all__
        assert getattr(mediastash, name) is getattr(stores, name), name
        assert name in dir(mediastash)
    with pytest.raises(AttributeError, match=r"module 'mediastash' has no attribute 'NoSuchStore'"):
        mediastash.NoSuchStore  # noqa: B018
    with pytest.raises(AttributeError, match=r"module 'mediastash.stores' has no attribute 'NoSuchStore'"):
        stores.NoSuchStore  # noqa: B018


def test_integrations_without_the_harness_extra_give_the_install_hint() -> None:
    code = """
import mediastash
try:
    from mediastash.integrations import OffloadingStepStore
except ImportError as error:
    print('hint:', error)
"""
    result = run_hiding('pydantic_ai,pydantic_ai_harness,pydantic_ai_persistence', code)
    assert result.returncode == 0, result.stderr
    # The extra that brings OffloadingStepStore's framework (the harness extra installs pydantic-ai too).
    assert (
        'hint: mediastash.integrations.OffloadingStepStore needs pydantic-ai-harness: pip install "mediastash[harness]"'
        in result.stdout
    )


@pytest.mark.parametrize(
    'value',
    [
        'https://bucket.example/key?X-Amz-Signature=SECRETSIGNATURE',
        'media+sha256://SECRETSIGNATURE',
        'SECRETSIGNATURE',
    ],
)
def test_an_invalid_media_uri_error_never_shows_the_value(value: str) -> None:
    from mediastash.errors import InvalidMediaURI
    from mediastash.uri import parse_media_uri

    with pytest.raises(InvalidMediaURI) as caught:
        parse_media_uri(value)
    assert 'SECRETSIGNATURE' not in str(caught.value)
    assert 'SECRETSIGNATURE' not in repr(caught.value)
    assert f'{len(value)} characters' in str(caught.value)
