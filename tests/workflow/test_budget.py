"""Output budgets in workflows: what of a tool's result reaches an ``llm`` or ``agent`` node's model, cut or kept as
an artifact, by the engine's, the kernel's or the YAML file's budget; per tool for Python and REST tools."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.servers.rest_app import create_app
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, pythontool
from kavalai.agent import MemoryArtifactStore, OutputBudget
from kavalai.llm import ToolResultMessage, UserMessage
from kavalai.testing import ScriptedLLM, ScriptedRequest, tool_call
from kavalai.workflow import WorkflowBuilder, WorkflowDefinitionError, WorkflowEngine

PAGE = "".join(f"line {i:04d}. " for i in range(500))  # 5,500 characters


@pythontool
def fetch(url: str) -> str:
    """A long page."""
    return PAGE


@pythontool
def big(n: int) -> str:
    """A text of n characters."""
    return ("abcdefghij" * (n // 10 + 1))[:n]


@pytest.fixture
def kernel() -> FunctionKernel:
    kernel = FunctionKernel()
    kernel.register_python_tool("web.fetch", fetch)
    kernel.register_python_tool("big", big)
    return kernel


def _summarize() -> WorkflowBuilder:
    return (
        WorkflowBuilder("summarize", output="string")
        .start(next="load")
        .function("load", tool="python://web.fetch", inputs={"url": "input.url"}, next="brief")
        .llm("brief", prompt="Summarize {{ page }} for {{ input.who }}.", inputs={"page": "load.result"}, next="end")
        .end("end")
    )


def _prompt(request: ScriptedRequest) -> str:
    return next(m.content for m in request.messages if isinstance(m, UserMessage))


async def test_without_a_budget_the_prompt_holds_the_whole_result(kernel: FunctionKernel) -> None:
    llm = ScriptedLLM(["short"])
    result = await WorkflowEngine(_summarize().build(), kernel, llm=llm).run({"url": "u", "who": "Ada"})
    assert result.ok, result.error
    assert _prompt(llm.requests[0]) == f"Summarize {PAGE} for Ada."


async def test_an_llm_node_sees_a_tool_result_cut_to_the_budget_with_a_notice(kernel: FunctionKernel) -> None:
    llm = ScriptedLLM(["short"])
    engine = WorkflowEngine(_summarize().build(), kernel, llm=llm, output_budget=OutputBudget(max_chars=300))
    result = await engine.run({"url": "u", "who": "Ada"})
    assert result.ok, result.error
    prompt = _prompt(llm.requests[0])
    assert prompt.startswith(f"Summarize {PAGE[:300]}\n[Truncated: the result of python://web.fetch has 5,500 ")
    assert prompt.endswith("characters; only the first 300 are shown.] for Ada.")
    assert "Ask for less" not in prompt  # one model call, no tools: nothing it could ask
    assert result.trace[1].output == {"result": PAGE}  # the trace keeps the tool's result whole
    assert result.trace[2].inputs is not None
    assert result.trace[2].inputs["prompt"] == prompt  # and shows the prompt as the model got it


async def test_per_tool_budgets_apply_to_a_tools_result_and_the_default_to_other_values(
    kernel: FunctionKernel,
) -> None:
    llm = ScriptedLLM(["short"])
    budget = OutputBudget(max_chars=1000, per_tool={"python://web.*": 100})
    engine = WorkflowEngine(_summarize().build(), kernel, llm=llm, output_budget=budget)
    await engine.run({"url": "u", "who": "x" * 1500})
    prompt = _prompt(llm.requests[0])
    assert (
        f"{PAGE[:100]}\n[Truncated: the result of python://web.fetch has 5,500 characters; only the first 100" in prompt
    )
    assert f"{'x' * 1000}\n[Truncated: a value of this prompt has 1,500 characters; only the first 1,000" in prompt


async def test_an_llm_nodes_overflow_kept_as_an_artifact_is_named_and_stored_whole(kernel: FunctionKernel) -> None:
    store = MemoryArtifactStore()
    llm = ScriptedLLM(["short"])
    budget = OutputBudget(max_chars=200, overflow="artifact", store=store)
    await WorkflowEngine(_summarize().build(), kernel, llm=llm, output_budget=budget).run({"url": "u", "who": "Ada"})
    prompt = _prompt(llm.requests[0])
    found = re.search(r"It is kept whole as (artifact://[0-9a-f]+)\.\] for Ada\.$", prompt)
    assert found is not None, prompt
    assert await store.get(found.group(1)) == PAGE
    assert "read_artifact" not in prompt  # an llm node cannot call it
    assert "\x00" not in prompt


async def test_an_agent_node_reads_on_with_read_artifact_and_its_tool_results_are_budgeted(
    kernel: FunctionKernel,
) -> None:
    handles: list[str] = []

    def script(request: ScriptedRequest) -> object:
        results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
        if not results:
            found = re.search(r"The whole result is (artifact://[0-9a-f]+)", _prompt(request))
            assert found is not None
            handles.append(found.group(1))
            return tool_call("read_artifact", {"handle": found.group(1), "offset": 150, "limit": 40})
        if len(results) == 1:
            return tool_call("python://big", {"n": 900})
        return "read it all"

    llm = ScriptedLLM(script)
    workflow = (
        WorkflowBuilder("research", output="string")
        .start(next="load")
        .function("load", tool="python://web.fetch", inputs={"url": "input.url"}, next="think")
        .agent("think", prompt="Read {{ page }}", inputs={"page": "load.result"}, next="end")
        .end("end")
        .build()
    )
    kernel.output_budget = OutputBudget(max_chars=150, overflow="artifact")  # the engine takes the kernel's
    result = await WorkflowEngine(workflow, kernel, llm=llm).run({"url": "u"})
    assert result.ok, result.error
    assert "read_artifact" in llm.requests[0].tool_names
    page, fetched = [m.content for m in llm.requests[2].messages if isinstance(m, ToolResultMessage)]
    assert f'"text":"{PAGE[150:190]}"' in page  # the agent paged through the prompt's artifact
    assert "The result of python://big has 913 characters; the first 150 are shown" in fetched
    assert result.trace[2].tool_calls[1].output == {"result": "abcdefghij" * 90}


async def test_the_engines_budget_wins_over_the_kernels(kernel: FunctionKernel) -> None:
    kernel.output_budget = OutputBudget(max_chars=5)
    llm = ScriptedLLM(["short"])
    engine = WorkflowEngine(_summarize().build(), kernel, llm=llm, output_budget=OutputBudget(max_chars=5000))
    await engine.run({"url": "u", "who": "Ada"})
    assert "only the first 5,000 are shown" in _prompt(llm.requests[0])


@pytest.fixture(scope="module")
def rest_url() -> Iterator[str]:
    with serve(create_app()) as url:
        yield url


async def test_a_yaml_output_budget_keeps_artifacts_in_files_and_budgets_rest_results(
    rest_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "flow.yaml"
    source.write_text(
        f"""
