"""Tool calls, model calls and other work as journaled steps, and the idempotency key each tool call carries.

:func:`durable_steps` is the kernel middleware: inside a durable run every call becomes one step of the run's journal.
The step's idempotency key (run id, step identity, hash of the arguments) is put in ``call.metadata["idempotency_key"]``
before the tool runs, where the REST adapter sends it as the ``Idempotency-Key`` header, the MCP adapter in the
request's ``_meta``, and a Python tool reads it (:func:`idempotency_key`). The result crosses the journal as JSON:
validated by the tool's output model before it is recorded, and again by the kernel when it is returned, replayed or
fresh. A failure is journaled too (as its type, message and fields), so a resumed run takes the same path.

:func:`step` journals anything else (a model call, the tool listing at the start of a run, an approval) the same
way, given how to write its result as JSON and read it back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, TypeVar

from kavalai.durable._run import DurableRun, current_run
from kavalai.errors import FunctionKernelException, KernelClosedError, ToolExecutionError, ToolOutputError
from kavalai.kernel import CallNext, Kernel, Middleware, ToolCall, ToolDefinition, coerce_output, current_call

__all__ = [
    "DurableStepError",
    "check_server_doubt",
    "durable_steps",
    "guarded",
    "idempotency_key",
    "is_durable_middleware",
    "retry_allowed",
    "run_tool_step",
    "step",
    "step_context",
]

T = TypeVar("T")

#: Where the middleware puts a call's idempotency key, and where the REST and MCP adapters look for it.
IDEMPOTENCY_KEY: Final = "idempotency_key"

_preset_key: ContextVar[str | None] = ContextVar("kavalai_durable_preset_key", default=None)
_context: ContextVar[Mapping[str, Any] | None] = ContextVar("kavalai_durable_step_context", default=None)


class DurableStepError(FunctionKernelException):
    """A journaled step failed with an exception that is not a kavalai error; replayed, it is raised as this,
    with the original type's name in :attr:`error_type`."""

    def __init__(self, message: str, *, error_type: str, uri: str | None = None) -> None:
        super().__init__(message, uri=uri)
        self.error_type = error_type


def durable_steps(kernel: Kernel | None = None) -> Middleware:
    """The middleware that journals every call made inside a durable run (outside one it only passes the call on).

    A runner adds it to the kernels it runs on (see :meth:`kavalai.durable.DurableRunner.attach`); put it last, so
    that tracing and policies outside it run in every attempt, and only the tool itself is skipped on replay.
    Given its ``kernel``, it checks a server's doubt policy the first time a durable run calls one of its tools
    (:func:`check_server_doubt`): a ``tools_on_doubt`` key naming no tool, registered in Python after the server,
    is refused there, before anything is sent.
    """
    checked: set[tuple[str, str]] = set()

    async def durable(call: ToolCall, call_next: CallNext) -> Any:
        run = current_run()
        if run is None:
            key = _preset_key.get()
            if key is not None:  # a step run again elsewhere (a Temporal activity): the key of its step
                call.metadata[IDEMPOTENCY_KEY] = key
            return await call_next(call)
        name = call.definition.metadata.get("server")
        if kernel is not None and isinstance(name, str) and (call.definition.kind, name) not in checked:
            check_server_doubt(kernel, call.definition.kind, name)
            checked.add((call.definition.kind, name))
        return await _journaled_call(run, call, call_next)

    durable.__kavalai_durable__ = True  # type: ignore[attr-defined]
    return durable


def check_server_doubt(kernel: Kernel, kind: str, server: str) -> None:
    """Check the doubt policy of ``server`` (of the tool kind ``kind``) against its tools as registered now, when
    its adapter has such a check (REST: ``tools_on_doubt`` names only its tools).

    Raises:
        DoubtKeyError: a key names no tool of the server (a :class:`~kavalai.errors.ConfigurationError` naming it,
            with a close name).
    """
    try:
        adapter = kernel.adapter(kind)
    except FunctionKernelException:  # a kind no adapter serves: nothing to check
        return
    check = getattr(adapter, "check_doubt_keys", None)
    if check is not None:
        check(server)


def is_durable_middleware(middleware: object) -> bool:
    """Whether ``middleware`` is one made by :func:`durable_steps`."""
    return getattr(middleware, "__kavalai_durable__", False) is True


