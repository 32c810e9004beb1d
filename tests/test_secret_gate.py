"""The secret gate's enumeration: the ways text leaves the process, found in the source, each crossing
:mod:`kavalai.secrets`. A new exception class, logger, span call, CLI entry or serve error path that goes around
it fails here, naming where."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kavalai
from kavalai.errors import FunctionKernelException

SRC = Path(__file__).resolve().parents[1] / "src" / "kavalai"

#: Exception classes that are not FunctionKernelExceptions: each is caught inside kavalai and turned into one (or
#: into a built-in exception a model reads), so its text never leaves as it is. A new one must be added here with
#: where it is translated, or derive from FunctionKernelException (whose message the gate masks).
INTERNAL_EXCEPTIONS = {
    "kavalai.adapters.mcp._era.InputRefused": "a handler's refusal, turned into the call's ToolExecutionError",
    "kavalai.adapters.mcp._http_limits.MessageTooLargeError": "an httpx2 StreamError the SDK turns into a JSON-RPC "
    "error, mapped by adapters/mcp/_errors.py",
    "kavalai.adapters.rest._openapi._Unsupported": "an OpenAPI construct skipped at import",
    "kavalai.agent._tools.HookFailures": "collected hook failures, reported as the agent's error",
    "kavalai.agent._tools._HookFailed": "one hook's failure, collected into HookFailures",
    "kavalai.agent.code_mode.CodeModeError": "a snippet's error, shown to the model as the tool result",
    "kavalai.auth._flow._Carrier": "carries an AuthenticationError through aiohttp",
    "kavalai.auth._loopback.AuthorizationDenied": "the sign-in's refusal, turned into AuthenticationError",
    "kavalai.cli._boundary.UsageError": "a command line the command cannot use: printed as its one line, status 2",
    "kavalai.durable._runner.UnknownRunError": "a run id that is not in the store (a LookupError naming the id)",
    "kavalai.durable._schema.SchemaVersionError": "a store of another schema version (names the versions)",
    "kavalai.http._body.BodyTooLargeError": "turned into ResponseTooLargeError / a fetch tool's ValueError",
    "kavalai.http._guard.HopRefusedError": "turned into OutboundRefusedError / a fetch tool's PermissionError",
    "kavalai.llm.schemas._Unsupported": "a schema construct a provider cannot take, handled in llm/schemas.py",
    "kavalai.workflow._expressions._Missing": "a missing name, turned into ExpressionError",
    "kavalai.workflow._expressions._Refused": "a refused operation, turned into ExpressionError",
    "kavalai.workflow._meter.EvaluationDeadlineError": "an evaluation past its deadline, turned into the run's "
    "timeout (templates) or ExpressionError (expressions)",
    "kavalai.workflow._meter.EvaluationLimitError": "an evaluation over its operation budget, turned into "
    "ExpressionError or the node's error",
    "kavalai.workflow._meter._SliceSpent": "an evaluation out of its event-loop slice, begun again off the loop",
    "kavalai.workflow._sizes.SizeError": "a value over a size bound, turned into the node's error",
}

#: Calls that put text into a span.
SPAN_CALLS = frozenset(
    {
        "set_attribute",
        "set_attributes",
        "set_status",
        "record_exception",
        "add_event",
        "start_as_current_span",
        "start_span",
    }
)


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _exception_classes() -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for info in pkgutil.walk_packages(kavalai.__path__, "kavalai."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__.startswith("kavalai"):
                found.add(value)
    return found


def test_every_exception_is_a_function_kernel_exception_or_translated_inside() -> None:
    classes = _exception_classes()
    outside = sorted(
        f"{cls.__module__}.{cls.__qualname__}" for cls in classes if not issubclass(cls, FunctionKernelException)
    )
    assert [name for name in outside if name not in INTERNAL_EXCEPTIONS] == []
    assert [name for name in INTERNAL_EXCEPTIONS if name not in outside] == []  # the list stays true
    assert len([cls for cls in classes if issubclass(cls, FunctionKernelException)]) > 20  # the walk finds them


def test_the_base_exception_masks_registered_secrets() -> None:
    from kavalai.secrets import MASK, register_secret

    register_secret("gate-secret-0451")
    error = FunctionKernelException("it said gate-secret-0451")
    assert str(error) == f"it said {MASK}"
    assert "gate-secret-0451" not in repr(error)


def _raised_from(cause: BaseException, *, explicit: bool) -> FunctionKernelException:
    """A kavalai error raised while ``cause`` is handled: ``from cause`` if ``explicit``, else as its context."""
    try:
        try:
            raise cause
        except Exception as foreign:
            if explicit:
                raise FunctionKernelException("the call failed") from foreign
            raise FunctionKernelException("the call failed")  # noqa: B904 - the implicit context is the case
    except FunctionKernelException as error:
        return error


@pytest.mark.parametrize("explicit", [True, False], ids=["cause", "context"])
def test_a_foreign_error_chained_to_a_kavalai_error_is_shown_masked(explicit: bool) -> None:
    import traceback

    from kavalai.secrets import MASK, register_secret

    secret = "chain-secret-7731"
    register_secret(secret)
    deep = ValueError(f"token {secret} refused")
    outer = RuntimeError("the client failed")
    outer.__cause__ = deep  # the secret is two links down, under a foreign error that holds none
    noted = LookupError("not found")
    noted.add_note(f"while sending token {secret}")  # a note the traceback module prints under the error
    for cause in (ValueError(f"upstream said {secret}"), outer, noted):
        error = _raised_from(cause, explicit=explicit)
        shown = "".join(traceback.format_exception(error))
        assert secret not in shown
        assert f"builtins.{type(cause).__name__}: " in shown  # the link is kept, named, masked
        assert MASK in shown
        assert "the call failed" in shown
    plain = _raised_from(KeyError("no secret here"), explicit=explicit)
    link = plain.__cause__ if explicit else plain.__context__
    assert isinstance(link, KeyError)  # a chain without a secret is the chain itself


def test_the_members_of_a_chained_exception_group_are_shown_masked() -> None:
    """Hostile round 8, case 11: a tool raising ``ExceptionGroup("many", [RuntimeError(secret)])`` (anyio's and
    ``asyncio.TaskGroup``'s way of failing) gave a ``ToolExecutionError`` whose formatted traceback printed the
    member's secret: the chain's gate looked at causes and contexts, not at a group's members."""
    import traceback

    from kavalai.secrets import MASK, register_secret

    secret = "group-secret-5e21c9"
    register_secret(secret)
    caused = RuntimeError("the member")
    caused.__cause__ = OSError(f"connect with {secret}")
    noted = ValueError("noted")
    noted.add_note(f"note {secret}")
    many: list[Exception] = [KeyError(f"k{i}") for i in range(200)]
    many.insert(10, LookupError(secret))  # shown (among the first 15), and found past the first 32 looked at
    groups = [
        ExceptionGroup("many", [RuntimeError(f"inner {secret}"), ValueError("plain")]),
        ExceptionGroup("outer", [ExceptionGroup("inner", [OSError(secret)])]),
        ExceptionGroup("caused", [caused]),
        ExceptionGroup("noted", [noted]),
        ExceptionGroup("long", many),
        BaseExceptionGroup("base", [KeyboardInterrupt(secret)]),
    ]
    for group in groups:
        error = FunctionKernelException("the call failed")
        error.__cause__ = group  # as ``raise ... from group`` links it (a BaseExceptionGroup is raised past except)
        shown = "".join(traceback.format_exception(error))
        assert secret not in shown, group.message
        assert MASK in shown
        assert f"builtins.{type(group).__name__}: {group.message}" in shown  # named, its members shown after it
        assert "+---------------- 1 ----------------" in shown
    plain = ExceptionGroup("plain", [KeyError("no secret here")])
    assert _raised_from(plain, explicit=True).__cause__ is plain  # a group without a secret is itself


def _logger_name(call: ast.Call) -> str | None:
    if not call.args:
        return "root"
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
        return str(first.values[0].value)
    return "(computed)"


def test_every_kavalai_logger_is_made_by_the_gate() -> None:
    found = []
    for path, tree in _sources():
        if path == SRC / "secrets.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getLogger":
                name = _logger_name(node)
                # a dependency's logger: bm25s's level is reset, DBOS's gets a filter for a warning it need not give
                if name is None or not name.startswith(("bm25s", "dbos")):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}: getLogger({name!r})")
    assert found == [], "make kavalai loggers with kavalai.secrets.get_logger (its filter masks secrets)"


