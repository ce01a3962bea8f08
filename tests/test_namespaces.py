"""Tenant namespaces beyond the conformance suite: the name rule, erase in batches, wrappers, views' lifecycle."""

from __future__ import annotations

import pytest

from mediastash import (
    EraseReport,
    InvalidArgumentError,
    InvalidNamespaceError,
    MemoryMediaStore,
    NamespaceUnsupportedError,
    StoreClosedError,
    StoreOperationError,
)
from mediastash.context import MediaContextLike
from mediastash.stores import _namespaces
from mediastash.stores._namespaces import check_namespace_name
from mediastash.testing import CountingMediaStore
from mediastash.testing.store import BAD_NAMESPACES


@pytest.mark.parametrize('name', ['a', 'A', '0', 'tenant-42', 'Tenant_42.v2', '.hidden', 'a..b', '-x', 'x' * 64])
def test_valid_names_are_accepted(name: str) -> None:
    assert check_namespace_name(name) == name


@pytest.mark.parametrize('name', BAD_NAMESPACES)
def test_bad_names_are_refused_naming_the_parameter_never_the_value(name: object) -> None:
    with pytest.raises(InvalidNamespaceError) as raised:
        check_namespace_name(name, parameter='--namespace')
    error = raised.value
    assert isinstance(error, InvalidArgumentError) and isinstance(error, ValueError)
    assert error.name == '--namespace'
    assert str(error).startswith('--namespace must be a namespace name')
    assert 'zq' not in str(error)


async def test_a_view_names_its_namespace_in_repr_and_errors() -> None:
    view = MemoryMediaStore().namespace('tenant-a')
    assert repr(view) == "MemoryMediaStore (namespace 'tenant-a')"
    await view.aclose()
    with pytest.raises(StoreClosedError, match="namespace 'tenant-a'"):
        await view.put(b'closed')


async def test_erase_works_through_batches_larger_than_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_namespaces, 'ERASE_BATCH', 7)
    store = MemoryMediaStore()
    view = store.namespace('big')
    sizes = [index + 1 for index in range(50)]
    for size in sizes:
        await view.put(bytes([size]) * size)
    kept = await store.put(b'x')
    progress: list[tuple[int, int]] = []
    report = await view.erase(progress=lambda count, size: progress.append((count, size)))
    assert report == EraseReport('big', 50, sum(sizes))
    assert len(progress) == 8 and progress[-1] == (50, sum(sizes))  # ceil(50 / 7) batches
    assert [count for count, _ in progress] == sorted(count for count, _ in progress)
    assert [uri async for uri in view.iter_uris()] == []
    assert await store.get(kept) == b'x'


class _UndeletableStore(MemoryMediaStore):
    """Lists blobs it never deletes: an erase must stop with an error instead of looping for ever."""

    async def _delete(self, digest: str, context: MediaContextLike) -> bool:
        return False

    def _open_namespace(self, name: str) -> _UndeletableStore:
        view = _UndeletableStore()
        view._blobs = self._namespaces.setdefault(name, MemoryMediaStore())._blobs
        return view


async def test_erase_stops_when_listed_blobs_cannot_be_deleted() -> None:
    view = _UndeletableStore().namespace('stuck')
    await view.put(b'cannot be deleted')
    with pytest.raises(StoreOperationError, match='could not be deleted'):
        await view.erase()


async def test_erase_refuses_the_store_itself_and_changes_nothing() -> None:
    store = MemoryMediaStore()
    uri = await store.put(b'the store itself')
    with pytest.raises(NamespaceUnsupportedError, match='not a namespace view'):
        await store.erase()
    assert await store.get(uri) == b'the store itself'


async def test_a_wrapper_view_wraps_the_inner_view_and_forwards_the_name() -> None:
    store = MemoryMediaStore()
    counting = CountingMediaStore(store)
    assert counting.supports_namespaces and counting.namespace_name is None
    view = counting.namespace('tenant-a')
    assert type(view) is CountingMediaStore
    assert view.namespace_name == 'tenant-a'
    assert view.storage_key == store.namespace('tenant-a').storage_key != counting.storage_key
    uri = await view.put(b'counted in the view')
    assert view.calls['put'] == 1 and counting.calls['put'] == 0
    assert not await store.exists(uri)
    assert await store.namespace('tenant-a').get(uri) == b'counted in the view'
    report = await view.erase()
    assert (report.count, report.bytes) == (1, len(b'counted in the view'))
    with pytest.raises(NamespaceUnsupportedError):
        view.namespace('tenant-b')


async def test_a_wrapper_view_closes_with_its_wrapper_but_not_the_other_way() -> None:
    counting = CountingMediaStore(MemoryMediaStore())
    view = counting.namespace('tenant-a')
    await view.aclose()
    await counting.put(b'the wrapper is still open')
    other = counting.namespace('tenant-b')
    await counting.aclose()
    with pytest.raises(StoreClosedError):
        await other.put(b'closed with its wrapper')


async def test_a_wrapper_over_a_store_without_namespaces_refuses() -> None:
    class Plain:
        async def put(self, data: bytes, *, context: object = None) -> str:
            raise AssertionError('not called')

    wrapper = CountingMediaStore(Plain())  # type: ignore[arg-type]
    assert wrapper.supports_namespaces is False
    with pytest.raises(NamespaceUnsupportedError):
        wrapper.namespace('tenant-a')
    with pytest.raises(InvalidNamespaceError):
        wrapper.namespace('zq/x')
