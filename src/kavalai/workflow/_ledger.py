"""What a run holds, against its memory budget: the latest value of each node and the run's trace.

One operation is bounded by ``max_value_size`` (:mod:`kavalai.workflow._sizes`); many visits are not, on their own:
a loop appending a long text at every visit grows a list of few items and many characters, and a trace keeping every
visit's values holds the sum of all of them. The ledger estimates (:func:`~kavalai.workflow._sizes.text_size`, an
over-estimate of the characters of a value written as text, stopping at the budget) each value a run stores and
each record its trace keeps:

- the trace keeps values while their total is under :data:`TRACE_FACTOR` x ``max_value_size``; past it, a record
  keeps its node, visit, timing, status and error, and a note of the size of what it left out;
- the latest values of the run's nodes and the trace together stay under :data:`RUN_FACTOR` x ``max_value_size``:
  past it, the run fails with :class:`~kavalai.workflow.errors.RunMemoryError` naming the node.
"""

from __future__ import annotations

from math import isfinite
from typing import Any, Final

from kavalai.workflow._result import NodeTrace
from kavalai.workflow._sizes import text_size
from kavalai.workflow.errors import RunMemoryError

__all__ = ["FLAT", "RUN_FACTOR", "SMALL", "TRACE_FACTOR", "RunLedger", "flat_size"]

#: The run's budget of values held and trace, in times ``max_value_size``.
RUN_FACTOR: Final = 64
#: The trace's budget of values, in times ``max_value_size``: past it, records keep sizes instead of values.
TRACE_FACTOR: Final = 16
#: The types of the values counted as 28 characters (with their key), a number's or a boolean's most.
SMALL: Final = frozenset({int, float, bool, type(None)})
#: The most keys of a dict sized without the general walk.
FLAT: Final = 16


class RunLedger:
    """The estimated sizes of what one run holds, checked against its budgets as each value is stored.

    Args:
        max_value_size: the workflow's ``max_value_size``.
    """

    __slots__ = ("_held", "_held_total", "_trace_total", "limit", "trace_limit")

    def __init__(self, max_value_size: int) -> None:
        self.limit = RUN_FACTOR * max_value_size
        self.trace_limit = TRACE_FACTOR * max_value_size
        self._held: dict[str, int] = {}
        self._held_total = 0
        self._trace_total = 0

    @property
    def total(self) -> int:
        """The estimated size of the values held and the trace's values."""
        return self._held_total + self._trace_total

    def hold(self, node: str, value: Any, size: int = -1) -> None:
        """Count ``value`` as the one ``node`` holds now (its earlier value let go); raise
        :class:`RunMemoryError` when the run would be over its budget. ``size``: the value's size when the caller
        has it already (:func:`flat_size` of a flat dict it copied), else -1."""
        held = self._held
        if size < 0:
            size = _size(value, self.limit)
        total = self._held_total = self._held_total + size - held.get(node, 0)
        held[node] = size
        if total + self._trace_total > self.limit:
            raise RunMemoryError(
                f"Node {node!r}: the run would hold more than {self.limit:,} characters or items in its values "
                f"and trace (64 x max_value_size); a loop probably keeps growing a value. Raise max_value_size "
                "if the workflow really needs more.",
                node=node,
                limit=self.limit,
            )

    def record(self, record: NodeTrace, inputs_size: int = -1) -> None:
        """Count ``record``'s values in the trace, or, past the trace's budget, replace them with their size.
        ``inputs_size``: the size of its inputs when the caller has it already, else -1."""
        if self._trace_total < self.trace_limit:
            # the output is the JSON form of the value the node holds now, sized as it was stored
            output, inputs = record.output, record.inputs
            held = self._held.get(record.node) if output is not None else 0
            size = _size(output, self.limit) if held is None else held
            if inputs is not None:
                size += inputs_size if inputs_size >= 0 else _size(inputs, self.limit)
            if self._trace_total + size <= self.trace_limit:
                self._trace_total += size
                return
        self._leave_out(record)

    def hold_visit(self, node: str, value: Any, record: NodeTrace, size: int, record_size: int) -> None:
        """:meth:`hold` of ``value`` (of ``size``) and :meth:`record` of ``record`` (its values of ``record_size``)
        in one: a function node's flat output, and its record holding that output and its flat inputs."""
        held = self._held
        total = self._held_total = self._held_total + size - held.get(node, 0)
        held[node] = size
        traced = self._trace_total
        if total + traced > self.limit:
            self.hold(node, value, size)  # raises, naming the node
        if traced < self.trace_limit and traced + record_size <= self.trace_limit:
            self._trace_total = traced + record_size
        else:
            self._leave_out(record)

    def _leave_out(self, record: NodeTrace) -> None:
        note = f"past the trace's budget of {self.trace_limit:,} characters: left out"
        if record.output is not None and type(record.output) not in SMALL:
            record.output = {"omitted": note, "size": _size(record.output, self.limit)}
        if record.inputs is not None:
            record.inputs = {"omitted": note, "size": _size(record.inputs, self.limit)}
        self._trace_total += 64  # the record itself


def flat_size(fields: dict[str, Any]) -> int:
    """The size the ledger counts for a flat dict of JSON values under text keys (a tool's usual output,
    ``{"result": 5}``, or a node's usual inputs): up to 16 keys, each holding a text, a finite number, a boolean or
    null; -1 for any other dict (a nan or infinite float included: it is not JSON as it is). Counted here, in one
    pass, without the general walk's checks and calls; never below :func:`text_size` of it. The keys must be texts
    (a model's fields, a node's input names; :func:`_size` checks them for any other dict)."""
    if len(fields) > FLAT:
        return -1
    total = 2 + 4 * len(fields)
    for key, item in fields.items():
        kind = type(item)
        if kind is str:
            total += len(key) + len(item) + 8
        elif kind in SMALL and (kind is not float or isfinite(item)):
            total += len(key) + 28
        else:
            return -1
    return total


def _size(value: Any, limit: int) -> int:
    """:func:`text_size` of ``value`` (stopping at ``limit``), with the common shapes counted at once: a number, a
    text, a flat dict (:func:`flat_size`)."""
    kind = type(value)
    if kind is dict:
        if not _text_keys(value):
            return text_size(value, limit)
        size = flat_size(value)
        if size < 0 and len(value) == 1:  # one key holding a flat dict (a start node's inputs, {"input": {...}})
            ((key, item),) = value.items()
            if type(item) is dict and _text_keys(item) and (size := flat_size(item)) >= 0:
                return 10 + len(key) + size  # what text_size counts for the outer dict, its key, and the inner
        return size if size >= 0 else text_size(value, limit)
    if kind in SMALL:
        return 8
    if kind is str:
        return len(value)
    return text_size(value, limit)


def _text_keys(value: dict[Any, Any]) -> bool:
    for key in value:  # noqa: SIM110 -- a loop: all() of a generator is a frame more, at every record
        if type(key) is not str:
            return False
    return True