def test_only_the_tracing_module_writes_into_spans() -> None:
    found = [
        f"{path.relative_to(SRC)}:{node.lineno}: {node.func.attr}"
        for path, tree in _sources()
        if path not in (SRC / "tracing.py", SRC / "_span_masking.py")  # the span gate writes masked values only
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SPAN_CALLS
    ]
    assert found == [], "set span attributes with kavalai.tracing.span / annotate (they mask secrets)"


def test_every_cli_command_runs_inside_the_redacting_stderr() -> None:
    tree = ast.parse((SRC / "cli" / "main.py").read_text(encoding="utf-8"))
    [main] = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main"]
    withs = [node for node in main.body if isinstance(node, ast.With)]
    # the secret gate, with the CLI boundary's terminal_text after it: stderr shows no secret and no terminal command
    assert [ast.unparse(item.context_expr) for w in withs for item in w.items] == [
        "redacting_stderr(also=terminal_text)"
    ]
    raw = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path, tree in _sources()
        if path.is_relative_to(SRC / "cli")
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in ("__stderr__", "__stdout__")
    ]
    assert raw == []  # the real stream, around the gate


def test_serve_sends_tool_errors_through_one_function_that_masks() -> None:
    tree = ast.parse((SRC / "serve" / "_errors.py").read_text(encoding="utf-8"))
    makers = []
    for path, module in _sources():
        if not path.is_relative_to(SRC / "serve"):
            continue
        for function in ast.walk(module):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.keyword) and node.arg == "is_error":
                    makers.append(f"{path.name}:{function.name}")
    assert makers == ["_errors.py:tool_error_result"]
    [gate] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "tool_error_result"]
    assert "redact(message)" in ast.unparse(gate)


