"""Numbers that name one object for a store's ``storage_key`` when nothing better identifies its storage.

A store on an object whose address it cannot read (a pool or client of an
unknown kind) is keyed by the object itself. ``id()`` alone could be inherited
by a new object once the first is gone, so the token holds the object: while
any store keeps its token, no other object can get the same number.
"""

from __future__ import annotations

import itertools
import threading
import weakref

__all__ = ['ObjectToken', 'token_for']


class ObjectToken:
    """Names ``target`` by ``number``; keep it alive as long as the name is in use."""

    __slots__ = ('__weakref__', 'number', 'target')

    def __init__(self, target: object, number: int) -> None:
        self.target = target
        self.number = number


_tokens: weakref.WeakValueDictionary[int, ObjectToken] = weakref.WeakValueDictionary()
_numbers = itertools.count()
_lock = threading.Lock()


def token_for(target: object) -> ObjectToken:
    """The token of ``target``: the same one for every caller while someone holds it."""
    with _lock:
        token = _tokens.get(id(target))
        if token is None or token.target is not target:
            token = _tokens[id(target)] = ObjectToken(target, next(_numbers))
    return token
