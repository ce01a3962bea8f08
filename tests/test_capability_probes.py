"""No module probes a store for a capability: they ask ``capabilities_of`` (issue 33).

Read from the source with ``ast``. A probe is ``getattr(x, 'name', ...)`` or
``hasattr(x, 'name')`` whose ``name`` is a capability method, a ``supports_*``
flag or one of the optional store attributes ``stores/capabilities.py`` has an
accessor for, or ``x.<capability method> is None`` / ``is not None``. Only
``stores/base.py`` (which declares the flags from the primitives) and
``stores/capabilities.py`` (the one place that looks) may do either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mediastash.stores.capabilities import CAPABILITY_METHODS

SRC = Path(__file__).resolve().parents[1] / 'src' / 'mediastash'
ALLOWED = frozenset({'stores/base.py', 'stores/capabilities.py'})

METHODS = frozenset(method for methods in CAPABILITY_METHODS.values() for method in methods)
ATTRIBUTES = frozenset(
    {
        'aclose',
        'capabilities',
        'deletion_generation',
        'inner',
        'namespace_name',
        'plan_from_url',
        'public_url_lifetime',
        'storage_key',
        'unknown_media_type_reason',
        'verifies_reads',
    }
)
"""The optional store attributes callers read through an accessor of ``stores/capabilities.py``."""


def probed_name(node: ast.AST) -> str | None:
    """The capability or store attribute ``node`` probes for, else ``None``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {'getattr', 'hasattr'}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        name = node.args[1].value
        if name in METHODS or name in ATTRIBUTES or name.startswith('supports_'):
            return name
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Attribute)
        and node.left.attr in METHODS
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.Is | ast.IsNot)
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value is None
    ):
        return node.left.attr
    return None


def probes_in(source: str) -> list[tuple[int, str]]:
    return [(node.lineno, name) for node in ast.walk(ast.parse(source)) if (name := probed_name(node)) is not None]


def probes(root: Path = SRC) -> list[str]:
    """Every probe outside the allowed modules, as ``path:line name``."""
    found = []
    for path in sorted(root.rglob('*.py')):
        relative = path.relative_to(root).as_posix()
        if relative in ALLOWED:
            continue
        found += [f'{relative}:{line} {name}' for line, name in probes_in(path.read_text(encoding='utf-8'))]
    return found


def test_no_module_probes_a_store_for_a_capability() -> None:
    assert probes() == [], 'ask capabilities_of(store) or an accessor of stores/capabilities.py instead'


def test_the_allowed_modules_are_still_there() -> None:
    for relative in ALLOWED:
        assert (SRC / relative).is_file(), relative


@pytest.mark.parametrize(
    'line',
    [
        "close = getattr(store, 'aclose', None)",
        "batched = getattr(self.inner, 'exists_many', None)",
        "if hasattr(store, 'iter_uris'): pass",
        "flag = getattr(cls, 'supports_namespaces', False)",
        "lifetime = getattr(self.media_store, 'public_url_lifetime', None)",
        'if store.delete is None: pass',
        'if self.cache.get_stream is not None: pass',
        "sweep = getattr(store, 'sweep_temp_files', None)",
    ],
)
def test_the_check_catches_a_probe(line: str) -> None:
    assert probes_in(line), line


@pytest.mark.parametrize(
    'line',
    [
        "content = getattr(part, 'content', None)",
        "code = getattr(exc, 'errno', None)",
        'method = getattr(store, name)',
        'if store.cache is None: pass',
        'if capabilities_of(store).deletes: pass',
    ],
)
def test_the_check_leaves_other_getattr_calls_alone(line: str) -> None:
    assert not probes_in(line), line


def test_derived_capabilities_do_not_keep_a_class_alive() -> None:
    """The per-class cache of derived capabilities holds its classes weakly: one made at run time can be freed."""
    import gc
    import weakref

    from mediastash.stores.capabilities import capabilities_of

    async def iter_uris() -> None:  # pragma: no cover - never called, only looked at
        return None

    made = type('MadeAtRunTime', (), {'iter_uris': iter_uris})
    assert capabilities_of(made()).listing
    alive = weakref.ref(made)
    del made
    gc.collect()
    assert alive() is None
