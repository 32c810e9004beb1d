"""The Jinja environment of workflow templates: Jinja's immutable sandbox, with every way to build a large value in
one step checked by the size of its result before it is built (:mod:`kavalai.workflow._sizes`).

Jinja's sandbox keeps templates away from Python's internals; it does not bound sizes. Here:

- the operators ``+ * % **`` go through :meth:`BoundedEnvironment.call_binop` (Jinja's documented
  ``intercepted_binops``), ``~`` through a checked join (the compiled template's ``str_join`` is replaced), and the
  joins of blocks, macros and ``{% set %}`` blocks through a checked ``concat``;
- the filters that multiply (``center``, ``indent``, ``join``, ``replace``, ``wordwrap``, ``format``, ``batch``,
  ``slice``, ``sum``, ``round``, ``urlize``) and those that write a value as text (``string``, ``list``, ``pprint``,
  ``tojson``, ``escape``, ``forceescape``, ``urlencode``, ``xmlattr``) are wrapped with a check of their result's size,
  and ``map`` yields items only while their text in all stays within the limit;
- method calls (``s.center(n)``, ``s.ljust``, ``s.rjust``, ``s.zfill``, ``s.expandtabs``, ``s.replace``,
  ``s.join``, ``s.translate``, ``s.format``, ``s.format_map``, ``n.to_bytes``) are checked in
  :meth:`BoundedEnvironment.call`; the sandbox's immutable variant refuses ``append``, ``extend`` and the other
  methods that grow a list, dict or set in place (a loop doubling a list);
- ``lipsum(n)`` is checked, and ``range()`` is the sandbox's (at most 100,000 items);
- the binary operators, joins and method calls are counted on the rendering's meter (:mod:`kavalai.workflow._meter`)
  by the items they copy, so the work of a template is bounded in time as its values are in size;
- every filter whose work grows with its input (:func:`_metered`: all but the few of :data:`CONSTANT_FILTERS`, so
  one added later is metered too) and the tests that go over their input (:data:`GROWING_TESTS`) are counted by
  the input they go over, and each item of an iterator a filter returns by one: a ``map``, ``select`` or ``sort``
  in a loop reaches the meter's checks (the deadline) as a loop step does. A constant-time filter or test is left
  as Jinja has it: wrapping it would cost each call a Python frame for nothing to count;
- comparisons (``== != < <= > >= in not in``, chained ones too) are rewritten in the compiled template to the
  environment's metered ones, Jinja's comparing tests (``eq``, ``lt``, ``in``, ...) are replaced by them, and the
  filters that compare their items (:data:`COMPARING_FILTERS`: ``sort``, ``dictsort``, ``groupby``, ``unique``,
  ``max``, ``min``) are charged before they begin, all by what they go over, nested items included
  (:mod:`kavalai.workflow._comparing`); a slice (``x[a:b]``) by the items it copies;
- the environment's ``filters``, ``tests`` and ``globals`` are gated mappings: what is set on them after the
  environment was built (``env.filters[name] = f``, ``update``, ``setdefault``, ``|=``, a new mapping assigned
  whole) is metered as Jinja's own are, so a later addition cannot bypass the meter. :data:`OPERATORS` lists every
  operator with its cost; ``tests/workflow/test_meter.py`` enumerates all of them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import GeneratorType
from typing import Any, Final, cast

import jinja2.tests
from jinja2 import pass_environment
from jinja2.filters import make_attrgetter
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment

from kavalai.workflow._comparing import COMPARISONS, metered_comparison, sort_cost
from kavalai.workflow._meter import current_meter, tick, weight, work
from kavalai.workflow._sizes import (
    bounded_sum,
    check_binop,
    check_size,
    counted,
    format_size,
    joined_size,
    max_size,
    percent_size,
    text_size,
)

__all__ = [
    "COMPARING_FILTERS",
    "COMPARING_TESTS",
    "CONSTANT_FILTERS",
    "CONSTANT_GLOBALS",
    "CONSTANT_TESTS",
    "GROWING_TESTS",
    "OPERATORS",
    "BoundedEnvironment",
    "CompareRewriter",
]

_MAX_DIGITS: Final = 1_000  # round(n, -10**9) would compute 10**(10**9)
_JOINS: Final = {"str_join": "kavalai_str_join", "markup_join": "kavalai_markup_join"}
_Check = Callable[[Any, list[Any], dict[str, Any]], None]


def _arg(args: list[Any], kwargs: Mapping[str, Any], index: int, name: str, default: Any) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str:
    """``value`` as text, refused first when that text would be over the limit."""
    if isinstance(value, str):
        return value
    check_size(text_size(value), "the text of the value")
    return str(value)


# --------------------------------------------------------------------------------------------- filters


def _center(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    check_size(max(text_size(args[0]), _int(_arg(args, kwargs, 1, "width", 80))), "the centered text")


def _indent(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    width = _arg(args, kwargs, 1, "width", 4)
    text = _text(args[0])
    per_line = len(width) if isinstance(width, str) else _int(width)
    check_size(per_line, "the indentation")
    check_size(len(text) + (text.count("\n") + 1) * per_line, "the indented text")


def _join(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    items = list(args[0])
    attribute = _arg(args, kwargs, 2, "attribute", None)
    if attribute is not None:
        items = list(map(make_attrgetter(env, attribute), items))
        if len(args) > 2:
            args[2] = None
        kwargs.pop("attribute", None)
    args[0] = items
    check_size(joined_size(items, str(_arg(args, kwargs, 1, "d", ""))), "the joined text")


def _replace(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    text = _text(args[0])
    old, new = str(_arg(args, kwargs, 1, "old", "")), str(_arg(args, kwargs, 2, "new", ""))
    count = _arg(args, kwargs, 3, "count", None)
    check_size(_replaced_size(text, old, new, count), "the replaced text")


def _replaced_size(text: Any, old: Any, new: Any, count: Any) -> int:
    found = (text.count(old) if old else len(text) + 1) if isinstance(old, type(text)) else 0
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(len(new) - len(old), 0) if isinstance(new, str | bytes) else len(text)


def _wordwrap(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    text = _text(args[0])
    width = max(_int(_arg(args, kwargs, 1, "width", 79)), 1)
    wrap = _arg(args, kwargs, 3, "wrapstring", None) or env.newline_sequence
    check_size(len(text) + (len(text) // width + text.count("\n") + 1) * len(str(wrap)), "the wrapped text")


def _format(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    values: Any = kwargs or tuple(args[1:])  # what do_format gives '%'
    check_size(percent_size(_text(args[0]), values), "the formatted text")


def _batch(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    check_size(_int(_arg(args, kwargs, 1, "linecount", 0)), "a batch")


def _slice(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    check_size(8 * _int(_arg(args, kwargs, 1, "slices", 0)), "the slices (a list each, counted as 8 items)")


def _round(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    if abs(_int(_arg(args, kwargs, 1, "precision", 0))) > _MAX_DIGITS:
        check_size(max_size() + 1, f"rounding to more than {_MAX_DIGITS:,} digits")


def _urlize(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    text = _text(args[0])
    extra = sum(len(str(kwargs.get(name) or "")) for name in ("target", "rel")) + 60
    check_size(2 * len(text) + (text.count(" ") + text.count("\n") + 1) * extra, "the text with links")


def _as_text(factor: int) -> _Check:
    """A check for a filter that writes its value as text up to ``factor`` times longer (escaping: 6x)."""

    def check(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
        check_size(factor * text_size(args[0]), "the text of the value")

    return check


def _tojson(env: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    indent = _int(_arg(args, kwargs, 1, "indent", 0))
    check_size((1 + indent) * text_size(args[0]), "the JSON text of the value")


_FILTER_CHECKS: Final[Mapping[str, _Check]] = {
    "center": _center,
    "indent": _indent,
    "join": _join,
    "replace": _replace,
    "wordwrap": _wordwrap,
    "format": _format,
    "batch": _batch,
    "slice": _slice,
    "round": _round,
    "urlize": _urlize,
    "string": _as_text(1),
    "list": _as_text(1),
    "tojson": _tojson,
    "pprint": _as_text(2),
    "e": _as_text(6),
    "escape": _as_text(6),
    "forceescape": _as_text(6),
    "xmlattr": _as_text(6),
    "urlencode": _as_text(12),
}


def _guarded(original: Callable[..., Any], check: _Check) -> Callable[..., Any]:
    """``original`` (a Jinja filter), its arguments checked first; Jinja's ``pass_*`` marker kept."""
    passes = getattr(original, "jinja_pass_arg", None)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        head, values = (list(args[:1]), list(args[1:])) if passes is not None else ([], list(args))
        environment = getattr(head[0], "environment", head[0]) if head else None
        check(environment, values, kwargs)
        return original(*head, *values, **kwargs)

    if passes is not None:
        guarded.jinja_pass_arg = passes  # type: ignore[attr-defined]
    return guarded


