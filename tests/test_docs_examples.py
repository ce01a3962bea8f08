"""The Python examples of the docs this module names run as pasted, and do what the text says."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from mediastash import DiskMediaStore, KnownBlobCache, MemoryMediaStore, externalize_media, restore_media

DOCS = Path(__file__).resolve().parent.parent / 'docs'
_BLOCK = re.compile(r'```python\n(.*?)```', re.DOTALL)


def blocks(page: str) -> list[str]:
    return _BLOCK.findall((DOCS / page).read_text(encoding='utf-8'))


def image_tree() -> dict[str, Any]:
    return {'kind': 'binary', 'data': base64.b64encode(b'\x89PNG' * 30_000).decode(), 'media_type': 'image/png'}


async def test_known_blobs_examples(tmp_path: Path) -> None:
    first, second = blocks('known-blobs.md')
    namespace: dict[str, Any] = {}
    exec(first, namespace)
    tree = image_tree()
    lean, again = await namespace['save_twice'](tree, tmp_path)
    assert lean == again
    uri = lean['uri']
    assert await DiskMediaStore(tmp_path).exists(uri)  # the second save wrote the deleted blob again
    assert await restore_media(again, media_store=DiskMediaStore(tmp_path), known_blobs=False) == tree

    exec(second, namespace)
    cache = namespace['cache']
    assert isinstance(cache, KnownBlobCache)
    assert cache.trust_seconds == 60


async def test_wrapping_example_delays_and_forwards() -> None:
    (slow,) = [block for block in blocks('stores.md') if 'class SlowStore' in block]
    namespace: dict[str, Any] = {}
    exec(slow, namespace)
    store = namespace['store']
    store.delay = 0.001
    tree = image_tree()
    lean = await externalize_media(tree, media_store=store, threshold_bytes=1024)
    assert isinstance(store.inner, MemoryMediaStore)
    assert await store.exists(lean['uri'])
    assert await restore_media(lean, media_store=store, known_blobs=False) == tree


def test_model_urls_setup_examples_run(tmp_path: Path, monkeypatch: Any) -> None:
    """Both setups build as pasted (API keys are only read, no request is sent)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('OPENAI_API_KEY', 'test-key')
    monkeypatch.setenv('ANTHROPIC_API_KEY', 'test-key')
    from mediastash.integrations import MediaUrls

    s3_setup, cdn_setup = blocks('model-urls.md')
    for block in (s3_setup, cdn_setup):
        namespace: dict[str, Any] = {}
        exec(block, namespace)
        (capability,) = [cap for cap in namespace['agent'].root_capability.capabilities if isinstance(cap, MediaUrls)]
        assert capability.media_store is namespace['store']
    assert namespace['store'].public_url_lifetime is None
    assert (tmp_path / 'media').is_dir()
