"""One rule for every timeout and deadline (issue 36, findings 1 and 2): finite positive seconds, clamped above
``MAX_SECONDS``, wire garbage ignored with one log line, caller garbage a ``ValueError`` naming the value."""

from __future__ import annotations

import ast
import asyncio
import logging
import math
import re
from pathlib import Path
from typing import Any

import pytest

from kavalai import FunctionKernel, McpServer, RestServer, pythontool
from kavalai.agent.code_mode import CodeMode
from kavalai.kernel import MAX_SECONDS, current_call, deadline, limit_seconds


@pythontool
async def left() -> float | None:
    """The seconds the call has left."""
    call = current_call()
    return call.remaining() if call is not None else None


@pytest.mark.parametrize("value", [math.inf, 1e308, 10**400, MAX_SECONDS * 2])
def test_a_huge_limit_is_clamped_to_the_maximum(value: float) -> None:
    assert limit_seconds(value) == MAX_SECONDS
    assert limit_seconds(value * 1000, wire=True, unit=0.001) == MAX_SECONDS


@pytest.mark.parametrize("value", [math.nan, -1, -math.inf, 0, 0.0, True, "5", b"5", [5], object()])
def test_a_callers_limit_that_is_not_positive_seconds_is_a_value_error_naming_it(value: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be positive \\(in seconds\\) or None, got ") as info:
        limit_seconds(value)
    assert repr(value)[:20] in str(info.value) or type(value).__name__ in str(info.value)


def test_a_remaining_time_may_be_zero_but_not_negative() -> None:
    assert limit_seconds(0, remaining=True) == 0.0
    with pytest.raises(ValueError, match="deadline must be at least 0 .*got -0.5"):
        limit_seconds(-0.5, what="deadline", remaining=True)
    with pytest.raises(ValueError, match="got nan"):
        deadline(math.nan)


@pytest.mark.parametrize("value", ["5000", "", None, [1], {"a": 1}, math.nan, True])
def test_a_wire_value_that_is_not_a_number_is_ignored_with_one_log_line(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kavalai"):
        assert limit_seconds(value, what="_meta io.kavalai/deadline", wire=True, unit=0.001) is None
    expected = 0 if value is None else 1  # no value sent is no deadline, and nothing to say
    assert len(caplog.records) == expected
    if expected:
        assert "Ignored the _meta io.kavalai/deadline sent" in caplog.records[0].getMessage()


def test_a_negative_wire_deadline_has_passed_and_milliseconds_become_seconds() -> None:
    assert limit_seconds(-5, wire=True, unit=0.001) == 0.0
    assert limit_seconds(1500, wire=True, unit=0.001) == 1.5


def test_a_hostile_value_is_shown_short() -> None:
    with pytest.raises(ValueError) as info:
        limit_seconds("x" * 10_000)
    assert len(str(info.value)) < 200


async def test_call_tool_refuses_a_garbage_timeout_and_clamps_an_infinite_one() -> None:
    kernel = FunctionKernel()
    kernel.register_python_tool("left", left)
    for bad in ("5", -1, math.nan, 0):
        with pytest.raises(ValueError, match=f"got {bad!r}"):
            await kernel.call_tool("python://left", timeout=bad)  # type: ignore[arg-type]
    for huge in (math.inf, 1e308):
        remaining = (await kernel.call_tool("python://left", timeout=huge)).result  # type: ignore[attr-defined]
        assert MAX_SECONDS - 60 < remaining <= MAX_SECONDS
    task = kernel.start_tool("python://left", timeout=math.inf)
    assert (await task.result()).result > MAX_SECONDS - 60  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="got -1"):
        kernel.start_tool("python://left", timeout=-1)
    await kernel.close()


def test_declared_limits_follow_the_same_rule() -> None:
    assert RestServer(name="r", url="http://h", timeout=math.inf).timeout == MAX_SECONDS
    assert McpServer(name="m", command="x", timeout=1e308, connect_timeout=math.inf).timeout == MAX_SECONDS
    for bad in (math.nan, -1, 0):
        with pytest.raises(ValueError, match="greater than 0"):  # a setting's message quotes no value
            RestServer(name="r", url="http://h", timeout=bad)
        with pytest.raises(ValueError, match="greater than 0"):
            McpServer(name="m", command="x", timeout=bad)
    assert pythontool(timeout=math.inf)(left) is left
    with pytest.raises(ValueError, match="got nan"):
        pythontool(timeout=math.nan)
    assert CodeMode(max_seconds=math.inf).max_seconds == MAX_SECONDS
    with pytest.raises(ValueError, match="max_seconds must be positive"):
        CodeMode(max_seconds=-1)


SRC = Path(__file__).resolve().parents[2] / "src" / "kavalai"


def _declared_limits() -> list[tuple[str, str]]:
    """Every field of a pydantic model in src/ named like a limit (``*timeout``, ``*_seconds``) and built with
    ``Field(...)``, with the source of its annotation."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if (
                    isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and re.search(r"timeout$|_seconds$", item.target.id)
                    and isinstance(item.value, ast.Call)
                    and getattr(item.value.func, "id", None) == "Field"
                ):
                    where = f"{path.relative_to(SRC)}:{node.name}.{item.target.id}"
                    found.append((where, ast.unparse(item.annotation)))
    return found


def test_every_declared_limit_crosses_the_one_rule() -> None:
    """The gate's enumeration: a settings field that holds a limit is a ``Seconds`` (checked and clamped by
    ``limit_seconds``); a new one written as a bare ``float`` fails here."""
    found = _declared_limits()
    assert len(found) >= 10  # the scan sees RestServer, McpServer, OAuth and the workflow nodes
    assert [where for where, annotation in found if "Seconds" not in annotation] == []


# The functions that apply the one rule: limit_seconds itself, and what wraps it for a caller's own error type.
_CHECKS = {"limit_seconds", "required_seconds", "checked_timeout"}
# Constructors that take a limit another has checked already, and which one.
_PASSED_ON = {
    "workflow/_executor.py:Execution.timeout": "WorkflowEngine's timeout, checked by checked_timeout",
}


def _checks(function: ast.AST, value: str) -> bool:
    """Whether ``function`` hands ``value`` (a name, or ``self.name``) to the rule as its first argument, or to
    ``super().__init__`` (whose constructor is scanned as well)."""
    for call in ast.walk(function):
        if not isinstance(call, ast.Call):
            continue
        name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
        if name in _CHECKS and call.args and ast.unparse(call.args[0]) == value:
            return True
        passed = any(ast.unparse(keyword.value) == value for keyword in call.keywords)
        if name == "__init__" and "super()" in ast.unparse(call.func) and passed:
            return True
    return False


def _constructor_limits() -> list[tuple[str, bool]]:
    """Every constructor parameter (``__init__``) and dataclass field in src/ named like a limit (``*timeout``,
    ``*_seconds``, ``poll``), outside error classes (which record a value), and whether it crosses the rule."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or re.search(r"(Error|Exception)$", node.name):
                continue
            methods = {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}
            where = f"{path.relative_to(SRC)}:{node.name}"
            init = methods.get("__init__")
            if init is not None:
                for arg in init.args.args + init.args.kwonlyargs:
                    if re.search(r"timeout$|_seconds$", arg.arg) and not arg.arg.startswith("on_"):
                        found.append((f"{where}.{arg.arg}", _checks(init, arg.arg)))
            if not any("dataclass" in ast.unparse(decorator) for decorator in node.decorator_list):
                continue
            post_init = methods.get("__post_init__")
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    if re.search(r"timeout$|_seconds$|^poll$", name) and not name.startswith("on_"):
                        checked = post_init is not None and _checks(post_init, f"self.{name}")
                        found.append((f"{where}.{name}", checked))
    return found


