"""The kernel served as one MCP server, so that an MCP host (Claude Desktop, an IDE, another agent) can use its
``python://``, ``rest://`` and ``mcp://`` tools: ``kavalai serve tools.yaml`` on the command line, or::

    from kavalai.config import KernelConfig, build_kernel
    from kavalai.serve import serve_stdio

    kernel = build_kernel(KernelConfig.from_file("tools.yaml"))
    await serve_stdio(kernel, deny=["python://fs.write*"])

Tools are named for model providers (``python://fs.ls`` is ``python_fs_ls``; :class:`ExposedTools` maps names and
URIs both ways), listed with their input and output schemas, and answered with ``structuredContent``. This package
imports the ``mcp`` SDK and uvicorn; ``import kavalai`` never imports it.
"""

from __future__ import annotations

from kavalai.serve._server import build_mcp_server, call_kernel_tool, tool_error_result, tool_result
from kavalai.serve._tools import ExposedTools, Naming, mcp_input_schema, mcp_output_schema
from kavalai.serve._transports import BearerTokenMiddleware, ReadyCallback, http_app, serve_http, serve_stdio

__all__ = [
    "BearerTokenMiddleware",
    "ExposedTools",
    "Naming",
    "ReadyCallback",
    "build_mcp_server",
    "call_kernel_tool",
    "http_app",
    "mcp_input_schema",
    "mcp_output_schema",
    "serve_http",
    "serve_stdio",
    "tool_error_result",
    "tool_result",
]
