"""``kavalai run`` traced from the standard OpenTelemetry environment: the real command, its spans sent over
OTLP/HTTP to a real receiver on 127.0.0.1 that decodes the protobuf."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
from tests.servers.otlp_receiver import ReceivedSpan, receive_traces

TRIAGE = str(Path(__file__).resolve().parents[2] / "examples" / "support_triage.yaml")
KAVALAI = str(Path(sys.executable).parent / "kavalai")


async def test_a_run_sends_its_workflow_node_and_tool_spans() -> None:
    async with receive_traces() as receiver:
        clean = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
        env = {**clean, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "triage-runs"}
        command = [KAVALAI, "run", TRIAGE, "--input", '{"message": "Security breach on the admin page"}']
        done = await anyio.run_process(command, env=env, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert f"kavalai run: tracing as service 'triage-runs' to OTLP/HTTP {receiver.url}/v1/traces" in stderr
    (run,) = receiver.named("workflow support-triage")
    (node,) = receiver.named("workflow.node triage")
    (tool,) = receiver.named("execute_tool python://urgent_terms")
    assert run.parent_span_id == ""
    assert {node.trace_id, tool.trace_id} == {run.trace_id}
    assert node.parent_span_id == run.span_id
    assert tool.attributes["gen_ai.tool.name"] == "python://urgent_terms"
    assert _ancestors(receiver.spans, tool.span_id) >= {node.span_id, run.span_id}  # the tool ran inside the node
    assert tool.resource["service.name"] == "triage-runs"


def test_console_spans_go_to_stderr_and_no_tracing_keeps_them_off() -> None:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console"}
    command = [KAVALAI, "run", TRIAGE, "--input", '{"message": "hello"}']
    traced = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert traced.returncode == 0, traced.stderr
    assert json.loads(traced.stdout)["queue"] == "support"  # stdout is the output alone
    assert '"name": "execute_tool python://urgent_terms"' in traced.stderr
    quiet = subprocess.run([*command, "--no-tracing"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert quiet.returncode == 0, quiet.stderr
    assert "tracing" not in quiet.stderr
    assert '"trace_id"' not in quiet.stderr


def _ancestors(spans: list[ReceivedSpan], span_id: str) -> set[str]:
    by_id = {span.span_id: span for span in spans}
    found: set[str] = set()
    current = by_id.get(span_id)
    while current is not None and current.parent_span_id:
        found.add(current.parent_span_id)
        current = by_id.get(current.parent_span_id)
    return found


def test_a_tracing_key_in_the_workflow_file_is_the_switch(tmp_path: Path) -> None:
    text = Path(TRIAGE).read_text(encoding="utf-8")
    (tmp_path / "off.yaml").write_text("tracing: false\n" + text, encoding="utf-8")
    for name in ("support_tools.py", "support_llm.py"):  # the workflow's tools and model sit beside it
        (tmp_path / name).write_text((Path(TRIAGE).parent / name).read_text(encoding="utf-8"), encoding="utf-8")
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console"}
    command = [KAVALAI, "run", str(tmp_path / "off.yaml"), "--input", '{"message": "hello"}']
    off = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False, cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    assert '"trace_id"' not in off.stderr  # the file says no, over the environment
    on = subprocess.run([*command, "--tracing"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert on.returncode == 0, on.stderr
    assert '"name": "workflow support-triage"' in on.stderr  # the command line says yes, over the file


def test_a_worker_asked_to_trace_without_an_exporter_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "zipkin_json"}
    command = [KAVALAI, "worker", TRIAGE, "--db", f"sqlite:///{tmp_path / 'runs.sqlite'}", "--trace"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "kavalai worker: OTEL_TRACES_EXPORTER: no trace exporter 'zipkin_json' is installed" in done.stderr
