"""The FunctionKernel: one registry for every tool kind, ``call_tool``, introspection and lifecycle."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType, UnionType
from typing import Any, Final, TypeVar, Union, cast, get_origin

from pydantic import BaseModel

from kavalai.adapters.base import ToolAdapter
from kavalai.adapters.python import PythonToolAdapter
from kavalai.errors import (
    FunctionKernelException,
    ServerConnectionError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolTimeoutError,
)
from kavalai.kernel._coerce import coerce_output, validate_input
from kavalai.kernel._definition import ToolDefinition
from kavalai.kernel._mcp_api import McpKernelMixin
from kavalai.kernel._rest_api import RestKernelMixin
from kavalai.kernel._uri import ToolURI

__all__ = ["FunctionKernel"]

logger = logging.getLogger("kavalai")

A = TypeVar("A", bound=ToolAdapter)
T = TypeVar("T")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


_UNSET: Final = _Unset()
_GLOB_CHARS: Final = frozenset("*?[")


class FunctionKernel(RestKernelMixin, McpKernelMixin):
    """Hosts Python, REST and MCP tools behind one typed calling convention.

    Every tool is addressed by a URI (``python://fs.ls``, ``rest://server.tool``, ``mcp://server.tool``) and has
    a Pydantic input and output model: :meth:`call_tool` validates the arguments, runs the tool and coerces its
    return value, so a caller always receives an instance of the tool's output model.

    Use it directly and call :meth:`close` when done, or as ``async with FunctionKernel() as kernel:``, which
    connects every registered server on entry and closes them on exit.
    """

    def __init__(self) -> None:
        self._tools: dict[str, ToolDefinition] = {}
        self._adapters: dict[str, ToolAdapter] = {}
        self._close_callbacks: list[Callable[[], Awaitable[None]]] = []
        self._python = self._adapter_for(PythonToolAdapter)

    # ----------------------------------------------------------------------------------------------- registry

    def add_tool(self, definition: ToolDefinition, *, replace: bool = False) -> None:
        """Publish a tool definition (adapters call this; see :class:`~kavalai.adapters.base.ToolRegistry`)."""
        name = definition.name
        if not replace and name in self._tools:
            raise ToolRegistrationError(
                f"A tool is already registered at {name}. Choose another name, or pass replace=True to replace it.",
                uri=name,
            )
        self._tools[name] = definition

    def remove_tool(self, uri: str) -> None:
        """Withdraw the tool at ``uri``; nothing happens if there is none."""
        self._tools.pop(str(uri), None)

    def on_close(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` on every :meth:`close` (for resources that tools open lazily, such as an HTTP
        session of a bundled tool group). Callbacks run after the adapters close, newest first."""
        self._close_callbacks.append(callback)

    def _adapter_for(self, cls: type[A]) -> A:
        adapter = self._adapters.get(cls.scheme)
        if adapter is None:
            adapter = cls(self)
            self._adapters[cls.scheme] = adapter
        if not isinstance(adapter, cls):  # pragma: no cover - one adapter class per scheme
            raise TypeError(f"the {cls.scheme}:// adapter is a {type(adapter).__name__}, not a {cls.__name__}")
        return adapter

    # ---------------------------------------------------------------------------------------------- python://

    def register_python_tool(
        self,
        name: str,
        func: Callable[..., Any],
        *,
        description: str | None = None,
        timeout: float | None = None,
        inline: bool | None = None,
        replace: bool = False,
    ) -> str:
        """Register a :func:`~kavalai.pythontool` function as ``python://<name>`` and return that URI.

        Args:
            name: the tool name, dots allowed (``"fs.ls"``); a ``python://`` prefix is accepted.
            func: a function decorated with ``@pythontool``.
            description: overrides the decorator's and the docstring's description.
            timeout: overrides the decorator's default timeout, in seconds.
            inline: overrides the decorator's ``inline`` switch for a sync function.
            replace: replace a tool already registered under this name instead of raising.

        Raises:
            ToolRegistrationError: an undecorated function, a duplicate name, ``*args``/``**kwargs`` or
                positional-only parameters, a generator function, type hints that do not resolve or that pydantic
                cannot build a model from, or a timeout that is not a positive number of seconds.
        """
        definition = self._python.register(
            name, func, description=description, timeout=timeout, inline=inline, replace=replace
        )
        return definition.name

    # ------------------------------------------------------------------------------------------------ calling

    async def call_tool(
        self,
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        timeout: float | _Unset | None = _UNSET,
    ) -> BaseModel:
        """Call the tool at ``uri`` and return its validated output model instance.

        Args:
            uri: the tool's URI, e.g. ``"python://fs.ls"``.
            arguments: the arguments, validated and coerced by the tool's input model (an instance of that
                model, or of any model whose fields fit, is accepted too).
            timeout: seconds before :class:`~kavalai.errors.ToolTimeoutError`; ``None`` for no limit. By default
                the tool's own timeout applies.

        Returns:
            An instance of the tool's output model; for wrapped return values read ``.result``. Under a type
            checker, :meth:`call_tool_as` gives the output (or its ``.result``) as the type you name.

        Raises:
            InvalidToolURIError, ToolNotFoundError, ToolInputError, ToolExecutionError, ToolTimeoutError,
            ToolOutputError, ServerConnectionError: all subclasses of FunctionKernelException naming the URI.
        """
        definition = self._tools.get(uri) if isinstance(uri, str) else None
        if definition is None:
            definition = await self.resolve_tool(uri)
        args = validate_input(definition, arguments)
        limit = definition.timeout if isinstance(timeout, _Unset) else timeout
        try:
            if limit is None:
                raw = await definition.invoke(args)
            else:
                raw = await _invoke_with_timeout(definition, args, limit)
        except FunctionKernelException:
            raise
        except Exception as exc:
            raise ToolExecutionError(
                f"Tool {definition.name} failed: {type(exc).__name__}: {exc}", uri=definition.name
            ) from exc
        return coerce_output(definition, raw)

    async def call_tool_as(
        self,
        output_type: type[T],
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        timeout: float | _Unset | None = _UNSET,
    ) -> T:
        """Like :meth:`call_tool`, but return the output as ``output_type``, for code under a type checker.

        ``call_tool`` returns ``BaseModel``, since each tool's output model is only known at run time. Name the type
        you expect instead: the output model itself for a tool that returns a model, or the type of ``.result`` for
        one whose return value is wrapped::

            entry = await kernel.call_tool_as(Entry, "python://fs.stat", {"name": "a.txt"})  # Entry
            names = await kernel.call_tool_as(list[str], "python://fs.ls", {"path": "."})  # list[str]
            total = await kernel.call_tool_as(int, "python://math.add", {"a": 1, "b": 2})  # int

        The value is checked with ``isinstance`` against ``output_type`` (against ``list`` for ``list[str]``);
        the check does not look inside containers, which the output model has already validated.

        Raises:
            TypeError: the output is not an ``output_type``; the message names the tool and what it returned.
            FunctionKernelException: as :meth:`call_tool`.
        """
        definition = await self.resolve_tool(uri)
        output = await self.call_tool(definition.name, arguments, timeout=timeout)
        if _is_a(output, output_type):
            return cast(T, output)
        if definition.wrapped:
            value = getattr(output, "result", None)
            if _is_a(value, output_type):
                return cast(T, value)
            got = f"{type(value).__name__} (at .result of {type(output).__name__})"
        else:
            got = type(output).__name__
        raise TypeError(
            f"Tool {definition.name} returned {got}, not {_type_name(output_type)}: "
            "name the output model, or the type of its .result, in call_tool_as."
        )

    # ---------------------------------------------------------------------------------------- introspection

    def list_tools(self, pattern: str | None = None) -> list[str]:
        """The URIs of the tools registered now, sorted; cheap and synchronous (it connects nothing).

        Args:
            pattern: an optional glob such as ``"python://fs.*"``.
        """
        if pattern is None:
            return sorted(self._tools)
        return sorted(name for name in self._tools if fnmatch.fnmatchcase(name, pattern))

    def has_tool(self, uri: str | ToolURI) -> bool:
        """Whether a tool is registered at ``uri`` now (no connecting)."""
        return str(uri) in self._tools

    def get_tool_definition(self, uri: str | ToolURI) -> ToolDefinition:
        """The definition of the tool at ``uri``: URI, kind, description, input and output models and schemas.

        Synchronous: tools of MCP servers that are not connected yet are not known here; use
        :meth:`resolve_tool` (which connects on demand) or connect first.
        """
        definition = self._tools.get(str(uri))
        if definition is None:
            raise self._not_found(ToolURI.parse(uri))
        return definition

    async def resolve_tool(self, uri: str | ToolURI) -> ToolDefinition:
        """Like :meth:`get_tool_definition`, but connects the tool's server first when it is not connected."""
        parsed = ToolURI.parse(uri)
        definition = self._tools.get(str(parsed))
        if definition is not None:
            return definition
        adapter = self._adapters.get(parsed.scheme)
        if adapter is not None:
            definition = await adapter.resolve(parsed)
            if definition is not None:
                return definition
        raise self._not_found(parsed)

    def get_input_model(self, uri: str | ToolURI) -> type[BaseModel]:
        """The Pydantic model a call's arguments are validated into."""
        return self.get_tool_definition(uri).input_model

    def get_output_model(self, uri: str | ToolURI) -> type[BaseModel]:
        """The Pydantic model a call's return value is coerced into."""
        return self.get_tool_definition(uri).output_model

    async def get_tool_descriptions(self, allowed_tools: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Describe the tools for a model: ``[{"name", "description", "inputSchema", "outputSchema"}, ...]``.

        Connects any registered server that is not connected yet, so no tool is invisible. A server that cannot be
        reached does not hide the others: its tools are left out and the failure is logged as a warning on the
        ``kavalai`` logger (call :meth:`connect` or ``connect_mcp_servers()`` to have it raised instead).

        Args:
            allowed_tools: ``None`` for every tool; otherwise exact URIs and globs (``"python://fs.*"``,
                ``"mcp://github.*"``, ``"*"``). ``[]`` allows nothing. An exact URI that names no tool raises
                :class:`~kavalai.errors.ToolNotFoundError`.
        """
        if allowed_tools is not None and not allowed_tools:
            return []
        await self._connect_what_can()
        names = self.select_tools(allowed_tools)
        return [self._tools[name].describe() for name in names]

    def select_tools(self, allowed_tools: Sequence[str] | None) -> list[str]:
        """The registered URIs that ``allowed_tools`` (exact URIs and globs, as in :meth:`get_tool_descriptions`)
        admits, sorted. Connects nothing."""
        if allowed_tools is None:
            return sorted(self._tools)
        if isinstance(allowed_tools, str):
            raise TypeError("allowed_tools takes a list of URIs or globs, not a single string")
        selected: set[str] = set()
        for entry in allowed_tools:
            if entry in self._tools:
                selected.add(entry)
            elif _GLOB_CHARS.intersection(entry):
                selected.update(name for name in self._tools if fnmatch.fnmatchcase(name, entry))
            else:
                raise self._not_found(ToolURI.parse(entry))
        return sorted(selected)

    def _not_found(self, uri: ToolURI) -> ToolNotFoundError:
        import difflib  # only an error path needs it

        name = str(uri)
        suggestions = difflib.get_close_matches(name, list(self._tools), n=3, cutoff=0.6)
        message = f"Unknown tool {name!r}."
        adapter = self._adapters.get(uri.scheme)
        hint = adapter.missing_hint(uri) if adapter is not None else None
        if hint:
            message = f"{message} {hint}"
        if suggestions:
            message = f"{message} Did you mean {suggestions[0]!r}?"
        return ToolNotFoundError(message, uri=name, suggestions=suggestions)

    # ---------------------------------------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        """Connect every registered server that is not connected yet (MCP servers start here)."""
        for adapter in list(self._adapters.values()):
            await adapter.connect()

    async def _connect_what_can(self) -> None:
        for adapter in list(self._adapters.values()):
            try:
                await adapter.connect()
            except ServerConnectionError as exc:
                logger.warning("Tools of unreachable servers are left out of the tool descriptions: %s", exc)

    async def close(self) -> None:
        """Close every session, process and task the kernel holds. Idempotent; the kernel reconnects on next use."""
        errors: list[BaseException] = []
        closers = [adapter.aclose for adapter in self._adapters.values()] + self._close_callbacks[::-1]
        for closer in closers:
            try:
                await closer()
            except Exception as exc:  # close the others before reporting
                errors.append(exc)
        for extra in errors[1:]:
            logger.warning("Another error while closing the kernel: %r", extra)
        if errors:
            raise errors[0]

    async def aclose(self) -> None:
        """Alias of :meth:`close`."""
        await self.close()

    async def __aenter__(self) -> FunctionKernel:
        try:
            await self.connect()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        kinds = ", ".join(f"{scheme}={n}" for scheme, n in _count_by_scheme(self._tools).items())
        return f"<FunctionKernel tools: {kinds or 'none'}>"


async def _invoke_with_timeout(definition: ToolDefinition, args: BaseModel, limit: float) -> Any:
    # asyncio.timeout rather than an anyio cancel scope: the same guarantees at a tenth of the cost per call.
    scope = asyncio.timeout(limit)
    try:
        async with scope:
            raw = await definition.invoke(args)
    except TimeoutError:
        if not scope.expired():
            raise  # the tool's own TimeoutError: an execution error, not ours
        raise _timed_out(definition, limit) from None
    if scope.expired():  # the tool caught the cancellation and returned anyway: still too late
        raise _timed_out(definition, limit)
    return raw


def _timed_out(definition: ToolDefinition, limit: float) -> ToolTimeoutError:
    return ToolTimeoutError(f"Tool {definition.name} timed out after {limit:g} s.", uri=definition.name, timeout=limit)


def _is_a(value: object, expected: Any) -> bool:
    origin = get_origin(expected)
    target = expected if origin is None or origin is Union or origin is UnionType else origin
    try:
        return isinstance(value, target)
    except TypeError:
        raise TypeError(f"call_tool_as checks the output with isinstance, which cannot check {expected!r}") from None


def _type_name(expected: Any) -> str:
    return expected.__name__ if isinstance(expected, type) else repr(expected)


def _count_by_scheme(names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        scheme = name.split("://", 1)[0]
        counts[scheme] = counts.get(scheme, 0) + 1
    return counts
