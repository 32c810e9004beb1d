"""A process killed in the middle of a durable run (``os._exit``), and the run resumed by a new process: the
checks of issue 14 on DBOS with SQLite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.durable.conftest import fetch, worker

#: Both places a DBOS run's steps can be recorded: kavalai's step log (the default) and DBOS's own steps.
STEP_LOGS = pytest.mark.parametrize("step_log", ["kavalai", "dbos"])


@STEP_LOGS
def test_a_workflow_killed_after_a_call_was_sent_but_not_recorded_completes_once_per_call(
    effects_url: str, tmp_path: Path, step_log: str
) -> None:
    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    crashed = worker("workflow", db, effects_url, "order-1", "--crash-after", "2", "--step-log", step_log)
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    assert [r["order"] for r in fetch(f"{effects_url}/requests")] == ["A", "B"]  # B was sent, then the crash

    resumed = worker("workflow", db, effects_url, "order-1", "--step-log", step_log)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "succeeded", outcome
    assert outcome["output"] == {"charges": [1, 2, 3]}

    requests = fetch(f"{effects_url}/requests")
    effects = fetch(f"{effects_url}/effects")
    # A was not sent again (recorded); B was sent again with the same key (not recorded), and done once.
    assert [r["order"] for r in requests] == ["A", "B", "B", "C"]
    assert requests[1]["key"] == requests[2]["key"]
    assert [e["order"] for e in effects] == ["A", "B", "C"]
    keys = [e["key"] for e in effects]
    assert len(set(keys)) == 3
    assert all(key.startswith("order-1.") for key in keys)

    again = worker(
        "workflow", db, effects_url, "order-1", "--step-log", step_log
    )  # a finished run: its result, from the journal
    assert json.loads(again.stdout)["output"] == {"charges": [1, 2, 3]}
    assert len(fetch(f"{effects_url}/requests")) == 4


@STEP_LOGS
def test_a_crash_after_the_step_was_recorded_resends_nothing(effects_url: str, tmp_path: Path, step_log: str) -> None:
    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    crashed = worker("workflow", db, effects_url, "order-2", "--crash-after", "2", "--recorded", "--step-log", step_log)
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    resumed = worker("workflow", db, effects_url, "order-2", "--step-log", step_log)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [r["order"] for r in fetch(f"{effects_url}/requests")] == ["A", "B", "C"]


def test_an_agent_survives_a_crash_between_two_model_steps(effects_url: str, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    crashed = worker("agent", db, effects_url, "chat-1", "--crash-after", "2", "--recorded")
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    assert [r["order"] for r in fetch(f"{effects_url}/requests")] == ["A", "B"]

    resumed = worker("agent", db, effects_url, "chat-1")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    outcome = json.loads(resumed.stdout)
    assert outcome["output"] == "charged 3 orders"
    assert outcome["tools"] == ["rest://shop.charge"] * 3  # the whole run's trace, replayed steps included
    # The model was asked only for what the journal did not hold: the reply after B's result, and the last one.
    assert outcome["llm_requests"] == 2
    assert [r["order"] for r in fetch(f"{effects_url}/requests")] == ["A", "B", "C"]  # nothing called again


def test_an_agent_killed_during_a_tool_call_sends_it_again_with_the_same_key(effects_url: str, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    assert worker("agent", db, effects_url, "chat-2", "--crash-after", "1").returncode == 3
    resumed = worker("agent", db, effects_url, "chat-2")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    requests = fetch(f"{effects_url}/requests")
    assert [r["order"] for r in requests] == ["A", "A", "B", "C"]
    assert requests[0]["key"] == requests[1]["key"]
    assert [e["order"] for e in fetch(f"{effects_url}/effects")] == ["A", "B", "C"]


def test_an_approval_waits_across_a_crash_and_an_answer_sent_meanwhile_is_taken(
    effects_url: str, tmp_path: Path
) -> None:
    import pytest

    from kavalai.durable import UnknownRunError
    from kavalai.durable.dbos import DbosClient
    from kavalai.errors import AlreadyAnsweredError

    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    waiting = worker("agent", db, effects_url, "approve-1", "--approval", "--exit-when-waiting")
    assert waiting.returncode == 3, waiting.stderr[-2000:]
    ((key, question),) = json.loads(waiting.stdout).items()
    assert question == {
        "key": key,
        "kind": "approval",
        "tool": "rest://shop.charge",
        "arguments": {"order": "A", "amount": 7},
    }
    assert fetch(f"{effects_url}/requests") == []  # nothing was charged before the approval

    client = DbosClient(db)  # no process runs the run now: the answer waits in the journal
    try:
        assert client.pending("approve-1") == {key: question}
        with pytest.raises(LookupError, match=f"waits for {key}"):
            client.answer("approve-1", "approval-99", "allow")
        with pytest.raises(ValueError, match="An approval is"):
            client.answer("approve-1", key, "maybe")
        client.answer("approve-1", key, "allow")
        with pytest.raises(AlreadyAnsweredError, match=rf"{key!r} was answered already") as lost:
            client.answer("approve-1", key, "deny")  # a second answer is told it lost, and what won
        assert lost.value.answer == {"action": "allow"}
    finally:
        client.close()

    # This process would refuse A: A charged shows the run took the answer sent while no process ran it.
    answers = json.dumps({"A": "deny", "B": {"action": "deny", "reason": "B is on hold"}})
    resumed = worker("agent", db, effects_url, "approve-1", "--approval", "--answers", answers)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    outcome = json.loads(resumed.stdout)
    assert outcome["output"] == "charged 3 orders"
    assert [e["order"] for e in fetch(f"{effects_url}/effects")] == ["A", "C"]  # A as answered meanwhile; B refused

    client = DbosClient(db)  # a finished run, and a run that never was: refused saying so, nothing sent
    try:
        with pytest.raises(LookupError, match=r"^Run approve-1 has finished: it waits for no answer; 'approval-9'"):
            client.answer("approve-1", "approval-9", "allow")
        with pytest.raises(UnknownRunError, match="No run 'approve-2'"):
            client.answer("approve-2", key, "allow")
        assert client.pending("approve-2") == {}
    finally:
        client.close()


def test_a_run_keeps_the_step_log_it_began_with(effects_url: str, tmp_path: Path) -> None:
    # Begun by a worker recording DBOS steps, resumed by one whose own runs use kavalai's step log: the recorded
    # steps are replayed from where they were recorded, not run again.
    db = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    crashed = worker("workflow", db, effects_url, "order-3", "--crash-after", "2", "--recorded", "--step-log", "dbos")
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    resumed = worker("workflow", db, effects_url, "order-3", "--step-log", "kavalai")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["output"] == {"charges": [1, 2, 3]}
    assert [r["order"] for r in fetch(f"{effects_url}/requests")] == ["A", "B", "C"]
