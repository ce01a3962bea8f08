"""The walker's interface for JSON trees beyond the two public walks: internal to mediastash.

Not public API (no stability promise, no API page); ``mediastash.integrations``
imports these names from here and never from the walker's private modules
(a test checks it). Needs nothing beyond the core. Typed pydantic-ai messages
have their own interface, ``mediastash.walker.typed``.

What it offers, and to whom:

* ``resolve_options`` (``OffloadingStepStore``, ``OffloadingKV``,
  ``MediaUrlSwapper``): the one checked ``WalkOptions`` of a constructor that
  takes ``options=`` as well as the three separate keywords; ``WalkSetting``
  keeps their ``threshold_bytes`` / ``known_blobs`` / ``max_concurrency``
  attributes as views of it.
* ``externalize_with(tree, media_store, options)`` and
  ``restore_collecting(tree, media_store, options)`` (``OffloadingKV``): the
  two walks with a ``WalkOptions`` checked once at construction; the restore
  also returns every ``(dict, key)`` it wrote a payload into, so the value
  can be serialized by splicing.
* ``deepest_path(tree)`` (``OffloadingKV``): where a tree too deep for
  ``json`` nests deepest, for its ``TreeDepthError``.
* ``TreeCopier`` and ``TooDeep`` (``integrations._placeholders``): the
  walker's depth-safe copy of a JSON tree, to subclass, and what it raises
  below the depth limit.
* ``payload_sizes(tree, structured=)`` (``tuning``): the size of every
  payload of a tree, measured as the threshold measures it.
"""

from mediastash.walker._common import TooDeep, TreeCopier, deepest_path
from mediastash.walker._options import WalkSetting, resolve_options
from mediastash.walker._recognise import payload_sizes
from mediastash.walker.externalize import externalize_with
from mediastash.walker.restore import restore_collecting

__all__ = [
    'TooDeep',
    'TreeCopier',
    'WalkSetting',
    'deepest_path',
    'externalize_with',
    'payload_sizes',
    'resolve_options',
    'restore_collecting',
]