async def _journaled_call(run: DurableRun, call: ToolCall, call_next: CallNext) -> Any:
    definition = call.definition
    arguments = call.arguments.model_dump(mode="json", by_alias=True, exclude_unset=True)
    name = f"tool {definition.name}"
    key = call.metadata[IDEMPOTENCY_KEY] = run.next_key({"tool": definition.name, "arguments": arguments}, name)
    request = {
        "kind": "tool",
        "uri": definition.name,
        "arguments": arguments,
        "key": key,
        "retry": retry_allowed(definition),
        "on_doubt": definition.metadata.get("on_doubt"),
        "origin": definition.metadata.get("origin"),  # where its effect goes: a resume elsewhere is in doubt
        "wrapped": definition.wrapped,
        "timeout": definition.timeout,
    }

    async def execute() -> Any:
        try:
            raw = await call_next(call)
            output = coerce_output(definition, raw)  # validated before it is recorded...
            data = output.model_dump(mode="json", by_alias=True)
        except (asyncio.CancelledError, KernelClosedError):
            raise  # not a fact of the run: the step is not recorded, and runs again on resume
        except FunctionKernelException as exc:
            return {"error": error_envelope(exc)}
        except Exception as exc:
            if type(exc).__name__ == "PydanticSerializationError":
                failure: FunctionKernelException = ToolOutputError(
                    f"Tool {definition.name} returned a value a durable run cannot journal as JSON: {exc}",
                    uri=definition.name,
                )
            else:  # what the kernel itself would raise for a tool's own exception
                failure = ToolExecutionError(
                    f"Tool {definition.name} failed: {type(exc).__name__}: {exc}", uri=definition.name
                )
            return {"error": error_envelope(failure)}
        return {"ok": data}

    recorded = await run.step(name, execute, request=request)
    if "error" in recorded:
        raise restore_error(recorded["error"])
    data = recorded["ok"]
    # ...and again by the kernel, after this returns: a wrapped output is handed back as its bare value.
    return data.get("result") if definition.wrapped and isinstance(data, dict) else data


async def step(
    name: str,
    execute: Callable[[], Awaitable[T]],
    *,
    dump: Callable[[T], Any],
    load: Callable[[Any], T],
    request: Callable[[], Any] | None = None,
) -> T:
    """Run ``execute`` as one journaled step of the current durable run, or just run it outside one.

    Args:
        name: what the step is (``"model openai/gpt-4.1"``, ``"tools"``), recorded with it.
        execute: the work.
        dump: the result as JSON-ready data, for the journal.
        load: the result back from that data (validated: a replayed result is checked like a fresh one).
        request: makes the step as JSON, for engines that run steps in another process (the target's
            ``execute_step`` redoes it there); called only inside a durable run.

    An exception ``execute`` raises is journaled (type, message, fields) and raised again, on replay as well: a
    kavalai error as its own class, another exception as :class:`DurableStepError`.
    """
    run = current_run()
    if run is None:
        return await execute()

    async def journaled() -> Any:
        return await guarded(execute, dump)

    made = None
    if request is not None:
        made = request()
        context = _context.get()
        if context is not None and isinstance(made, dict):
            made = {**made, **context}
    recorded = await run.step(name, journaled, request=made)
    if "error" in recorded:
        raise restore_error(recorded["error"])
    return load(recorded["ok"])


@contextmanager
def step_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to the JSON request of every :func:`step` begun inside the ``with`` block, so the target that
    redoes a step elsewhere (a Temporal activity) knows where it came from: a workflow's agent node marks its
    agent's steps with ``node=<id>``."""
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


async def run_tool_step(kernel: Kernel, request: Mapping[str, Any]) -> Any:
    """Redo a tool step from its request (a Temporal activity): the call with the step's idempotency key; the
    result as the journal holds it (``{"ok": ...}`` or ``{"error": ...}``)."""
    token = _preset_key.set(str(request["key"]))
    try:
        output = await kernel.call_tool(str(request["uri"]), request.get("arguments") or {})
        return {"ok": output.model_dump(mode="json", by_alias=True)}
    except KernelClosedError:
        raise
    except FunctionKernelException as exc:
        return {"error": error_envelope(exc)}
    finally:
        _preset_key.reset(token)


async def guarded(execute: Callable[[], Awaitable[T]], dump: Callable[[T], Any]) -> Any:
    """``{"ok": dump(await execute())}``, or ``{"error": ...}`` for an exception: a step's result as journaled."""
    try:
        return {"ok": dump(await execute())}
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return {"error": error_envelope(exc)}


