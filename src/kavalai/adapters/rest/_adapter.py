"""The ``rest://`` adapter: REST servers, their tools (by hand or from OpenAPI) and the calls to them.

Imported on first use by the kernel (it imports aiohttp). A tool looks its server up by name on every call, so
re-registering a server with ``replace=True`` re-points its existing tools at the new configuration.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
from collections.abc import Awaitable, Generator, Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from kavalai.adapters._doubt import check_doubt_keys, doubt_metadata
from kavalai.adapters._settings import public_name
from kavalai.adapters.base import ToolAdapter, ToolRegistry
from kavalai.adapters.rest._config import RestServer
from kavalai.adapters.rest._idempotency import header_key
from kavalai.adapters.rest._oauth import session_for
from kavalai.adapters.rest._openapi import OpenApiOperation, check_spec, parse_spec, read_operations
from kavalai.adapters.rest._request import (
    METHODS,
    PreparedRequest,
    RequestPlan,
    path_placeholders,
)
from kavalai.adapters.rest._session import ServerSession
from kavalai.documents import MAX_DOCUMENT_BYTES
from kavalai.errors import (
    ConfigurationError,
    FunctionKernelException,
    InvalidToolURIError,
    ServerConnectionError,
    ToolRegistrationError,
    ToolTimeoutError,
)
from kavalai.kernel import (
    Invoker,
    ToolDefinition,
    ToolURI,
    current_call,
    limit_seconds,
    model_from_json_schema,
    output_model_from_json_schema,
)
from kavalai.secrets import get_logger

__all__ = ["OpenApiImport", "RestAdapter"]

logger = get_logger("kavalai.rest")

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
#: The call metadata key whose value is sent as the ``Idempotency-Key`` header (kavalai.durable sets it).
IDEMPOTENCY_KEY = "idempotency_key"


class OpenApiImport(list[str]):
    """What ``register_openapi`` returns: the URIs of the tools a spec registered, a list.

    A spec given as a dict or a file is imported at once. A spec at a URL is fetched when its server connects
    (``kernel.connect()``, or the first listing or call of that server's tools); until then the list is empty.
    Awaiting the list imports it now and gives the list, so code written as ``await kernel.register_openapi(...)``
    keeps working (and sees fetching errors there).
    """

    def __init__(
        self,
        adapter: RestAdapter,
        server_name: str,
        spec: Any,
        include: list[str] | None,
        exclude: list[str] | None,
        replace: bool,
    ) -> None:
        super().__init__()
        self._adapter = adapter
        self.server_name, self.spec = server_name, spec
        self.include, self.exclude, self.replace = include, exclude, replace

    def done(self, uris: list[str]) -> None:
        """Record the URIs the import registered."""
        self[:] = uris

    def __await__(self) -> Generator[Any, None, OpenApiImport]:
        return self._load().__await__()

    async def _load(self) -> OpenApiImport:
        await self._adapter.load_spec(self)
        return self


class RestAdapter(ToolAdapter):
    """Registers REST servers and their tools, and sends each call through the server's pooled session."""

    scheme: ClassVar[str] = "rest"

    def __init__(self, registry: ToolRegistry) -> None:
        super().__init__(registry)
        self._servers: dict[str, ServerSession] = {}
        self._pending: dict[str, list[OpenApiImport]] = {}  # specs at a URL, fetched when their server connects
        self._retired: list[ServerSession] = []
        self._adhoc: dict[str, ToolDefinition] = {}  # unlisted tools of Kaval.AI-style ad-hoc calls, by URI + method

    # --------------------------------------------------------------------------------------------- servers

    def register_server(self, server: RestServer, *, replace: bool = False) -> None:
        """Record ``server``. Environment variables it names are read when its first session opens.

        Raises:
            ToolRegistrationError: a server of that name is registered and ``replace`` is false.
        """
        if not isinstance(server, RestServer):
            raise ToolRegistrationError(
                f"register_rest_server takes a RestServer, not {type(server).__name__}: RestServer(name=..., url=...)."
            )
        existing = self._servers.get(server.name)
        if existing is not None and not replace:
            raise ToolRegistrationError(
                f"REST server {server.name!r} is already registered. Choose another name, or pass "
                "replace=True to replace it."
            )
        session = session_for(server)  # per identity with OAuth
        if existing is not None:
            self._retired.append(existing)
        self._servers[server.name] = session
        prefix = f"rest://{server.name}."
        self._adhoc = {key: d for key, d in self._adhoc.items() if not key.startswith(prefix)}
        for definition in self.registry.tools_of("rest", server.name):
            # Tools follow their server: its timeout (unless a tool has its own), where their effect goes (a durable
            # step's origin) and its doubt policy; a replaced server's would make a resume judge the wrong server.
            metadata = {key: value for key, value in definition.metadata.items() if key != "on_doubt"}
            metadata.update(origin=server.origin, **doubt_metadata(server, definition.uri.tool))
            timeout = definition.timeout if definition.metadata.get("own_timeout") else server.timeout
            self.registry.add_tool(dataclasses.replace(definition, timeout=timeout, metadata=metadata), replace=True)

    def server_names(self) -> list[str]:
        """The names of the registered servers, in registration order."""
        return list(self._servers)

    def server(self, name: str) -> RestServer:
        """The configuration of the registered server ``name``."""
        return self._session(name).server

    def _session(self, name: str) -> ServerSession:
        session = self._servers.get(name)
        if session is None:
            known = ", ".join(repr(n) for n in sorted(self._servers)) or "none"
            raise ConfigurationError(
                f"No REST server named {name!r} is registered (registered: {known}). Register it first with "
                f"kernel.register_rest_server(RestServer(name={name!r}, url=...))."
            )
        return session

    # ----------------------------------------------------------------------------------------------- tools

    def register_tool(
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
        """Register ``rest://<server_name>.<tool_name>`` and return its URI (see ``register_rest_tool``)."""
        session = self._session(server_name)
        uri = _tool_uri(server_name, tool_name)
        verb = str(method).upper()
        if verb not in METHODS:
            raise ConfigurationError(
                f"Cannot register {uri}: unknown HTTP method {method!r}; use one of {', '.join(sorted(METHODS))}.",
                uri=str(uri),
            )
        route = path if path is not None else tool_name
        route = route if route.startswith("/") else f"/{route}"
        schema = _schema_dict(uri, "input_schema", input_schema) or dict(_NO_ARGUMENTS)
        _check_placeholders(uri, route, schema)
        try:
            timeout = limit_seconds(timeout)
        except ValueError as exc:
            raise ConfigurationError(f"Cannot register {uri}: {exc}.", uri=str(uri)) from None
        definition = self._definition(
            uri,
            RequestPlan.simple(verb, route),
            schema,
            _schema_dict(uri, "output_schema", output_schema),
            description or f"{verb} {route} on REST server {server_name!r}.",
            timeout if timeout is not None else session.server.timeout,
            extra_metadata={"own_timeout": timeout is not None},
        )
        self.registry.add_tool(definition, replace=replace)
        return definition.name

    def register_openapi(
        self,
        server_name: str,
        spec: Mapping[str, Any] | str | os.PathLike[str],
        *,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        replace: bool = False,
    ) -> OpenApiImport:
        """Register one tool per operation of an OpenAPI 3 spec (see ``register_openapi``).

        A dict or a file registers at once; a spec at a URL is recorded and fetched when the server connects (or
        when the returned :class:`OpenApiImport` is awaited). Every tool of a spec is built before any is
        registered, so a spec that fails registers nothing.
        """
        session = self._session(server_name)
        for name, names in (("include", include), ("exclude", exclude)):
            if isinstance(names, str):
                raise ConfigurationError(
                    f"register_openapi({server_name!r}, ...): {name} takes a list of operationIds or tags, not a "
                    f"string; did you mean {name}=[{names!r}]?"
                )
        job = OpenApiImport(self, server_name, spec, include, exclude, replace)
        document = _local_spec(session, spec)
        if document is None:
            self._pending.setdefault(server_name, []).append(job)
        else:
            job.done(self._import(session, document, job))
        return job

    async def load_spec(self, job: OpenApiImport) -> None:
        """Fetch and register a spec recorded at a URL (once; later calls return at once)."""
        pending = self._pending.get(job.server_name, [])
        if not any(item is job for item in pending):  # jobs are lists: compare by identity, not contents
            return
        session = self._session(job.server_name)
        document = await _fetch_spec_document(session, job.spec)
        if any(item is job for item in pending):  # another task may have imported it meanwhile
            pending[:] = [item for item in pending if item is not job]
            job.done(self._import(session, document, job))

    async def _load_pending(self, server_name: str) -> None:
        for job in list(self._pending.get(server_name, [])):
            await self.load_spec(job)

    def check_doubt_keys(self, server_name: str) -> None:
        """Check that the server's ``tools_on_doubt`` names only its tools (see :func:`check_doubt_keys`), once its
        tools are known: a configuration file's when it loads, a server's specs at URLs once :meth:`connect` or a
        first call imported them.

        Raises:
            ConfigurationError: a key names no tool of the server.
        """
        prefix = f"rest://{server_name}."
        names = [uri.removeprefix(prefix) for uri in self.registry.names_of("rest", server_name)]
        check_doubt_keys(self._session(server_name).server, f"REST server {server_name!r}", names)

    def _import(self, session: ServerSession, document: dict[str, Any], job: OpenApiImport) -> list[str]:
        try:
            operations, skipped = read_operations(document, include=job.include, exclude=job.exclude)
        except ConfigurationError as exc:
            raise ConfigurationError(f"Cannot import OpenAPI tools for REST server {session.name!r}: {exc}") from exc
        for skip in skipped:
            logger.warning("OpenAPI import for REST server %r skipped %s: %s", session.name, skip.label, skip.reason)
        definitions = [self._from_operation(session, op) for op in operations]
        if not job.replace:
            for definition in definitions:
                if definition.name in self.registry:
                    raise ToolRegistrationError(
                        f"A tool is already registered at {definition.name}. Pass replace=True to replace the "
                        "tools of this spec, or filter it with include=/exclude=.",
                        uri=definition.name,
                    )
        for definition in definitions:
            self.registry.add_tool(definition, replace=job.replace)
        return [definition.name for definition in definitions]

    def remove_tool(self, uri: str) -> bool:
        """Withdraw a ``rest://`` tool (and forget any ad-hoc variant of it)."""
        self._adhoc = {key: d for key, d in self._adhoc.items() if not key.startswith(f"{uri} [")}
        return self.registry.remove_tool(uri) is not None

    def _from_operation(self, session: ServerSession, operation: OpenApiOperation) -> ToolDefinition:
        named_by = " named by its operationId" if operation.operation_id else " named by its path"
        uri = _tool_uri(session.name, operation.tool_name, named_by=named_by)
        return self._definition(
            uri,
            operation.plan,
            operation.input_schema,
            operation.output_schema,
            operation.description,
            session.server.timeout,
            extra_metadata={
                "operation_id": operation.operation_id,
                "tags": list(operation.tags),
                "paths": list(operation.paths),
                **({} if operation.idempotent is None else {"idempotent": operation.idempotent}),
                **({"honours_key": True} if operation.honours_key else {}),
            },
        )

    def _definition(
        self,
        uri: ToolURI,
        plan: RequestPlan,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None,
        description: str,
        timeout: float | None,
        *,
        extra_metadata: Mapping[str, Any] | None = None,
    ) -> ToolDefinition:
        name = str(uri)
        base = _model_base_name(uri)
        try:
            input_model = model_from_json_schema(input_schema, f"{base}Input")
            output_model, wrapped = output_model_from_json_schema(output_schema, f"{base}Output")
        except FunctionKernelException as exc:
            exc.uri = exc.uri or name
            raise
        except Exception as exc:  # the converter's own complaint about a schema, named for this tool
            raise ConfigurationError(f"Cannot register {name}: invalid JSON schema: {exc}", uri=name) from exc
        server = uri.server or ""  # rest:// URIs always name a server
        return ToolDefinition(
            uri=uri,
            description=description,
            input_model=input_model,
            output_model=output_model,
            invoke=self._invoker(server, plan, name),
            wrapped=wrapped,
            timeout=timeout,
            input_schema=input_schema,
            output_schema=output_schema,
            metadata={
                "server": server,
                "method": plan.method,
                "qualifier": plan.method,  # the " [GET]" of Kaval.AI 1.0's names for REST tools
                "path": plan.path,
                "origin": self._session(server).server.origin,  # where its effect goes (_origin)
                **doubt_metadata(self._session(server).server, uri.tool),
                **(extra_metadata or {}),
            },
        )

    def _invoker(self, server_name: str, plan: RequestPlan, uri: str) -> Invoker:
        servers = self._servers

        def invoke(args: BaseModel) -> Awaitable[Any]:
            """Build the request now and return the send to await (no coroutine frame of its own per call)."""
            values = args.__pydantic_serializer__.to_python(args, by_alias=True, exclude_unset=True, mode="json")
            request = plan.prepare(values, uri=uri)
            call = current_call()
            server = servers[server_name]
            if call is not None:
                key = call.metadata.get(IDEMPOTENCY_KEY)
                # a durable run's step (or a middleware) gave it one: the same on retries; a key the caller passed
                # in a documented header of any spelling is kept (aiohttp would let ours replace it)
                if isinstance(key, str) and not any(name.lower() == "idempotency-key" for name in request.headers):
                    request.headers["Idempotency-Key"] = header_key(key)  # a header is ASCII text
                header = server.server.deadline_header
                left = call.remaining() if header is not None else None
                if header is not None and left is not None:  # the server opted in to hear the call's deadline
                    request.headers[header] = str(math.floor(left * 1000))
            return server.send(request, uri=uri)

        return invoke

    # ----------------------------------------------------------------------------------------- the contract

    async def connect(self) -> None:
        """Fetch and register every OpenAPI spec recorded at a URL; a server whose spec fails is named in one
        :class:`~kavalai.errors.ServerConnectionError`, the others' tools are registered."""
        failures: list[str] = []
        imported: list[str] = []
        for server_name in list(self._pending):
            if not self._pending[server_name]:
                continue
            try:
                await self._load_pending(server_name)
            except FunctionKernelException as exc:
                failures.append(f"REST server {server_name!r}: {exc}")
            else:
                imported.append(server_name)
        if failures:
            raise ServerConnectionError("Cannot import OpenAPI specs:\n" + "\n".join(failures))
        for server_name in imported:  # its tools are known now
            self.check_doubt_keys(server_name)

    async def resolve(self, uri: ToolURI) -> ToolDefinition | None:
        """A tool named with an HTTP method (``rest://api.items [GET]``, or ``call_tool(..., method="GET")``).

        The registered tool when its method is that one; when the server has no such tool, an ad-hoc tool that
        sends ``<METHOD> <server url>/<tool>`` (query parameters for GET, HEAD and DELETE, a JSON body otherwise),
        as Kaval.AI 1.0 called REST endpoints. Ad-hoc tools are not listed. Without a method, an unregistered name
        stays an unknown tool (with did-you-mean), so a typo never reaches the server.
        """
        method, server = uri.qualifier, uri.server or ""
        if self._pending.get(server):
            await self._load_pending(server)  # its spec is at a URL: import it now, as a connect would
            self.check_doubt_keys(server)
            if method is None:
                return self.registry.get(str(uri))
        if method is None or server not in self._servers:
            return None
        registered = self.registry.get(str(uri))
        if registered is not None:
            return registered if registered.metadata.get("method") == method else None
        if method not in METHODS:
            raise ConfigurationError(
                f"Cannot call {uri} [{method}]: unknown HTTP method; use one of {', '.join(sorted(METHODS))}.",
                uri=str(uri),
            )
        key = f"{uri} [{method}]"
        definition = self._adhoc.get(key)
        if definition is None:
            session = self._servers[server]
            definition = self._definition(
                uri.without_qualifier(),
                RequestPlan.simple(method, f"/{uri.tool}"),
                {"type": "object", "additionalProperties": True},
                None,
                f"{method} /{uri.tool} on REST server {server!r} (ad hoc).",
                session.server.timeout,
                extra_metadata={"ad_hoc": True},
            )
            self._adhoc[key] = definition  # built once: a model per call would cost milliseconds
        return definition

    def missing_hint(self, uri: ToolURI) -> str | None:
        """Explain a missing ``rest://`` tool: its server is not registered, or which tools it has."""
        server = uri.server or ""
        if server not in self._servers:
            return (
                f"No REST server named {server!r} is registered; register it with "
                f"kernel.register_rest_server(RestServer(name={server!r}, url=...))."
            )
        tools = sorted(d.uri.tool for d in self.registry.tools_of("rest", server))
        if not tools:
            return (
                f"REST server {server!r} has no tools yet; add them with kernel.register_rest_tool(...) or "
                "kernel.register_openapi(...)."
            )
        shown = ", ".join(tools[:10]) + (", ..." if len(tools) > 10 else "")
        return f"REST server {server!r} has: {shown}."

    async def aclose(self) -> None:
        """Close every server's pooled session; the next call opens a new one."""
        retired, self._retired = self._retired, []
        for session in [*retired, *self._servers.values()]:
            await session.aclose()


def _tool_uri(server_name: str, tool_name: str, *, named_by: str = "") -> ToolURI:
    """``rest://<server_name>.<tool_name>``; ``named_by`` says where an OpenAPI tool's name came from."""
    what = f"a tool of REST server {server_name!r}{named_by}"
    public_name(tool_name, what, "name the tool yourself (its 'name', or an operationId without the variable)")
    try:
        return ToolURI.build("rest", server_name, tool_name)
    except InvalidToolURIError as exc:
        raise ToolRegistrationError(f"Cannot register a REST tool: {exc}", uri=exc.uri) from exc


def _model_base_name(uri: ToolURI) -> str:
    parts = f"{uri.server}_{uri.tool}".replace(".", "_").replace("-", "_").split("_")
    return "".join(part[:1].upper() + part[1:] for part in parts if part)


def _schema_dict(uri: ToolURI, what: str, schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise ConfigurationError(
            f"Cannot register {uri}: {what} must be a JSON schema object (a dict) or None, "
            f"not {type(schema).__name__}.",
            uri=str(uri),
        )
    return dict(schema)


def _check_placeholders(uri: ToolURI, path: str, schema: Mapping[str, Any]) -> None:
    properties = schema.get("properties", {})
    missing = [name for name in path_placeholders(path) if name not in properties]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        raise ConfigurationError(
            f"Cannot register {uri}: the path {path!r} has placeholders {names} that are not properties of the "
            "input schema. Add them to input_schema['properties'].",
            uri=str(uri),
        )


def _local_spec(session: ServerSession, spec: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any] | None:
    """The spec document of a dict or a file, read now; ``None`` for a spec at a URL (fetched later)."""
    if isinstance(spec, Mapping):
        return check_spec(spec, source="(given as a dict)")
    text = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
    if not isinstance(text, str):
        raise ConfigurationError(
            f"register_openapi takes a dict, a file path or a URL path, not {type(spec).__name__}."
        )
    if text.startswith(("http://", "https://")):
        return None
    content = _read_spec_file(text, isinstance(spec, os.PathLike))
    if content is not None:
        return parse_spec(content, source=repr(text))
    if not text.startswith("/"):
        raise ConfigurationError(
            f"The OpenAPI spec {text!r} is not a file, and not a URL path on REST server {session.name!r} "
            "(those start with '/', like '/openapi.json')."
        )
    return None


async def _fetch_spec_document(session: ServerSession, spec: Any) -> dict[str, Any]:
    text = str(spec)
    if text.startswith(("http://", "https://")) and _origin(text) != _origin(session.resolved.base_url):
        # The session carries the server's credentials; they must not go to another host.
        raise ConfigurationError(
            f"The OpenAPI spec URL {text!r} is not on REST server {session.name!r}; its credentials are only "
            "sent to its own origin. Fetch the spec yourself and pass it as a dict."
        )
    fetched = await _fetch_spec(session, text)
    source = f"{text!r} of REST server {session.name!r}"
    return parse_spec(fetched, source=source) if isinstance(fetched, str) else check_spec(fetched, source=source)


async def _fetch_spec(session: ServerSession, url: str) -> Any:
    """GET the spec at ``url`` through the server's session, within the server's timeout."""
    limit = session.server.timeout
    scope = asyncio.timeout(limit)
    try:
        async with scope:
            return await session.send(PreparedRequest("GET", url, [], {}, None, False))
    except TimeoutError:
        if not scope.expired():
            raise  # the session's own ToolTimeoutError
        raise ToolTimeoutError(
            f"REST server {session.name!r}: fetching the OpenAPI spec {url!r} timed out after {limit:g} s "
            "(the server's timeout).",
            timeout=limit,
        ) from None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def _read_spec_file(path: str, must_exist: bool) -> str | None:
    """The text of the spec file at ``path``; ``None`` when there is no such file and it need not exist."""
    file = Path(path)
    if not must_exist and not file.is_file():
        return None
    try:
        size = file.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise ConfigurationError(
                f"The OpenAPI spec file {path!r} is {size:,} bytes, over the limit of {MAX_DOCUMENT_BYTES:,} bytes "
                "for one document."
            )
        return file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"Cannot read the OpenAPI spec file {path!r}: {exc}") from exc
