"""The secret masker of one origin (:class:`Redactor`) and the secret gate: the process's one registry, which
every exception message, log record, span, CLI stderr line and JSON-RPC error passes."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from kavalai import ServerConnectionError
from kavalai.config import KernelConfig, build_kernel, expand_env
from kavalai.errors import FunctionKernelException
from kavalai.secrets import (
    MASK,
    Redactor,
    get_logger,
    holds_secret,
    looks_secret,
    redact,
    redacting_stderr,
    register_secret,
    register_url_credentials,
)


def test_every_secret_is_masked_longest_first() -> None:
    redactor = Redactor(["abc123", "abc123-extended", ""])
    assert redactor.redact("token abc123-extended and abc123") == f"token {MASK} and {MASK}"
    assert redactor.holds("x abc123 y")
    assert not redactor.holds("nothing here")
    assert bool(redactor)
    assert not Redactor([])


def test_short_values_are_kept_when_a_minimum_is_set() -> None:
    redactor = Redactor(["1", "hunter22"], min_length=4)
    assert redactor.redact("retry 1 with hunter22") == f"retry 1 with {MASK}"
    assert not redactor.holds("1")


def test_any_object_is_read_as_text() -> None:
    redactor = Redactor(["s3cr3t"])
    assert redactor.redact(ValueError("bad s3cr3t")) == f"bad {MASK}"
    assert "s3cr3t" not in repr(redactor)


# ------------------------------------------------------------------------------------------ the secret gate
# The examples: a value read by ${VAR} in a configuration never shows in an error, a log record, a span or
# the CLI's stderr, wherever it was used (args, urls, headers, env).


def _secret(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex}"  # a fresh value per test: the registry is the process's


async def test_an_expanded_variable_in_a_stdio_servers_args_is_masked_in_its_start_error() -> None:
    secret = _secret("Sup3rS3cret")
    document = {
        "mcp_servers": [{"name": "m", "command": "/nonexistent/bin/mcp-thing", "args": ["--api-key", "${KV_SECRET}"]}]
    }
    kernel = build_kernel(KernelConfig.from_dict(document), env={"KV_SECRET": secret})
    with pytest.raises(ServerConnectionError) as caught:
        async with kernel:  # connects
            pass
    assert "MCP server 'm'" in str(caught.value)
    assert secret not in str(caught.value)
    assert secret not in repr(caught.value)
    assert MASK in str(caught.value)


async def test_an_expanded_variable_in_a_rest_url_is_masked_in_the_unreachable_error() -> None:
    token = _secret("bot-token")
    document = {"rest_servers": [{"name": "api", "url": "http://127.0.0.1:1/bot${TOKEN}"}]}
    kernel = build_kernel(KernelConfig.from_dict(document), env={"TOKEN": token})
    kernel.register_rest_tool("api", "ping", "GET")
    async with kernel:
        with pytest.raises(ServerConnectionError, match="cannot reach REST server 'api'") as caught:
            await kernel.call_tool("rest://api.ping")
    assert token not in str(caught.value)


def test_an_expanded_variable_is_masked_in_log_records_and_their_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    secret = _secret("header-value")
    expand_env({"headers": {"X-Key": "${KEY}"}}, {"KEY": secret})
    logger = get_logger("kavalai.test_secrets")
    with caplog.at_level(logging.INFO, logger="kavalai.test_secrets"):
        try:
            raise RuntimeError(f"the server echoed {secret}")
        except RuntimeError:
            logger.exception("failed with %s", secret)
    [record] = caplog.records
    assert secret not in record.getMessage()
    assert secret not in (record.exc_text or "")
    assert secret not in caplog.text


def test_public_variables_of_a_workflow_are_not_registered() -> None:
    folder = f"/tmp/{uuid.uuid4().hex}/flows"
    assert expand_env("${WORKFLOW_DIR}/x", {"WORKFLOW_DIR": folder}, public={"WORKFLOW_DIR"}) == f"{folder}/x"
    assert redact(folder) == folder
    assert not holds_secret(folder)


def test_an_expanded_variable_is_masked_in_span_attributes_status_and_exception_events() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kavalai import FunctionKernel, ToolExecutionError, pythontool
    from kavalai.tracing import tool_tracing

    secret = _secret("span-secret")
    expand_env("${SPAN_SECRET}", {"SPAN_SECRET": secret})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def leaky(text: str) -> str:
        """Echo, then fail with the secret in the message."""
        raise ValueError(f"bad input {text} with {secret}")

    async def run() -> None:
        async with FunctionKernel() as kernel:
            kernel.add_middleware(tool_tracing(tracer_provider=provider, capture_content=True))
            kernel.register_python_tool("leaky", pythontool(leaky))
            with pytest.raises(ToolExecutionError):
                await kernel.call_tool("python://leaky", {"text": secret})

    anyio.run(run)
    [finished] = exporter.get_finished_spans()
    shown = json.dumps(
        {
            "attributes": dict(finished.attributes or {}),
            "status": finished.status.description,
            "events": [dict(event.attributes or {}) for event in finished.events],
        }
    )
    assert finished.events  # the exception was recorded, masked
    assert secret not in shown
    assert MASK in shown


def test_serve_never_prints_the_otlp_endpoints_userinfo(tmp_path: Path) -> None:
    password = _secret("TracerPw")
    (tmp_path / "gate_tools.py").write_text('def add(a: int, b: int) -> int:\n    """Add."""\n    return a + b\n')
    (tmp_path / "tools.yaml").write_text('{"python_functions": [{"function": "gate_tools.add", "name": "m.add"}]}')
    clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env = {**clean, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://tracer:{password}@127.0.0.1:1"}
    command = [str(Path(sys.executable).parent / "kavalai"), "serve", "tools.yaml"]
    done = subprocess.run(command, input="", capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert "kavalai serve: tracing as service 'kavalai' to OTLP/HTTP http://127.0.0.1:1/v1/traces" in done.stderr
    assert password not in done.stderr
    assert "tracer:" not in done.stderr


def test_the_cli_stderr_passes_the_gate(capsys: pytest.CaptureFixture[str]) -> None:
    secret = _secret("cli-secret")
    register_secret(secret)
    with redacting_stderr():
        print(f"kavalai: failed with {secret}", file=sys.stderr)
    assert capsys.readouterr().err == f"kavalai: failed with {MASK}\n"


def test_short_values_and_url_credentials() -> None:
    register_secret("8080", None, "")
    assert redact("port 8080") == "port 8080"  # a port is no secret: under MIN_SECRET_LENGTH
    password = _secret("pw")
    register_url_credentials(f"https://user:{password}@example.com/")
    assert redact(f"https://user:{password}@example.com/") == f"https://user:{MASK}@example.com/"
    error = FunctionKernelException(f"the url had {password}")
    assert password not in str(error)
    assert password not in repr(error)


# ------------------------------------------------------------------ dependencies' loggers, values given in Python


@pytest.mark.parametrize("name", ["mcp.client.auth.oauth2", "httpx2", "aiohttp.client", "dbos", "temporalio.worker"])
def test_a_dependencys_log_record_is_masked_whatever_handler_shows_it(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = _secret("dep-token")
    register_secret(secret)
    with caplog.at_level(logging.INFO, logger=name):
        logging.getLogger(name).info("refreshed the token %s", secret)
        try:
            raise RuntimeError(f"the server echoed {secret}")
        except RuntimeError:
            logging.getLogger(name).exception("failed")
    assert len(caplog.records) == 2
    assert secret not in caplog.text
    assert all(secret not in record.getMessage() for record in caplog.records)
    assert MASK in caplog.records[0].getMessage()


def test_the_record_gate_wraps_the_factory_in_place_once() -> None:
    register_secret(_secret("factory"))
    factory = logging.getLogRecordFactory()
    register_secret(_secret("factory-again"))
    assert logging.getLogRecordFactory() is factory  # installed once, not stacked per secret
    record = factory("x", logging.INFO, __file__, 1, "%d %d", ("one",), None)  # arguments that do not format
    assert record.args == ("one",)  # left to the handler to report, as without the gate


async def test_a_secret_variable_passed_in_python_args_is_masked_in_the_start_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kavalai import FunctionKernel, McpServer

    secret = _secret("PyArgS3cret")
    monkeypatch.setenv("KVT_SERVICE_API_KEY", secret)
    server = McpServer(
        name="m", command="/nonexistent/bin/mcp-thing", args=["--api-key", os.environ["KVT_SERVICE_API_KEY"]]
    )
    kernel = FunctionKernel()
    kernel.register_mcp_server(server)
    with pytest.raises(ServerConnectionError) as caught:
        async with kernel:
            pass
    assert "MCP server 'm'" in str(caught.value)
    assert secret not in str(caught.value)
    assert MASK in str(caught.value)


def test_mcp_env_values_of_secret_variables_are_known_process_wide() -> None:
    from kavalai import McpServer

    token, level = _secret("svc-token"), _secret("verbose")
    McpServer(name="m", command="srv", env={"SERVICE_TOKEN": token, "KVT_LOG_MODE": level})
    assert redact(f"echo {token}") == f"echo {MASK}"
    assert redact(f"mode {level}") == f"mode {level}"  # not a secret by its name: masked in that server's errors only


async def test_a_secret_variable_in_a_python_rest_url_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    from kavalai import FunctionKernel, RestServer

    token = _secret("py-bot-token")
    monkeypatch.setenv("KVT_BOT_TOKEN", token)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="api", url=f"http://127.0.0.1:1/bot{os.environ['KVT_BOT_TOKEN']}"))
    kernel.register_rest_tool("api", "ping", "GET")
    async with kernel:
        with pytest.raises(ServerConnectionError, match="cannot reach REST server 'api'") as caught:
            await kernel.call_tool("rest://api.ping")
    assert token not in str(caught.value)


# ------------------------------------------------------------------------- which ${VAR} expansions are secrets


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("DB_PASSWORD", True),
        ("CLIENT_SECRET", True),
        ("AUTH_HEADER", True),
        ("DB_PWD", True),
        ("APIKEY", True),
        ("PWD", False),
        ("SEARCH_SERVER", False),
        ("LOG_LEVEL", False),
        ("DATABASE_URL", False),
        ("WORKFLOW_DIR", False),
    ],
)
def test_which_names_look_secret(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


def test_a_non_secret_variable_is_not_masked_but_a_secret_one_is() -> None:
    name, key = _secret("websearch"), _secret("sk-live")
    env = {"KVT_SEARCH_SERVER": name, "KVT_SEARCH_API_KEY": key}
    assert expand_env("mcp://${KVT_SEARCH_SERVER}.search?key=${KVT_SEARCH_API_KEY}", env) == (
        f"mcp://{name}.search?key={key}"
    )
    assert redact(f"mcp://{name}.search?key={key}") == f"mcp://{name}.search?key={MASK}"


def test_url_credentials_of_any_variable_are_masked() -> None:
    password = _secret("dbpw")
    expand_env("${KVT_DATABASE_URL}", {"KVT_DATABASE_URL": f"postgresql://app:{password}@db.internal/app"})
    assert redact(f"connect to postgresql://app:{password}@db.internal/app") == (
        f"connect to postgresql://app:{MASK}@db.internal/app"
    )


def test_secret_and_public_variables_can_be_declared() -> None:
    host, limit, every = _secret("internal-host"), _secret("4096tokens"), _secret("anything")
    env = {
        "KVT_HOSTNAME": host,
        "KVT_TOKEN_LIMIT": limit,
        "KAVALAI_SECRET_VARIABLES": "KVT_HOSTNAME",
        "KAVALAI_PUBLIC_VARIABLES": "KVT_TOKEN_LIMIT",
    }
    expand_env("${KVT_HOSTNAME} ${KVT_TOKEN_LIMIT}", env)
    assert redact(host) == MASK  # declared secret, though its name is not
    assert redact(limit) == limit  # declared public, though its name looks secret
    expand_env("${KVT_PLAIN}", {"KVT_PLAIN": every, "KAVALAI_SECRET_VARIABLES": "*"})
    assert redact(every) == MASK  # '*': every variable, as before


def test_log_lines_to_writes_the_kavalai_loggers_warnings_as_masked_lines() -> None:
    import io

    from kavalai.secrets import get_logger, log_lines_to, register_secret

    secret = f"s3cret-{uuid.uuid4().hex}"
    register_secret(secret)
    stream = io.StringIO()
    with log_lines_to(stream):
        get_logger("kavalai.serve").warning("sent %s", secret)
        logging.getLogger("kavalai.made.elsewhere").warning("also %s", secret)  # no filter of its own
        get_logger("kavalai").info("below the level")
    get_logger("kavalai").warning("after the block")
    assert stream.getvalue().splitlines() == [
        "kavalai.serve: WARNING: sent ***",
        "kavalai.made.elsewhere: WARNING: also ***",
    ]
