"""``kavalai serve`` traced the standard OpenTelemetry way: the ``OTEL_*`` environment, ``--tracing``, a
``tracing:`` key, and ``opentelemetry-instrument``.

The served process is the real ``kavalai`` command, driven by the MCP SDK's client over stdio; its spans go over
OTLP/HTTP to a real receiver on 127.0.0.1 (``tests/servers/otlp_receiver.py``) that decodes the protobuf. The client
sends a W3C ``traceparent`` in the call's ``_meta``, so the served call's spans must continue that trace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from opentelemetry import context, propagate
from tests.servers.otlp_receiver import ReceivedSpan, Receiver, receive_traces

TOOLS = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
BIN = Path(sys.executable).parent
_INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


def _config(folder: Path, **extra: object) -> Path:
    (folder / "traced_tools.py").write_text(TOOLS, encoding="utf-8")
    document = {
        "python_functions": [{"function": "traced_tools.add", "name": "math.add"}],
        "mcp_servers": [{"name": "demo", "command": sys.executable, "args": ["-m", "kavalai.demo.mcp_server"]}],
        **extra,
    }
    path = folder / "tools.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _environment(receiver: Receiver, **variables: str) -> dict[str, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    # the batch processor sends every 50 ms; the process sends the rest when it ends
    return {**clean, "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, **variables}


#: The ``traceparent`` each ``tools/call`` carried as it left the client, by tool name (see :class:`_Noting`).
_SENT: dict[str, str] = {}


class _Noting:
    """The write side of the client's transport, noting the ``traceparent`` each ``tools/call`` carries as sent.

    The client continues the trace of :data:`TRACEPARENT` (in its ``_meta`` and as the current context). Where no
    tracer provider is set in this process it is sent as it is; where an earlier test set a recording one, the MCP SDK
    puts its own CLIENT span's in its place (a child of it). Either way the served spans must continue what was
    sent, so that is what the checks read.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def send(self, item: SessionMessage) -> None:
        message = item.message.model_dump(by_alias=True)
        params = message.get("params") or {}
        sent = (params.get("_meta") or {}).get("traceparent")
        if message.get("method") == "tools/call" and sent is not None:
            _SENT[params["name"]] = sent
        await self._stream.send(item)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Noting:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _noting(transport: Any) -> AsyncIterator[tuple[Any, _Noting]]:
    async with transport as (read, write):
        yield read, _Noting(write)


@contextlib.asynccontextmanager
async def _served(command: list[str], folder: Path, env: dict[str, str]) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(folder), env=env)
    _SENT.clear()
    with (folder / "serve.log").open("w") as errlog:
        async with Client(_noting(stdio_client(params, errlog=errlog))) as client:
            yield client


async def _call_both(client: Client) -> None:
    """A Python tool and a proxied MCP tool, each under the client's trace."""
    names = {tool.title: tool.name for tool in (await client.list_tools()).tools}
    token = context.attach(propagate.extract({"traceparent": TRACEPARENT}))
    try:
        added = await client.call_tool(names["python://math.add"], {"a": 2, "b": 40}, meta={"traceparent": TRACEPARENT})
        stats = await client.call_tool("mcp_demo_text_stats", {"text": "a bb"}, meta={"traceparent": TRACEPARENT})
    finally:
        context.detach(token)
    assert added.structured_content == {"result": 42}
    assert stats.structured_content is not None
    assert stats.structured_content["words"] == 2


def _sent_parent(tool: str) -> str:
    """The parent span id the client sent with its call of ``tool`` (in :data:`TRACEPARENT`'s trace)."""
    version, trace_id, parent_id, flags = _SENT[tool].split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    return parent_id


def _one(spans: list[ReceivedSpan]) -> ReceivedSpan:
    assert len(spans) == 1, spans
    return spans[0]