name: report
input: object
output: string
rest_servers:
  - name: shop
    url: {rest_url}
    rest_tools:
      - {{name: large, method: GET, path: /large, input_schema: {{properties: {{n: {{type: integer}}}}}}}}
output_budget: {{max_chars: 10000, per_tool: {{"rest://shop.*": 120}}, overflow: artifact, artifact_dir: kept}}
nodes:
  - {{id: start, kind: start, next: load}}
  - {{id: load, kind: function, tool: "rest://shop.large", inputs: {{n: 20}}, next: say}}
  - {{id: say, kind: llm, model: scripted, prompt: "Report {{{{ rows }}}}", inputs: {{rows: load.result}}, next: end}}
  - {{id: end, kind: end}}
""",
        encoding="utf-8",
    )
    llm = ScriptedLLM(["done"])
    async with WorkflowEngine.from_yaml(source, llms={"scripted": llm}) as engine:
        result = await engine.run({})
    assert result.ok, result.error
    prompt = _prompt(llm.requests[0])
    assert "the result of rest://shop.large has" in prompt
    assert "only the first 120 are shown. It is kept whole as artifact://" in prompt
    [kept] = list((tmp_path / "kept").glob("*.txt"))
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600


def test_a_yaml_output_budget_is_checked_when_the_workflow_loads() -> None:
    document = {
        "output_budget": {"max_chars": 100, "overflow": "spill"},
        "nodes": [{"id": "start", "kind": "start", "next": "end"}, {"id": "end", "kind": "end"}],
    }
    with pytest.raises(WorkflowDefinitionError, match="output_budget.overflow"):
        WorkflowEngine.from_dict(document)
