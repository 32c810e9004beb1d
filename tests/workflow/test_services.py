"""What the engine starts with its connections: REST apps it serves itself, OpenAPI imports, model clients; and
the tool check of ``connect()``."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import aiohttp
import anyio
import anyio.lowlevel
import pytest

from kavalai import FunctionKernel
from kavalai.testing import ScriptedLLM
from kavalai.workflow import WorkflowBuilder, WorkflowDefinitionError, WorkflowEngine
from kavalai.workflow._services import ServedRestApp

BOOKSHOP = """
name: bookshop
input: object
output: object
rest_servers:
  - name: shop
    app: kavalai.demo.rest_app.create_demo_app
    openapi: /openapi.json
    include: [books]
nodes:
  - {id: start, kind: start, next: books}
  - {id: books, kind: function, tool: "rest://shop.listBooks", inputs: {author: input.author}, next: end}
  - {id: end, kind: end, outputs: {titles: {expr: "len(books.result)"}, first: "books.result[0].title"}}
"""


def _write(tmp_path: Path, body: str, module: str = "") -> Path:
    if module:
        (tmp_path / f"{module.split('.')[0]}.py").write_text(textwrap.dedent(module.split(":", 1)[1]), "utf-8")
    path = tmp_path / "workflow.yaml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def _served(engine: WorkflowEngine) -> ServedRestApp:
    (service,) = [s for s in engine._services if isinstance(s, ServedRestApp)]
    return service


async def _refused(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(f"{url}/books"):
            return False
    except aiohttp.ClientConnectionError:
        return True


async def test_a_served_app_runs_while_connected_and_its_openapi_spec_is_imported(tmp_path: Path) -> None:
    engine = WorkflowEngine.from_yaml(_write(tmp_path, BOOKSHOP))
    assert engine.kernel.list_tools("rest://*") == []  # registered when the app starts, not at load time
    async with engine:
        first_url = _served(engine).url
        assert first_url is not None
        assert engine.kernel.list_tools("rest://*") == [
            "rest://shop.createBook",
            "rest://shop.getBook",
            "rest://shop.listBooks",
        ]
        result = await engine.run({"author": "Ursula K. Le Guin"})
        assert result.ok, result.error
        assert result.output == {"titles": 2, "first": "The Left Hand of Darkness"}
    assert await _refused(first_url)  # aclose() stopped serving
    # connected again, the app is served anew (on another free port) and the tools follow it
    async with engine:
        second_url = _served(engine).url
        assert second_url is not None
        assert (await engine.run({"author": "Octavia E. Butler"})).output == {"titles": 1, "first": "Kindred"}
    assert await _refused(second_url)


async def test_a_run_without_connect_starts_the_app_and_aclose_stops_it(tmp_path: Path) -> None:
    engine = WorkflowEngine.from_yaml(_write(tmp_path, BOOKSHOP))
    try:
        assert (await engine.run({"author": "Octavia E. Butler"})).output == {"titles": 1, "first": "Kindred"}
        url = _served(engine).url
        assert url is not None
        assert not await _refused(url)
    finally:
        await engine.aclose()
    assert await _refused(url)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("app: kavalai.demo.rest_app.create_demo_app", "app: kavalai.demo.rest_app.nope"),
            "Field 'rest_servers\\[0\\].app': module 'kavalai.demo.rest_app' has no attribute 'nope'",
        ),
        (
            ("    openapi: /openapi.json", "    url: http://127.0.0.1:1\n    openapi: /openapi.json"),
            "Field 'rest_servers\\[0\\]': give either 'app' \\(a REST app the engine serves\\) or 'url', not both",
        ),
        (("    openapi: /openapi.json", "    colour: red\n    openapi: /openapi.json"), "colour"),
    ],
)
def test_served_app_errors_at_load(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    assert change[0] in BOOKSHOP
    with pytest.raises(WorkflowDefinitionError, match=message):
        WorkflowEngine.from_yaml(_write(tmp_path, BOOKSHOP.replace(*change)))


async def test_an_app_that_is_not_an_aiohttp_application_fails_at_connect(tmp_path: Path) -> None:
    module = f"notaiohttp_{uuid.uuid4().hex[:8]}"
    source = f"{module}.py:\ndef make_app():\n    return {{'not': 'an app'}}\n"
    body = BOOKSHOP.replace("kavalai.demo.rest_app.create_demo_app", f"{module}.make_app")
    engine = WorkflowEngine.from_yaml(_write(tmp_path, body, source))
    with pytest.raises(WorkflowDefinitionError, match="the app is a dict, not an aiohttp.web.Application") as caught:
        async with engine:
            pytest.fail("the body must not run")  # pragma: no cover
    assert caught.value.field == "rest_servers[0].app"


MODELS = """
name: models
input: object
output: string
models:
  writer: {factory: MODULE.make_llm}
nodes:
  - {id: start, kind: start, next: say}
  - {id: say, kind: llm, model: writer, prompt: "Say hi", next: end}
  - {id: end, kind: end}
"""


async def test_yaml_model_clients_are_created_on_connect_and_closed_on_aclose(tmp_path: Path) -> None:
    module = f"models_{uuid.uuid4().hex[:8]}"
    source = f"""{module}.py:
from kavalai.testing import ScriptedLLM

MADE = []

class Closing(ScriptedLLM):
    closed = False

    async def aclose(self) -> None:
        self.closed = True

