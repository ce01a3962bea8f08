"""The shape of ``src/mediastash``'s imports, read from the source with ``ast`` (nothing is imported).

What counts as an edge: every ``import`` / ``from ... import`` naming a
mediastash module, resolved to the most specific module it names (``from
mediastash.stores import base`` is ``mediastash.stores.base``; ``from
mediastash.stores import MemoryMediaStore`` is the ``mediastash.stores``
package). The parent packages Python runs on the way are not edges: a package
``__init__`` that re-exports its submodules would otherwise be in a cycle with
each of them.

Each edge is tagged with when it runs: ``module`` (at import time, including
inside a module-level ``try`` or ``if``), ``function`` (inside a function
body: a deferred import) and ``typing`` (under ``if TYPE_CHECKING:``, never
run). Three cycle checks:

- at import time (``module`` edges only): a cycle there can fail with a
  partially initialised module, so it is never allowed;
- at run time (``module`` and ``function`` edges): a deferred import only
  hides a dependency; two modules that need each other are one module split
  badly (``stores/base.py`` -> ``verify.py`` -> ``stores/protocols.py`` ->
  ``stores/base.py`` was such a cycle, through a deferred import), so the
  layering the design describes allows none either;
- counting ``typing`` edges too (under ``if TYPE_CHECKING:``, never run): a
  cycle that only an annotation closes still says two modules need each
  other. Each backend's ``_url.py`` once named its ``_store.py`` class that
  way, and ``stores/base.py`` the registry's ``StorePlan``; the options
  classes and ``stores/_plan.py`` removed them, and none may come back.

And the CLI sits on top: no module outside ``mediastash.cli`` imports it, except
``mediastash.__main__``, which is the ``python -m mediastash`` entry point. The
test kit (``mediastash.testing``) is for tests: no other module imports it (the
counting store and the synthetic histories it exports live in
``mediastash._counting`` and ``mediastash._histories``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / 'src'
PACKAGE = 'mediastash'
CLI = 'mediastash.cli'
CLI_ENTRY_POINTS = frozenset({'mediastash.__main__'})
TEST_KIT = 'mediastash.testing'


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    when: str  # 'module', 'function' or 'typing'
    line: int

    def __str__(self) -> str:
        return f'{self.importer}:{self.line} -> {self.imported} ({self.when})'


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package by dotted name, with its file and whether it is a package."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted((SRC / PACKAGE).rglob('*.py')):
        parts = list(path.relative_to(SRC).with_suffix('').parts)
        is_package = parts[-1] == '__init__'
        if is_package:
            parts.pop()
        found['.'.join(parts)] = (path, is_package)
    return found


MODULES = modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or (
        isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'
    )


def _imported_names(node: ast.Import | ast.ImportFrom, package: str) -> Iterator[str]:
    """The modules an import statement names (a name that is no module stands for the module it comes from)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        base = package.split('.')[: len(package.split('.')) - node.level + 1]
        source = '.'.join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ''
    for alias in node.names:
        full = f'{source}.{alias.name}'
        yield full if full in MODULES else source


def edges_of(name: str) -> list[Edge]:
    """The imports of one module, each tagged with when it runs."""
    path, is_package = MODULES[name]
    package = name if is_package else name.rpartition('.')[0]
    found: list[Edge] = []

    def visit(nodes: Iterable[ast.stmt], when: str) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, 'typing')
                visit(node.orelse, when)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, 'function' if when == 'module' else when)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for imported in _imported_names(node, package):
                    if imported in MODULES and imported != name:
                        found.append(Edge(name, imported, when, node.lineno))
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        visit([child], when)
                for field in ('handlers',):
                    for handler in getattr(node, field, []):
                        visit(handler.body, when)

    visit(ast.parse(path.read_text(), filename=str(path)).body, 'module')
    return found


EDGES = [edge for name in MODULES for edge in edges_of(name)]


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for edge in edges:
        graph[edge.importer].add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            connect(name)
    return found


