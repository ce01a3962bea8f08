"""Logging: silent by default, DEBUG records for store calls and walks, never a secret or a full URL."""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from mediastash import DiskMediaStore, externalize_media, media_uri_for, restore_media


def test_silent_by_default() -> None:
    """Without logging configured, mediastash prints nothing, even for a warning-level record."""
    code = (
        'import asyncio, logging, mediastash\n'
        "logging.getLogger('mediastash.stores.base').warning('should go nowhere')\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert result.stdout == 'ok\n'
    assert result.stderr == ''
    handlers = logging.getLogger('mediastash').handlers
    assert any(isinstance(handler, logging.NullHandler) for handler in handlers)


async def test_debug_records_for_store_calls_and_walks(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = DiskMediaStore(
        tmp_path / 'media', public_url=lambda uri, context: f'https://cdn.example/{uri[-64:]}?sig=s3cr3t'
    )
    data = b'\x89PNG' * 50_000
    tree = {'kind': 'binary', 'data': base64.b64encode(data).decode(), 'media_type': 'image/png'}
    uri = media_uri_for(data)
    with caplog.at_level(logging.DEBUG, logger='mediastash'):
        lean = await externalize_media(tree, media_store=store, threshold_bytes=1024)
        assert await restore_media(lean, media_store=store, known_blobs=False) == tree
        await store.exists(uri)
        await store.public_url(uri)
    messages = [record.getMessage() for record in caplog.records if record.name.startswith('mediastash')]
    put = [m for m in messages if ' put ' in m]
    assert put and uri in put[0] and f'{len(data)} bytes' in put[0] and ' ms' in put[0]
    assert any(' get ' in m and uri in m for m in messages)
    assert any(' exists ' in m and 'stored' in m for m in messages)
    assert any(m.startswith('externalize: 1 payloads (1 distinct stored') for m in messages)
    assert any(m.startswith('restore: 1 markers, 1 distinct blobs') for m in messages)
    assert not any('s3cr3t' in m for m in messages)  # URLs (with their signatures) are never logged
    assert {record.name for record in caplog.records} <= {
        'mediastash.stores.base',
        'mediastash.walker.externalize',
        'mediastash.walker.restore',
    }


async def test_no_record_work_when_debug_is_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = DiskMediaStore(tmp_path)
    with caplog.at_level(logging.INFO, logger='mediastash'):
        await store.put(b'quiet')
    assert [record for record in caplog.records if record.name.startswith('mediastash')] == []
