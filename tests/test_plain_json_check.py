"""The plain-JSON check of a tool output (issue 32): the depth-at-a-time check gives the verdict of a value-by-value
walk on every value, including the ones it must refuse (subclasses, tuples, sets, non-str keys, non-finite floats,
shared containers, cycles)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from mediastash.integrations.pydantic_ai._typed_payloads import _plain_json


class _Str(str):
    pass


class _Int(int):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


class _List(list):  # type: ignore[type-arg]
    pass


def _by_each_value(value: Any) -> bool:
    """The definition, one value at a time: a tree of exact JSON types, str keys and finite floats."""
    met: set[int] = set()

    def plain(node: Any) -> bool:
        kind = type(node)
        if kind is dict or kind is list:
            if id(node) in met:
                return False
            met.add(id(node))
            if kind is dict:
                return all(type(key) is str for key in node) and all(plain(item) for item in node.values())
            return all(plain(item) for item in node)
        if kind is float:
            return math.isfinite(node)
        return kind in (str, int, bool, type(None))

    return plain(value)


_ODD_SCALARS: list[Any] = [
    float('nan'),
    float('inf'),
    -float('inf'),
    _Str('s'),
    _Int(3),
    b'raw',
    (1, 2),
    {1, 2},
    frozenset(),
    1j,
    Ellipsis,
]
_ODD_KEYS: list[Any] = [1, None, 2.5, True, (1,), _Str('k')]


def _random_value(rng: random.Random, depth: int, made: list[Any]) -> Any:
    roll = rng.random()
    if depth == 0 or roll < 0.35:
        if rng.random() < 0.03:
            return rng.choice(_ODD_SCALARS)
        return rng.choice(['text', '', 0, -7, 10**30, 1.5, -0.0, 0.0, True, False, None])
    if made and rng.random() < 0.02:
        return rng.choice(made)  # shared with an earlier container (or one that holds this: a cycle)
    container: Any
    if roll < 0.65:
        container = _List() if rng.random() < 0.02 else []
        made.append(container)
        container.extend(_random_value(rng, depth - 1, made) for _ in range(rng.randint(0, 5)))
    else:
        container = _Dict() if rng.random() < 0.02 else {}
        made.append(container)
        for index in range(rng.randint(0, 5)):
            key = rng.choice(_ODD_KEYS) if rng.random() < 0.03 else f'k{index}'
            container[key] = _random_value(rng, depth - 1, made)
    if rng.random() < 0.01:
        container.append(container) if isinstance(container, list) else container.update(me=container)
    return container


def test_the_check_agrees_with_the_value_by_value_definition_on_random_values() -> None:
    rng = random.Random(32)
    verdicts = {True: 0, False: 0}
    for _ in range(3000):
        value = _random_value(rng, rng.randint(0, 5), [])
        expected = _by_each_value(value)
        assert _plain_json(value) is expected, value
        verdicts[expected] += 1
    assert verdicts[True] > 1000 and verdicts[False] > 300  # both answers are exercised


@pytest.mark.parametrize(
    'value',
    [
        [{'a': 1}, {'b': float('nan')}],
        [[[[float('-inf')]]]],
        {'rows': [{'a': _Str('x')}]},
        [{'a': (1, 2)}],
        [{1: 'int key'}],
        {'a': {'b': {None: 1}}},
        [_List([1])],
        [_Dict(a=1)],
        [{'a': b'bytes'}],
        [{'a': _Int(1)}],
    ],
)
def test_values_the_dump_would_change_are_refused(value: Any) -> None:
    assert _by_each_value(value) is False
    assert _plain_json(value) is False


def test_shared_and_cyclic_containers_are_refused_and_a_tree_passes() -> None:
    row = {'id': 1, 'tags': ['a', 'b']}
    assert _plain_json([row, {'id': 1, 'tags': ['a', 'b']}, {'tags': list(row['tags'])}]) is True
    assert _plain_json([row, row]) is False  # the same dict twice at one depth
    assert _plain_json([row, {'again': [row]}]) is False  # the same dict at two depths
    assert _plain_json([row, dict(row)]) is False  # a shared inner list (a shallow copy of the row)
    loop: list[Any] = [1, [2]]
    loop[1].append(loop)
    assert _plain_json(loop) is False
    assert _plain_json({'n': 1.0, 'z': -0.0, 'big': 10**40, 's': 'x', 'b': True, 'none': None}) is True
    assert _plain_json([]) is True and _plain_json({}) is True and _plain_json('text') is True