def _counting(original: Callable[..., Any]) -> Callable[..., Any]:
    """The ``map`` filter, its items refused once their text in all would be over the limit."""

    def mapped(*args: Any, **kwargs: Any) -> Any:
        return counted(original(*args, **kwargs), "the mapped items")

    mapped.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return mapped


#: Filters whose work does not grow with their input, and why: left as Jinja has them, not metered (a call costs
#: what Jinja's does); their number in a rendering is bounded by the loop steps (counted) times the template's length.
#: Every other filter of the environment, Jinja's or one added later, is metered (:func:`_metered`).
CONSTANT_FILTERS: Final[Mapping[str, str]] = {
    "abs": "abs() of a number (numbers are bounded in size)",
    "attr": "one attribute read, through the sandbox",
    "count": "len() of the value",
    "length": "len() of the value",
    "d": "the value, or the default",
    "default": "the value, or the default",
    "first": "the first item of an iterator: one step",
    "last": "the last item of a sequence, read reversed: one step",
    "random": "random.choice() of a sequence: one index",
}
#: Tests whose work grows with their input (``str(value).islower()``): metered by the value's size.
GROWING_TESTS: Final[Mapping[str, int]] = {"lower": 0, "upper": 0}
#: Jinja's comparing tests and the comparison each makes (:data:`kavalai.workflow._comparing.COMPARISONS`): charged
#: by what they compare, as the operators ``==``, ``<``, ``in`` of a template are.
COMPARING_TESTS: Final[Mapping[str, str]] = {
    **dict.fromkeys(("==", "eq", "equalto"), "eq"),
    **dict.fromkeys(("!=", "ne"), "ne"),
    **dict.fromkeys((">", "gt", "greaterthan"), "gt"),
    **dict.fromkeys((">=", "ge"), "gteq"),
    **dict.fromkeys(("<", "lt", "lessthan"), "lt"),
    **dict.fromkeys(("<=", "le"), "lteq"),
    "in": "in",
}
#: Tests that take one step whatever their input, and why: left as Jinja has them.
CONSTANT_TESTS: Final[Mapping[str, str]] = {
    **dict.fromkeys(("odd", "even", "divisibleby"), "arithmetic on a number (integers are bounded in size)"),
    **dict.fromkeys(("defined", "undefined", "none", "true", "false"), "an identity or type check"),
    **dict.fromkeys(("boolean", "integer", "float", "number", "string", "mapping"), "a type check"),
    **dict.fromkeys(("sequence", "iterable", "callable", "escaped"), "a check of the value's methods"),
    **dict.fromkeys(("filter", "test"), "a name looked up in the environment"),
    "sameas": "``value is other``: identity, whatever their size",
}
#: Filters that compare their input's items, and whether they sort it (about ``log2 n`` comparisons an item):
#: charged by :func:`kavalai.workflow._comparing.sort_cost`, nested items included.
COMPARING_FILTERS: Final[Mapping[str, bool]] = {
    "sort": True,
    "dictsort": True,
    "groupby": True,
    "unique": False,
    "max": False,
    "min": False,
}
#: The globals a template starts with, and why calling them needs no meter of its own: anything added later is
#: metered (:class:`_Gated`).
CONSTANT_GLOBALS: Final[Mapping[str, str]] = {
    "range": "the sandbox's range (at most 100,000 items), each step of a loop over it counted",
    "dict": "a dict of the call's keyword arguments, as many as the template's text holds",
    "lipsum": "checked by the size of its result first",
    **dict.fromkeys(("cycler", "joiner", "namespace"), "a small object; its methods are counted as calls"),
}
#: The operators of a template, and what they cost: each is charged to the meter, but the constant-time ones.
OPERATORS: Final[Mapping[str, str]] = {
    **dict.fromkeys(("+", "*", "%", "**"), "metered: call_binop, by the items it copies (size checked first)"),
    "~": "metered: the checked join, by the characters it copies",
    **dict.fromkeys(
        ("==", "!=", "<", "<=", ">", ">=", "in", "not in"), "metered: the compiled comparison, by what it compares"
    ),
    "[a:b]": "metered: getitem, by the items the slice copies",
    **dict.fromkeys(("-", "/", "//"), "constant: arithmetic on numbers (a text or list refuses it)"),
    **dict.fromkeys(("and", "or", "not", "is", "[]", "."), "constant: one truth test, identity or lookup"),
}
_SIZED: Final = (str, bytes, bytearray, list, tuple, dict, set, frozenset, range)
_SMALL: Final = 256


