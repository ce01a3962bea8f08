"""Random interleavings of puts and deletes across a store and its namespaces, for the server backends' tests.

The embedded stores have theirs in ``tests/test_namespaces.py``; the PostgreSQL,
MongoDB and S3 test modules run this one on their real servers (issue 27).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from mediastash import media_uri_for

__all__ = ['SPACES', 'check_interleaving', 'operations']

SPACES: list[str | None] = [None, 'tenant-a', 'Tenant-A', 'tenant-b']
"""The store itself and three namespaces, two of which differ only in case."""

operations = st.lists(
    st.tuples(st.sampled_from(['put', 'delete']), st.integers(0, len(SPACES) - 1), st.integers(0, 5)),
    max_size=20,
)
"""``(operation, index into SPACES, payload number)`` steps."""


def payload(number: int) -> bytes:
    """Payload ``number``: 10 to 60 bytes, so a store with small chunks keeps some inline and splits others."""
    return f'payload {number}|'.encode() * (number + 1)


async def check_interleaving(store: Any, steps: list[tuple[str, int, int]]) -> None:
    """Run ``steps`` on ``store`` and its views, then check that every view lists exactly what the model says."""
    views = [store if name is None else store.namespace(name) for name in SPACES]
    model: list[set[str]] = [set() for _ in SPACES]
    for operation, space, number in steps:
        data = payload(number)
        if operation == 'put':
            model[space].add(await views[space].put(data))
        else:
            uri = media_uri_for(data)
            assert await views[space].delete(uri) is (uri in model[space])
            model[space].discard(uri)
    for view, expected in zip(views, model, strict=True):
        assert {uri async for uri in view.iter_uris()} == expected, view.namespace_name
        assert {info.uri async for info in view.iter_blobs()} == expected, view.namespace_name
        assert await view.exists_many([media_uri_for(payload(number)) for number in range(6)]) == expected