def test_no_local_handlers_exception_text_is_sent_to_a_server() -> None:
    """In the callbacks answering a server (sampling, elicitation, roots), an exception caught is never part of what
    is returned: the server gets a fixed refusal. Only kavalai's own explanation (a FunctionKernelException, whose
    message passed the secret gate: a call made with no answerer) is told."""
    tree = ast.parse((SRC / "adapters" / "mcp" / "_client_side.py").read_text(encoding="utf-8"))
    handlers = [node for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler)]
    assert handlers  # the callbacks do catch their handlers' failures
    leaks = [
        f"line {ret.lineno}"
        for handler in handlers
        if handler.name is not None
        and not (isinstance(handler.type, ast.Name) and handler.type.id == "FunctionKernelException")
        for ret in ast.walk(ast.Module(body=handler.body, type_ignores=[]))
        if isinstance(ret, ast.Return) and any(isinstance(n, ast.Name) and n.id == handler.name for n in ast.walk(ret))
    ]
    assert leaks == []


def test_every_server_built_under_serve_is_gated() -> None:
    """Every ``Server(...)`` construction under serve/ is returned through ``gated(...)``, which puts the redacting
    middleware on it: an exception escaping any request (a listing, a read, a call, the SDK's own handlers) is masked
    before the SDK sends its text to a host."""
    built = []
    for path, module in _sources():
        if not path.is_relative_to(SRC / "serve"):
            continue
        for function in ast.walk(module):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            own = list(_own_nodes(function))
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Server" for n in own):
                returns = [ast.unparse(n.value) for n in own if isinstance(n, ast.Return) and n.value is not None]
                built.append((path.name, function.name, returns))
    assert built == [("_server.py", "build_mcp_server", ["gated(server)"])]


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not descending into the functions and classes it defines."""
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


async def test_the_redacting_middleware_is_innermost_on_every_built_server(tmp_path: Path) -> None:
    """The servers ``build_mcp_server`` makes (tools alone; tools and the relayed MCP handlers) carry the redacting
    middleware innermost, so the SDK's middleware before it (its tracing) sees only masked errors, and every handler
    registered on them is reached through it (the SDK composes ``Server.middleware`` around every request)."""
    from kavalai import FunctionKernel, McpServer, pythontool
    from kavalai.serve import build_mcp_server
    from kavalai.serve._errors import redacting

    @pythontool
    def ping() -> str:
        """Answer."""
        return "pong"

    kernel = FunctionKernel()
    kernel.register_python_tool("t.ping", ping)
    plain = build_mcp_server(kernel)
    kernel.register_mcp_server(McpServer(name="m", command=sys.executable, args=["-c", "pass"]))
    relaying = build_mcp_server(kernel)
    try:
        for server in (plain, relaying):
            assert server.middleware[-1] is redacting
            assert server.middleware.count(redacting) == 1
        assert "resources/read" in relaying._request_handlers  # the relayed handlers are registered ...
        assert "resources/read" not in plain._request_handlers  # ... only when there are MCP servers
    finally:
        await kernel.close()


async def test_an_exception_escaping_a_served_request_is_masked() -> None:
    import uuid

    import pytest
    from mcp.shared.exceptions import MCPError

    from kavalai.secrets import MASK, register_secret
    from kavalai.serve._errors import redacting

    secret = f"handler-secret-{uuid.uuid4().hex}"
    register_secret(secret)

    class Context:
        method = "resources/read"

    async def leaky(ctx: object) -> None:
        raise RuntimeError(f"backend said {secret}")

    async def protocol(ctx: object) -> None:
        raise MCPError(-32602, f"bad uri {secret}", {"uri": secret})

    with pytest.raises(MCPError) as caught:
        await redacting(Context(), leaky)  # type: ignore[arg-type]
    assert caught.value.message == "kavalai serve failed internally (RuntimeError)"  # no handler-private text
    with pytest.raises(MCPError) as caught:
        await redacting(Context(), protocol)  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.message, caught.value.data) == (-32602, f"bad uri {MASK}", None)


UNCAUGHT = """
import sys, threading
from kavalai.errors import ToolExecutionError
from kavalai.secrets import register_secret

