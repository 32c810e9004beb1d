"""Safe expressions over the run context, evaluated by walking a whitelisted Python AST (never ``eval()``).

An expression is parsed once with :func:`ast.parse` and every node is checked against a whitelist, so anything
outside it (imports, lambdas, comprehensions, method calls, dunder access) is refused at build time. What is
allowed:

- names: ``input`` and the ids of nodes that have run (their outputs);
- ``a.b`` reads the key ``b`` of a mapping or the field ``b`` of a Pydantic model (never a Python attribute);
- ``a[0]``, ``a["key"]``, ``a[1:3]``; literals, lists, tuples, dicts;
- ``and or not``, comparisons (``== != < <= > >= in not in is is not``), arithmetic (``+ - * / // % **``) and
  ``x if cond else y``;
- calls of a fixed set of functions (:data:`FUNCTIONS`), plus ``get("path.to.value", default)``, which reads a
  path and falls back to ``default`` when any part of it is missing (useful for loop counters).

Every evaluation runs under a meter (:mod:`kavalai.workflow._meter`): its operations are counted by the items they
copy, and the deadline of the run around it is checked every few thousand; a run evaluates with
:meth:`Expression.evaluate_async`, which holds the event loop for at most a slice (and never for one operation on a
huge list), then goes on in a worker thread. Results are bounded before they are built
(:mod:`kavalai.workflow._sizes`): exponents above 64, repetitions longer
than 100,000 items, texts and lists over the size limit (``+``, ``str()``, ``sum()`` of lists), integers over 100,000
bits, ``round()`` to more than 1,000 digits, and ``%`` formatting of text (whose field widths are unbounded) are
refused.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Final

from pydantic import BaseModel

from kavalai.kernel import current_deadline
from kavalai.workflow._comparing import compare_cost, contains_cost, sort_cost
from kavalai.workflow._meter import (
    EvaluationDeadlineError,
    EvaluationLimitError,
    Meter,
    _SliceSpent,
    current_meter,
    weight,
)
from kavalai.workflow._meter import evaluate as metered
from kavalai.workflow._sizes import SizeError, bounded_str, bounded_sum, check_binop
from kavalai.workflow.errors import ExpressionError, failure_text, quoted

__all__ = ["FUNCTIONS", "NOTHING", "Expression", "compile_expression", "is_path", "read_key"]

#: The functions an expression may call, by name.
FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = {
    "abs": abs,
    "all": all,
    "any": any,
    "bool": bool,
    "float": float,
    "int": int,
    "len": len,
    "list": list,
    "lower": lambda s: bounded_str(s).lower(),
    "max": max,
    "min": min,
    "round": lambda number, digits=None: _round(number, digits),
    "sorted": sorted,
    "str": lambda value="": bounded_str(value),
    "sum": bounded_sum,
    "upper": lambda s: bounded_str(s).upper(),
}
_GET: Final = "get"
#: The functions that compare their argument's items, and whether they sort them (see ``_comparing.sort_cost``).
_COMPARING_FUNCTIONS: Final[Mapping[str, bool]] = {"sorted": True, "max": False, "min": False}
_MAX_EXPONENT: Final = 64
_MAX_REPEAT: Final = 100_000
_MAX_DIGITS: Final = 1_000  # round(n, -10**9) would compute 10**(10**9)
_OPERATORS: Final[Mapping[type[ast.operator], str]] = {ast.Add: "+", ast.Mult: "*", ast.Pow: "**", ast.Mod: "%"}

_BINARY: Final[Mapping[type[ast.operator], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: Final[Mapping[type[ast.unaryop], Callable[[Any], Any]]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_COMPARE: Final[Mapping[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_STRUCTURAL: Final = (
    ast.Expression,
    ast.Load,
    ast.Constant,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
)


class _Missing(LookupError):
    """A name, key or index that is not there (``get()`` turns it into the default)."""


class _Refused(ValueError):
    """An operation outside the bounds (a huge exponent or repetition)."""


class Expression:
    """A parsed, whitelisted expression.

    Attributes:
        source: the expression text.
        names: the root names it reads (``{"input", "listing"}``), for build-time checks.
    """

    __slots__ = ("_path", "_tree", "names", "source")

    def __init__(self, source: str, tree: ast.Expression, names: frozenset[str]) -> None:
        self.source = source
        self._tree = tree
        self.names = names
        self._path = _path_keys(tree.body)

    @property
    def path(self) -> tuple[str, tuple[Any, ...]] | None:
        """The root name and the keys of a plain path through dicts (``a.b["c"]`` gives ``("a", ("b", "c"))``),
        which :meth:`plain_path` reads; ``None`` for any other expression."""
        return self._path

    def evaluate(self, context: Mapping[str, Any], *, node: str | None = None, field: str | None = None) -> Any:
        """Evaluate against ``context`` (names to values) on the caller's thread, under a meter but in one piece (a
        caller on the event loop uses :meth:`evaluate_async`); raise :class:`ExpressionError` naming ``node`` and
        ``field``."""
        value = self.plain_path(context)
        if value is not NOTHING:
            return value
        return self._walk(context, Meter(deadline=current_deadline()), node, field)

    async def evaluate_async(
        self, context: Mapping[str, Any], *, node: str | None = None, field: str | None = None
    ) -> Any:
        """:meth:`evaluate`, never holding the event loop for more than a slice: on the loop for at most
        :data:`~kavalai.workflow._meter.SLICE` and short of any operation on more than
        :data:`~kavalai.workflow._meter.HEAVY` items, else begun again in a worker thread the caller owns."""
        value = self.plain_path(context)
        if value is not NOTHING:
            return value
        return await metered(lambda: self._walk(context, current_meter(), node, field))

    def plain_path(self, context: Mapping[str, Any]) -> Any:
        """A plain path through dicts (most bindings: ``step.result.items``) read without the tree walk (nor a
        coroutine: the run's walk tries it first), or ``NOTHING`` for any other case (a list index, a model, a
        missing key and its error)."""
        if self._path is not None and type(context) is dict:
            value = context.get(self._path[0], NOTHING)
            for key in self._path[1]:
                if type(value) is not dict or key not in value:
                    return NOTHING
                value = value[key]
            return value
        return NOTHING

    def _walk(self, context: Mapping[str, Any], meter: Meter | None, node: str | None, field: str | None) -> Any:
        try:
            return _Evaluator(context, meter or Meter(deadline=current_deadline())).eval(self._tree.body)
        except _SliceSpent:
            raise  # out of its slice of the event loop: begun again in a worker thread
        except (_Missing, _Refused, SizeError, EvaluationDeadlineError, EvaluationLimitError) as exc:
            raise ExpressionError(
                f"{_where(node, field)}expression {quoted(self.source)}: {exc.args[0]}",
                expression=self.source,
                node=node,
                field=field,
            ) from None
        except Exception as exc:
            raise ExpressionError(
                f"{_where(node, field)}expression {quoted(self.source)} failed: {failure_text(exc)}",
                expression=self.source,
                node=node,
                field=field,
            ) from exc

    def __repr__(self) -> str:
        return f"Expression({quoted(self.source)})"


def compile_expression(source: str, *, node: str | None = None) -> Expression:
    """Parse and check ``source``; raise :class:`ExpressionError` naming ``node`` if it is not allowed."""
    if not isinstance(source, str):
        raise ExpressionError(
            f"{_where(node)}an expression must be a string, not {type(source).__name__}",
            expression=repr(source),
            node=node,
        )
    try:
        return _compile(source)
    except ExpressionError as exc:
        raise ExpressionError(f"{_where(node)}{exc.message}", expression=source, node=node) from None


def is_path(source: str) -> bool:
    """Whether ``source`` is a plain context path: a name followed by ``.key`` and ``[constant]`` parts."""
    try:
        tree = _parse(source)
    except ExpressionError:
        return False
    return _path_root(tree.body) is not None


def _parse(source: str) -> ast.Expression:
    """The one parse of an expression's source: a source nested too deeply for the parser (``-`` or ``not`` 100,000
    times, ``x+x+...`` 50,000 terms, whose ``MemoryError`` or ``RecursionError`` came out of ``ast.parse``) or one
    it cannot encode (a lone surrogate: ``UnicodeEncodeError``) is an :class:`ExpressionError`, as a syntax error
    is."""
    try:
        return ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"expression {quoted(source)} does not parse: {exc.msg}", expression=source) from None
    except ValueError as exc:  # a lone surrogate (a JSON document's "\\ud800") cannot be encoded for the parser
        raise ExpressionError(f"expression {quoted(source)} does not parse: {exc}", expression=source) from None
    except (RecursionError, MemoryError):
        raise ExpressionError(
            f"expression {quoted(source)} is nested too deeply to parse ({len(source):,} characters)",
            expression=source,
        ) from None


#: What :meth:`Expression.plain_path` gives for an expression that is not a plain path through dicts.
NOTHING: Final = object()


def _path_keys(node: ast.expr) -> tuple[str, tuple[Any, ...]] | None:
    """The root name and the keys of a plain path (``a.b["c"]`` gives ``("a", ("b", "c"))``), else ``None``."""
    keys: list[Any] = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            keys.append(node.attr)
        elif isinstance(node.slice, ast.Constant):
            keys.append(node.slice.value)
        else:
            return None
        node = node.value
    if not isinstance(node, ast.Name) or node.id in FUNCTIONS or node.id == _GET:
        return None
    return node.id, tuple(reversed(keys))


def _path_root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return None
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


@lru_cache(maxsize=1024)
def _compile(source: str) -> Expression:
    tree = _parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        _check(node, source)
        if isinstance(node, ast.Name) and node.id not in FUNCTIONS and node.id != _GET:
            names.add(node.id)
        if _is_get(node):
            names.update(_get_names(node, source))
    return Expression(source, tree, frozenset(names))


def _check(node: ast.AST, source: str) -> None:
    allowed = isinstance(node, _STRUCTURAL) or type(node) in _BINARY or type(node) in _UNARY or type(node) in _COMPARE
    if not allowed:
        raise ExpressionError(
            f"expression {quoted(source)} uses {type(node).__name__}, which is not allowed in workflow expressions",
            expression=source,
        )
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise ExpressionError(
            f"expression {quoted(source)} reads {quoted(node.attr)}: names starting with '_' are not allowed",
            expression=source,
        )
    if isinstance(node, ast.Call):
        _check_call(node, source)


def _check_call(node: ast.Call, source: str) -> None:
    if not isinstance(node.func, ast.Name) or (node.func.id not in FUNCTIONS and node.func.id != _GET):
        allowed = ", ".join(sorted([*FUNCTIONS, _GET]))
        raise ExpressionError(
            f"expression {quoted(source)} calls {quoted(ast.unparse(node.func))}; only these functions may be called: "
            f"{allowed}",
            expression=source,
        )
    if node.keywords:
        raise ExpressionError(
            f"expression {quoted(source)}: keyword arguments are not allowed in calls", expression=source
        )


def _is_get(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == _GET


def _get_names(node: ast.AST, source: str) -> set[str]:
    assert isinstance(node, ast.Call)
    first = node.args[0] if node.args else None
    if len(node.args) not in (1, 2) or not isinstance(first, ast.Constant) or not isinstance(first.value, str):
        raise ExpressionError(
            f"expression {quoted(source)}: get() takes a path string and an optional default, e.g. "
            "get('counter.result', 0)",
            expression=source,
        )
    if not is_path(first.value):
        raise ExpressionError(
            f"expression {quoted(source)}: get() needs a context path such as 'node.field[0]', not "
            f"{quoted(first.value)}",
            expression=source,
        )
    root = _path_root(_parse(first.value).body)
    return {root} if root else set()


class _Evaluator:
    """Walks the tree, counting each operation on the evaluation's meter (by the items it copies)."""

    __slots__ = ("_context", "_meter")

    def __init__(self, context: Mapping[str, Any], meter: Meter) -> None:
        self._context = context
        self._meter = meter

    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, f"_{type(node).__name__}")
        return method(node)

    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _Name(self, node: ast.Name) -> Any:
        if node.id in ("True", "False", "None"):  # pragma: no cover - parsed as constants on 3.8+
            return {"True": True, "False": False, "None": None}[node.id]
        try:
            return self._context[node.id]
        except KeyError:
            raise _Missing(
                f"{node.id!r} is not defined (it is neither the workflow input nor a node that has run)"
            ) from None

    def _Attribute(self, node: ast.Attribute) -> Any:
        return read_key(self.eval(node.value), node.attr)

    def _Subscript(self, node: ast.Subscript) -> Any:
        value = self.eval(node.value)
        if isinstance(node.slice, ast.Slice):
            parts = [None if p is None else self.eval(p) for p in (node.slice.lower, node.slice.upper, node.slice.step)]
            return value[slice(*parts)]
        return read_key(value, self.eval(node.slice))

    def _List(self, node: ast.List) -> Any:
        return [self.eval(item) for item in node.elts]

    def _Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.eval(item) for item in node.elts)

    def _Dict(self, node: ast.Dict) -> Any:
        if any(key is None for key in node.keys):
            raise _Refused("'**' unpacking is not allowed in workflow expressions")
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        value: Any = None
        for operand in node.values:
            value = self.eval(operand)
            if bool(value) is not is_and:
                return value
        return value

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.eval(node.operand))

    def _BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.eval(node.left), self.eval(node.right)
        _check_bounds(node.op, left, right)
        self._meter.tick(weight(left, right))
        return _BINARY[type(node.op)](left, right)

    def _Compare(self, node: ast.Compare) -> Any:
        left = self.eval(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator)
            kind = type(op)
            if kind is ast.In or kind is ast.NotIn:  # charged by what they go over before they do
                self._meter.work(contains_cost(left, right))
            elif kind is not ast.Is and kind is not ast.IsNot:
                self._meter.work(compare_cost(left, right))
            if not _COMPARE[kind](left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    def _Call(self, node: ast.Call) -> Any:
        assert isinstance(node.func, ast.Name)
        if node.func.id == _GET:
            return self._get(node)
        arguments = [self.eval(arg) for arg in node.args]
        self._meter.tick(weight(*arguments))
        sorting = _COMPARING_FUNCTIONS.get(node.func.id)
        if sorting is not None and arguments:  # sorted(), max(), min(): charged by what they compare
            compared = arguments[0] if len(arguments) == 1 else arguments
            self._meter.work(sort_cost(compared, sorting=sorting))
        return FUNCTIONS[node.func.id](*arguments)

    def _get(self, node: ast.Call) -> Any:
        assert isinstance(node.args[0], ast.Constant)
        path = _compile(node.args[0].value)
        try:
            return self.eval(path._tree.body)
        except (_Missing, IndexError, TypeError):
            return self.eval(node.args[1]) if len(node.args) > 1 else None


def read_key(value: Any, key: Any) -> Any:
    """``value[key]`` for mappings and sequences, a field for Pydantic models; ``_Missing`` when absent."""
    if isinstance(value, BaseModel):
        if isinstance(key, str) and (key in type(value).model_fields or key in (value.model_extra or {})):
            return getattr(value, key)
        raise _Missing(f"{type(value).__name__} has no field {key!r}")
    if isinstance(value, Mapping):
        if key in value:
            return value[key]
        shown = ", ".join(repr(k) for k in list(value)[:10])
        raise _Missing(f"no key {key!r} (keys: {shown or 'none'})")
    if isinstance(value, list | tuple | str):
        if not isinstance(key, int):
            raise _Missing(f"cannot read {key!r} of a {type(value).__name__}; use an integer index")
        try:
            return value[key]
        except IndexError:
            raise _Missing(f"index {key} is out of range (length {len(value)})") from None
    raise _Missing(f"cannot read {key!r} of a {type(value).__name__}")


def _check_bounds(op: ast.operator, left: Any, right: Any) -> None:
    if isinstance(op, ast.Pow) and isinstance(right, int | float) and abs(right) > _MAX_EXPONENT:
        raise _Refused(f"exponent {right} is above the limit of {_MAX_EXPONENT}")
    if isinstance(op, ast.Mod) and isinstance(left, str | bytes):
        raise _Refused("'%' formatting of text is not allowed (its widths are unbounded); use '+' and str()")
    if isinstance(op, ast.Mult):
        for seq, count in ((left, right), (right, left)):
            sized = isinstance(seq, str | bytes | list | tuple) and isinstance(count, int)
            if sized and len(seq) * count > _MAX_REPEAT:
                raise _Refused(f"repetition of {len(seq) * count} items is above the limit of {_MAX_REPEAT}")
    # Bound what the operation produces, not only its operands: chained ** and * of big integers, + of long texts.
    symbol = _OPERATORS.get(type(op))
    if symbol is not None:
        check_binop(symbol, left, right)


def _round(number: Any, digits: Any = None) -> Any:
    if isinstance(digits, int) and abs(digits) > _MAX_DIGITS:
        raise _Refused(f"round() to {digits} digits is beyond the limit of {_MAX_DIGITS}")
    return round(number) if digits is None else round(number, digits)


def _where(node: str | None, field: str | None = None) -> str:
    where = f"Node {node!r}: " if node else ""
    return f"{where}field {field!r}: " if field else where
