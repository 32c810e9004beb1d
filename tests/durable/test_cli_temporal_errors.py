"""``kavalai runs`` and ``kavalai answer`` on Temporal when the server cannot be reached or has no such namespace:
one line on stderr naming the server (and the namespace), nothing on stdout, exit status 1 (docs/operations.md), for
every action. Before, a wrong namespace read as "no run 'r1' on the temporal runner" (every call failed
``NOT_FOUND``)."""

from __future__ import annotations

import pytest

from kavalai.cli.main import main

pytestmark = pytest.mark.timeout(240)

COMMANDS = [
    ["runs", "show", "r1"],
    ["runs", "list"],
    ["runs", "cancel", "r1"],
    ["runs", "resolve", "r1", "2", "--done"],
    ["answer", "r1"],
    ["answer", "r1", "approve-1", "allow"],
]


def one_line(capsys: pytest.CaptureFixture[str], command: list[str], *engine: str) -> str:
    status = main([*command, *engine])
    out, err = capsys.readouterr()
    assert status == 1, (command, out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, (command, err)
    assert lines[0].startswith(f"kavalai {command[0]}: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: "-".join(command[:2]))
def test_an_unreachable_temporal_server_is_one_line_and_exit_1(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_line(capsys, command, "--engine", "temporal", "--address", "127.0.0.1:1")
    assert "cannot reach the Temporal server at 127.0.0.1:1" in line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: "-".join(command[:2]))
def test_a_namespace_the_temporal_server_has_not_is_one_line_and_exit_1(
    command: list[str], capsys: pytest.CaptureFixture[str], temporal_address: str
) -> None:
    line = one_line(capsys, command, "--address", temporal_address, "--namespace", "no-such-namespace")
    assert f"the Temporal server at {temporal_address} has no namespace 'no-such-namespace'" in line


def test_commands_on_a_finished_temporal_run_say_it_has_ended(
    capsys: pytest.CaptureFixture[str], temporal_address: str
) -> None:
    """A finished run: ``answer RUN`` lists no question (``{}``, exit 0; before, an ``RPCError`` about no worker
    polling, since a query needs one); ``answer RUN KEY`` and ``runs resolve`` are refused, one line, exit 1;
    ``runs cancel`` is refused naming its state, exit 1 (before: "cancelled", exit 0, though nothing was), and the
    run stays finished."""
    import asyncio
    import json
    import uuid

    from kavalai.durable import TemporalRunner
    from tests.durable.conftest import fetch
    from tests.durable.test_journal_io import charging_engine, orders
    from tests.servers.effects_app import create_app
    from tests.servers.uvicorn_server import serve

    queue, run_id = f"q-{uuid.uuid4().hex[:8]}", f"ended-{uuid.uuid4().hex[:8]}"
    engine_options = ["--address", temporal_address, "--queue", queue]

    async def finish(shop: str) -> None:
        runner = TemporalRunner(temporal_address, task_queue=queue)
        engine = charging_engine(runner, shop)
        try:
            result = await engine.run({}, run_id=run_id)
            assert result.ok, result.error
        finally:
            await runner.aclose()
            await engine.aclose()

    with serve(create_app()) as shop:
        asyncio.run(finish(shop))
        assert main(["answer", run_id, *engine_options]) == 0
        assert json.loads(capsys.readouterr().out) == {}
        assert "waits for no answer 'approve-1'" in one_line(
            capsys, ["answer", run_id, "approve-1", "allow"], *engine_options
        )
        assert "waits for no answer 'doubt-2'" in one_line(
            capsys, ["runs", "resolve", run_id, "2", "--done"], *engine_options
        )
        line = one_line(capsys, ["runs", "cancel", run_id], *engine_options)
        assert f"Run {run_id} has ended (finished): there is nothing to cancel." in line
        assert main(["runs", "show", run_id, *engine_options]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "finished"
        assert orders(fetch(f"{shop}/effects")) == ["A", "B", "C"]