def _explained(found: list[list[str]], edges: list[Edge]) -> str:
    lines = []
    for component in found:
        members = set(component)
        lines.append(' <-> '.join(component))
        lines.extend(f'    {edge}' for edge in edges if edge.importer in members and edge.imported in members)
    return '\n'.join(lines)


def test_the_reader_sees_the_package() -> None:
    """The graph is not empty by accident: known modules and known edges of each kind are there."""
    assert {'mediastash', 'mediastash.stores.base', 'mediastash.cli', 'mediastash.sync'} <= MODULES.keys()
    kinds = {(edge.importer, edge.imported, edge.when) for edge in EDGES}
    assert ('mediastash.cli._sync', 'mediastash.sync', 'module') in kinds
    assert ('mediastash.__main__', 'mediastash.cli', 'module') in kinds
    assert any(edge.when == 'function' for edge in EDGES)
    assert any(edge.when == 'typing' for edge in EDGES)


def test_the_cycle_finder_finds_cycles() -> None:
    made_up = [
        Edge('mediastash.uri', 'mediastash.errors', 'module', 1),
        Edge('mediastash.errors', 'mediastash.markers', 'function', 2),
        Edge('mediastash.markers', 'mediastash.uri', 'typing', 3),
    ]
    assert cycles(made_up) == [['mediastash.errors', 'mediastash.markers', 'mediastash.uri']]
    assert cycles(made_up[:2]) == []


def test_no_import_cycle_at_import_time() -> None:
    at_import = [edge for edge in EDGES if edge.when == 'module']
    found = cycles(at_import)
    assert not found, _explained(found, at_import)


def test_no_import_cycle_at_run_time() -> None:
    at_run_time = [edge for edge in EDGES if edge.when != 'typing']
    found = cycles(at_run_time)
    assert not found, _explained(found, at_run_time)


def typing_only_cycles() -> list[list[str]]:
    """The cycles that only annotations close (see the module docstring)."""
    run_time = cycles(edge for edge in EDGES if edge.when != 'typing')
    return [component for component in cycles(EDGES) if component not in run_time]


def test_no_import_cycle_even_counting_type_checking_imports() -> None:
    found = cycles(EDGES)
    assert not found, _explained(found, EDGES)
    assert typing_only_cycles() == []


@pytest.mark.parametrize('when', ['module', 'function', 'typing'])
def test_no_library_module_imports_the_cli(when: str) -> None:
    outside = [
        str(edge)
        for edge in EDGES
        if edge.when == when
        and (edge.imported == CLI or edge.imported.startswith(CLI + '.'))
        and not (edge.importer == CLI or edge.importer.startswith(CLI + '.'))
        and edge.importer not in CLI_ENTRY_POINTS
    ]
    assert not outside, '\n'.join(outside)


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + '.')


@pytest.mark.parametrize('when', ['module', 'function', 'typing'])
def test_no_production_module_imports_the_test_kit(when: str) -> None:
    outside = [
        str(edge)
        for edge in EDGES
        if edge.when == when and _inside(edge.imported, TEST_KIT) and not _inside(edge.importer, TEST_KIT)
    ]
    assert not outside, '\n'.join(outside)


STORES = 'mediastash.stores'
BELOW_THE_STORES = frozenset(
    {
        'mediastash._checks',
        'mediastash._lru',
        'mediastash._plugins',
        'mediastash._tasks',
        'mediastash._units',
        'mediastash.context',
        'mediastash.errors',
        'mediastash.keys',
        'mediastash.known_blobs',
        'mediastash.uri',
        'mediastash.urls',
    }
)
"""What ``mediastash.stores`` may import from outside itself: the layers below it (URIs, keys and URL resolvers,
errors, the media context) and small helpers. The walker, the integrations, gc, verification's callers, the CLI
and ``open_store`` sit above it."""


@pytest.mark.parametrize('when', ['module', 'function', 'typing'])
def test_the_stores_import_no_layer_above_them(when: str) -> None:
    """``stores/base.py`` once imported ``mediastash.verify`` (in a function): an upward edge, now gone."""
    upward = [
        str(edge)
        for edge in EDGES
        if edge.when == when
        and _inside(edge.importer, STORES)
        and not _inside(edge.imported, STORES)
        and edge.imported not in BELOW_THE_STORES
    ]
    assert not upward, '\n'.join(upward)


