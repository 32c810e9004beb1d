"""The kernel's ``rest://`` methods. The REST adapter (and ``aiohttp``) is imported on first use."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from kavalai.adapters.base import ToolAdapter
    from kavalai.adapters.rest import RestServer
    from kavalai.adapters.rest._adapter import RestAdapter

    A = TypeVar("A", bound=ToolAdapter)

__all__ = ["RestKernelMixin"]


class RestKernelMixin:
    """``register_rest_server``, ``register_rest_tool`` and ``register_openapi`` of :class:`FunctionKernel`."""

    if TYPE_CHECKING:

        def _adapter_for(self, cls: type[A]) -> A: ...

    def _rest(self) -> RestAdapter:
        from kavalai.adapters.rest._adapter import RestAdapter

        return self._adapter_for(RestAdapter)

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

    async def register_openapi(
        self,
        server_name: str,
        spec: Mapping[str, Any] | str | os.PathLike[str],
        *,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        replace: bool = False,
    ) -> list[str]:
        """Register one ``rest://`` tool per operation of an OpenAPI spec; return their URIs.

        Args:
            server_name: a registered REST server.
            spec: the spec as a dict, a path to a JSON or YAML file, or a URL path on the server
                (``"/openapi.json"``, fetched with the server's session and auth) or a full URL.
            include: keep only operations whose operationId or tag is listed.
            exclude: drop operations whose operationId or tag is listed.
            replace: replace tools already registered at the same URIs.

        Operations that cannot be JSON tools (a multipart-only body) are skipped with a warning logged on
        ``kavalai.rest``. Every tool is built before any is registered, so a spec that fails registers nothing.
        """
        return await self._rest().register_openapi(server_name, spec, include=include, exclude=exclude, replace=replace)
