"""Garbage-collection roots as a contract every layer may import: the ``Root`` protocol and what builds on it.

``mediastash.gc`` reads roots; each integration (``mediastash.integrations.*``)
implements them for its own framework's objects and storage. Both import
this package, which imports neither: the collector knows no framework, and
an integration needs no collector. Here:

- ``Root`` (a structural protocol) and ``RootReadError``;
- the roots no framework is needed to read: lean trees, URI sets, files,
  folders of them, a harness ``FileStepStore`` folder or ``SqliteStepStore``
  database (``mediastash.gc`` serves them too);
- ``add_references`` / ``referenced_uris``: the markers of a lean tree;
- ``SQLiteTablesRoot`` / ``PostgresTablesRoot``: the read loops of roots that
  read database tables with SQL (read-only, paged, whole or refused);
- the registry of ``KIND:`` arguments (``mediastash gc --roots``, plug-ins
  through the ``mediastash.roots`` entry-point group) and of the adapters
  that turn a framework's object into its root.

``docs/gc.md`` ("Writing a root for a new framework") shows them in use.
"""

from mediastash.errors import RootReadError
from mediastash.roots._files import (
    FileStepStoreRoot,
    JsonFileRoot,
    JsonLinesFileRoot,
    JsonTreeRoot,
    SqliteStepStoreRoot,
    UriFileRoot,
    UriRoot,
)
from mediastash.roots._protocol import Root
from mediastash.roots._references import add_references, referenced_uris
from mediastash.roots._registry import (
    ENTRY_POINT_GROUP,
    RootAdapter,
    RootFactory,
    available_root_kinds,
    register_root_adapter,
    register_root_kind,
    root_adapters,
    root_kind,
    root_kinds_help,
)
from mediastash.roots._sql import (
    PAGE_ROWS,
    PostgresTablesRoot,
    SQLiteTablesRoot,
    json_text_references,
    paged_references,
    sql_name,
)

__all__ = [
    'ENTRY_POINT_GROUP',
    'FileStepStoreRoot',
    'JsonFileRoot',
    'JsonLinesFileRoot',
    'JsonTreeRoot',
    'PAGE_ROWS',
    'PostgresTablesRoot',
    'Root',
    'RootAdapter',
    'RootFactory',
    'RootReadError',
    'SQLiteTablesRoot',
    'SqliteStepStoreRoot',
    'UriFileRoot',
    'UriRoot',
    'add_references',
    'available_root_kinds',
    'json_text_references',
    'paged_references',
    'referenced_uris',
    'register_root_adapter',
    'register_root_kind',
    'root_adapters',
    'root_kind',
    'root_kinds_help',
    'sql_name',
]
