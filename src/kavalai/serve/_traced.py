"""The SERVER span of each request the gateway serves, recorded only while a tracer provider is set.

The MCP SDK builds every server with a tracing middleware of its own (mcp 2.x: its only default middleware). That
middleware lives in a private module of the SDK, so kavalai neither imports nor names it: :func:`traced_when_configured`
replaces the middleware the SDK built the server with by :func:`request_span`, which records the same span from
OpenTelemetry's public API (name ``"{method} {target}"``, kind SERVER, the ``mcp.*``, ``jsonrpc.*`` and
``gen_ai.*`` attributes of the MCP semantic conventions, the client's ``traceparent`` from ``_meta`` as its parent)
with its attributes and error texts through the secret gate. ``tests/serve/test_traced.py`` pins that the SDK builds
a server with exactly one middleware, so a release adding another is a change to check here first.

With no tracer provider set, the span would record nothing, and kavalai's own tracing (``execute_tool`` spans, a
REST call's ``traceparent``) is off too: the span's work per request (about 3% of the gateway's time under 32
sessions) is then skipped. A provider set while serving (``opentelemetry-instrument``, ``--tracing``, or later) is
honoured from the next request on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from pydantic import ValidationError

from kavalai.tracing import mark_failed, server_span, tracing_configured

__all__ = ["request_span", "traced_when_configured"]

S = TypeVar("S", bound=Server[Any])


def traced_when_configured(server: S) -> S:
    """``server`` (just built by the SDK) with :func:`request_span` in place of the tracing middleware it was built
    with."""
    server.middleware[:] = [request_span]
    return server


async def request_span(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Run the request in a SERVER span continuing the client's trace, when a tracer provider is set."""
    if not tracing_configured():
        return await call_next(ctx)
    name = ctx.params.get("name") if ctx.params else None
    target = name if isinstance(name, str) else None
    with server_span(
        f"{ctx.method} {target}" if target else ctx.method, _attributes(ctx, target), _parent(ctx.meta)
    ) as span:
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            code = str(exc.error.code)
            mark_failed(span, {"error.type": code, "rpc.response.status_code": code}, exc.error.message)
            raise
        except ValidationError:  # the host is answered with a fixed message; the pydantic text carries its input
            code = str(INVALID_PARAMS)
            mark_failed(span, {"error.type": code, "rpc.response.status_code": code}, "Invalid request parameters")
            raise
        except Exception as exc:
            mark_failed(span, {"error.type": type(exc).__qualname__}, str(exc), exc)
            raise
        if ctx.method == "tools/call" and _is_tool_error(result):
            mark_failed(span, {"error.type": "tool_error"}, None)
        return result


def _attributes(ctx: ServerRequestContext[Any, Any], target: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {"mcp.method.name": ctx.method}
    if ctx.protocol_version:
        attributes["mcp.protocol.version"] = ctx.protocol_version
    if ctx.request_id is not None:
        attributes["jsonrpc.request.id"] = str(ctx.request_id)
    if ctx.method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if target is not None:
            attributes["gen_ai.tool.name"] = target
    elif ctx.method == "prompts/get" and target is not None:
        attributes["gen_ai.prompt.name"] = target
    return attributes


def _parent(meta: Mapping[str, Any] | None) -> Context | None:
    """The client's trace context from ``_meta``; ``None`` (the current context is the parent) when it sent none or
    one that is not valid, since an empty context would make the span a root instead."""
    if not meta:
        return None
    try:
        carried = propagate.extract(dict(meta))
    except (ValueError, TypeError):
        return None
    return carried if trace.get_current_span(carried).get_span_context().is_valid else None


def _is_tool_error(result: object) -> bool:
    """Whether a ``tools/call`` result reaches the wire as ``isError``: the model, or its camelCase form as a dict
    (a handler's result is checked before it is serialized)."""
    if isinstance(result, CallToolResult):
        return result.is_error is True
    return isinstance(result, Mapping) and result.get("isError") is True
