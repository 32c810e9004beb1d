"""``python://`` tools: the :func:`pythontool` decorator and the adapter that runs decorated functions."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any, ClassVar, Final, Literal, TypeVar, get_origin, overload

from pydantic import BaseModel

from kavalai.adapters._settings import public_name
from kavalai.adapters._threads import run_in_thread
from kavalai.errors import InvalidToolURIError, ToolRegistrationError
from kavalai.kernel import (
    FIELDS_CALL,
    FunctionSchema,
    Invoker,
    LazyTool,
    ToolAdapter,
    ToolDefinition,
    ToolURI,
    code_of,
    current_call,
    function_schema,
    limit_seconds,
    qualname,
)

__all__ = ["PythonToolAdapter", "ToolOptions", "is_pythontool", "pythontool"]

F = TypeVar("F", bound=Callable[..., Any])
_FLAG = "__kavalai_tool__"


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """What ``@pythontool(...)`` recorded on a function.

    Attributes:
        description: overrides the docstring's description.
        timeout: the default timeout of a call in seconds (``None``: no limit).
        inline: run a sync function on the event loop instead of in a worker thread. Only for cheap functions
            that never block: a slow inline tool stalls every other task.
        idempotent: calling it twice with the same idempotency key has the effect of one call (it reads
            :func:`kavalai.durable.idempotency_key`): a durable run may send it again after a crash.
        on_doubt: what a durable run does with a call of it found sent without a result (``"fail"``, ``"replay"``
            or ``"ask"``; ``None``: the runner's choice, ``"fail"`` by default; see ``docs/durable.md``).
        local_types: for a function defined inside another, the types in scope where it was decorated, so that
            string annotations (``from __future__ import annotations``) naming local classes resolve.
    """

    description: str | None = None
    timeout: float | None = None
    inline: bool = False
    idempotent: bool = False
    on_doubt: Literal["fail", "replay", "ask"] | None = None
    local_types: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", limit_seconds(self.timeout, what="@pythontool timeout"))


_DEFAULT_OPTIONS: Final = ToolOptions()


@overload
def pythontool(func: F, /) -> F: ...


@overload
def pythontool(
    *,
    description: str | None = None,
    timeout: float | None = None,
    inline: bool = False,
    idempotent: bool = False,
    on_doubt: Literal["fail", "replay", "ask"] | None = None,
) -> Callable[[F], F]: ...


def pythontool(
    func: F | None = None,
    /,
    *,
    description: str | None = None,
    timeout: float | None = None,
    inline: bool = False,
    idempotent: bool = False,
    on_doubt: Literal["fail", "replay", "ask"] | None = None,
) -> F | Callable[[F], F]:
    """Mark a function as a tool that a :class:`~kavalai.FunctionKernel` may register.

    The function is returned unchanged (it stays directly callable); the decorator only records its options.
    Use it bare (``@pythontool``) or with options (``@pythontool(description=..., timeout=5, inline=True)``).
    It also marks methods (above or below ``@staticmethod``/``@classmethod``, or a bound method after the fact,
    which marks its function), callable objects and ``functools.partial`` objects.

    Args:
        func: the function, when used bare.
        description: the tool description; by default the docstring's summary and body.
        timeout: the default timeout of a call in seconds.
        inline: run a *sync* function directly on the event loop rather than in a worker thread.
        idempotent: it honours the call's idempotency key (:func:`kavalai.durable.idempotency_key`), so a durable
            run may send a call whose outcome is unknown again (see ``docs/durable.md``, the step journal).
        on_doubt: what a durable run does with a call found sent without a result, when it is not idempotent:
            ``"fail"`` (:class:`~kavalai.errors.OutcomeUnknownError`), ``"replay"`` or ``"ask"`` (the operator
            settles it: ``kavalai runs resolve``); ``None``: the runner's choice.
    """
    timeout = limit_seconds(timeout, what="@pythontool timeout")
    if on_doubt not in (None, "fail", "replay", "ask"):
        raise ValueError(f"on_doubt must be 'fail', 'replay' or 'ask', got {on_doubt!r}")
    options = ToolOptions(
        description=description, timeout=timeout, inline=inline, idempotent=idempotent, on_doubt=on_doubt
    )
    if options == _DEFAULT_OPTIONS:
        options = _DEFAULT_OPTIONS  # one object for the common case, not one per function

    def mark(target: F, depth: int = 1) -> F:
        if not isinstance(target, staticmethod | classmethod) and not callable(target):
            raise TypeError(f"@pythontool decorates a function, not {type(target).__name__}")
        marked = options
        if "<locals>" in getattr(code_of(target), "__qualname__", ""):
            marked = replace(options, local_types=_types_in_scope(sys._getframe(depth)))
        if isinstance(target, staticmethod | classmethod):
            # `@pythontool` above `@staticmethod`/`@classmethod`: mark the function the descriptor hands out.
            setattr(target.__func__, _FLAG, marked)
        try:
            setattr(target, _FLAG, marked)
        except AttributeError:
            # A bound method stores no attributes of its own; it reads them from its function.
            function = getattr(target, "__func__", None)
            if function is None:
                raise TypeError(
                    f"@pythontool cannot mark {target!r}; wrap it in a function of your own and decorate that"
                ) from None
            setattr(function, _FLAG, marked)
        return target

    return mark(func, depth=2) if func is not None else mark


def _types_in_scope(frame: FrameType) -> dict[str, Any]:
    # Only what an annotation can name (classes, generic aliases): the tool keeps no other local alive.
    return {name: value for name, value in frame.f_locals.items() if isinstance(value, type) or get_origin(value)}


def is_pythontool(func: object) -> bool:
    """Whether ``func`` was decorated with :func:`pythontool`."""
    return isinstance(getattr(func, _FLAG, None), ToolOptions)


class PythonToolAdapter(ToolAdapter):
    """Registers decorated functions as ``python://`` tools and runs them.

    Async functions are awaited; sync functions run in a worker thread (``kavalai.adapters._threads``: at most 40
    calls of an event loop at a time) unless registered ``inline``. A timed-out sync call returns at once, but its
    thread runs to the end, since Python cannot stop a thread.
    """

    scheme: ClassVar[str] = "python"

    def register(
        self,
        name: str,
        func: Callable[..., Any],
        *,
        description: str | None = None,
        timeout: float | None = None,
        inline: bool | None = None,
        replace: bool = False,
    ) -> str:
        """Publish ``func`` at ``python://name`` and return that URI.

        Its description and JSON schemas are worked out now, and every error in its signature is raised now; its
        models are built now or when it is first called (see :func:`~kavalai.kernel.function_schema`).
        """
        uri = _python_uri(name)
        options = getattr(func, _FLAG, None)
        if not isinstance(options, ToolOptions):
            raise ToolRegistrationError(
                f"Cannot register {uri}: {qualname(func)} is not decorated with @pythontool (a tool function "
                "must be decorated with @kavalai.pythontool). Add `@pythontool` above its definition (or wrap it: "
                "`pythontool(func)`).",
                uri=str(uri),
            )
        try:
            timeout = limit_seconds(timeout)
        except ValueError as exc:
            raise ToolRegistrationError(f"Cannot register {uri}: {exc}.", uri=str(uri)) from None
        schema = function_schema(
            func, uri=str(uri), description=description or options.description, local_types=options.local_types
        )
        name = str(uri)
        if not replace and name in self.registry:
            raise ToolRegistrationError(
                f"Python tool {uri.tool!r} is already registered at {name}. Choose another name, or pass "
                "replace=True to replace it.",
                uri=name,
            )
        run_inline = options.inline if inline is None else inline
        metadata: dict[str, Any] = {"function": _dotted_name(func)}
        if options.idempotent:
            metadata["idempotent"] = True
        if options.on_doubt is not None:
            metadata["on_doubt"] = options.on_doubt
        limit = timeout if timeout is not None else options.timeout
        build = functools.partial(_definition, uri, schema, func, run_inline, limit, metadata)
        if schema.deferred and schema.input_schema is not None and schema.output_schema is not None:
            # Listed from its schemas now; its models are built when it is first called or looked up.
            lazy = LazyTool(uri, schema.description, schema.input_schema, schema.output_schema, build, metadata)
            self.registry.add_lazy(lazy, replace=replace)
        else:
            self.registry.add_tool(build(), replace=replace)
        return name


def _definition(
    uri: ToolURI,
    schema: FunctionSchema,
    func: Callable[..., Any],
    inline: bool,
    timeout: float | None,
    metadata: dict[str, Any],
) -> ToolDefinition:
    return ToolDefinition(
        uri=uri,
        description=schema.description,
        input_model=schema.input_model,
        output_model=schema.output_model,
        invoke=_invoker(func, schema.is_async, inline, schema.renamed),
        wrapped=schema.wrapped,
        timeout=timeout,
        input_schema=schema.input_schema,
        output_schema=schema.output_schema,
        metadata=metadata,
    )


def _dotted_name(func: Callable[..., Any]) -> str:
    code = code_of(func)
    return f"{getattr(code, '__module__', None) or '?'}.{qualname(code)}"


def _python_uri(name: str) -> ToolURI:
    if not isinstance(name, str):
        raise ToolRegistrationError(f"A python tool name must be a string, not {type(name).__name__}.")
    if name.startswith("python://"):
        name = name.removeprefix("python://")
    elif "://" in name:
        raise ToolRegistrationError(
            f"Cannot register {name!r} as a Python tool: give a bare name ('fs.ls') or a 'python://' URI."
        )
    public_name(name, "a Python tool", "give the tool a name of your own")
    try:
        return ToolURI.parse(f"python://{name}")
    except InvalidToolURIError as exc:
        raise ToolRegistrationError(str(exc), uri=exc.uri) from exc


def _invoker(func: Callable[..., Any], is_async: bool, inline: bool, renamed: tuple[tuple[str, str], ...]) -> Invoker:
    kwargs = _kwargs_getter(renamed)
    if is_async:
        if not renamed:

            def invoke_plain(args: BaseModel) -> Awaitable[Any]:
                # The tool's own coroutine, handed back as it is: no coroutine frame of ours around it.
                # (extra="forbid": __dict__ holds exactly the fields, named as the parameters.)
                return func(**args.__dict__)  # type: ignore[no-any-return]

            setattr(invoke_plain, FIELDS_CALL, func)  # the kernel calls func itself when nothing wraps the call
            return invoke_plain

        def invoke_async(args: BaseModel) -> Awaitable[Any]:
            return func(**kwargs(args))  # type: ignore[no-any-return]

        return invoke_async
    if inline:

        async def invoke_inline(args: BaseModel) -> Any:
            raw = func(**kwargs(args))
            # A sync function that hands back an awaitable (`return client.fetch(x)`) means its result.
            return (await raw) if inspect.isawaitable(raw) else raw

        return invoke_inline

    async def invoke_in_thread(args: BaseModel) -> Any:
        call = current_call()  # its thread is counted until it returns, even after a cut ends the call
        release, uri = (call.hold(), call.uri) if call is not None else (None, None)
        raw = await run_in_thread(functools.partial(func, **kwargs(args)), release, uri)  # in a copy of the context
        return (await raw) if inspect.isawaitable(raw) else raw

    return invoke_in_thread


def _kwargs_getter(renamed: tuple[tuple[str, str], ...]) -> Callable[[BaseModel], dict[str, Any]]:
    if not renamed:
        # extra="forbid" means __dict__ holds exactly the fields, named as the parameters.
        return _instance_dict
    field_to_param = {field: param for param, field in renamed}

    def with_renames(args: BaseModel) -> dict[str, Any]:
        return {field_to_param.get(key, key): value for key, value in args.__dict__.items()}

    return with_renames


def _instance_dict(args: BaseModel) -> dict[str, Any]:
    return args.__dict__