# -- frameworks: the walker and the core import none; each integration subpackage only its own (issue 30) --------

INTEGRATIONS = 'mediastash.integrations'
FRAMEWORK_HOMES = {
    'pydantic_ai': 'mediastash.integrations.pydantic_ai',
    'pydantic_ai_harness': 'mediastash.integrations.pydantic_ai',
    'pydantic_ai_persistence': 'mediastash.integrations.pydantic_ai',
    'langgraph': 'mediastash.integrations.langgraph',
    'langchain_core': 'mediastash.integrations.langgraph',
    'langchain': 'mediastash.integrations.langgraph',
    'agents': 'mediastash.integrations.openai_agents',
}
"""Each agent framework's top-level package, and the one integration subpackage that may import it."""

FRAMEWORK_FREE_PACKAGES = (
    'mediastash.walker',
    'mediastash.stores',
    'mediastash.cli',
    'mediastash.testing',
    'mediastash.tuning',
)
"""Packages that must import no framework at all (as every module outside ``integrations``; see below). ``tuning``
was the last exception: its step-store reader is the pydantic-ai integration's (``_tune_inputs``), found by name."""


@dataclass(frozen=True)
class ExternalImport:
    importer: str
    package: str  # the top-level package named
    when: str
    line: int

    def __str__(self) -> str:
        return f'{self.importer}:{self.line} imports {self.package} ({self.when})'


def external_imports(name: str, source: str) -> list[ExternalImport]:
    """Every absolute import of a package outside mediastash in module ``name`` (its ``source``), each tagged
    with when it runs as ``edges_of`` tags edges."""
    found: list[ExternalImport] = []

    def visit(nodes: Iterable[ast.stmt], when: str) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.body, 'typing')
                visit(node.orelse, when)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, 'function' if when == 'module' else when)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                if isinstance(node, ast.Import):
                    named = [alias.name for alias in node.names]
                else:
                    named = [node.module] if node.level == 0 and node.module else []
                for module in named:
                    top = module.split('.')[0]
                    if top != PACKAGE:
                        found.append(ExternalImport(name, top, when, node.lineno))
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        visit([child], when)
                for handler in getattr(node, 'handlers', []):
                    visit(handler.body, when)

    visit(ast.parse(source).body, 'module')
    return found


EXTERNAL = [found for name, (path, _) in MODULES.items() for found in external_imports(name, path.read_text())]
FRAMEWORK_IMPORTS = [found for found in EXTERNAL if found.package in FRAMEWORK_HOMES]


def test_the_reader_sees_framework_imports() -> None:
    """The check below is not empty by accident: each integration's known framework imports are found, of each kind."""
    seen = {(found.importer, found.package) for found in FRAMEWORK_IMPORTS}
    assert ('mediastash.integrations.pydantic_ai._typed_walk', 'pydantic_ai') in seen
    assert ('mediastash.integrations.pydantic_ai.step_store', 'pydantic_ai_harness') in seen
    assert ('mediastash.integrations.langgraph.saver', 'langgraph') in seen
    assert ('mediastash.integrations.openai_agents.session', 'agents') in seen
    assert {found.when for found in FRAMEWORK_IMPORTS} >= {'module', 'function'}
    made_up = (
        'import os\nfrom . import sibling\nfrom mediastash.uri import is_media_uri\n'
        'if TYPE_CHECKING:\n    from langgraph.types import Send\n'
        'def f():\n    try:\n        import agents.items\n    except ImportError:\n        import pydantic_ai\n'
    )
    assert [(found.package, found.when) for found in external_imports('mediastash.x', made_up)] == [
        ('os', 'module'),
        ('langgraph', 'typing'),
        ('agents', 'function'),
        ('pydantic_ai', 'function'),
    ]


