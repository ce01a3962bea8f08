"""``open_store(url)``: a store from one URL string, for the command line and configuration files.

This module only splits off the scheme and asks the store registry
(``mediastash.stores.registry``) for the class; each backend parses its own
URLs in ``from_url`` (the forms: ``docs/cli.md``, "Store URLs"). Errors never
quote the URL or a value from it, which may hold a password or a secret
pasted in the wrong place. Opening is planned first (parse, check, find) and
done last, so a refused URL creates nothing.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote_plus

from mediastash.errors import InvalidStoreConfiguration, NamespaceUnsupportedError
from mediastash.stores._namespaces import check_namespace_name
from mediastash.stores._plan import StorePlan
from mediastash.stores._url import SCHEME
from mediastash.stores.base import BaseMediaStore, owning_view
from mediastash.stores.cached import CachedMediaStore, WriteMode
from mediastash.stores.capabilities import capabilities_of, class_capabilities, url_planner_of
from mediastash.stores.protocols import MediaStore
from mediastash.stores.registry import available_schemes, known_forms, scheme_form, store_class

__all__ = ['open_cached_store', 'open_store']

_SCHEME_TYPO = re.compile(r'\s*([A-Za-z][A-Za-z0-9+.-]+)(?::(?!//)|//)|\s+([A-Za-z][A-Za-z0-9+.-]+)://')
"""A scheme-like word not followed by ``://`` (``s3:/b``, ``memory:``, ``s3//b``), or one after leading blanks."""
_WRITE_MODES = ('through', 'around')


def open_store(
    url: str | os.PathLike[str], *, create: bool = True, namespace: str | None = None, **overrides: Any
) -> BaseMediaStore:
    """The store a URL names (``memory://``, a path, ``file://``, ``sqlite://``, ``s3://``, ``mongodb[+srv]://``,
    or the scheme of an installed plug-in backend).

    ``namespace`` (or ``?namespace=NAME`` in a ``scheme://`` URL; both may be
    given only when equal) opens the view of that tenant namespace instead
    (``BaseMediaStore.namespace``); closing the view then closes its store too.
    A backend without namespaces is refused before anything is opened.

    ``overrides`` are keyword arguments for the store's constructor and win
    over the URL (for example ``client=`` or ``public_url=``). With
    ``create=False`` a disk folder or SQLite file that does not exist raises
    ``StoreNotFoundError`` and nothing is created; remote storage is never
    created either way. A bad URL raises ``InvalidStoreConfiguration``. The
    store is an async context manager (``async with open_store(...) as store``).
    A known scheme without its ``//`` (``s3:/bucket``, ``memory:``) is refused
    rather than taken for a folder name; write ``./s3:/x`` for such a folder.
    """
    url, name = _split_namespace(url, namespace)
    _check_namespaces(url, name)
    return _namespaced(_plan(url, create, overrides), name).open()


def _split_namespace(url: str | os.PathLike[str], namespace: object) -> tuple[str | os.PathLike[str], str | None]:
    """``url`` without its ``namespace=`` query parameter, and the namespace asked for (checked, never shown).

    Only a ``scheme://`` URL carries parameters (a ``?`` in a plain path is
    part of a folder's name). The parameter is taken out here, so no backend's
    URL parser has to know it.
    """
    name = None if namespace is None else check_namespace_name(namespace)
    if not isinstance(url, str) or SCHEME.match(url) is None:
        return url, name
    head, mark, rest = url.partition('?')
    if not mark:
        return url, name
    query, hash_mark, fragment = rest.partition('#')
    kept: list[str] = []
    given: list[str] = []
    for piece in query.split('&'):
        key, _, value = piece.partition('=')
        if unquote_plus(key) == 'namespace':
            given.append(unquote_plus(value))
        else:
            kept.append(piece)
    if not given:
        return url, name
    if len(given) > 1:
        raise InvalidStoreConfiguration('the store URL gives the parameter namespace= twice')
    in_url = check_namespace_name(given[0], parameter='the namespace= URL parameter')
    if name is not None and name != in_url:
        raise InvalidStoreConfiguration('namespace= and the namespace= URL parameter name different namespaces')
    remaining = '&'.join(piece for piece in kept if piece)
    return head + ('?' + remaining if remaining else '') + hash_mark + fragment, in_url


def _check_namespaces(url: str | os.PathLike[str], name: str | None) -> None:
    """With a namespace asked for: ``NamespaceUnsupportedError`` when the backend ``url`` names has none."""
    if name is None:
        return
    match = SCHEME.match(url) if isinstance(url, str) else None
    cls = store_class('file' if match is None else match.group(1))
    if not class_capabilities(cls).namespaces:
        raise NamespaceUnsupportedError(f'{cls.__name__} has no namespaces; nothing was opened')


def _namespaced(plan: StorePlan[BaseMediaStore], name: str | None) -> StorePlan[BaseMediaStore]:
    """``plan``, or (with a namespace) a plan of the namespace's view that owns the store it was made from."""
    if name is None:
        return plan
    return StorePlan(lambda: owning_view(plan.build(), name), plan.folders)