def _metered(original: Callable[..., Any], grows_with: int = 0) -> Callable[..., Any]:
    """``original`` (a Jinja filter or test) counted on the rendering's meter: the items of its argument
    ``grows_with`` (the value, by default) when it has more than :data:`_SMALL`, and one operation an item of a
    generator it returns. Calls on small values are not counted one by one: their number is bounded by the loop
    steps (counted) times the template's length."""
    passes = getattr(original, "jinja_pass_arg", None)
    metered = _by_value(original, passes is not None) if grows_with == 0 else _by_argument(original, grows_with)
    if passes is not None:
        metered.jinja_pass_arg = passes  # type: ignore[attr-defined]
    metered.kavalai_metered = True  # type: ignore[attr-defined]
    return metered


def _by_value(original: Callable[..., Any], passes: bool) -> Callable[..., Any]:
    """The wrapper of a filter or test that goes over its value: the value a parameter of its own (no look into a
    tuple of arguments), and ``original`` called without unpacking when it is given nothing else (most calls).
    The names it reads are the factory's (not defaults a template's keyword argument could replace)."""
    sized, small = _SIZED, _SMALL
    if passes:

        def metered_passing(head: Any, value: Any, /, *args: Any, **kwargs: Any) -> Any:
            if isinstance(value, sized) and len(value) > small:
                work(1 + len(value))
            result = original(head, value, *args, **kwargs) if args or kwargs else original(head, value)
            return result if type(result) is not GeneratorType else _each_counted(result)

        return metered_passing

    def metered(value: Any, /, *args: Any, **kwargs: Any) -> Any:
        if isinstance(value, sized) and len(value) > small:
            work(1 + len(value))
        result = original(value, *args, **kwargs) if args or kwargs else original(value)
        return result if type(result) is not GeneratorType else _each_counted(result)

    return metered