def framework_imports_outside_the_integrations(found: Iterable[ExternalImport], when: str) -> list[str]:
    """The framework imports (running ``when``) of modules outside ``mediastash.integrations``."""
    return [
        str(one)
        for one in found
        if one.package in FRAMEWORK_HOMES and one.when == when and not _inside(one.importer, INTEGRATIONS)
    ]


@pytest.mark.parametrize('when', ['module', 'function', 'typing'])
def test_the_walker_and_the_core_import_no_framework(when: str) -> None:
    """Issue 30 item 2: nothing outside ``mediastash.integrations`` imports an agent framework, not even for typing
    (``walker/`` above all: the typed pydantic-ai walk lives in ``integrations/pydantic_ai/``; ``tuning/``: the
    step-store reader of ``tune`` lives there too). No module is exempt."""
    outside = framework_imports_outside_the_integrations(FRAMEWORK_IMPORTS, when)
    assert not outside, '\n'.join(outside)
    in_free_packages = [
        str(found)
        for found in FRAMEWORK_IMPORTS
        if found.when == when and any(_inside(found.importer, package) for package in FRAMEWORK_FREE_PACKAGES)
    ]
    assert not in_free_packages, '\n'.join(in_free_packages)


OLD_TUNING_INPUTS = """
from mediastash.tuning._readers import read_with

async def load_step_store(path, *, media_store=None):
    try:
        from pydantic_ai_harness.step_persistence import FileStepStore, SqliteStepStore

        from mediastash.integrations import OffloadingStepStore
    except ImportError:
        raise HistoryInputError('needs pydantic-ai-harness') from None

def _dumped(snapshot):
    from pydantic_ai.messages import ModelMessagesTypeAdapter
"""
"""The imports ``tuning/_inputs.py`` had while it read step stores itself (issue 30's last exception)."""


def test_the_framework_rule_catches_what_tuning_once_imported() -> None:
    """Were ``tuning/_inputs.py`` to import the harness, pydantic-ai or an integration again, the checks would fail."""
    name = 'mediastash.tuning._inputs'
    found = external_imports(name, OLD_TUNING_INPUTS)
    assert framework_imports_outside_the_integrations(found, 'function') == [
        f'{name}:6 imports pydantic_ai_harness (function)',
        f'{name}:13 imports pydantic_ai (function)',
    ]
    integration = [
        imported for imported, _ in imported_names_in(name, OLD_TUNING_INPUTS, False) if _inside(imported, INTEGRATIONS)
    ]
    assert integration == ['mediastash.integrations']


@pytest.mark.parametrize('when', ['module', 'function', 'typing'])
def test_each_integration_imports_only_its_own_framework(when: str) -> None:
    """``integrations/pydantic_ai/`` imports pydantic-ai (and its harness and persistence packages) only,
    ``langgraph/`` LangGraph and langchain-core only, ``openai_agents/`` the Agents SDK only; the modules every
    integration shares (``integrations/_*.py``, the kit) import none."""
    wrong = [
        f'{found} (only {FRAMEWORK_HOMES[found.package]} may)'
        for found in FRAMEWORK_IMPORTS
        if found.when == when
        and _inside(found.importer, INTEGRATIONS)
        and not _inside(found.importer, FRAMEWORK_HOMES[found.package])
    ]
    assert not wrong, '\n'.join(wrong)


def test_no_integration_imports_another() -> None:
    """An integration subpackage never reaches into another one (that would pull in the other's framework)."""
    homes = sorted(set(FRAMEWORK_HOMES.values()))
    crossing = [
        str(edge)
        for edge in EDGES
        for home in homes
        if _inside(edge.importer, home)
        and _inside(edge.imported, INTEGRATIONS)
        and any(_inside(edge.imported, other) for other in homes if other != home)
    ]
    assert not crossing, '\n'.join(crossing)


GC = 'mediastash.gc'
ROOTS = 'mediastash.roots'
FRAMEWORKS = frozenset({*FRAMEWORK_HOMES, 'openai', 'sqlalchemy'})
"""Top-level packages of the agent frameworks the integrations serve."""