def _check_call_spans(receiver: Receiver) -> None:
    """The served calls' spans: the SDK's SERVER span continues the client's trace, kavalai's ``execute_tool``
    span nests under it, and the proxied call's CLIENT span under that."""
    server = _one([s for s in receiver.named("tools/call python_math_add") if s.kind == "SERVER"])
    assert (server.trace_id, server.parent_span_id) == (TRACE_ID, _sent_parent("python_math_add"))
    tool = _one(receiver.named("execute_tool python://math.add"))
    assert (tool.trace_id, tool.parent_span_id, tool.kind) == (TRACE_ID, server.span_id, "INTERNAL")
    assert tool.scope == "kavalai"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "python://math.add"
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["gen_ai.tool.description"] == "Add two integers."
    proxied = _one(receiver.named("execute_tool mcp://demo.text_stats"))
    outer = _one([s for s in receiver.named("tools/call mcp_demo_text_stats") if s.kind == "SERVER"])
    assert (proxied.trace_id, proxied.parent_span_id) == (TRACE_ID, outer.span_id)
    assert proxied.attributes["kavalai.tool.server"] == "demo"
    operation = _one(receiver.named("tools/call text_stats"))
    assert (operation.trace_id, operation.parent_span_id, operation.kind) == (TRACE_ID, proxied.span_id, "INTERNAL")
    # one CLIENT span for the upstream request: the MCP SDK's (kavalai's operation span is not a second one)
    clients = [s for s in receiver.spans if s.kind == "CLIENT" and s.trace_id == TRACE_ID]
    inner = _one([s for s in clients if "text_stats" in s.name])
    assert (inner.name, inner.parent_span_id) == ("MCP send tools/call text_stats", operation.span_id)


async def test_the_otel_environment_traces_a_served_call(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with anyio.fail_after(40):
        async with receive_traces() as receiver:
            env = _environment(
                receiver, OTEL_SERVICE_NAME="served-tools", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test"
            )
            async with _served([str(BIN / "kavalai"), "serve", str(config)], tmp_path, env) as client:
                await _call_both(client)
            # the client closed stdin: the process ended, sending what it still held
    _check_call_spans(receiver)
    assert set(receiver.content_types) == {"application/x-protobuf"}
    tool = _one(receiver.named("execute_tool python://math.add"))
    assert tool.resource["service.name"] == "served-tools"
    assert tool.resource["deployment.environment"] == "test"
    log = (tmp_path / "serve.log").read_text()
    assert f"kavalai serve: tracing as service 'served-tools' to OTLP/HTTP {receiver.url}/v1/traces" in log


async def test_the_command_line_wins_over_the_file_and_the_file_over_the_environment(tmp_path: Path) -> None:
    config = _config(tmp_path, tracing=False)
    with anyio.fail_after(40):
        async with receive_traces() as receiver:
            env = _environment(receiver)  # the environment asks for traces; the file's `tracing: false` wins
            async with _served([str(BIN / "kavalai"), "serve", str(config)], tmp_path, env) as client:
                await _call_both(client)
            assert receiver.spans == []
            assert "tracing" not in (tmp_path / "serve.log").read_text()
            async with _served([str(BIN / "kavalai"), "serve", str(config), "--tracing"], tmp_path, env) as client:
                await _call_both(client)  # --tracing wins over the file
    _check_call_spans(receiver)
    assert _one(receiver.named("execute_tool python://math.add")).resource["service.name"] == "kavalai"


def test_an_exporter_nobody_provides_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess

    env = {**os.environ, "OTEL_TRACES_EXPORTER": "zipkin_json"}
    done = subprocess.run(
        [str(BIN / "kavalai"), "serve", str(_config(tmp_path))],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2
    assert "no trace exporter 'zipkin_json' is installed" in done.stderr


async def test_under_opentelemetry_instrument_the_global_provider_is_used(tmp_path: Path) -> None:
    instrument = shutil.which("opentelemetry-instrument", path=str(BIN))
    assert instrument is not None, "opentelemetry-distro (a dev dependency) provides opentelemetry-instrument"
    config = _config(tmp_path)
    with anyio.fail_after(40):
        async with receive_traces() as receiver:
            # opentelemetry-instrument sets the provider up (its default OTLP protocol is gRPC: HTTP is asked for)
            env = _environment(
                receiver,
                OTEL_SERVICE_NAME="instrumented",
                OTEL_TRACES_EXPORTER="otlp_proto_http",
                OTEL_METRICS_EXPORTER="none",
                OTEL_LOGS_EXPORTER="none",
            )
            command = [instrument, str(BIN / "kavalai"), "serve", str(config)]
            async with _served(command, tmp_path, env) as client:
                await _call_both(client)
            await _wait_for(receiver, "execute_tool mcp://demo.text_stats")
    _check_call_spans(receiver)  # each span once: kavalai set no second provider
    assert _one(receiver.named("execute_tool python://math.add")).resource["service.name"] == "instrumented"
    log = (tmp_path / "serve.log").read_text()
    assert "kavalai serve: tracing with the tracer provider already set" in log


async def _wait_for(receiver: Receiver, name: str) -> None:
    """Until a span named ``name`` arrived (the instrumented process sends on its own schedule, at most 10 s)."""
    with anyio.fail_after(10):
        while not receiver.named(name):  # noqa: ASYNC110 - spans arrive over HTTP; no event to wait on
            await anyio.sleep(0.05)


async def test_under_opentelemetry_instrument_no_span_reaches_the_protocol_stream(tmp_path: Path) -> None:
    """The console exporter ``opentelemetry-instrument`` sets up writes to stdout; its last batch, flushed as the
    process ends, must not land on the stream the client reads the protocol from."""
    instrument = shutil.which("opentelemetry-instrument", path=str(BIN))
    assert instrument is not None
    config = _config(tmp_path)
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env = {
        **clean,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "600000",  # nothing sent on a schedule: every span waits for the end
    }
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _INITIALIZE},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "python_math_add", "arguments": {"a": 2, "b": 3}},
        },
    ]
    with anyio.fail_after(60):
        process = await anyio.open_process(
            [instrument, str(BIN / "kavalai"), "serve", str(config)], cwd=tmp_path, env=env
        )
        async with process:
            assert process.stdin is not None
            assert process.stdout is not None
            assert process.stderr is not None
            out, err = bytearray(), bytearray()

            async def read(stream: Any, into: bytearray) -> None:
                async for chunk in stream:
                    into.extend(chunk)

            async with anyio.create_task_group() as group:
                group.start_soon(read, process.stdout, out)
                group.start_soon(read, process.stderr, err)
                await process.stdin.send((json.dumps(requests[0]) + "\n").encode())
                while b'"id":1' not in out.replace(b" ", b""):  # noqa: ASYNC110 - read by the task above
                    await anyio.sleep(0.02)
                await process.stdin.send("".join(json.dumps(r) + "\n" for r in requests[1:]).encode())
                while b'"id":2' not in out.replace(b" ", b""):  # noqa: ASYNC110
                    await anyio.sleep(0.02)
                await process.stdin.aclose()  # the client is done: the process ends, flushing its spans
            await process.wait()
    lines = [line for line in out.decode().splitlines() if line.strip()]
    assert len(lines) == 2, out.decode()
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in lines)
    assert '"name": "execute_tool python://math.add"' in err.decode()  # the spans went to stderr instead