#: The HTTP methods whose repetition has the effect of one call (RFC 9110): a REST tool using one may be retried.
_IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


def retry_allowed(definition: ToolDefinition) -> bool:
    """Whether an engine may run a tool step again after an attempt whose outcome is unknown (its worker died,
    it timed out): when the tool says it is read-only or idempotent (``metadata`` ``read_only``/``idempotent``, the
    MCP tool's ``annotations`` ``readOnlyHint``/``idempotentHint`` as its server listed them, an OpenAPI operation's
    ``x-idempotent: true``, an idempotent HTTP method unless its operation says ``x-idempotent: false``), when its
    OpenAPI operation documents the ``Idempotency-Key`` header (its server tells repeats apart by it), or when it
    carries the step's idempotency key to the other side (REST as ``Idempotency-Key``, MCP in ``_meta``), so that
    side can tell a repeat, and its server was given no ``on_doubt`` policy (a server with one does not honour the
    key). A Python tool is retried only when it says so: it may read the key, but nothing shows
    that it does."""
    metadata = definition.metadata
    if metadata.get("read_only") or metadata.get("idempotent"):
        return True
    if any(hints.get("readOnlyHint") or hints.get("idempotentHint") for hints in _annotations(metadata)):
        return True
    if definition.kind == "rest" and metadata.get("honours_key"):  # its OpenAPI operation documents the key header
        return True
    method = metadata.get("method") or metadata.get("qualifier") or ""
    said = metadata.get("idempotent") is not False  # an OpenAPI operation's x-idempotent: false is taken at its word
    if definition.kind == "rest" and said and str(method).upper() in _IDEMPOTENT_METHODS:
        return True
    return definition.kind in ("rest", "mcp") and metadata.get("on_doubt") is None


def _annotations(metadata: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A tool's MCP annotations: the ones its server listed (``metadata["listed"]["annotations"]``, how the MCP
    adapter keeps them) and any given as ``metadata["annotations"]``."""
    listed = metadata.get("listed")
    found = [listed.get("annotations") if isinstance(listed, Mapping) else None, metadata.get("annotations")]
    return [hints for hints in found if isinstance(hints, Mapping)]


def idempotency_key() -> str | None:
    """The idempotency key of the tool call running now (in a tool, or what it awaits), or ``None`` when the call
    has none: it is not part of a durable run, and no middleware gave it one."""
    call = current_call()
    if call is None:
        return None
    key = call.metadata.get(IDEMPOTENCY_KEY)
    return key if isinstance(key, str) else None


# ------------------------------------------------------------------------------------------------- errors as JSON


def error_envelope(exc: BaseException) -> dict[str, Any]:
    """An exception as JSON: its class (module and name), message and JSON-ready fields."""
    from pydantic_core import to_jsonable_python

    fields: dict[str, Any] = {}
    if isinstance(exc, FunctionKernelException):
        for name, value in vars(exc).items():
            if name.startswith("_") or name == "message":
                continue
            try:
                fields[name] = to_jsonable_python(value, fallback=str)
            except Exception:  # a field that is not data: left out
                continue
    cls = type(exc)
    return {"type": f"{cls.__module__}:{cls.__qualname__}", "message": str(exc), "fields": fields}


def restore_error(envelope: dict[str, Any]) -> FunctionKernelException:
    """The exception a journaled error stands for: the kavalai error class it was, with its fields, or a
    :class:`DurableStepError` naming a foreign type."""
    type_name = str(envelope.get("type", ""))
    message = str(envelope.get("message", ""))
    fields = envelope.get("fields") or {}
    cls = _kavalai_error_class(type_name)
    if cls is None:
        return DurableStepError(
            f"{type_name.rpartition(':')[2] or 'Error'}: {message}", error_type=type_name, uri=fields.get("uri")
        )
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.message = message
    error.uri = None
    for name, value in fields.items():
        setattr(error, name, value)
    return error


def _kavalai_error_class(type_name: str) -> type[FunctionKernelException] | None:
    module, _, qualname = type_name.partition(":")
    if not module.startswith("kavalai"):
        return None
    pending: list[type[FunctionKernelException]] = [FunctionKernelException]
    while pending:  # every loaded subclass, by module and name: no import of the module named in the journal
        cls = pending.pop()
        if cls.__module__ == module and cls.__qualname__ == qualname:
            return cls
        pending.extend(cls.__subclasses__())
    return None
