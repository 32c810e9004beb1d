"""The origin rule (issue 35, fault case 5): a step's idempotency key protects a repeat only at the server that saw
it, so a step found sent after a crash whose tool's server has since moved (its URL changed in the configuration
between the crash and the resume) is in doubt, never sent to the new origin, whatever its tool says. Counted at two
local shop services, the old origin and the new one: each charge made once in all.

Cases, written before any was run:

1. DBOS on SQLite: a keyed REST charge B sent, the journal away past the run's patience (interrupted); the shop's
   URL changed; the resume ends in doubt at B naming the step, the old origin and the new one; B charged once at
   the old shop, nothing at the new one.
2. The same on DBOS Postgres (stopped ``-m immediate`` mid-charge, started again), under ``-m faults``.
3. The same with the server's ``on_doubt: replay``: still in doubt (a replay elsewhere is not a replay).
4. The same URL written another way (upper-case host, the default port written out, a trailing slash, a path):
   the same origin, so B is sent again with its key, where it went (charged once: the shop honours the key).
5. A URL with userinfo: the journal's sent mark holds the origin without it.
6. Temporal: the worker SIGKILLed during charge C, the resuming worker's shop URL changed: C's retried activity
   finds the server moved, the run ends in doubt at C naming both origins; C charged once, nothing at the new shop.
7. A stdio MCP server's origin is its command line with secrets masked (and its working directory).
8. DBOS, the tool's policy ``ask`` and the server moved: the run asks (the question names both origins); ``--retry``
   sends B to the new origin, once.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kavalai import FunctionKernel, McpServer, RestServer
from kavalai.durable import DbosRunner
from kavalai.errors import RunInterruptedError
from kavalai.secrets import register_secret
from kavalai.workflow import WorkflowBuilder, WorkflowEngine
from tests.durable.conftest import fetch
from tests.durable.fault_matrix import Case, Outcome, finish, start, workflow_text
from tests.durable.test_doubt import asked, described, journal, resolve
from tests.durable.test_journal_io import orders
from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

pytestmark = pytest.mark.timeout(300)


def charging(runner: DbosRunner, url: str, *, on_doubt: Any = None) -> WorkflowEngine:
    """Three charges A, B, C through ``rest://shop.charge`` (keyed: it carries the step's ``Idempotency-Key``), the
    shop at ``url``."""
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="shop", url=url, on_doubt=on_doubt))
    schema = {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}}}
    kernel.register_rest_tool("shop", "charge", "POST", schema, path="/charge")
    builder = WorkflowBuilder("charges", input=dict, output=dict).start(next="a")
    for node, after in (("a", "b"), ("b", "c"), ("c", "done")):
        inputs = {"order": {"expr": f"'{node.upper()}'"}, "amount": {"expr": "1"}}
        builder = builder.function(node, tool="rest://shop.charge", inputs=inputs, next=after)
    workflow = builder.end("done", outputs={"n": {"expr": "[a.result.charge, b.result.charge, c.result.charge]"}})
    return WorkflowEngine(workflow.build(), kernel, durable=runner)


def origin_of(url: str) -> str:
    host_port = url.split("://", 1)[1].split("/", 1)[0]
    return f"http://{host_port}"


def respelled(url: str) -> str:
    """The same origin written another way: the host in upper case (a name, not an address), a path."""
    port = url.rsplit(":", 1)[1].rstrip("/")
    return f"HTTP://LOCALHOST:{port}/"


async def moved_between_crash_and_resume(kind: str, tmp_path: Path, case: str) -> None:
    """Charge B made at the first shop, its record lost with the journal; the resume's shop is the second one (or
    the first, spelled another way: ``case == "same"``)."""
    with journal(kind, tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)
        on_doubt = {"replay": "replay", "ask": "ask"}.get(case)
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as old, serve(create_app()) as new:
                first = old if case != "same" else old.replace("127.0.0.1", "localhost")
                with pytest.raises(RunInterruptedError):
                    await charging(runner, first, on_doubt=on_doubt).run({}, run_id="moved-1")
                await asyncio.to_thread(store.release)
                again = respelled(old) if case == "same" else new
                if case == "ask":
                    await asked_and_retried(runner, again, store.url, old, new)
                    assert orders(fetch(f"{old}/effects")) == ["A", "B"]
                    assert orders(fetch(f"{new}/effects")) == ["B", "C"]  # sent there once, as the operator said
                    return
                result = await charging(runner, again, on_doubt=on_doubt).run({}, run_id="moved-1")
                old_requests, old_effects = orders(fetch(f"{old}/requests")), orders(fetch(f"{old}/effects"))
                new_requests = orders(fetch(f"{new}/requests"))
            if case == "same":
                assert result.ok, result.error
                assert result.output == {"n": [1, 2, 3]}
                assert old_requests == ["A", "B", "B", "C"]  # B again, with its key, where it went
                assert old_effects == ["A", "B", "C"]
                return
            assert not result.ok
            text = str(result.error)
            assert text.startswith("Node 'b': Outcome unknown: check before retrying. Step 2 of run moved-1 (")
            assert f"it was sent to {origin_of(old)}, and rest://shop.charge's server is now {origin_of(new)}" in text
            assert old_requests == old_effects == ["A", "B"]  # B once, at the old shop
            assert new_requests == []  # nothing at the new one
            shown = await asyncio.to_thread(described, store.url, "moved-1")
            assert shown == [{"position": 2, "name": "b#1/tool rest://shop.charge#1", "state": "in_doubt"}]
        finally:
            await runner.aclose()


async def asked_and_retried(runner: DbosRunner, url: str, db: str, old: str, new: str) -> None:
    done = asyncio.ensure_future(charging(runner, url, on_doubt="ask").run({}, run_id="moved-1"))
    question = await asked(runner, "moved-1", "doubt-2", done)
    assert (question["sent_to"], question["now_at"]) == (origin_of(old), origin_of(new))
    assert f"to {origin_of(old)} (its server is now {origin_of(new)})" in question["question"]
    assert fetch(f"{new}/requests") == []  # nothing sent while it asks
    settled = await asyncio.to_thread(resolve, db, "moved-1", 2, "--retry")
    assert settled.returncode == 0, settled.stderr
    result = await asyncio.wait_for(done, 120)  # bounded: liveness only
    assert result.ok, result.error


def sent_marks(url: str, run_id: str) -> list[Any]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT result FROM kavalai_steps WHERE run_id = :r AND position < 0"), {"r": run_id}
            )
            return [json.loads(row[0]) for row in rows]
    finally:
        engine.dispose()


@pytest.mark.parametrize("case", ["moved", "replay", "same", "ask"])
async def test_a_keyed_step_found_sent_is_in_doubt_when_its_server_moved(tmp_path: Path, case: str) -> None:
    await moved_between_crash_and_resume("sqlite", tmp_path, case)


@pytest.mark.faults
@pytest.mark.parametrize("case", ["moved", "replay"])
async def test_on_postgres_a_keyed_step_found_sent_is_in_doubt_when_its_server_moved(tmp_path: Path, case: str) -> None:
    await moved_between_crash_and_resume("postgres", tmp_path, case)


async def test_the_sent_mark_holds_the_origin_and_nothing_else_of_the_url(tmp_path: Path) -> None:
    """A REST base URL may hold no userinfo nor query (refused by ``RestServer``); its path is not part of the origin.
    (An MCP url's userinfo and query: the next test.)"""
    with journal("sqlite", tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)
        try:
            with serve(create_app(on_charge=store.at_first("B"))) as shop:
                with pytest.raises(RunInterruptedError):
                    await charging(runner, f"{shop}/").run({}, run_id="moved-1")
                await asyncio.to_thread(store.release)
                marks = await asyncio.to_thread(sent_marks, store.url, "moved-1")
            assert [mark["origin"] for mark in marks] == [origin_of(shop)] * 2  # A's and B's (a mark stays)
        finally:
            await runner.aclose()


def test_a_stdio_servers_origin_is_its_command_line_with_secrets_masked(tmp_path: Path) -> None:
    register_secret("tok-origin-test-5e2")
    server = McpServer(name="m", command="python", args=["-m", "srv", "--token", "tok-origin-test-5e2"], cwd=tmp_path)
    assert server.origin == f"stdio:python -m srv --token *** (in {tmp_path})"
    assert McpServer(name="m", command="python", args=["-m", "srv2"]).origin == "stdio:python -m srv2"
    assert McpServer(name="m", url="https://u:p@Search.Example/mcp?k=1").origin == "https://search.example:443"


def test_a_temporal_step_retried_after_its_server_moved_is_in_doubt(temporal_address: str, tmp_path: Path) -> None:
    """The worker killed during charge C (keyed: Temporal retries its activity); the resuming worker's shop is
    another one: the retried attempt finds the server moved, the run ends in doubt at C, C made once, at the old
    shop, nothing at the new one."""
    case = Case("temporal", "during", 1)
    workflow = tmp_path / "five.yaml"
    workflow.write_text(workflow_text(), encoding="utf-8")
    run_id = f"moved-{uuid.uuid4().hex[:8]}"
    outcome = Outcome(case)
    with serve(create_app(kill_during="C")) as old, serve(create_app()) as new:
        first = start(case, temporal_address, workflow, run_id, "first", old)
        first.communicate(timeout=180)
        assert first.returncode == -signal.SIGKILL
        resumer = start(case, temporal_address, workflow, run_id, "resumer", new)
        output = finish(resumer, 180, outcome)
        old_requests, new_requests = fetch(f"{old}/requests"), fetch(f"{new}/requests")
        old_effects = fetch(f"{old}/effects")
    assert outcome.problems == [], (tmp_path / "resumer.log").read_text()
    assert output["status"] == "failed"
    text = output["output"]
    assert text.startswith(f"Node 'c': Outcome unknown: check before retrying. Step 3 of run {run_id} ("), text
    assert f"it was sent to {origin_of(old)}, and rest://shop.charge's server is now {origin_of(new)}" in text
    assert orders(old_requests) == orders(old_effects) == ["A", "B", "C"]  # C once, at the old shop
    assert new_requests == []


@pytest.mark.parametrize("moved", [True, False], ids=["command_changed", "same_command"])
async def test_a_stdio_mcp_step_found_sent_is_in_doubt_when_its_command_changed(tmp_path: Path, moved: bool) -> None:
    """An MCP tool that says it is idempotent (``idempotentHint``: replayed after a crash), its server a process: the
    command line changed between the crash and the resume makes the step in doubt, naming both command lines; the
    same command replays it. Counted at a shop that takes every call as an effect."""
    from tests.durable.test_doubt_servers import engine as charges

    def kernel(shop: str, *flags: str) -> FunctionKernel:
        made = FunctionKernel()
        args = [*flags, "-m", "tests.servers.mcp_shop"]
        made.register_mcp_server(McpServer(name="pay", command=sys.executable, args=args, env={"SHOP_URL": shop}))
        return made

    with journal("sqlite", tmp_path) as store:
        runner = DbosRunner(store.url, journal_outage=0.3, **store.settings)
        try:
            with serve(create_app(on_charge=store.at_first("B"), honour_keys=False)) as shop:
                first = kernel(shop)
                try:
                    with pytest.raises(RunInterruptedError):
                        await charges(first, runner, "mcp://pay.settle").run({}, run_id="moved-mcp")
                finally:
                    await first.close()
                await asyncio.to_thread(store.release)
                flags = ("-W", "ignore") if moved else ()
                second = kernel(shop, *flags)
                try:
                    result = await charges(second, runner, "mcp://pay.settle").run({}, run_id="moved-mcp")
                finally:
                    await second.close()
                effects = orders(fetch(f"{shop}/effects"))
        finally:
            await runner.aclose()
    if not moved:
        assert result.ok, result.error
        assert effects == ["A", "B", "B", "C"]  # replayed where it went (the shop takes every call)
        return
    assert not result.ok
    old = f"stdio:{shlex.join([sys.executable, '-m', 'tests.servers.mcp_shop'])}"
    new = f"stdio:{shlex.join([sys.executable, '-W', 'ignore', '-m', 'tests.servers.mcp_shop'])}"
    assert f"it was sent to {old}, and mcp://pay.settle's server is now {new}" in str(result.error)
    assert effects == ["A", "B"]  # B once