SECRET = "kv-uncaught-" + "7d1e0c2b"  # not in this source as one word: the printed source lines do not hold it
register_secret(SECRET)


def fail():
    try:
        raise ValueError(f"the foreign error holds {SECRET}")
    except ValueError as error:
        raise ToolExecutionError("the tool failed") from error


if sys.argv[1] == "thread":
    thread = threading.Thread(target=fail)
    thread.start()
    thread.join()
else:
    fail()
"""


@pytest.mark.parametrize("where", ["main", "thread"])
def test_an_uncaught_kavalai_error_is_printed_without_a_chained_secret(where: str, tmp_path: Path) -> None:
    """On main, Python 3.11's built-in printer of an uncaught exception (C code, reading ``__cause__`` past the
    masked copy) showed the foreign error's secret; the interpreter's hooks now write through the gate once a
    secret is registered (``sys.excepthook``, ``threading.excepthook``)."""
    import subprocess

    script = tmp_path / "uncaught.py"
    script.write_text(UNCAUGHT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), where], capture_output=True, text=True, timeout=120)
    assert "ToolExecutionError: the tool failed" in done.stderr  # the error is printed, with its chain
    assert "ValueError: the foreign error holds ***" in done.stderr
    assert "7d1e0c2b" not in done.stderr


def _server_settings() -> list[type]:
    """The server settings kavalai exports (the pydantic models of ``kavalai.adapters``' ``_config`` modules):
    what a configuration's ``${VAR}`` expansions are put into (its credentials are ``SecretStr`` in ``_auth``)."""
    from pydantic import BaseModel

    exported = [getattr(kavalai, name) for name in kavalai.__all__]
    return [
        item
        for item in exported
        if inspect.isclass(item)
        and issubclass(item, BaseModel)
        and item.__module__.startswith("kavalai.adapters.")
        and item.__module__.endswith("._config")
    ]


def test_every_server_settings_repr_crosses_the_secret_gate() -> None:
    """The enumeration of the settings' reprs: each defines ``__repr_args__`` through ``masked_repr_args``."""
    settings = _server_settings()
    assert {cls.__name__ for cls in settings} >= {"McpServer", "RestServer"}
    for cls in settings:
        assert "__repr_args__" in vars(cls), cls
        assert "masked_repr_args" in inspect.getsource(cls), cls


def test_a_secret_expanded_into_a_server_setting_is_not_in_its_repr() -> None:
    """On main ``repr(McpServer(args=['--key', token]))`` (a ``${VAR}`` expansion) and a ``RestServer`` whose url
    path holds a token showed the registered secret whole."""
    from kavalai import McpServer, RestServer
    from kavalai.secrets import register_secret

    token = "kv-settings-repr-31f9a7c2"
    register_secret(token)
    shown = [
        McpServer(name="m", command="mcp-thing", args=["--api-key", token], cwd=f"/srv/{token}"),
        McpServer(name="h", url=f"http://example.com/mcp/{token}"),
        RestServer(name="r", url=f"http://example.com/bot{token}"),
    ]
    for setting in shown:
        for text in (repr(setting), str(setting)):
            assert token not in text
            assert "***" in text


def test_every_span_exporter_kavalai_sets_up_masks_what_it_sends() -> None:
    """The enumeration of the door spans leave by: every span processor kavalai adds to a provider exports through
    ``MaskingExporter`` (``kavalai._span_masking``), or is ``MaskingProcessor`` (added to an SDK provider set by
    others, masking each span as it is written), so a span another library made (the MCP SDK's) is masked too."""
    added = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Attribute) and called.attr == "add_span_processor":
                added.append((f"{path.relative_to(SRC)}:{node.lineno}", ast.unparse(node)))
    assert added, "configure_tracing adds the exporters' processors"
    unmasked = [where for where, call in added if "MaskingExporter(" not in call and "MaskingProcessor()" not in call]
    assert unmasked == [], "export spans through kavalai._span_masking.MaskingExporter (or mask them as they start)"