#: `kavalai` as installed without the otel extra: the OpenTelemetry SDK cannot be imported.
_WITHOUT_SDK = (
    "import sys; sys.modules['opentelemetry.sdk'] = None; from kavalai.cli.main import main; sys.exit(main())"
)


async def test_an_otlp_endpoint_in_the_environment_without_the_sdk_serves_untraced(tmp_path: Path) -> None:
    config = _config(tmp_path)
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env = {**clean, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}  # a host's, for some other program
    with anyio.fail_after(40):
        async with _served([sys.executable, "-c", _WITHOUT_SDK, "serve", str(config)], tmp_path, env) as client:
            names = {tool.title: tool.name for tool in (await client.list_tools()).tools}
            added = await client.call_tool(names["python://math.add"], {"a": 2, "b": 40})
    assert added.structured_content == {"result": 42}
    log = (tmp_path / "serve.log").read_text()
    assert (
        log.count("kavalai serve: not tracing: Tracing needs the OpenTelemetry SDK: pip install 'kavalai[otel]'") == 1
    )
    with anyio.fail_after(30):
        asked = await anyio.run_process(
            [sys.executable, "-c", _WITHOUT_SDK, "serve", str(config), "--tracing"], env=env, check=False
        )
    assert asked.returncode == 2  # asked for on the command line: not ignored
    assert "Tracing needs the OpenTelemetry SDK" in asked.stderr.decode()