def _by_argument(original: Callable[..., Any], grows_with: int) -> Callable[..., Any]:
    """The wrapper of a test whose work grows with another argument than its value (``x is in seq``)."""
    at = grows_with + (1 if getattr(original, "jinja_pass_arg", None) is not None else 0)

    def metered(*args: Any, **kwargs: Any) -> Any:
        if len(args) > at:
            value = args[at]
            if isinstance(value, _SIZED) and len(value) > _SMALL:
                work(1 + len(value))
        return original(*args, **kwargs)

    return metered


def _comparing(original: Callable[..., Any], sorting: bool) -> Callable[..., Any]:
    """The wrapper of a filter that compares its value's items (``sort``, ``max``): charged by what it compares,
    nested items included, before it begins."""
    passes = getattr(original, "jinja_pass_arg", None) is not None

    def metered(*args: Any, **kwargs: Any) -> Any:
        value = args[1] if passes else args[0]
        if isinstance(value, _SIZED):
            work(sort_cost(value, sorting=sorting))
        result = original(*args, **kwargs)
        return result if type(result) is not GeneratorType else _each_counted(result)

    return _marked(metered, original)


def _marked(metered: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    passes = getattr(original, "jinja_pass_arg", None)
    if passes is not None:
        metered.jinja_pass_arg = passes  # type: ignore[attr-defined]
    metered.kavalai_metered = True  # type: ignore[attr-defined]
    return metered


def _comparison(name: str) -> Callable[..., Any]:
    compare = metered_comparison(name)
    compare.kavalai_metered = True  # type: ignore[attr-defined]
    return compare


_METERED: Final = {name: _comparison(name) for name in COMPARISONS}


def _gate_filter(name: str, function: Any) -> Any:
    """A filter set on the environment: metered (by its input, or by what it compares)."""
    if getattr(function, "kavalai_metered", False) or not callable(function):
        return function
    sorting = COMPARING_FILTERS.get(name)
    return _metered(function) if sorting is None else _comparing(function, sorting)


def _gate_test(name: str, function: Any) -> Any:
    """A test set on the environment: Jinja's comparing ones charged as comparisons, any other metered."""
    if getattr(function, "kavalai_metered", False) or not callable(function):
        return function
    if name in COMPARING_TESTS and function is jinja2.tests.TESTS.get(name):
        return _comparison(COMPARING_TESTS[name])
    return _metered(function)


def _gate_global(name: str, value: Any) -> Any:
    """A global set on the environment: a function is metered by its first argument (a value is left as it is)."""
    if getattr(value, "kavalai_metered", False) or not callable(value):
        return value
    return _marked(_by_argument(value, 0), value)


class _Gated(dict[str, Any]):
    """The filters, tests or globals of the environment: what is set after it was built (``env.filters[name] = f``,
    ``update``, ``setdefault``, ``|=``) passes ``gate`` first, so no later addition bypasses the meter."""

    def __init__(self, gate: Callable[[str, Any], Any], items: Mapping[str, Any], *, gated: bool) -> None:
        super().__init__({k: gate(k, v) for k, v in items.items()} if gated else items)
        self.gate = gate

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, self.gate(name, value))

    def update(self, *args: Any, **kwargs: Any) -> None:
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def setdefault(self, name: str, value: Any = None) -> Any:
        if name not in self:
            self[name] = value
        return self[name]

    def __ior__(self, other: Any) -> _Gated:  # type: ignore[override,misc]
        self.update(other)
        return self


