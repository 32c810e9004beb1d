"""The size bound of workflow expressions and templates: no one operation builds a value over the limit.

Every operation that can make a large text or list out of small operands (``*`` and ``+`` of texts and lists, ``%``
and ``str.format`` with their field widths, joins, sums of lists, padding, replacing, wrapping, converting a value
holding many references to one large text into text) is checked here by the size of its result, computed from its
operands *before* the result is built. The limit counts characters of a text or items of a list
(:data:`DEFAULT_MAX_SIZE` unless a workflow sets ``max_value_size``; the engine sets it for the run with
:func:`size_limit`).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Final

__all__ = [
    "DEFAULT_MAX_SIZE",
    "SizeError",
    "bounded_str",
    "bounded_sum",
    "check_binop",
    "check_size",
    "counted",
    "format_size",
    "joined_size",
    "max_size",
    "percent_size",
    "size_limit",
    "text_size",
]

#: The most characters of a text, or items of a list, one expression or template operation may build by default.
DEFAULT_MAX_SIZE: Final = 1_000_000
MAX_BITS: Final = 100_000  # the largest integer an operation may produce (about 30,000 digits)
_limit: ContextVar[int] = ContextVar("kavalai_max_value_size", default=DEFAULT_MAX_SIZE)
_SEQUENCES: Final = (str, bytes, list, tuple)
_PERCENT: Final = re.compile(r"%(?:\(([^)]*)\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")
_SPEC: Final = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[a-zA-Z%]?")


class SizeError(OverflowError):
    """An operation refused because its result would be over the size limit (or an integer over its bits)."""


def max_size() -> int:
    """The size limit in force: characters of a text or items of a list."""
    return _limit.get()


class size_limit:  # lower case: used as a function, `with size_limit(n):`
    """Set the size limit for the code inside the block (a workflow run).

    A class rather than a generator-made context manager: entered once a run, it costs a third as much.
    """

    __slots__ = ("_limit", "_token")

    def __init__(self, limit: int) -> None:
        self._limit = limit

    def __enter__(self) -> None:
        self._token = _limit.set(self._limit)

    def __exit__(self, *exc_info: object) -> None:
        _limit.reset(self._token)


def check_size(size: int, what: str) -> None:
    """Refuse ``what`` when its result would have ``size`` characters or items, over the limit."""
    limit = _limit.get()
    if size > limit:
        raise SizeError(f"{what} would be longer than {limit:,} characters or items")


def text_size(value: Any, limit: int | None = None) -> int:
    """A cheap over-estimate of ``len(str(value))``, stopping once past ``limit`` (shared items counted each time,
    as ``str()`` writes them each time)."""
    limit = _limit.get() if limit is None else limit
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        kind = type(item)  # the JSON types by identity first: isinstance() of Mapping is an ABC check, once an item
        if kind is str:
            total += len(item) + 4
        elif kind is dict:
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif kind is int:
            total += limit + 1 if item.bit_length() > MAX_BITS else item.bit_length() // 3 + 4  # digits, ", "
        elif kind is float or kind is bool or item is None:
            total += 24
        elif isinstance(item, str | bytes):
            total += len(item) + 4
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            stack.extend(item)
        elif _is_int(item):
            total += limit + 1 if item.bit_length() > MAX_BITS else item.bit_length() // 3 + 4  # digits, ", "
        else:
            total += 24
    return total


def bounded_str(value: Any) -> str:
    """``str(value)``, refused when the text would be over the limit (a list of one long text repeated, say)."""
    if type(value) is str:
        return value
    check_size(text_size(value), "the text of the value")
    return str(value)


def check_binop(op: str, left: Any, right: Any) -> None:
    """Refuse ``left <op> right`` (``op`` one of ``+ * % **``) when its result would be over the limits."""
    if op == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCES) and _is_int(count):
                check_size(len(seq) * count, f"repeating a {type(seq).__name__} of {len(seq):,} {count:,} times")
        if _is_int(left) and _is_int(right) and left.bit_length() + right.bit_length() > MAX_BITS:
            raise SizeError(f"the product would have more than {MAX_BITS:,} bits")
    elif op == "+":
        if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
            check_size(len(left) + len(right), "the result")
    elif op == "**":
        if _is_int(left) and _is_int(right) and right > 0 and max(left.bit_length(), 1) * right > MAX_BITS:
            raise SizeError(f"the power would have more than {MAX_BITS:,} bits")
    elif op == "%" and isinstance(left, str | bytes):
        check_size(percent_size(left, right), "the %-formatted text")


def percent_size(template: str | bytes, args: Any) -> int:
    """An upper bound of ``len(template % args)``, from its field widths and precisions and its arguments."""
    text = template.decode("latin-1") if isinstance(template, bytes) else template
    values = list(args) if isinstance(args, tuple) else [args]
    total, position = len(text), 0
    for match in _PERCENT.finditer(text):
        key, width, precision, kind = match.groups()
        if "*" in (width, precision):
            raise SizeError("a '*' field width in %-formatting is not allowed: write the width in the format")
        if kind == "%":
            continue
        if key is not None and isinstance(args, Mapping):
            value = args.get(key)
        else:
            value = values[position] if position < len(values) else None
            position += 1
        total += max(int(width or 0), text_size(value)) + int(precision or 0)
        if total > _limit.get():
            break
    return total


def format_size(template: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """An upper bound of ``len(template.format(*args, **kwargs))``, from its fields' widths and values."""
    total, automatic = 0, 0
    for literal, field, spec, _conversion in string.Formatter().parse(template):
        total += len(literal)
        if field is None:
            continue
        spec = spec or ""
        if "{" in spec:
            raise SizeError("a nested '{...}' field in a format spec is not allowed: write the width in the format")
        root = re.split(r"[.\[]", field, maxsplit=1)[0]
        if root == "":
            root, automatic = str(automatic), automatic + 1
        value = args[int(root)] if root.isdigit() and int(root) < len(args) else kwargs.get(root)
        found = _SPEC.fullmatch(spec)
        width, precision = (found.group(1), found.group(2)) if found else ("", "")
        total += max(int(width or 0), text_size(value)) + int(precision or 0)
        if total > _limit.get():
            break
    return total


def counted(items: Iterable[Any], what: str) -> Iterator[Any]:
    """``items``, refused once the text of those yielded so far would be over the limit in all (a ``map`` that
    makes a long text of each of many items, collected into one list or text)."""
    limit, total = _limit.get(), 0
    for item in items:
        total += len(item) if isinstance(item, str) else text_size(item, limit)
        if total > limit:
            check_size(total, what)
        yield item


def joined_size(items: list[Any], separator: str | bytes | bytearray) -> int:
    """``len(separator.join(map(str, items)))``, over-estimated from the items' text sizes."""
    limit = _limit.get()
    total = len(separator) * max(len(items) - 1, 0)
    for item in items:
        total += len(item) if isinstance(item, str) else text_size(item, limit)
        if total > limit:
            break
    return total


def bounded_sum(items: Iterable[Any], start: Any = 0) -> Any:
    """``sum(items, start)``; lists and tuples are concatenated once, in linear time, after their total length is
    checked (``sum()`` itself copies the growing list at every step: quadratic time, however small the result)."""
    values = list(items)
    if not isinstance(start, list | tuple):
        return sum(values, start)
    if not all(isinstance(value, type(start)) for value in values):
        return sum(values, start)  # the TypeError sum() gives
    check_size(len(start) + sum(len(value) for value in values), "the sum of the lists")
    joined = [item for part in (start, *values) for item in part]
    return joined if isinstance(start, list) else tuple(joined)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