def make_llm():
    MADE.append(Closing(["hi"]))
    return MADE[-1]
"""
    engine = WorkflowEngine.from_yaml(_write(tmp_path, MODELS.replace("MODULE", module), source))
    import sys

    made = sys.modules[module].MADE
    assert made == []  # nothing is created at load time
    async with engine:
        assert len(made) == 1
        assert (await engine.run({})).output == "hi"
    assert made[0].closed
    async with engine:  # a new client after a reconnect
        assert len(made) == 2
        assert (await engine.run({})).output == "hi"
    assert made[1].closed


async def test_a_model_that_cannot_be_created_fails_at_connect_naming_the_field(tmp_path: Path) -> None:
    module = f"models_{uuid.uuid4().hex[:8]}"
    source = f"{module}.py:\ndef make_llm():\n    raise RuntimeError('no API key for the writer')\n"
    engine = WorkflowEngine.from_yaml(_write(tmp_path, MODELS.replace("MODULE", module), source))
    with pytest.raises(WorkflowDefinitionError, match="Field 'models.writer': no API key for the writer"):
        await engine.connect()
    await engine.aclose()
    # and a run that was not connected first fails in the node, naming the field
    result = await engine.run({})
    assert (result.failed_node, getattr(result.error, "field", None)) == ("say", "model")
    assert "no API key for the writer" in str(result.error)


@pytest.mark.parametrize(
    ("model", "message"),
    [("opnai/gpt-4.1-mini", "Did you mean 'openai'"), ("gpt-4.1-mini", "is not a model id such as")],
)
def test_model_ids_are_checked_at_load(tmp_path: Path, model: str, message: str) -> None:
    body = MODELS.replace("{factory: MODULE.make_llm}", model)
    with pytest.raises(WorkflowDefinitionError, match=f"Field 'models.writer': '{model}' {message}|{message}"):
        WorkflowEngine.from_yaml(_write(tmp_path, body))


async def test_connect_checks_every_tool_the_workflow_names(tools_kernel: FunctionKernel) -> None:
    misspelt = (
        WorkflowBuilder("t")
        .start(next="add")
        .function("add", tool="python://t.ad", inputs={"a": 1, "b": 2}, next="end")
        .end()
        .build()
    )
    with pytest.raises(WorkflowDefinitionError) as caught:
        async with WorkflowEngine(misspelt, tools_kernel):
            pytest.fail("the body must not run")  # pragma: no cover
    assert (caught.value.node, caught.value.field) == ("add", "tool")
    assert str(caught.value) == (
        "Node 'add': field 'tool': Unknown tool 'python://t.ad'. Did you mean 'python://t.add'?"
    )
    agent = (
        WorkflowBuilder("t")
        .start(next="ask")
        .agent("ask", prompt="hi", allowed_tools=["python://t.add", "mcp://github.*"], next="end")
        .end()
        .build()
    )
    with pytest.raises(
        WorkflowDefinitionError, match="field 'allowed_tools\\[1\\]': The pattern 'mcp://github.\\*' matches no"
    ):
        await WorkflowEngine(agent, tools_kernel, llm=ScriptedLLM(["x"])).connect()


class _Recorder:
    """A service that records its starts and stops."""

    def __init__(self) -> None:
        self.log: list[str] = []

    async def start(self, kernel: FunctionKernel) -> None:
        await anyio.lowlevel.checkpoint()  # let concurrent runs race for the start
        self.log.append("start")

    async def stop(self) -> None:
        self.log.append("stop")


async def test_services_start_once_for_concurrent_runs_and_stop_on_aclose(tools_kernel: FunctionKernel) -> None:
    workflow = WorkflowBuilder("t", input=int, output=int).start(next="end").end().build()
    service = _Recorder()
    engine = WorkflowEngine(workflow, tools_kernel, services=[service])
    outputs: list[int] = []

    async def run_one(n: int) -> None:
        outputs.append((await engine.run(n)).output)

    async with anyio.create_task_group() as group:
        for n in range(5):
            group.start_soon(run_one, n)
    assert sorted(outputs) == [0, 1, 2, 3, 4]
    assert service.log == ["start"]
    await engine.aclose()
    await engine.aclose()
    assert service.log == ["start", "stop"]
    async with engine:
        assert service.log == ["start", "stop", "start"]
    assert service.log == ["start", "stop", "start", "stop"]


async def test_connect_checks_that_every_model_node_has_a_model(tools_kernel: FunctionKernel) -> None:
    def workflow(model: str | None) -> WorkflowBuilder:
        return WorkflowBuilder("t", output=str).start(next="say").llm("say", prompt="hi", model=model, next="end").end()

    with pytest.raises(WorkflowDefinitionError, match="Node 'say' needs a model") as caught:
        await WorkflowEngine(workflow(None).build(), tools_kernel).connect()
    assert (caught.value.node, caught.value.field) == ("say", "model")
    with pytest.raises(WorkflowDefinitionError, match="Node 'say': field 'model': Unknown provider 'opnai'"):
        await WorkflowEngine(workflow("opnai/gpt-4.1-mini").build(), tools_kernel).connect()
    # a client given to the engine serves every model node, whatever its model name
    async with WorkflowEngine(workflow("writer").build(), tools_kernel, llm=ScriptedLLM(["hi"])) as engine:
        assert (await engine.run({})).output == "hi"