def test_every_limit_a_constructor_takes_crosses_the_one_rule() -> None:
    """The gate's enumeration for function parameters: a constructor's limit (a durable runner's step_timeout, an
    OutsideApproval's timeout, an LLM's timeout) goes through limit_seconds (or a wrapper of it) where it is
    taken; a new one stored as it came fails here."""
    found = _constructor_limits()
    assert len(found) >= 8  # the runners, OutsideApproval, OutsideElicitation, the LLM providers, the workflow
    unchecked = [where for where, checked in found if not checked and where not in _PASSED_ON]
    assert unchecked == []
    assert set(_PASSED_ON) <= {where for where, _ in found}  # the list holds no stale entry


def test_durable_and_approval_limits_follow_the_one_rule() -> None:
    from kavalai.agent import OutsideApproval
    from kavalai.agent.elicitation import OutsideElicitation
    from kavalai.durable.dbos import DbosRunner
    from kavalai.durable.temporal import TemporalRunner

    assert TemporalRunner(step_timeout=math.inf).step_timeout == MAX_SECONDS
    assert DbosRunner(busy_timeout=10**400).busy_timeout == MAX_SECONDS
    assert OutsideApproval(timeout=math.inf).timeout == MAX_SECONDS
    assert OutsideElicitation(timeout=None).timeout is None
    for bad in (math.nan, -1, 0, "5"):
        with pytest.raises(ValueError, match="step_timeout must be positive"):
            TemporalRunner(step_timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="shutdown_timeout must be positive"):
            TemporalRunner(shutdown_timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"heartbeat_timeout must be positive \(in seconds\), got "):
            TemporalRunner(heartbeat_timeout=bad)  # type: ignore[arg-type]  (a required limit: not "or None")
        with pytest.raises(ValueError, match="busy_timeout must be positive"):
            DbosRunner(busy_timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be positive"):
            OutsideApproval(timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be positive"):
            OutsideElicitation(timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll must be positive"):
        OutsideElicitation(poll=0)
    with pytest.raises(ValueError, match="heartbeat_timeout must be at least 2 seconds"):
        TemporalRunner(heartbeat_timeout=1.5)  # a step heartbeats every half second: it would time out alive


# A parameter named like a limit: a timeout, a deadline, seconds, a polling or heartbeat interval, a staleness or
# outage bound, a patience.
_LIMIT_LIKE = re.compile(r"timeout|deadline|seconds|^poll$|polling|heartbeat|stale_after|patience|outage|interval$")
# Public functions that take such a limit and hand it, unchanged, to one that applies the rule, and which one.
_FORWARDED = {
    "_span_masking.py:MaskingExporter.force_flush(timeout_millis)": "the wrapped exporter's force_flush (OTel's API)",
    "_span_masking.py:MaskingProcessor.force_flush(timeout_millis)": "a span processor's force_flush (OTel's API)",
    "kernel/_call.py:deadline(seconds)": "Deadline.__init__",
    "kernel/_core.py:Kernel.call_tool_as(timeout)": "Kernel.call_tool",
    "function_kernel.py:FunctionKernel.register_python_tool(timeout)": "PythonToolAdapter.register",
    "function_kernel.py:FunctionKernel.register_rest_tool(timeout)": "RestAdapter.register_tool",
    "tools/_kaval_fetch.py:fetch(timeout)": "GuardedClient.request",
    "durable/_dbos_journal.py:DbosJournal.wait_for_answer(timeout)": "DurableRun.wait_for_answer",
    "durable/_answer_log.py:SqlAnswerLog.__init__(outage)": "DbosRunner's journal_outage",
    "durable/_dbos_database.py:make_engine(busy_timeout)": "DbosRunner's busy_timeout",
    "durable/_dbos_database.py:with_lock_timeout(seconds)": "DbosRunner's busy_timeout (make_engine's)",
    "durable/_dbos_local.py:LocalRuns.until_settled(outage)": "DbosRunner's journal_outage",
    "durable/_journal_io.py:journal_io(outage)": "DbosRunner's journal_outage",
    "durable/_step_log.py:StepLogJournal.__init__(outage)": "DbosRunner's journal_outage",
    "durable/_step_log.py:StepLogJournal.open(outage)": "DbosRunner's journal_outage",
    "durable/_temporal_connect.py:patiently(outage)": "TemporalRunner's journal_outage",
    "durable/_temporal_answer.py:no_worker(outage)": "TemporalRunner's journal_outage",
    "durable/_temporal_answer.py:questions(outage)": "TemporalRunner's journal_outage",
    "durable/_temporal_answer.py:deliver(outage)": "TemporalRunner's journal_outage",
    "serve/_transports.py:serve_http(session_idle_timeout)": "http_app",
    "serve/_transports.py:serve_http(body_timeout)": "uvicorn_config",
    "serve/_transports.py:serve_http(send_timeout)": "uvicorn_config",
    "serve/_transports.py:uvicorn_config(body_timeout)": "Bounds (its __post_init__: required_seconds)",
    "serve/_transports.py:uvicorn_config(send_timeout)": "Bounds (its __post_init__: required_seconds)",
    "workflow/_engine.py:WorkflowEngine.run(timeout)": "WorkflowEngine._execution (checked_timeout)",
    "workflow/_engine.py:WorkflowEngine.stream(timeout)": "WorkflowEngine._execution (checked_timeout)",
    "workflow/_executor.py:Execution.__init__(timeout)": "WorkflowEngine (checked_timeout)",
    "workflow/_meter.py:Meter.__init__(deadline)": "Execution's timeout, as a loop time (not a limit)",
    **{
        f"workflow/{module}:WorkflowBuilder.{kind}(timeout)": "the node's Seconds field"
        for module in ("_builder.py", "kaval/_bilingual.py")
        for kind in ("function", "agent", "llm", "parallel")
    },
}


def _public_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """A module's public functions and the public methods (and constructors) of its classes, overloads and protocols
    (which have no body) aside."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(("", node))
        elif (
            isinstance(node, ast.ClassDef)
            and not re.search(r"^_|(Error|Exception)$", node.name)
            and not any("Protocol" in ast.unparse(base) for base in node.bases)
        ):
            found += [
                (f"{node.name}.", item)
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
    return [
        (owner, function)
        for owner, function in found
        if (function.name == "__init__" or not function.name.startswith("_"))
        and not any("overload" in ast.unparse(decorator) for decorator in function.decorator_list)
    ]


def _hands_to_the_rule(function: ast.AST, value: str) -> bool:
    """Whether ``function`` passes ``value`` to the rule (or a wrapper of it), first or by keyword."""
    for call in ast.walk(function):
        if isinstance(call, ast.Call):
            name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
            given = [ast.unparse(arg) for arg in call.args[:1]] + [ast.unparse(kw.value) for kw in call.keywords]
            wrapper = name in _CHECKS | {"default_timeout_of"} or "super().__init__" in ast.unparse(call.func)
            if value in given and wrapper:
                return True
    return False


def _limit_parameters() -> dict[str, bool]:
    """Every parameter of a public function or constructor in src/ named like a limit, and whether it crosses the
    rule where it is taken."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        for owner, function in _public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            args = function.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs:
                if _LIMIT_LIKE.search(arg.arg) and not arg.arg.startswith("on_"):
                    where = f"{path.relative_to(SRC)}:{owner}{function.name}({arg.arg})"
                    found[where] = _hands_to_the_rule(function, arg.arg)
    return found


def test_every_limit_a_public_function_takes_crosses_the_one_rule() -> None:
    """The gate's enumeration for every parameter named like a limit (not only ``*timeout``: a heartbeat, a polling
    interval, an outage bound, a patience): it goes through limit_seconds (or a wrapper of it) where it is taken, or
    is handed on unchanged to a function that does (listed with which); a new one stored as it came fails here."""
    found = _limit_parameters()
    assert len(found) >= 50  # the kernel's calls, the runners, the builders, the fetch tools, the LLM clients
    assert [where for where, checked in found.items() if not checked and where not in _FORWARDED] == []
    assert [where for where in _FORWARDED if where not in found] == []  # the list holds no stale entry
    assert [where for where in _FORWARDED if found.get(where)] == []  # nor one that checks by itself now


_BAD = (math.nan, -1, -math.inf, 0, "5", True)
_HUGE = (math.inf, 1e308, 10**400)


@pytest.mark.parametrize("name", ["heartbeat", "stale_after", "polling", "journal_outage"])
def test_a_dbos_runners_intervals_follow_the_one_rule(name: str) -> None:
    from kavalai.durable.dbos import DbosRunner

    for huge in _HUGE:
        assert getattr(DbosRunner(**{name: huge}), name) == MAX_SECONDS
    assert getattr(DbosRunner(**{name: 2}), name) == 2.0
    for bad in _BAD:
        with pytest.raises(ValueError, match=f"{name} must be positive \\(in seconds\\)"):
            DbosRunner(**{name: bad})


def test_a_dbos_clients_result_refuses_a_bad_polling_before_it_asks_the_journal(tmp_path: Path) -> None:
    from kavalai.durable import UnknownRunError
    from kavalai.durable.dbos import DbosClient

    client = DbosClient(f"sqlite:///{tmp_path / 'journal.db'}")
    try:
        for bad in _BAD:
            with pytest.raises(ValueError, match="polling must be positive"):
                client.result("no-such-run", polling=bad)  # type: ignore[arg-type]
        with pytest.raises(UnknownRunError):  # a huge polling is clamped and the run looked up
            client.result("no-such-run", polling=10**400)
    finally:
        client.close()


async def test_a_durable_runs_waits_for_answers_follow_the_one_rule() -> None:
    from kavalai.durable._memory import _MemoryAnswers, _MemoryJournal
    from kavalai.durable._run import DurableRun

    questions: dict[str, Any] = {}
    run = DurableRun("r", _MemoryJournal({}, questions), answers=_MemoryAnswers())  # type: ignore[arg-type]
    for bad in _BAD:
        with pytest.raises(ValueError, match="timeout must be positive"):
            await run.wait_for_answer("approval", {"q": 1}, timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be positive"):
            await run.answer_in_step("k", {"q": 1}, None, timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="poll must be positive"):
            await run.answer_in_step("k", {"q": 1}, None, poll=bad)  # type: ignore[arg-type]
    # A huge timeout is a year: the wait starts (a 400-digit integer used to overflow the loop's clock) and ends with
    # the answer given.
    waiting = asyncio.ensure_future(run.wait_for_answer("approval", {"q": 1}, timeout=10**400))
    for _ in range(100):  # a bounded wait for the question to be published
        await asyncio.sleep(0)
        if questions:
            break
    questions["approval-1"].answer.set_result("yes")
    assert await waiting == "yes"
    in_step = asyncio.ensure_future(run.answer_in_step("k", {"q": 2}, None, timeout=10**400, poll=0.01))
    for _ in range(100):
        await asyncio.sleep(0)
        if await run.answers.open_questions("r"):  # type: ignore[union-attr]
            break
    await run.answers.keep("r", "k", {"q": 2}, "no")  # type: ignore[union-attr]
    assert await in_step == "no"


def test_a_workflow_builders_limits_follow_the_one_rule() -> None:
    from kavalai.workflow import WorkflowBuilder
    from kavalai.workflow.errors import WorkflowDefinitionError

    def built(timeout: Any) -> Any:
        builder = WorkflowBuilder("w").limits(timeout=timeout).start(next="end").end()
        return builder.build().timeout

    for huge in _HUGE:
        assert built(huge) == MAX_SECONDS
    for bad in _BAD:
        with pytest.raises(WorkflowDefinitionError, match="field 'timeout' must be positive"):
            WorkflowBuilder("w").limits(timeout=bad)


async def test_the_small_waits_follow_the_one_rule() -> None:
    from kavalai._tracing_setup import TracingSetup
    from kavalai.auth._loopback import LoopbackRedirect
    from kavalai.tools.rss import make_get_rss_feed

    for bad in _BAD:
        with pytest.raises(ValueError, match="timeout must be positive"):
            make_get_rss_feed(timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be positive"):
            await LoopbackRedirect().wait("state", bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be positive"):
            TracingSetup(source="global").flush(bad)  # type: ignore[arg-type]
    assert callable(make_get_rss_feed(timeout=math.inf))
    TracingSetup(source="global").flush(math.inf)  # a year, in whole milliseconds: no OverflowError