def _plan(url: str | os.PathLike[str], create: bool, overrides: dict[str, Any]) -> StorePlan[BaseMediaStore]:
    """The backend's plan for ``url``: checked (and, with ``create=False``, found) but nothing created."""
    if isinstance(url, os.PathLike):
        return _backend_plan(store_class('file'), url, create, overrides)  # a Path is always a path
    if not isinstance(url, str):
        raise InvalidStoreConfiguration(f'a store URL must be a str or a path, got {type(url).__name__}')
    if not url.strip():
        raise InvalidStoreConfiguration(f'the store URL is empty; use one of {known_forms()}')
    typo = _SCHEME_TYPO.match(url)
    if typo is not None:
        scheme = (typo.group(1) or typo.group(2)).lower()
        if scheme in available_schemes():
            raise InvalidStoreConfiguration(
                f'the store URL begins with the {scheme} scheme but not with "{scheme}://" (the rest is not shown); '
                f'write {scheme_form(scheme)}. Nothing was created; to name a folder that begins like this, '
                'write ./ before it'
            )
    match = SCHEME.match(url)
    if match is None or (os.name == 'nt' and len(match.group(1)) == 1):  # C://x is a Windows path
        return _backend_plan(store_class('file'), url, create, overrides)
    return _backend_plan(store_class(match.group(1)), url, create, overrides)


def _backend_plan(
    store: type[BaseMediaStore], url: str | os.PathLike[str], create: bool, overrides: dict[str, Any]
) -> StorePlan[BaseMediaStore]:
    """``store.plan_from_url`` where the class offers it, else a plan that calls ``store.from_url`` when built.

    A subclass that overrides only ``from_url`` gets its ``from_url`` (its
    parent's ``plan_from_url`` does not know about the override).
    """
    planner = url_planner_of(store)
    if planner is not None and _defined_in(store, 'from_url') in _defined_in(store, 'plan_from_url').__mro__:
        plan: StorePlan[BaseMediaStore] = planner(url, create=create, **overrides)
        return plan
    return StorePlan(lambda: store.from_url(url, create=create, **overrides))  # type: ignore[arg-type]  # a path: file://


def open_cached_store(
    url: str | os.PathLike[str],
    *,
    cache: str | os.PathLike[str] | MediaStore,
    cache_max_bytes: int | None = None,
    cache_write: WriteMode = 'through',
    create: bool = True,
    namespace: str | None = None,
    **overrides: Any,
) -> CachedMediaStore:
    """``open_store(url)`` with a local ``cache`` in front of it: a ``CachedMediaStore``.

    ``cache`` is a URL or path (opened with ``create=True``: a folder is the
    usual choice) or a store object; ``cache_max_bytes`` bounds it (LRU
    eviction) and ``cache_write`` is the ``write=`` mode. ``create`` and
    ``overrides`` apply to the store ``url`` names. Closing the result closes
    both. See ``docs/stores.md`` ("Caching a remote store"). ``namespace``
    (as in ``open_store``) opens that namespace of the store and of the cache.

    Everything is checked before anything is created: a store that is missing
    (``create=False``) or any refused option leaves no cache folder, and a
    failure while the two are put together removes the empty folders this
    call made.
    """
    if cache_write not in _WRITE_MODES:
        raise InvalidStoreConfiguration("cache_write must be 'through' or 'around'")
    if cache_max_bytes is not None and (
        isinstance(cache_max_bytes, bool) or not isinstance(cache_max_bytes, int) or cache_max_bytes < 0
    ):
        raise InvalidStoreConfiguration('cache_max_bytes must be a non-negative int (bytes) or None')
    url, name = _split_namespace(url, namespace)
    _check_namespaces(url, name)
    backing_plan = _namespaced(_plan(url, create, overrides), name)
    cache_plan = None
    if isinstance(cache, str | os.PathLike):
        cache, cache_name = _split_namespace(cache, None)
        if cache_name is not None:
            raise InvalidStoreConfiguration('the cache URL takes no namespace= (the cache follows namespace=)')
        _check_namespaces(cache, name)
        cache_plan = _namespaced(_plan(cache, True, {}), name)
    elif name is not None and not capabilities_of(cache).namespaces:
        raise NamespaceUnsupportedError(f'the cache {type(cache).__name__} has no namespaces; nothing was opened')

    def build() -> CachedMediaStore:
        backing = backing_plan.build()
        cache_store: MediaStore = cache_plan.build() if cache_plan is not None else cache  # type: ignore[assignment]
        if cache_plan is None and name is not None:
            cache_store = owning_view(cache_store, name)
        try:
            return CachedMediaStore(backing, cache=cache_store, max_bytes=cache_max_bytes, write=cache_write)
        except (TypeError, ValueError) as error:  # the options were checked above: these name types, not values
            raise InvalidStoreConfiguration(f'cache: {error}') from None

    folders = backing_plan.folders + (cache_plan.folders if cache_plan is not None else ())
    return StorePlan(build, folders).open()


def _defined_in(store: type, name: str) -> type:
    """The class in ``store``'s MRO whose body defines ``name`` (``object`` when none does)."""
    return next((cls for cls in store.__mro__ if name in vars(cls)), object)
