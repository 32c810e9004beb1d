"""The leaf kernel: the one registry, adapters plugged in by scheme, the middleware chain, ``call_tool``, lifecycle.

:class:`Kernel` knows no tool kind. Adapters (``python://``, ``rest://``, ``mcp://``, or one of your own) are
plugged in by scheme; cross-cutting concerns wrap every call as middleware. :class:`kavalai.FunctionKernel` is this
class plus the seed's registration methods for the three built-in kinds.
"""

from __future__ import annotations

import asyncio
import contextvars
import fnmatch
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar, overload

from pydantic import BaseModel

from kavalai.errors import (
    DeadlineExceededError,
    FunctionKernelException,
    InvalidToolURIError,
    KernelClosedError,
    ServerConnectionError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from kavalai.kernel._adapter import ToolAdapter
from kavalai.kernel._call import (
    Deadline,
    Middleware,
    ProgressCallback,
    ToolCall,
    _current,
    arm_own_limit,
    calls_around,
    open_scope,
)
from kavalai.kernel._cancel import _running_loop, _task_of
from kavalai.kernel._closing import Closing, close_wait, end_calls_in_flight, wait_for_threads
from kavalai.kernel._coerce import PLAIN, coerce_output, convert_output, input_failed, output_failed, validate_input
from kavalai.kernel._cuts import cancellation as _cancellation
from kavalai.kernel._cuts import cut_error as _cut_error
from kavalai.kernel._definition import ToolDefinition
from kavalai.kernel._descriptions import ToolDescriptions
from kavalai.kernel._registry import ToolRegistry
from kavalai.kernel._seconds import MAX_SECONDS, limit_seconds
from kavalai.kernel._tasks import ToolTask
from kavalai.kernel._uri import ToolURI
from kavalai.secrets import get_logger

__all__ = ["Kernel"]

logger = get_logger("kavalai")

T = TypeVar("T")
K = TypeVar("K", bound="Kernel")
AdapterFactory = Callable[[ToolRegistry], ToolAdapter]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


_UNSET: Final = _Unset()
_GLOB_CHARS: Final = frozenset("*?[")


_new_call: Final = object.__new__


class Kernel:
    """Tools of every kind behind one typed calling convention: the core of :class:`~kavalai.FunctionKernel`.

    Args:
        middleware: middleware to wrap every call, outermost first (see :meth:`add_middleware`).
    """

    def __init__(self, *, middleware: Sequence[Middleware] = ()) -> None:
        self.registry = ToolRegistry()
        # The hot path reads the built tools' dict itself (one look-up per call); a miss, a lazily published tool
        # among them, goes through registry.get().
        self._tools = self.registry._tools
        self._adapters: dict[str, ToolAdapter] = {}
        self._factories: dict[str, AdapterFactory] = {}
        self._eager: set[str] = set()  # factories built at the first connect or listing, not only on use
        self._close_callbacks: list[Callable[[], Awaitable[None]]] = []
        self._middleware: list[Middleware] = []
        self._chain: Callable[[ToolCall], Awaitable[Any]] | None = None
        # The in-flight registry: every call running now, on any loop or thread; call_tool adds and removes its own.
        self._inflight: set[ToolCall] = set()
        # Calls that have ended (cut) while a worker thread of theirs runs on: see threads_in_flight().
        self._lingering: set[ToolCall] = set()
        # Started by start_tool and still running: held here (a task nobody holds may be collected) for close().
        self._tool_tasks: set[ToolTask] = set()
        # The close() running now: a call that starts meanwhile is refused (KernelClosedError); after close()
        # returns the kernel works again, reconnecting on next use. The hot path reads its marks only.
        self._closer = Closing()
        self._closing = self._closer.marks
        for item in middleware:
            self.add_middleware(item)

    # ---------------------------------------------------------------------------------------------- adapters

    def add_adapter(
        self, adapter: ToolAdapter | AdapterFactory, *, scheme: str | None = None, lazy: bool = False
    ) -> None:
        """Plug in the adapter of a scheme: an instance built on :attr:`registry`, or a factory taking the registry
        (an adapter class, or any callable) that the kernel calls to build it (give ``scheme`` then, or set
        ``scheme`` on the factory).

        A factory's adapter is built when the scheme is first needed: a URI of the scheme is called, resolved or
        looked up, or the kernel connects or describes its tools. With ``lazy=True`` only a URI of the scheme
        builds it (the built-in ``rest://`` and ``mcp://`` adapters, whose libraries are imported then).

        Raises:
            ValueError: another adapter already serves that scheme, or the scheme is not given.
        """
        name = scheme or getattr(adapter, "scheme", None)
        if not isinstance(name, str) or not name:
            raise ValueError("add_adapter needs the scheme: set `scheme` on the adapter class or pass scheme=...")
        if name in self._adapters or name in self._factories:
            raise ValueError(f"An adapter for {name}:// is already plugged into this kernel.")
        if isinstance(adapter, ToolAdapter):
            if adapter.registry is not self.registry:
                raise ValueError(f"The {name}:// adapter was built on another registry: build it on kernel.registry.")
            self._adapters[name] = adapter
        elif callable(adapter):
            self._factories[name] = adapter
            if not lazy:
                self._eager.add(name)
        else:
            raise TypeError(f"add_adapter takes a ToolAdapter or a factory of one, not {type(adapter).__name__}")

    def adapter(self, scheme: str) -> ToolAdapter:
        """The adapter of ``scheme``, created now if it was plugged in as a factory.

        Raises:
            InvalidToolURIError: no adapter serves that scheme.
            TypeError: the factory did not build a ToolAdapter on this kernel's registry.
        """
        found = self._adapters.get(scheme)
        if found is not None:
            return found
        factory = self._factories.get(scheme)
        if factory is None:
            raise InvalidToolURIError(
                f"Invalid tool URI scheme {scheme!r}: unknown scheme {scheme!r}; {self._handled()}."
            )
        created = factory(self.registry)
        if not isinstance(created, ToolAdapter) or created.registry is not self.registry:
            raise TypeError(
                f"The factory of the {scheme}:// adapter must return a ToolAdapter built on the registry it is given, "
                f"not {type(created).__name__}."
            )
        del self._factories[scheme]
        self._eager.discard(scheme)
        self._adapters[scheme] = created
        return created

    def _build_eager_adapters(self) -> None:
        """Build the adapters plugged in as (non-lazy) factories that are not built yet."""
        for scheme in list(self._eager):
            self.adapter(scheme)

    @property
    def schemes(self) -> list[str]:
        """The schemes this kernel serves, sorted."""
        return sorted({*self._adapters, *self._factories})

    # -------------------------------------------------------------------------------------------- middleware

    def add_middleware(self, middleware: Middleware) -> None:
        """Wrap every later call in ``middleware``: ``async def mw(call, call_next) -> raw value``.

        Middleware run in the order added, the first added outermost: it sees the call first and the raw result
        last. Arguments are validated before the chain; the raw value it returns is coerced after it.
        """
        if not callable(middleware):
            raise TypeError(f"A middleware is an async callable (call, call_next), not {type(middleware).__name__}")
        self._middleware.append(middleware)
        self._chain = _compose(self._middleware)

    @property
    def middleware(self) -> tuple[Middleware, ...]:
        """The middleware around every call, outermost first."""
        return tuple(self._middleware)

    # ---------------------------------------------------------------------------------------------- registry

    def add_tool(self, definition: ToolDefinition, *, replace: bool = False) -> None:
        """Publish a tool definition into the registry (adapters usually do this themselves)."""
        self.registry.add_tool(definition, replace=replace)

    def remove_tool(self, uri: str | ToolURI) -> bool:
        """Withdraw the tool at ``uri`` through the adapter that owns it, so that it is neither listed nor callable
        any more. Return whether there was such a tool."""
        name = str(uri)
        if name not in self.registry:
            return False
        adapter = self._adapters.get(name.split("://", 1)[0])
        if adapter is None:
            return self.registry.remove_tool(name) is not None
        return adapter.remove_tool(name)

    def on_close(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` on every :meth:`close` (for resources that tools open lazily, such as an HTTP
        session of a bundled tool group). Callbacks run after the adapters close, newest first."""
        self._close_callbacks.append(callback)

    # ------------------------------------------------------------------------------------------------ calling

    @overload
    async def call_tool(
        self,
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        timeout: float | _Unset | None = _UNSET,
        method: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> BaseModel: ...

    @overload
    async def call_tool(
        self,
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        output_type: type[T],
        timeout: float | _Unset | None = _UNSET,
        method: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> T: ...

    async def call_tool(
        self,
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        output_type: Any = None,
        timeout: float | _Unset | None = _UNSET,
        method: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """Call the tool at ``uri`` and return its validated output.

        Args:
            uri: the tool's URI, e.g. ``"python://fs.ls"``.
            arguments: the arguments, validated and coerced by the tool's input model (an instance of that
                model, or of any model whose fields fit, is accepted too).
            output_type: a type to validate the output into and return instead of the output model: your own
                model, or a type such as ``list[Todo]`` or ``int`` (for a tool whose return value is wrapped, its
                ``.result`` is what is validated). Type checkers see the call return this type.
            timeout: seconds before :class:`~kavalai.errors.ToolTimeoutError`; ``None`` for no limit. By default
                the tool's own timeout applies.
            method: the same as a `` [METHOD]`` suffix on the URI, as Kaval.AI 1.0 wrote ``rest://`` calls: the
                HTTP method of the REST tool meant, or of an ad-hoc call of ``<server url>/<tool>`` when no such
                tool is registered. Schemes whose adapter gives it no meaning refuse it.
            progress: ``callback(progress, total, message)``, sync or async, called as the tool reports progress:
                an MCP server's progress notifications, a Python tool's ``current_call().report_progress(...)``.

        Returns:
            An instance of the tool's output model (for wrapped return values read ``.result``), or the output
            validated into ``output_type``.

        Raises:
            InvalidToolURIError, ToolNotFoundError, ToolInputError, ToolExecutionError, ToolTimeoutError,
            ToolOutputError, ServerConnectionError, KernelClosedError: all subclasses of FunctionKernelException
            naming the URI.
            ValueError: ``timeout`` is not ``None`` nor a positive number of seconds (one above a year is
                clamped to :data:`~kavalai.kernel.MAX_SECONDS`, see :func:`~kavalai.kernel.limit_seconds`).
        """
        definition = self._tools.get(uri) if type(uri) is str and method is None else None
        if definition is None:
            if method is not None:
                uri = f"{ToolURI.parse(uri).without_qualifier()} [{method}]"
            if self._closing:  # before resolving, which may connect a server that close() is closing
                raise KernelClosedError(f"The kernel is closing: {uri} was not started.", uri=str(uri))
            definition = await self._resolve_for_call(uri, timeout)
        if type(arguments) is dict:  # validate_input's common case, inlined
            try:
                args = definition._validate_in(arguments)
            except Exception as exc:
                args = input_failed(definition, arguments, exc)
        else:
            args = validate_input(definition, arguments)
        # ToolCall(definition, args, progress) without type.__call__ nor __init__'s frame: ToolCall.__init__'s stores.
        call = _new_call(ToolCall)
        unset: Any = None  # Any: the type checker keeps the slots' declared types (a None assigned would narrow them)
        call.deadline = call.parent = call._source = call._task = call._cut = call._timer = unset
        call._metadata = call._limit = call._ended = call._lingering = call._released = unset
        call._baseline = call._held = call._id = 0
        call._done = False
        call.definition = definition
        call.arguments = args
        call.progress = progress
        outer = _current.get()
        if type(outer) is Deadline:  # a block left in another task stays in its entering task's context: skipped
            outer = open_scope(outer)
        if timeout is _UNSET:
            limit = definition.timeout
        elif timeout is None or ((type(timeout) is float or type(timeout) is int) and 0 < timeout < MAX_SECONDS):
            limit = timeout  # the one rule's common cases, without the call
        else:
            limit = limit_seconds(timeout)
        loop = _running_loop()  # the task whose work close() and the deadline may cut (running_task(), inlined)
        if loop is not None and (task := _task_of(loop)) is not None:
            call._task = task
            call._baseline = task.cancelling()
            if outer is None and limit is not None:
                arm_own_limit(call, loop, limit)  # the common case of _bind_deadline, inlined
            elif outer is not None:
                self._bind_deadline(call, outer, limit)
        elif limit is not None or outer is not None:
            self._bind_deadline(call, outer, limit)
        token = _current.set(call)
        inflight = self._inflight
        inflight.add(call)  # first, then the closing check: close() sets it first, then reads the registry
        chain = self._chain
        try:
            if self._closing:
                raise KernelClosedError(
                    f"The kernel is closing: {definition.name} was not started.", uri=definition.name
                )
            if chain is not None:
                raw = await chain(call)
            elif (fields_call := definition._fields_call) is not None:
                raw = await fields_call(**args.__dict__)  # what invoke does, without its frame (FIELDS_CALL)
            else:
                raw = await definition.invoke(args)
        except FunctionKernelException as exc:
            if call._cut is not None:
                call._withdraw()
                cut = _cut_error(call)
                if type(exc) is not type(cut) or exc.uri != definition.name:  # an inner call's or the adapter's
                    raise cut from exc  # this call ends with its own error, naming it, the other as its cause
            if exc.uri is not None and exc.uri != definition.name:  # an inner call's error the tool let through
                raise ToolExecutionError(f"Tool {definition.name} failed: {exc}", uri=definition.name) from exc
            raise
        except asyncio.CancelledError:
            error = _cancellation(call)
            if error is None:
                raise
            raise error from None
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # the last two: asyncio would end the process
            if call._cut is not None and call._withdraw():
                raise _cut_error(call) from exc  # the tool turned our cancellation into an error of its own
            raise ToolExecutionError(
                f"Tool {definition.name} failed: {type(exc).__name__}: {exc}", uri=definition.name
            ) from exc
        finally:
            inflight.discard(call)
            _current.reset(token)
            if call._ended is not None or call._held:
                call._finish(self._lingering)
            elif call._timer is not None:  # _finish's common case, inlined
                call._done = True
                call._timer.discard(call)
        if call._cut is not None:  # the tool caught the cancellation and returned anyway: still too late
            call._withdraw()
            raise _cut_error(call)
        task = call._task
        if task is not None and task.cancelling() > call._baseline:  # the caller was cancelled, the tool swallowed it
            raise _cancellation(call) or asyncio.CancelledError()
        if definition.wrapped and type(raw) in PLAIN:  # coerce_output's common case, inlined
            try:
                output = definition._validate_out({"result": raw})
            except Exception as exc:
                raise output_failed(definition, raw, exc) from exc
        else:
            output = coerce_output(definition, raw)
        return output if output_type is None else convert_output(definition, output, output_type)

    async def _resolve_for_call(self, uri: str | ToolURI, timeout: float | _Unset | None) -> ToolDefinition:
        """:meth:`resolve_tool` for a call of a tool not known yet (its server connects now, before the call is a
        record): bounded by the call's ``timeout`` when given and by the deadline around it, so that a server that
        hangs while starting cannot hold a call past its limit (the call then runs within its own timeout)."""
        limit = None if timeout is _UNSET or timeout is None else limit_seconds(timeout)
        outer = open_scope(_current.get())
        if (limit is None and (outer is None or outer.deadline is None)) or str(uri) in self.registry:
            return await self.resolve_tool(uri)  # nothing to bound, or nothing to connect (a ToolURI of a known tool)
        block = Deadline(limit, what=f"connection for {uri}")
        try:
            with block:
                return await self.resolve_tool(uri)
        except DeadlineExceededError:
            if not block.expired:
                raise  # a block inside the adapter's work, not this one
            if block._source is None and limit is not None:
                message = f"Tool {uri} timed out after {limit:g} s: its server was still connecting."
            else:
                message = f"Tool {uri} ran past the deadline around it: its server was still connecting."
            raise ToolTimeoutError(message, uri=str(uri), timeout=limit) from None

    @staticmethod
    def _bind_deadline(call: ToolCall, outer: ToolCall | Deadline | None, limit: float | None) -> None:
        """The call's deadline: the nearer of its own ``limit`` and the deadline of the scope around it; a timer
        cuts the call's work at it. A deadline that has already passed refuses the call before it starts."""
        call._bind(outer, limit)
        left = call.remaining()
        if left is None:
            return
        call._limit = limit if call._source is None else left
        if left <= 0.0:
            raise _cut_error(call, started=False)
        call._arm(limit)

    def start_tool(
        self,
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        timeout: float | _Unset | None = _UNSET,
        progress: ProgressCallback | None = None,
    ) -> ToolTask:
        """Start ``call_tool(uri, arguments)`` in the background and return its :class:`ToolTask` at once.

        Works for every tool kind: the call runs in a task of the running event loop, under the same validation,
        timeout and middleware as ``call_tool``; ``close()`` cancels the tasks still running (their result is then
        :class:`~kavalai.errors.KernelClosedError`, or cancelled when they had not started). Started inside a tool
        call or a deadline block, the background call is not part of it: it keeps only its own timeout.

        Raises:
            ValueError: ``timeout`` is not ``None`` nor a positive number of seconds.
        """
        if timeout is not _UNSET:
            timeout = limit_seconds(timeout)  # a caller's bad timeout is refused here, not in the background
        call = self.call_tool(uri, arguments, timeout=timeout, progress=progress)
        detached = contextvars.copy_context()
        detached.run(_current.set, None)
        task = ToolTask(str(uri), call, context=detached)
        self._tool_tasks.add(task)
        task.add_done_callback(self._tool_tasks.discard)
        return task

    async def call_tool_as(
        self,
        output_type: type[T],
        uri: str | ToolURI,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        timeout: float | _Unset | None = _UNSET,
    ) -> T:
        """``call_tool(uri, arguments, output_type=output_type)``, with the type first.

        Raises:
            ToolOutputError: the output does not validate into ``output_type``; the message names the tool.
            FunctionKernelException: as :meth:`call_tool`.
        """
        return await self.call_tool(uri, arguments, output_type=output_type, timeout=timeout)

    # ---------------------------------------------------------------------------------------- introspection

    def list_tools(self, pattern: str | None = None) -> list[str]:
        """The URIs of the tools registered now, sorted; cheap and synchronous (it connects nothing).

        Args:
            pattern: an optional glob such as ``"python://fs.*"``.
        """
        if self._eager:
            self._build_eager_adapters()
        if pattern is None:
            return sorted(self.registry.names())
        return sorted(name for name in self.registry.names() if fnmatch.fnmatchcase(name, pattern))

    @property
    def tools_revision(self) -> int:
        """A number that changes whenever a tool is published, replaced or withdrawn (never otherwise): a caller
        that keeps something made from :meth:`list_tools` rebuilds it only when the revision it saw moved."""
        if self._eager:
            self._build_eager_adapters()
        return self.registry.revision

    def has_tool(self, uri: str | ToolURI) -> bool:
        """Whether a tool is registered at ``uri`` now (no connecting)."""
        if self._eager:
            self._build_eager_adapters()
        return str(uri) in self.registry

    def get_tool_definition(self, uri: str | ToolURI) -> ToolDefinition:
        """The definition of the tool at ``uri``: URI, kind, description, input and output models and schemas.

        Synchronous: tools of servers that are not connected yet are not known here; use :meth:`resolve_tool`
        (which connects on demand) or connect first.
        """
        definition = self.registry.get(str(uri))
        if definition is None and self._eager:
            self._build_eager_adapters()
            definition = self.registry.get(str(uri))
        if definition is None:
            raise self._not_found(self._parse(uri))
        return definition

    async def resolve_tool(self, uri: str | ToolURI) -> ToolDefinition:
        """Like :meth:`get_tool_definition`, but connects the tool's server first when it is not connected."""
        parsed = self._parse(uri)
        definition = None if parsed.qualifier else self.registry.get(str(parsed))
        if definition is not None:
            return definition
        adapter = self.adapter(parsed.scheme)  # built now if it was plugged in as a factory
        definition = None if parsed.qualifier else self.registry.get(str(parsed))  # it may publish as it is built
        if definition is None:
            with self._closer.refusing_connects(parsed):  # a close() meanwhile closes the server it connects
                definition = await adapter.resolve(parsed)  # a qualified URI is the adapter's to interpret
        if definition is not None:
            return definition
        raise self._not_found(parsed)

    def _parse(self, uri: str | ToolURI) -> ToolURI:
        try:
            parsed = ToolURI.parse(uri)
        except InvalidToolURIError as exc:
            hint = self._with_scheme(str(uri))
            if hint is None:
                raise
            raise InvalidToolURIError(f"{exc} Did you mean {hint!r}?", uri=str(uri)) from None
        if parsed.scheme not in self._adapters and parsed.scheme not in self._factories:
            raise InvalidToolURIError(
                f"Unsupported protocol {parsed.scheme!r} in tool URI {str(parsed)!r}: unknown scheme "
                f"{parsed.scheme!r}; {self._handled()}.",
                uri=str(parsed),
            )
        return parsed

    def _with_scheme(self, text: str) -> str | None:
        """The registered URI ``text`` names without its scheme (``time.now`` for ``mcp://time.now``), if any."""
        if "://" in text:
            return None
        return next((name for name in self.registry.names() if name.partition("://")[2] == text), None)

    def _handled(self) -> str:
        schemes = ", ".join(repr(s) for s in self.schemes)
        return f"this kernel handles {schemes}" if schemes else "this kernel handles nothing: plug in an adapter"

    def get_input_model(self, uri: str | ToolURI) -> type[BaseModel]:
        """The Pydantic model a call's arguments are validated into."""
        return self.get_tool_definition(uri).input_model

    def get_output_model(self, uri: str | ToolURI) -> type[BaseModel]:
        """The Pydantic model a call's return value is coerced into."""
        return self.get_tool_definition(uri).output_model

    async def get_tool_descriptions(self, allowed_tools: Sequence[str] | None = None) -> ToolDescriptions:
        """Describe the tools for a model: ``[{"name", "description", "inputSchema", "outputSchema"}, ...]``.

        The result reads as that list (iterate it, index it, compare it with a list, ``list(...)`` it) and is also
        its JSON text, as Kaval.AI 1.0 returned it, so ``json.loads(await kernel.get_tool_descriptions())`` works
        too (see :class:`~kavalai.kernel.ToolDescriptions`). In that JSON text a tool whose adapter gives it a
        qualifier is named as Kaval.AI 1.0 named it (``"rest://shop.get_item [GET]"``, a name ``call_tool`` and
        ``allowed_tools`` accept too); the list keeps the plain URI. :meth:`describe_tools` returns a plain list.

        Connects any registered server that is not connected yet, so no tool is invisible. A server that cannot be
        reached does not hide the others: its tools are left out and the failure is logged as a warning on the
        ``kavalai`` logger (call :meth:`connect` or ``connect_mcp_servers()`` to have it raised instead).

        Args:
            allowed_tools: ``None`` for every tool; otherwise exact URIs and globs (``"python://fs.*"``,
                ``"mcp://github.*"``, ``"*"``). ``[]`` allows nothing. An exact URI that names no tool, or a glob
                that matches none, raises :class:`~kavalai.errors.ToolNotFoundError`.
        """
        items = await self.describe_tools(allowed_tools)
        # Kaval.AI 1.0 named a tool with a qualifier (a REST tool's HTTP method) as "rest://s.t [GET]" in this JSON.
        qualifiers = {item["name"]: self.registry.metadata_of(item["name"]).get("qualifier") for item in items}
        return ToolDescriptions(items, qualifiers={name: q for name, q in qualifiers.items() if isinstance(q, str)})

    async def describe_tools(self, allowed_tools: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """:meth:`get_tool_descriptions` as a plain ``list`` of dicts, without building its JSON text."""
        if allowed_tools is not None and not allowed_tools:
            return []
        await self._connect_what_can()
        names = self.select_tools(allowed_tools)
        return [self.registry.describe(name) for name in names]

    def select_tools(self, allowed_tools: Sequence[str] | None) -> list[str]:
        """The registered URIs that ``allowed_tools`` (exact URIs and globs, as in :meth:`get_tool_descriptions`)
        admits, sorted. Connects nothing.

        Raises:
            ToolNotFoundError: an exact URI names no tool, or a glob matches none (with close matches).
        """
        if allowed_tools is None:
            return sorted(self.registry.names())
        if isinstance(allowed_tools, str):
            raise TypeError("allowed_tools takes a list of URIs or globs, not a single string")
        selected: set[str] = set()
        for entry in allowed_tools:
            if entry.endswith("]") and " [" in entry:
                entry = str(self._parse(entry))  # `rest://api.items [GET]`, as Kaval.AI 1.0 printed REST tools
            if _GLOB_CHARS.intersection(entry):
                # A glob is always a glob, even when a tool is literally named like it (`python://*`).
                matched = [name for name in self.registry.names() if fnmatch.fnmatchcase(name, entry)]
                if not matched:
                    raise self._no_match(entry)
                selected.update(matched)
            elif entry in self.registry:
                selected.add(entry)
            else:
                raise self._not_found(self._parse(entry))
        return sorted(selected)

    def _no_match(self, pattern: str) -> ToolNotFoundError:
        import difflib  # only an error path needs it

        literal = pattern.replace("*", "").replace("?", "")
        suggestions = difflib.get_close_matches(literal, self.registry.names(), n=3, cutoff=0.5)
        message = f"The pattern {pattern!r} matches no registered tool, so it would allow nothing."
        if suggestions:
            message = f"{message} Did you mean {suggestions[0]!r}?"
        return ToolNotFoundError(message, uri=pattern, suggestions=suggestions)

    def _not_found(self, uri: ToolURI) -> ToolNotFoundError:
        import difflib  # only an error path needs it

        name = str(uri)
        suggestions = difflib.get_close_matches(name, self.registry.names(), n=3, cutoff=0.6)
        shown = f"{name} [{uri.qualifier}]" if uri.qualifier else name
        message = f"Unknown tool {shown!r}."
        if uri.server is not None:
            message = f"Unknown tool {shown!r}: {uri.scheme.upper()} tool {uri.tool!r} on server {uri.server!r}."
        adapter = self._adapters.get(uri.scheme)
        hint = adapter.missing_hint(uri) if adapter is not None else None
        if hint:
            message = f"{message} {hint}"
        if suggestions:
            message = f"{message} Did you mean {suggestions[0]!r}?"
        elif not hint:
            message = f"{message} No tool is registered at this URI (not registered)."
        return ToolNotFoundError(message, uri=name, suggestions=suggestions)

    # ---------------------------------------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        """Connect every registered server that is not connected yet (MCP servers start here)."""
        self._build_eager_adapters()
        for adapter in list(self._adapters.values()):
            await adapter.connect()

    async def _connect_what_can(self) -> None:
        self._build_eager_adapters()
        for adapter in list(self._adapters.values()):
            try:
                await adapter.connect()
            except ServerConnectionError as exc:
                logger.warning("Tools of unreachable servers are left out of the tool descriptions: %s", exc)

    async def close(self) -> None:
        """Fail every call in flight with :class:`~kavalai.errors.KernelClosedError`, then close every session,
        process and task the kernel holds. Idempotent; the kernel reconnects on next use.

        While it runs the kernel is *closing*: a call that starts then (from any task, loop or thread) is refused
        with :class:`~kavalai.errors.KernelClosedError`; one that started before it is cut. Once it returns,
        calls work again, and servers reconnect on their next use. A call whose tool's server was connecting for
        it when ``close()`` closed that server ends with :class:`~kavalai.errors.KernelClosedError` too."""
        with self._closer.running():
            await self._close()

    async def _close(self) -> None:
        until = asyncio.get_running_loop().time() + close_wait()
        own = calls_around()  # a tool closing its own kernel (from its task or its thread) is left to finish
        await end_calls_in_flight(self._inflight, own)
        await wait_for_threads(self._lingering, until, own)
        for task in list(self._tool_tasks):
            if not task.done():
                await task.cancel()
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

    def calls_in_flight(self) -> list[ToolCall]:
        """The calls running now, on every event loop and thread (a snapshot of the in-flight registry)."""
        return list(self._inflight)

    def threads_in_flight(self) -> list[ToolCall]:
        """The calls that have ended (cut by their deadline or by :meth:`close`) while a worker thread of theirs
        still runs their sync tool, which Python cannot stop. Each still holds its thread's turn of the per-loop
        limit; it leaves this list when its thread returns."""
        return list(self._lingering)

    async def aclose(self) -> None:
        """Alias of :meth:`close`."""
        await self.close()

    async def __aenter__(self: K) -> K:
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
        kinds = ", ".join(f"{scheme}={n}" for scheme, n in _count_by_scheme(self.registry.names()).items())
        return f"<{type(self).__name__} tools: {kinds or 'none'}>"


def _compose(middleware: Sequence[Middleware]) -> Callable[[ToolCall], Awaitable[Any]]:
    def invoke(call: ToolCall) -> Awaitable[Any]:  # hands back the tool's own awaitable: no coroutine of its own
        return call.definition.invoke(call.arguments)

    chain: Callable[[ToolCall], Awaitable[Any]] = invoke
    for item in reversed(middleware):
        chain = _link(item, chain)
    return chain


def _link(item: Middleware, call_next: Callable[[ToolCall], Awaitable[Any]]) -> Callable[[ToolCall], Awaitable[Any]]:
    def step(call: ToolCall) -> Awaitable[Any]:
        return item(call, call_next)

    return step


def _count_by_scheme(names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        scheme = name.split("://", 1)[0]
        counts[scheme] = counts.get(scheme, 0) + 1
    return counts