class _GatedAttribute:
    """An environment's ``filters``, ``tests`` or ``globals``: always a :class:`_Gated` mapping, one assigned whole
    too (gated once the environment is sealed, at the end of its constructor)."""

    def __init__(self, gate: Callable[[str, Any], Any]) -> None:
        self.gate = gate
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_kavalai_{name}"

    def __get__(self, environment: Any, owner: type | None = None) -> Any:
        return self if environment is None else environment.__dict__[self.slot]

    def __set__(self, environment: Any, value: Mapping[str, Any]) -> None:
        environment.__dict__[self.slot] = _Gated(self.gate, value, gated=environment._kavalai_sealed)


def _each_counted(items: Iterator[Any]) -> Iterator[Any]:
    meter = current_meter()
    if meter is None:
        yield from items
        return
    for item in items:
        meter.work(1)
        yield item


@pass_environment
def _sum(environment: Any, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
    items = iterable if attribute is None else map(make_attrgetter(environment, attribute), iterable)
    return bounded_sum(items, start)


# --------------------------------------------------------------------------------------------- methods


def _method_check(owner: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    if isinstance(owner, str | bytes | bytearray):
        text: Any = owner
        if name in ("center", "ljust", "rjust", "zfill"):
            check_size(max(len(owner), _int(_arg(args, kwargs, 0, "width", 0))), f"the text of {name}()")
        elif name == "expandtabs":
            tab = _int(_arg(args, kwargs, 0, "tabsize", 8))
            check_size(len(owner) + text.count(b"\t" if isinstance(text, bytes | bytearray) else "\t") * tab, name)
        elif name == "replace":
            old, new, count = (_arg(args, kwargs, i, key, -1) for i, key in enumerate(("old", "new", "count")))
            check_size(_replaced_size(owner, old, new, count), "the replaced text")
        elif name == "join" and args:
            args[0] = list(args[0])
            check_size(joined_size(args[0], owner), "the joined text")
        elif name == "translate" and args and isinstance(args[0], Mapping):
            longest = max((len(v) for v in args[0].values() if isinstance(v, str | bytes)), default=1)
            check_size(len(owner) * max(longest, 1), "the translated text")
        elif name in ("format", "format_map") and isinstance(owner, str):
            if name == "format_map":
                values = args[0] if args and isinstance(args[0], Mapping) else {}
                check_size(format_size(owner, (), values), "the formatted text")
            else:
                check_size(format_size(owner, tuple(args), kwargs), "the formatted text")
    elif isinstance(owner, int) and name == "to_bytes":
        check_size(_int(_arg(args, kwargs, 0, "length", 1)), "the bytes")


# --------------------------------------------------------------------------------------------- environment


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with every size-multiplying operation checked before it builds its result."""

    intercepted_binops = frozenset({"+", "*", "%", "**"})

    _kavalai_sealed = False

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._build()
        self._kavalai_sealed = True  # from here on, what is set on filters, tests and globals is gated

    def _build(self) -> None:
        for name, check in _FILTER_CHECKS.items():
            self.filters[name] = _guarded(self.filters[name], check)
        self.filters["sum"] = _sum
        self.filters["map"] = _counting(self.filters["map"])
        lipsum: Callable[..., Any] = self.globals["lipsum"]

        def bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
            check_size(_int(n) * _int(max) * 12, "the lorem ipsum")
            return str(lipsum(n, html, min, max))

        self.globals["lipsum"] = bounded_lipsum
        for name, function in self.filters.items():
            if name not in CONSTANT_FILTERS:
                self.filters[name] = _gate_filter(name, function)
        tests: dict[str, Callable[..., Any]] = cast("dict[str, Callable[..., Any]]", self.tests)  # typed by defaults
        for name, place in GROWING_TESTS.items():
            tests[name] = _metered(tests[name], place)
        for name, comparison in COMPARING_TESTS.items():
            tests[name] = _comparison(comparison)
        self.kavalai_str_join = self._joined(str_join)  # the compiled template calls these for '~'
        self.kavalai_markup_join = self._joined(markup_join)
        for name, metered in _METERED.items():  # the compiled template calls these for '==', 'in', ...
            setattr(self, f"kavalai_{name}", metered)

    # Filters, tests and globals are kept in gated mappings: replaced whole or added to after the environment was
    # built, what they are given is metered (Jinja's own constructor fills them before the gate is sealed).
    filters = _GatedAttribute(_gate_filter)
    tests = _GatedAttribute(_gate_test)
    globals = _GatedAttribute(_gate_global)

    @staticmethod
    def kavalai_chain(names: tuple[str, ...], *operands: Any) -> bool:
        """A chained comparison (``a < b < c``), each charged: its operands are evaluated before the first."""
        return all(_METERED[name](operands[index], operands[index + 1]) for index, name in enumerate(names))

    def getitem(self, obj: Any, argument: Any) -> Any:
        """``obj[argument]``; a slice is charged by the items it copies."""
        if type(argument) is slice and isinstance(obj, _SIZED):
            tick(1 + len(range(*argument.indices(len(obj)))))
        return super().getitem(obj, argument)

    @staticmethod
    def _joined(join: Callable[[Iterable[Any]], str]) -> Callable[[Iterable[Any]], str]:
        def checked(items: Iterable[Any]) -> str:
            values = list(items)
            check_size(joined_size(values, ""), "the joined text")
            tick(weight(*values))
            return join(values)

        return checked

    @staticmethod
    def concat(items: Iterable[Any]) -> str:
        """The join of a block's, a macro's or a ``{% set %}`` block's output, checked first."""
        values = list(items)
        check_size(joined_size(values, ""), "the text of the block")
        tick(weight(*values))
        return "".join(values)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """``left <operator> right``, refused first when its result would be over the limit."""
        check_binop(operator, left, right)
        tick(weight(left, right))
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``__obj`` from the template; a method that builds a text (``s.center(n)``) is checked first."""
        target = getattr(__obj, "__wrapped__", __obj)  # Jinja wraps str.format in a function of its own
        owner, name = getattr(target, "__self__", None), getattr(target, "__name__", "")
        values = list(args)
        if owner is not None:
            _method_check(owner, name, values, kwargs)
            tick(weight(owner, *values))
        return super().call(__context, __obj, *values, **kwargs)


_COMPARE_NAMES: Final[Mapping[type[ast.cmpop], str]] = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "lteq",
    ast.Gt: "gt",
    ast.GtE: "gteq",
    ast.In: "in",
    ast.NotIn: "notin",
}


def _literal(node: ast.expr) -> bool:
    """A constant of the template's text, or a list or tuple of them."""
    if isinstance(node, ast.List | ast.Tuple):
        return all(isinstance(item, ast.Constant) for item in node.elts)
    return isinstance(node, ast.Constant)


def _bounded_by_text(node: ast.Compare) -> bool:
    """Whether a single comparison goes over no more than the template's own text, left as Python has it: ``x == 3``,
    ``s < 'm'`` (a text compared with a literal stops at the literal's length), ``x in [1, 2]``."""
    if len(node.ops) != 1:
        return False
    if isinstance(node.ops[0], ast.In | ast.NotIn):
        return _literal(node.comparators[0])
    return isinstance(node.left, ast.Constant) or isinstance(node.comparators[0], ast.Constant)


class CompareRewriter(ast.NodeTransformer):
    """Points the compiled template's comparisons (``==``, ``<``, ``in``, ...) at the environment's metered ones;
    ``is`` (identity, Jinja's own checks for missing names) and a comparison with a literal of the template's text
    (bounded by that text: :func:`_bounded_by_text`) are left as they are."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        names = [_COMPARE_NAMES.get(type(op)) for op in node.ops]
        if None in names or _bounded_by_text(node):
            return node
        environment = ast.Name(id="environment", ctx=ast.Load())
        operands = [node.left, *node.comparators]
        if len(names) == 1:
            function = ast.Attribute(value=environment, attr=f"kavalai_{names[0]}", ctx=ast.Load())
            return ast.copy_location(ast.Call(func=function, args=operands, keywords=[]), node)
        chain = ast.Attribute(value=environment, attr="kavalai_chain", ctx=ast.Load())
        kinds = ast.Tuple(elts=[ast.Constant(value=name) for name in names], ctx=ast.Load())
        return ast.copy_location(ast.Call(func=chain, args=[kinds, *operands], keywords=[]), node)


class JoinRewriter(ast.NodeTransformer):
    """Points the compiled template's ``str_join`` and ``markup_join`` (the ``~`` operator) at the checked ones."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        replacement = _JOINS.get(node.id)
        if replacement is None or not isinstance(node.ctx, ast.Load):
            return node
        environment = ast.Name(id="environment", ctx=ast.Load())
        return ast.copy_location(ast.Attribute(value=environment, attr=replacement, ctx=ast.Load()), node)
