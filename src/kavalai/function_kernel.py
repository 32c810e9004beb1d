"""The FunctionKernel: the leaf :class:`~kavalai.kernel.Kernel` with the built-in tool kinds plugged in.

It keeps every registration method of the seed (``register_python_tool``, ``register_rest_server``,
``register_rest_tool``, ``register_openapi``, ``register_mcp_server``, ``connect_mcp_servers``, ...) as a facade over
the adapter of each scheme. The ``python://`` adapter is built with the kernel; the ``rest://`` and ``mcp://``
adapters (and aiohttp and the MCP SDK with them) are imported when first needed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from kavalai.adapters.python import PythonToolAdapter
from kavalai.compat import KavalCompatMixin
from kavalai.kernel import Kernel, Middleware, ToolAdapter, ToolRegistry

if TYPE_CHECKING:
    from kavalai.adapters.mcp import (
        McpAdapter,
        McpCompletion,
        McpPrompt,
        McpPromptResult,
        McpResource,
        McpResourceContent,
        McpResourceTemplate,
        McpServer,
        McpServerState,
    )
    from kavalai.adapters.rest import OpenApiImport, RestAdapter, RestServer

__all__ = ["FunctionKernel"]


def _rest_adapter(registry: ToolRegistry) -> ToolAdapter:
    from kavalai.adapters.rest import RestAdapter

    return RestAdapter(registry)


def _mcp_adapter(registry: ToolRegistry) -> ToolAdapter:
    from kavalai.adapters.mcp import McpAdapter

    return McpAdapter(registry)


class FunctionKernel(KavalCompatMixin, Kernel):
    """Hosts Python, REST and MCP tools behind one typed calling convention.

    Every tool is addressed by a URI (``python://fs.ls``, ``rest://server.tool``, ``mcp://server.tool``) and has
    a Pydantic input and output model: :meth:`call_tool` validates the arguments, runs the tool and coerces its
    return value, so a caller always receives an instance of the tool's output model.

    Use it directly and call :meth:`close` when done, or as ``async with FunctionKernel() as kernel:``, which
    connects every registered server on entry and closes them on exit.

    Args:
        middleware: middleware to wrap every call, outermost first (see :meth:`add_middleware`).
        output_budget: the default output budget of agents using this kernel (a
            :class:`kavalai.agent.budget.OutputBudget`).
    """

    def __init__(self, *, middleware: Sequence[Middleware] = (), output_budget: Any = None) -> None:
        super().__init__(middleware=middleware)
        #: The default :class:`~kavalai.agent.budget.OutputBudget` of the agents that use this kernel (an agent's
        #: own ``output_budget`` wins); ``None`` for none. The kernel itself returns results whole.
        self.output_budget = output_budget
        self._python = PythonToolAdapter(self.registry)
        self.add_adapter(self._python)
        self.add_adapter(_rest_adapter, scheme="rest", lazy=True)
        self.add_adapter(_mcp_adapter, scheme="mcp", lazy=True)

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
        return self._python.register(
            name, func, description=description, timeout=timeout, inline=inline, replace=replace
        )

    # ------------------------------------------------------------------------------------------------ rest://

    def _rest(self) -> RestAdapter:
        return cast("RestAdapter", self.adapter("rest"))

    def register_rest_server(self, server: RestServer, *, replace: bool = False) -> None:
        """Register a REST server; its tools are registered with :meth:`register_rest_tool` or
        :meth:`register_openapi`. Nothing is connected until the first call."""
        self._rest().register_server(server, replace=replace)

    def register_rest_tool(
        self,
        server_name: str,
        tool_name: str,
        method: str,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        description: str | None = None,
        *,
        path: str | None = None,
        timeout: float | None = None,
        replace: bool = False,
    ) -> str:
        """Register ``rest://<server_name>.<tool_name>`` and return its URI.

        Args:
            server_name: a server registered with :meth:`register_rest_server`.
            tool_name: the tool name; also the request path unless ``path`` is given.
            method: the HTTP method (``GET``, ``POST``, ``PUT``, ``PATCH``, ``DELETE``, ``HEAD``).
            input_schema: the JSON schema of the arguments (an object schema); ``None`` for no arguments.
            output_schema: the JSON schema of the response body; ``None`` accepts any JSON value.
            description: what the tool does.
            path: the request path relative to the server URL, with ``{placeholders}`` filled from arguments.
            timeout: the default timeout of a call in seconds; by default the server's.
            replace: replace a tool already registered at this URI instead of raising.
        """
        return self._rest().register_tool(
            server_name,
            tool_name,
            method,
            input_schema,
            output_schema,
            description,
            path=path,
            timeout=timeout,
            replace=replace,
        )

    def register_openapi(
        self,
        server_name: str,
        spec: Mapping[str, Any] | str | os.PathLike[str],
        *,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        replace: bool = False,
    ) -> OpenApiImport:
        """Register one ``rest://`` tool per operation of an OpenAPI spec; return their URIs.

        Registration only records configuration: a spec given as a dict or a file registers its tools at once; a
        spec at a URL (a path on the server such as ``"/openapi.json"``, fetched with the server's session and
        auth, or a full URL) is fetched when the REST adapter connects (:meth:`connect`, or the first listing or
        call of that server's tools), exactly like an MCP server's tool list. The returned list is also awaitable
        (it gives itself), so code written as ``await kernel.register_openapi(...)`` keeps working.

        Args:
            server_name: a registered REST server.
            spec: the spec as a dict, a path to a JSON or YAML file, or a URL path on the server or a full URL.
            include: keep only operations whose operationId or tag is listed.
            exclude: drop operations whose operationId or tag is listed.
            replace: replace tools already registered at the same URIs.
        """
        return self._rest().register_openapi(server_name, spec, include=include, exclude=exclude, replace=replace)

    # ------------------------------------------------------------------------------------------------- mcp://

    def _mcp(self) -> McpAdapter:
        return cast("McpAdapter", self.adapter("mcp"))

    def register_mcp_server(self, server: McpServer) -> None:
        """Record an MCP server's configuration. Nothing starts until :meth:`connect_mcp_servers`, a tool
        listing or a call needs it.

        Raises:
            ToolRegistrationError: a server of the same name is already registered.
        """
        self._mcp().register_server(server)

    async def connect_mcp_servers(self) -> None:
        """Start (or connect to) every registered MCP server that is not connected yet, concurrently, and
        discover its tools. Servers that connect stay usable even when another fails; the failures are then
        raised as one :class:`~kavalai.errors.ServerConnectionError` naming each server and why."""
        await self._mcp().connect()

    async def close_mcp_servers(self) -> None:
        """Close every MCP server (sessions, processes, tasks) and withdraw their tools, leaving the rest of the
        kernel open. Idempotent; a server connects again on next use."""
        await self._mcp().aclose()

    def mcp_server_states(self) -> list[McpServerState]:
        """The state of every registered MCP server (connected, failed and why, closed, ...), in registration
        order. Cheap and synchronous: it connects nothing."""
        return self._mcp().states()

    def get_mcp_server_state(self, name: str) -> McpServerState:
        """The state of the MCP server registered as ``name``.

        Raises:
            ToolNotFoundError: no MCP server of that name is registered.
        """
        return self._mcp().state(name)

    # ------------------------------------------------------------------ mcp:// resources, prompts, completion

    async def list_resources(self, server: str) -> list[McpResource]:
        """The resources the MCP server ``server`` lists (every page), connecting it first if needed.

        Raises:
            ToolNotFoundError: no MCP server of that name is registered.
            ServerConnectionError, JsonRpcError, ToolTimeoutError: as for a call (``JsonRpcError`` with code
                -32601 when the server offers no resources).
        """
        return await self._mcp().list_resources(server)

    async def list_resource_templates(self, server: str) -> list[McpResourceTemplate]:
        """The resource templates (``weather://{city}/today``) of the MCP server ``server``; errors as
        :meth:`list_resources`."""
        return await self._mcp().list_resource_templates(server)

    async def read_resource(self, server: str, uri: str) -> list[McpResourceContent]:
        """The contents of the resource ``uri`` of the MCP server ``server``: text as ``.text``, binary as base64
        ``.blob`` (``.decode()`` gives the bytes either way); errors as :meth:`list_resources`."""
        return await self._mcp().read_resource(server, uri)

    async def subscribe_resource(self, server: str, uri: str) -> None:
        """Ask the MCP server ``server`` to say when the resource ``uri`` changes: each change reaches its
        ``McpServer(on_change=...)`` callback as an ``McpChange(kind="resource", uri=...)``. A subscription lasts
        until :meth:`unsubscribe_resource` or :meth:`close`: a reconnect subscribes again, and one the new server
        refuses reaches ``on_change`` as ``McpChange(kind="lost", uri=...)`` (then ``kind="restored"`` once a later
        reconnect's server takes it again). Errors as :meth:`list_resources`."""
        await self._mcp().subscribe_resource(server, uri)

    async def unsubscribe_resource(self, server: str, uri: str) -> None:
        """Stop the changes of ``uri`` that :meth:`subscribe_resource` asked for."""
        await self._mcp().subscribe_resource(server, uri, subscribe=False)

    async def list_prompts(self, server: str) -> list[McpPrompt]:
        """The prompts of the MCP server ``server``, with their arguments; errors as :meth:`list_resources`."""
        return await self._mcp().list_prompts(server)

    async def get_prompt(self, server: str, name: str, arguments: Mapping[str, Any] | None = None) -> McpPromptResult:
        """The prompt ``name`` of the MCP server ``server`` rendered with ``arguments`` (sent as strings, as MCP
        prompt arguments are): its messages, text and images kept; errors as :meth:`list_resources`."""
        return await self._mcp().get_prompt(server, name, arguments)

    async def complete(
        self,
        server: str,
        ref: McpPrompt | McpResourceTemplate | str,
        argument: str,
        value: str = "",
        *,
        context: Mapping[str, str] | None = None,
    ) -> McpCompletion:
        """Suggestions for ``argument`` of a prompt or resource template of the MCP server ``server``, given
        what was typed so far (``value``) and the arguments already chosen (``context``).

        ``ref`` is a prompt or template as listed, a prompt's name, or a template's URI.
        """
        return await self._mcp().complete(server, ref, argument, value, context)
