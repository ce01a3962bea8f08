"""Plug-ins written before declared capabilities (issue 33): each keeps working or is refused naming the new name.

(a) a ``MediaStore``-protocol-only class with extra methods under the names callers used to probe for;
(b) ``BaseMediaStore`` subclasses that set a public method to ``None`` (the old "absent") or declare a
``supports_*`` flag that disagrees with what the class body writes; (c) registry targets that are a function
or a class with no URL hook; (d) the ``url_planner=`` class keyword.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from mediastash import (
    BaseMediaStore,
    DeletableMediaStore,
    InvalidStoreConfiguration,
    ListableMediaStore,
    MemoryMediaStore,
    StreamingMediaStore,
    WrapperMediaStore,
    capabilities_of,
    media_uri_for,
    open_store,
)
from mediastash.errors import InvalidArgumentError
from mediastash.gc import StoreNotCollectable, collect_garbage
from mediastash.stores import StorePlan, class_capabilities
from mediastash.stores.capabilities import (
    public_url_lifetime_of,
    sweep_temp_files,
    unknown_media_type_reason_of,
)
from mediastash.stores.protocols import confirm_in, exists_in
from mediastash.stores.verify import verify_store
from mediastash.sync import sync_stores

# -- (a) a protocol-only plug-in -------------------------------------------------------------


class OldProtocolStore:
    """No base class, no declarations: the five ``MediaStore`` methods and extras under their old names."""

    unknown_media_type_reason = 'old plug-ins keep no media types'

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.touched: list[str] = []
        self.sweeps = 0

    @property
    def public_url_lifetime(self) -> float:
        return 60

    async def put(self, data: bytes, *, context: Any = None) -> str:
        uri = media_uri_for(data)
        self.blobs[uri] = bytes(data)
        return uri

    async def get(self, uri: str, *, context: Any = None) -> bytes:
        return self.blobs[uri]

    async def exists(self, uri: str, *, context: Any = None) -> bool:
        return uri in self.blobs

    async def public_url(self, uri: str, *, context: Any = None) -> str | None:
        return None

    async def get_metadata(self, uri: str, *, context: Any = None) -> dict[str, str]:
        return {}

    async def iter_uris(self) -> AsyncIterator[str]:
        for uri in list(self.blobs):
            yield uri

    async def delete_many(self, uris: Iterable[str]) -> int:
        return sum(self.blobs.pop(uri, None) is not None for uri in list(uris))

    async def touch_many(self, uris: Iterable[str]) -> set[str]:
        """The signature before ``touch_after`` and ``max_concurrency`` were passed."""
        found = {uri for uri in uris if uri in self.blobs}
        self.touched.extend(sorted(found))
        return found

    async def sweep_temp_files(self) -> int:
        self.sweeps += 1
        return 0


class OldMethodsStore(OldProtocolStore):
    """The reason and the lifetime written as plain methods rather than properties."""

    def unknown_media_type_reason(self) -> str:  # type: ignore[override]
        return 'said by a method'

    def public_url_lifetime(self) -> float:  # type: ignore[override]
        return 90.0


def test_a_protocol_only_plugin_declares_what_its_methods_show() -> None:
    declared = capabilities_of(OldProtocolStore())
    assert declared == class_capabilities(OldProtocolStore)
    assert declared.listing and declared.touch and declared.temp_sweep
    assert not declared.deletes, 'delete_many without delete is no DeletableMediaStore'
    assert not (declared.collection or declared.stat or declared.exists_many or declared.verifies_reads)


async def test_its_extras_are_read_through_the_accessors() -> None:
    store = OldProtocolStore()
    assert unknown_media_type_reason_of(store) == 'old plug-ins keep no media types'
    assert public_url_lifetime_of(store) == 60.0
    await sweep_temp_files(store)
    assert store.sweeps == 1
    wrapped = WrapperMediaStore(store)
    assert wrapped.unknown_media_type_reason == 'old plug-ins keep no media types'
    assert wrapped.public_url_lifetime == 60.0


def test_extras_written_as_methods_are_called() -> None:
    store = OldMethodsStore()
    assert unknown_media_type_reason_of(store) == 'said by a method'
    assert public_url_lifetime_of(store) == 90.0


async def test_an_old_touch_many_without_the_new_keywords_is_called_without_them() -> None:
    store = OldProtocolStore()
    uri = await store.put(b'touch me')
    missing = media_uri_for(b'never put')
    assert await confirm_in(store, [uri, missing]) == {uri}
    assert await confirm_in(store, [uri], touch_after=0) == {uri}
    assert await WrapperMediaStore(store).touch_many([uri, missing], touch_after=0) == {uri}
    assert store.touched == [uri, uri, uri]
    assert await exists_in(store, [uri, missing]) == {uri}


async def test_sync_verify_and_gc_treat_a_protocol_only_plugin_by_what_it_has() -> None:
    source = OldProtocolStore()
    uris = {await source.put(b'first'), await source.put(b'second')}
    destination = MemoryMediaStore()
    report = await sync_stores(source, destination)
    assert report.copied == 2 and {uri async for uri in destination.iter_uris()} == uris
    checked = await verify_store(source)
    assert checked.ok == 2 and not checked.corrupt
    with pytest.raises(StoreNotCollectable) as raised:
        await collect_garbage(source, roots=[])
    assert 'iter_blobs' in str(raised.value) and 'delete_unless_touched' in str(raised.value)
    assert len(source.blobs) == 2


# -- (b) BaseMediaStore subclasses of the old kind ---------------------------------------------


@pytest.mark.parametrize(
    ('absent', 'flag', 'gone'),
    [
        ('delete', 'deletes', ('delete', 'delete_many')),
        ('delete_many', 'deletes', ('delete', 'delete_many')),
        ('iter_uris', 'listing', ('iter_uris',)),
        ('put_stream', 'stream_writes', ('put_stream',)),
        ('get_stream', 'stream_reads', ('get_stream',)),
        ('iter_blobs', 'blob_listing', ('iter_blobs', 'iter_blobs_in_range')),
    ],
)
async def test_a_method_set_to_none_turns_its_capability_off(absent: str, flag: str, gone: tuple[str, ...]) -> None:
    cls = type('OldReadOnly', (MemoryMediaStore,), {absent: None})
    assert getattr(cls, f'supports_{flag}') is False
    assert getattr(class_capabilities(cls), flag) is False
    store = cls()
    assert getattr(capabilities_of(store), flag) is False
    for name in gone:
        assert getattr(store, name) is None, name
    uri = await store.put(b'still a store')
    assert await store.get(uri) == b'still a store'


async def test_a_store_with_delete_set_to_none_is_neither_deleted_from_nor_repaired() -> None:
    class NoDeletes(MemoryMediaStore):
        delete = None

    store = NoDeletes()
    assert not isinstance(store, DeletableMediaStore) and isinstance(store, ListableMediaStore)
    await store.put(b'kept')
    with pytest.raises(TypeError, match='cannot delete'):
        await verify_store(store, repair=True)
    subclass = type('Below', (NoDeletes,), {})
    assert subclass.delete is None and not subclass.supports_deletes, 'a parent saying absent stays absent'


def test_a_method_set_to_none_beside_its_flag_declared_true_is_refused() -> None:
    with pytest.raises(InvalidStoreConfiguration) as raised:
        type('Both', (MemoryMediaStore,), {'supports_deletes': True, 'delete': None})
    message = str(raised.value)
    assert 'Both' in message and 'supports_deletes' in message and 'delete' in message


@pytest.mark.parametrize(
    ('flag', 'method'),
    [('supports_deletes', 'delete'), ('supports_listing', 'iter_uris'), ('supports_stream_writes', 'put_stream')],
)
def test_a_flag_declared_false_beside_the_public_method_it_removes_is_refused(flag: str, method: str) -> None:
    async def written(self: Any, *args: Any, **kwargs: Any) -> Any:
        return None

    with pytest.raises(InvalidStoreConfiguration) as raised:
        type('Contradicts', (MemoryMediaStore,), {flag: False, method: written})
    message = str(raised.value)
    assert 'Contradicts' in message and flag in message and method in message


def test_a_flag_declared_false_over_an_inherited_primitive_still_turns_it_off() -> None:
    class ReadOnly(MemoryMediaStore):
        supports_deletes = False

    assert ReadOnly.delete is None and not class_capabilities(ReadOnly).deletes


def test_a_flag_declared_true_without_its_primitive_names_the_primitive() -> None:
    with pytest.raises(InvalidStoreConfiguration) as raised:

        class Claims(BaseMediaStore):
            supports_listing = True

    assert 'supports_listing' in str(raised.value) and '_list_digests' in str(raised.value)


# -- (d) url_planner= ----------------------------------------------------------------------------------


def plan_memory(cls: Any, url: str, create: bool, overrides: dict[str, Any]) -> StorePlan[Any]:
    if url != 'planned://':
        raise InvalidStoreConfiguration('planned:// takes nothing else')
    return StorePlan(lambda: cls(**overrides))


class DictPrimitives(BaseMediaStore):
    """The four required primitives over one dict, and no URL hook."""

    def __init__(self) -> None:
        super().__init__()
        self.blobs: dict[str, bytes] = {}

    async def _write(self, digest: str, data: bytes, context: Any) -> None:
        self.blobs.setdefault(digest, data)

    async def _read(self, digest: str, context: Any) -> bytes:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return self.blobs[digest]

    async def _contains(self, digest: str, context: Any) -> bool:
        return digest in self.blobs

    async def _read_metadata(self, digest: str, context: Any) -> dict[str, str]:
        if digest not in self.blobs:
            raise self._not_found(digest)
        return {}


class PlannedStore(DictPrimitives, url_planner=plan_memory):
    """An old plug-in: its URL parser named in the class statement."""


async def test_a_url_planner_plugin_registers_opens_and_declares(registry: Any) -> None:
    registry.register_store('planned', PlannedStore)
    store = open_store('planned://')
    assert type(store) is PlannedStore
    assert await store.get(await store.put(b'planned')) == b'planned'
    declared = capabilities_of(store)
    assert not declared.listing and not declared.deletes and declared.stat
    assert not isinstance(store, StreamingMediaStore)
    with pytest.raises(InvalidStoreConfiguration, match='planned:// takes nothing else'):
        open_store('planned://x')


def test_a_subclass_of_a_url_planner_plugin_inherits_its_planner() -> None:
    class Child(PlannedStore):
        pass

    assert type(Child.from_url('planned://')) is Child


# -- (c) registry targets -------------------------------------------------------------------------


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    from mediastash.stores import registry

    monkeypatch.setattr(registry, '_registered', dict(registry._registered))
    return registry


def make_store_function(url: str) -> MemoryMediaStore:
    """What an old plug-in might have registered: a factory rather than a class."""
    return MemoryMediaStore()


def test_registering_a_function_names_what_to_register_instead(registry: Any) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        registry.register_store('factory', make_store_function)  # type: ignore[arg-type]
    message = str(raised.value)
    assert 'target' in message and 'BaseMediaStore' in message
    assert 'options_class' in message and 'from_url' in message


def test_an_entry_point_naming_a_function_is_refused_naming_the_hooks(registry: Any) -> None:
    registry.register_store('factory', f'{__name__}:make_store_function')
    with pytest.raises(InvalidStoreConfiguration) as raised:
        registry.store_class('factory')
    message = str(raised.value)
    assert 'is a function' in message and 'options_class' in message and 'from_url' in message


def test_registering_a_class_that_cannot_be_opened_from_a_url_is_refused_at_registration(registry: Any) -> None:
    class NoUrl(DictPrimitives):
        """Primitives, but no options_class, no url_planner and no from_url of its own."""

    with pytest.raises(InvalidStoreConfiguration) as raised:
        registry.register_store('nourl', NoUrl)
    message = str(raised.value)
    assert 'NoUrl' in message and 'options_class' in message and 'from_url' in message
    assert 'nourl' not in registry.available_schemes()


@pytest.mark.parametrize(
    ('absent', 'flag'),
    [
        ('stat', 'stat'),
        ('touch_many', 'touch'),
        ('exists_many', 'exists_many'),
        ('check_blob', 'check'),
        ('require_storage', 'require_storage'),
    ],
)
async def test_a_method_every_base_store_has_set_to_none_is_declared_absent(absent: str, flag: str) -> None:
    """The methods the base always supplies, set to ``None`` by an old plug-in: the declaration follows."""
    cls = type('WithoutOne', (MemoryMediaStore,), {absent: None})
    store = cls()
    assert getattr(capabilities_of(store), flag) is False
    assert getattr(class_capabilities(cls), flag) is False
    uri = await store.put(b'confirmed without it')
    assert await confirm_in(store, [uri]) == {uri}
    assert await exists_in(store, [uri]) == {uri}
