"""The exceptions workflows raise, a branch of kavalai's one exception tree::

    FunctionKernelException (kavalai.errors)
    └── WorkflowError                   .node (the node id, when one is involved)
        ├── WorkflowDefinitionError     the graph or its YAML is invalid; raised before any run; .field
        ├── ExpressionError             an expression or path that does not parse or cannot be evaluated; .field
        ├── NodeError                   a node failed during a run; .field, .errors; the cause is chained
        │   ├── NodeValidationError     a value that crossed a node boundary does not fit its declared type
        │   └── NodeTimeoutError        a node ran longer than its timeout; .timeout
        ├── VisitLimitError             the run visited more nodes than ``max_visits`` (a runaway loop)
        ├── RunMemoryError              the values a run holds would be over its memory budget; .limit
        └── RunTimeoutError             the whole run took longer than its timeout; .timeout

Every message names the node, the field where one applies, and the reason.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any, Final

from kavalai.errors import FunctionKernelException
from kavalai.secrets import redact

__all__ = [
    "ExpressionError",
    "NodeError",
    "NodeTimeoutError",
    "NodeValidationError",
    "RunMemoryError",
    "RunTimeoutError",
    "VisitLimitError",
    "WorkflowDefinitionError",
    "WorkflowError",
    "bounded_message",
    "quoted",
]


class WorkflowError(FunctionKernelException):
    """Base class of every workflow error.

    Attributes:
        node: the id of the node the error concerns, or ``None`` when it concerns the whole workflow.
    """

    def __init__(self, message: str, *, node: str | None = None, uri: str | None = None) -> None:
        super().__init__(bounded_message(redact(message)), uri=uri)
        self.node = node


#: The longest message a workflow error keeps, in characters; past it, the middle is cut (:func:`bounded_message`).
MAX_MESSAGE: Final = 2_000
_HEAD: Final = 1_200
_TAIL: Final = 600


#: The characters of a source (an expression, a path) an error quotes: its start and its end.
_QUOTED_HEAD: Final = 160
_QUOTED_TAIL: Final = 60


def quoted(source: str) -> str:
    """``source`` (an expression, a context path) as an error quotes it: whole (``repr``) when short, else its start
    and its end and its length, so an error about a 100 KB expression is not 100 KB (or twice that). Every message
    of the evaluation errors quotes its source through here (enumerated by
    ``tests/workflow/test_error_excerpts.py``). Masked by the secret gate before it is cut, as the whole message is
    in :func:`bounded_message`: a cut would leave part of a secret the gate no longer recognises."""
    source = redact(source)
    if len(source) <= _QUOTED_HEAD + _QUOTED_TAIL:
        return repr(source)
    return f"{source[:_QUOTED_HEAD]!r}...{source[-_QUOTED_TAIL:]!r} ({len(source):,} characters)"


def bounded_message(message: str) -> str:
    """``message`` cut to at most about :data:`MAX_MESSAGE` characters, keeping its start (the node and field) and its
    end (the reason), the one place every workflow error's message passes: an expression or a template of 100 KB
    quoted in its error (a parse error, a refused name, a failure at run time) is an excerpt, not the whole source
    once or twice. Masked by the secret gate before it is cut, so no cut leaves part of a secret."""
    if len(message) <= MAX_MESSAGE:
        return message
    cut = len(message) - _HEAD - _TAIL
    return f"{message[:_HEAD]} [... {cut:,} characters cut ...] {message[-_TAIL:]}"


def failure_text(exc: BaseException) -> str:
    """What an evaluation's foreign error (``TypeError``, ``ValueError``, ...) says in a workflow author's terms: its
    type and text, the one place every evaluation failure is worded (enumerated by
    ``tests/workflow/test_error_excerpts.py``). Python's limit on the digits of a number written as text or read
    from it (``str(10 ** 5000)``, ``int('9' * 5000)``) is told as the limit it is, not as the interpreter setting
    (``sys.set_int_max_str_digits``) a workflow file cannot change."""
    text = str(exc)
    if isinstance(exc, ValueError) and "set_int_max_str_digits" in text:
        limit = sys.get_int_max_str_digits()
        read = re.search(r"value has (\d+) digits", text)
        if read is not None:
            return f"the text has {int(read.group(1)):,} digits, too many to read as a number (the limit is {limit:,})"
        return f"the number has more than {limit:,} digits, too many to write as text (the limit is {limit:,} digits)"
    return f"{type(exc).__name__}: {text}"


class WorkflowDefinitionError(WorkflowError, ValueError):
    """The workflow definition is invalid: an unknown node, a missing type, an unreachable node, ...

    Raised by :meth:`WorkflowBuilder.build` and the YAML loader, before any run.

    Attributes:
        field: the offending field of the node or document (``"next"``, ``"output"``, ``"types.Listing"``).
    """

    def __init__(self, message: str, *, node: str | None = None, field: str | None = None) -> None:
        super().__init__(message, node=node)
        self.field = field


class ExpressionError(WorkflowError, ValueError):
    """An expression or context path that does not parse, uses something not allowed, or cannot be evaluated.

    Attributes:
        expression: the expression text.
        field: the node field holding the expression (``"condition"``, ``"inputs.path"``), when known.
    """

    def __init__(self, message: str, *, expression: str, node: str | None = None, field: str | None = None) -> None:
        super().__init__(message, node=node)
        self.expression = expression
        self.field = field


class NodeError(WorkflowError):
    """A node failed during a run; the original exception (a tool error, ...) is the ``__cause__``.

    Attributes:
        field: the input or output field at fault, when there is one.
        errors: pydantic's error list when the failure is a validation failure, else empty.
    """

    def __init__(
        self,
        message: str,
        *,
        node: str,
        field: str | None = None,
        errors: Sequence[Any] = (),
        uri: str | None = None,
    ) -> None:
        super().__init__(message, node=node, uri=uri)
        self.field = field
        self.errors = list(errors)


class NodeValidationError(NodeError, ValueError):
    """A value crossing a node boundary (a node's inputs or output, the workflow's input or output) does not
    fit its declared type."""


class NodeTimeoutError(NodeError, TimeoutError):
    """A node ran longer than its ``timeout``.

    Attributes:
        timeout: the timeout in seconds that ran out.
    """

    def __init__(self, message: str, *, node: str, timeout: float) -> None:
        super().__init__(message, node=node)
        self.timeout = timeout


class VisitLimitError(WorkflowError):
    """The run visited more nodes than its ``max_visits`` limit; usually a loop whose exit is never taken.

    Attributes:
        limit: the limit that was reached.
    """

    def __init__(self, message: str, *, node: str | None, limit: int) -> None:
        super().__init__(message, node=node)
        self.limit = limit


class RunMemoryError(WorkflowError):
    """The values a run holds (the latest output of each node and the run's trace) would be over its memory
    budget: 64 times the workflow's ``max_value_size``, in characters or items.

    Attributes:
        limit: the budget that was reached.
    """

    def __init__(self, message: str, *, node: str | None, limit: int) -> None:
        super().__init__(message, node=node)
        self.limit = limit


class RunTimeoutError(WorkflowError, TimeoutError):
    """The whole run took longer than its ``timeout``.

    Attributes:
        timeout: the run timeout in seconds.
    """

    def __init__(self, message: str, *, node: str | None, timeout: float) -> None:
        super().__init__(message, node=node)
        self.timeout = timeout
