"""The walker's interface beyond the two public walks: internal to mediastash, for its integrations.

Not public API (no stability promise, no API page); ``mediastash.integrations``
imports these names from here and never from the walker's private modules
(a test checks it). Needs nothing beyond the core: no framework is imported by
the walker, and a framework's typed walk (``integrations.pydantic_ai``) is
built in its integration from the names below.

What it offers, and to whom:

* ``options_from_keywords`` (every integration's constructor): the one
  checked ``WalkOptions`` of a constructor that takes ``options=`` and, for
  one release, the three separate keywords (``**walk_keywords:
  Unpack[WalkKeywords]``) with a ``DeprecationWarning`` naming the new form;
  ``WalkSetting`` keeps their ``threshold_bytes`` / ``known_blobs`` /
  ``max_concurrency`` attributes as views of it.
* ``externalize_with(tree, media_store, options)`` and
  ``restore_collecting(tree, media_store, options)``: the two walks with a
  ``WalkOptions`` checked once at construction; the restore also returns every
  ``(dict, key)`` it wrote a payload into, so the value can be serialized by
  splicing (and, with ``raw_binary=True``, leaves binary payloads as bytes).
* ``deepest_path(tree)``: where a tree too deep for ``json`` nests deepest,
  for its ``TreeDepthError``.
* ``TreeCopier`` and ``TooDeep``: the walker's depth-safe copy of a JSON
  tree, to subclass, and what it raises below the depth limit.
* ``payload_sizes(tree, structured=)`` (``tuning``): the size of every
  payload of a tree, measured as the threshold measures it.
* The one payload route, for a typed walk that finds payloads on objects
  rather than in JSON: ``PayloadBatch`` (each distinct payload stored once,
  under one bound; ``Job`` is one payload in it), ``select_cache`` (the
  known-blob cache a walk uses), ``externalize_emptied`` (the JSON walk of a
  dump whose payload fields a typed pass emptied and already batched),
  ``new_marker`` / ``settle`` (a marker built as every save builds it) and
  ``urlsafe_alphabet_used`` (the stamp a binary marker needs).
* ``LeanMemo`` and ``rejoin`` (a typed walk's ``externalize``): each
  message's lean JSON from the latest save, by object and exact state, and
  its payloads handed to the next save's batch again, so an unchanged message
  is not walked again but its blobs are still known or stored.
* The threshold rule, so a typed recogniser finds exactly what the JSON walk
  finds: ``text_size``, ``canonical_json``, ``holds_payload_near_top``,
  ``EMBEDDED_MARKERS`` and ``CONTAINER_TYPES``.
"""

from mediastash.walker._batch import Job, PayloadBatch, new_marker, settle, urlsafe_alphabet_used
from mediastash.walker._common import TooDeep, TreeCopier, deepest_path, select_cache
from mediastash.walker._lean_memo import LeanMemo, rejoin
from mediastash.walker._options import WalkKeywords, WalkSetting, WalkSettings, options_from_keywords
from mediastash.walker._recognise import (
    CONTAINER_TYPES,
    EMBEDDED_MARKERS,
    canonical_json,
    holds_payload_near_top,
    payload_sizes,
    text_size,
)
from mediastash.walker.externalize import externalize_emptied, externalize_with
from mediastash.walker.restore import restore_collecting

__all__ = [
    'CONTAINER_TYPES',
    'EMBEDDED_MARKERS',
    'Job',
    'LeanMemo',
    'PayloadBatch',
    'TooDeep',
    'TreeCopier',
    'WalkKeywords',
    'WalkSetting',
    'WalkSettings',
    'canonical_json',
    'deepest_path',
    'externalize_emptied',
    'externalize_with',
    'holds_payload_near_top',
    'new_marker',
    'options_from_keywords',
    'payload_sizes',
    'rejoin',
    'restore_collecting',
    'select_cache',
    'settle',
    'text_size',
    'urlsafe_alphabet_used',
]