def imported_names(name: str) -> list[tuple[str, int]]:
    """Every module an ``import`` / ``from ... import`` of module ``name`` names, mediastash or not (with its line),
    wherever it sits (module level, a function, ``TYPE_CHECKING``)."""
    path, is_package = MODULES[name]
    return imported_names_in(name, path.read_text(), is_package)


def imported_names_in(name: str, source: str, is_package: bool) -> list[tuple[str, int]]:
    """``imported_names`` of the module ``name`` whose text is ``source``."""
    package = name if is_package else name.rpartition('.')[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.extend((imported, node.lineno) for imported in _imported_names(node, package))
    return found


def _framework(module: str) -> bool:
    return module.partition('.')[0] in FRAMEWORKS


TUNING = 'mediastash.tuning'
HISTORY_INPUTS = 'mediastash._history_inputs'


@pytest.mark.parametrize('layer', [GC, ROOTS, TUNING, HISTORY_INPUTS])
def test_gc_tuning_and_their_contracts_import_no_integration_nor_framework(layer: str) -> None:
    """gc reads roots through ``mediastash.roots``: an integration implements them, gc never names one. Likewise
    ``tune`` reads a framework's store through a reader its integration implements (``tuning/_readers.py`` names the
    built-in ones as ``module:attribute`` strings) and ``mediastash._history_inputs``, what both share."""
    found = [
        f'{name}:{line} -> {imported}'
        for name in MODULES
        if _inside(name, layer)
        for imported, line in imported_names(name)
        if _inside(imported, INTEGRATIONS) or _framework(imported)
    ]
    assert not found, '\n'.join(found)


def test_the_integrations_import_no_collector() -> None:
    """The roots contract sits below the integrations; gc above them: an integration never imports gc."""
    found = [
        f'{name}:{line} -> {imported}'
        for name in MODULES
        if _inside(name, INTEGRATIONS)
        for imported, line in imported_names(name)
        if _inside(imported, GC)
    ]
    assert not found, '\n'.join(found)


MODULE_NAME_MATCHING = re.compile(
    r"__module__|sys\.modules|__qualname__|\.__name__\s*(==|!=|in\b)|['\"]mediastash\.integrations|import_module\("
)
"""What matching a class by where it comes from looks like in source text (``type(x).__name__ == 'FileStepStore'``,
``sys.modules.get('mediastash.integrations.kv')``, a ``__module__`` comparison, an import by name)."""


def module_name_matching(name: str) -> list[str]:
    path = MODULES[name][0]
    return [
        f'{name}:{number}: {line.strip()}'
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if MODULE_NAME_MATCHING.search(line)
    ]


@pytest.mark.parametrize('layer', [GC, ROOTS])
def test_gc_matches_no_class_by_its_module_name(layer: str) -> None:
    """No ``__module__`` comparison, ``sys.modules`` lookup or ``type(x).__name__`` test in gc or the contract:
    a root is what it does (``Root``), an object's root is its integration's to say (``root_adapters``). Only the
    registry names the built-in integrations' modules, as ``module:attribute`` strings imported on use."""
    found = [
        hit
        for name in MODULES
        if _inside(name, layer) and name != f'{ROOTS}._registry'
        for hit in module_name_matching(name)
    ]
    assert not found, '\n'.join(found)


@pytest.mark.parametrize(
    'line',
    [
        '    loaded = sys.modules.get(module)',
        "        if type(inner).__name__ == 'FileStepStore' and isinstance(directory, Path):",
        "_CONVERSATION_MODULE: Final = 'mediastash.integrations.conversation_store'",
        "    if value.__class__.__module__.startswith('langgraph'):",
    ],
)
def test_the_module_name_check_catches_what_gc_once_did(line: str) -> None:
    """Lines of the old ``gc/_roots.py`` (and one more way to match by module): each is caught."""
    assert MODULE_NAME_MATCHING.search(line)
    assert not MODULE_NAME_MATCHING.search("raise TypeError(f'{type(roots).__name__} is not a root')")
