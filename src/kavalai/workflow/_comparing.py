"""What comparing, membership and sorting cost, for the meter of evaluation (:mod:`kavalai.workflow._meter`).

``a == b``, ``a < b``, ``x in seq`` and sorting are one Python operation each, but they go over their operands:
two equal lists of a million items are compared item by item, ``[[big]] == [[big]]`` goes over ``big`` though its
top level has one item, ``x in seq`` compares ``x`` with every item, and ``sorted()`` makes about ``n log n``
comparisons. Each is charged, before it is done, by the items and characters it may go over (:func:`extent`,
nested ones included), so the meter checks the deadline after a long comparison and never begins one on more than
:data:`~kavalai.workflow._meter.HEAVY` items on the event loop. A comparison where either side is a number,
``None`` or a boolean is one step, and costs a type check.

Templates reach these through the comparisons of their compiled code and Jinja's comparing tests and sorting
filters (:mod:`kavalai.workflow._sandbox`); expressions through their walk (:mod:`kavalai.workflow._expressions`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Set
from itertools import islice
from typing import Any, Final

from pydantic import BaseModel

from kavalai.workflow._meter import HEAVY, work

__all__ = [
    "COMPARISONS",
    "compare_cost",
    "contains_cost",
    "extent",
    "metered_comparison",
    "sort_cost",
]

#: The most an :func:`extent` walk counts: past it, the value is charged this much (more than the meter lets one
#: operation do on the event loop, and a check of the deadline after it), and the walk costs no more.
CAP: Final = 4 * HEAVY
#: Types a comparison with which takes one step, whatever the other side.
_ATOMS: Final = frozenset({int, float, bool, type(None)})
_TEXTS: Final = frozenset({str, bytes, bytearray})
_CONTAINERS: Final = frozenset({list, tuple, set, frozenset, dict})
_FLAT: Final = _ATOMS | _TEXTS
#: A comparison of values this small is not charged one by one: a loop step (counted) makes a bounded number.
_SMALL: Final = 256


def _in(item: Any, container: Any) -> bool:
    return item in container


def _not_in(item: Any, container: Any) -> bool:
    return item not in container


def extent(value: Any, cap: int = CAP) -> int:
    """The items and characters ``value`` holds, nested ones included (what comparing it may go over), at most
    ``cap``. Flat containers are measured at C speed (their items' types, their texts' lengths)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _TEXTS or isinstance(item, str | bytes | bytearray | range):  # a Markup text too
            total += 1 + len(item)
        elif kind in _CONTAINERS or isinstance(item, list | tuple | Set | Mapping):
            total += 1 + len(item)
            if total >= cap:
                return cap
            inner = item.values() if isinstance(item, Mapping) else item
            kinds = set(map(type, islice(inner, cap - total)))
            if kinds <= _ATOMS:
                continue
            if kinds <= _TEXTS:
                total += sum(map(len, islice(inner, cap - total)))
                continue
            stack.extend(islice(inner, cap - total))
        elif isinstance(item, BaseModel):
            stack.append(item.__dict__)  # a model compares as its fields do
        else:
            total += 1
        if total >= cap:
            return cap
    return total


def compare_cost(left: Any, right: Any) -> int:
    """What ``left == right`` (or ``!=``, ``<``, ``<=``, ``>``, ``>=``) may go over: the smaller side."""
    if type(left) in _ATOMS or type(right) in _ATOMS:
        return 1
    return 1 + extent(right, extent(left))


def contains_cost(item: Any, container: Any) -> int:
    """What ``item in container`` may go over: a text's characters, a sequence's items (each compared with
    ``item``), or ``item`` itself for a hashed lookup (a tuple's hash goes over its items)."""
    kind = type(container)
    if kind is list or kind is tuple:  # a number, None or a boolean is compared with an item in one step
        return 1 + (len(container) if type(item) in _ATOMS else extent(container))
    if kind in _TEXTS or isinstance(container, str | bytes | bytearray):
        return 1 + len(container) + (len(item) if type(item) in _TEXTS else 0)
    if kind is dict or kind is set or kind is frozenset or isinstance(container, Mapping | Set):
        return 1 if type(item) in _FLAT else 1 + extent(item)
    if kind is list or kind is tuple or isinstance(container, list | tuple):
        return 1 + extent(container)
    return 1  # a range (arithmetic), an iterator a filter made (which counts its items itself)


def sort_cost(value: Any, *, sorting: bool = True) -> int:
    """What sorting ``value`` (``sorting``: about ``log2 n`` comparisons an item) or going over it comparing
    (``max``, ``min``, ``unique``) may cost: its extent, times the comparisons of an item."""
    size = len(value) if isinstance(value, list | tuple | Set | Mapping | str | range) else 0
    rounds = max(size.bit_length(), 1) if sorting else 1
    return 1 + extent(value) * rounds


#: The comparisons a template or an expression may make, by Jinja's name of the operator.
COMPARISONS: Final[Mapping[str, Callable[[Any, Any], Any]]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "lteq": operator.le,
    "gt": operator.gt,
    "gteq": operator.ge,
    "in": _in,
    "notin": _not_in,
}


def metered_comparison(name: str) -> Callable[[Any, Any], Any]:
    """The comparison ``name`` (a key of :data:`COMPARISONS`), charged to the current meter before it is made."""
    compare, atoms = COMPARISONS[name], _ATOMS
    if name in ("in", "notin"):

        def membership(item: Any, container: Any) -> Any:
            kind = type(container)
            if (kind is list or kind is tuple) and type(item) in atoms:  # most tests: a number in a short list
                if len(container) > _SMALL:
                    work(1 + len(container))
            elif kind is not range:
                work(contains_cost(item, container))
            return compare(item, container)

        return membership

    def comparison(left: Any, right: Any) -> Any:
        kind = type(left)
        if kind in atoms or type(right) in atoms:
            return compare(left, right)
        if kind is str and type(right) is str:  # two texts: the shorter one's characters
            if len(left) > _SMALL and len(right) > _SMALL:
                work(1 + min(len(left), len(right)))
        else:
            work(compare_cost(left, right))
        return compare(left, right)

    return comparison
