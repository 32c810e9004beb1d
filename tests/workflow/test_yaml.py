"""The YAML loader: graph, types and the kernel sections, and its errors."""

from __future__ import annotations

import json
import re
import textwrap
import uuid
from pathlib import Path

import pytest

from kavalai import FunctionKernel
from kavalai.workflow import WorkflowDefinitionError, WorkflowEngine

HELPERS = '''
from kavalai import pythontool

@pythontool
def double(x: int) -> int:
    """Double a number."""
    return 2 * x

def shout(text: str) -> str:
    """Not decorated: the loader wraps it."""
    return text.upper() + "!"
'''


def _write(tmp_path: Path, body: str, helpers: str = HELPERS) -> tuple[Path, str]:
    module = f"wf_helpers_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(helpers, encoding="utf-8")
    path = tmp_path / "workflow.yaml"
    path.write_text(textwrap.dedent(body).replace("HELPERS", module), encoding="utf-8")
    return path, module


GOOD = """
name: double-and-shout
input:
  type: object
  properties:
    n: {type: integer}
    word: {type: string}
  required: [n, word]
output: Result
types:
  Result:
    type: object
    properties:
      doubled: {type: integer}
      shouted: {type: string}
      big: {type: boolean}
    required: [doubled, shouted, big]
limits: {max_visits: 10, timeout: 30}
python_functions:
  - HELPERS.double
  - {function: HELPERS.shout, name: text.shout}
nodes:
  - {id: start, kind: start, next: twice}
  - {id: twice, kind: function, tool: "python://double", inputs: {x: input.n}, next: loud}
  - {id: loud, kind: function, tool: "python://text.shout", inputs: {text: input.word}, next: done}
  - id: done
    kind: end
    outputs: {doubled: twice.result, shouted: loud.result, big: {expr: "twice.result > 10"}}
"""


async def test_loads_and_runs_a_yaml_workflow(tmp_path: Path) -> None:
    path, _ = _write(tmp_path, GOOD)
    async with WorkflowEngine.from_yaml(path) as engine:
        assert engine.workflow.name == "double-and-shout"
        assert engine.workflow.input_type.name == "DoubleAndShoutInput"
        assert (engine.max_visits, engine.timeout) == (10, 30)
        assert engine.kernel.list_tools() == ["python://double", "python://text.shout"]
        result = await engine.run({"n": "21", "word": "hey"})
        assert result.ok, result.error
        assert result.output_data == {"doubled": 42, "shouted": "HEY!", "big": True}
        assert type(result.output).__name__ == "Result"
        invalid = await engine.run({"n": 1})
        assert invalid.failed_node == "start"
        assert "word: Field required" in str(invalid.error)


async def test_tools_go_on_a_given_kernel_and_limits_can_be_overridden(tmp_path: Path) -> None:
    path, _ = _write(tmp_path, GOOD)
    kernel = FunctionKernel()
    engine = WorkflowEngine.from_yaml(path, kernel=kernel, max_visits=3, timeout=None)
    assert engine.kernel is kernel
    assert kernel.has_tool("python://double")
    assert (engine.max_visits, engine.timeout) == (3, None)
    async with engine:
        result = await engine.run({"n": 1, "word": "a"})
    assert "limit of 3 node visits" in str(result.error)


def test_environment_variables_are_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = GOOD.replace("- HELPERS.double", "- ${KV_HELPER_MODULE}.double").replace(
        "name: text.shout}", "name: '${SHOUT_NAME:-text.shout}'}"
    )
    path, module = _write(tmp_path, body)
    monkeypatch.setenv("KV_HELPER_MODULE", module)
    engine = WorkflowEngine.from_yaml(path)
    assert engine.kernel.list_tools() == ["python://double", "python://text.shout"]
    monkeypatch.delenv("KV_HELPER_MODULE")
    with pytest.raises(WorkflowDefinitionError, match="reads \\$\\{KV_HELPER_MODULE\\}, but the environment variable"):
        WorkflowEngine.from_yaml(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("name: double-and-shout", "name: [x"), "is not valid YAML"),
        (("limits: {max_visits: 10, timeout: 30}", "limts: {}"), "field 'limts' is not a known field. Did you mean"),
        (
            ("limits: {max_visits: 10, timeout: 30}", "limits: {max_visits: 0}"),
            "field 'limits.max_visits': Input should be greater than or equal to 1",
        ),
        (("- HELPERS.double", "- HELPERS.triple"), "module '.*' has no attribute 'triple'"),
        (("- HELPERS.double", "- no_such_module_kv.double"), "cannot import module 'no_such_module_kv'"),
        (("- HELPERS.double", "- double"), "'double' is not a dotted path"),
        (
            ("- {function: HELPERS.shout, name: text.shout}", "- {function: HELPERS.double, name: double}"),
            "Field 'python_functions\\[1\\]': Python tool 'double' is already registered at python://double",
        ),
        (("nodes:", "tools: [nope]\nnodes:"), "Field 'tools\\[0\\]': there is no bundled tool group 'nope'"),
        (("nodes:", "tools: [{group: fs, root: /no/such/dir/kv}]\nnodes:"), "Field 'tools\\[0\\]':"),
        (("nodes:", "mcp_servers: [{name: 'bad name', command: x}]\nnodes:"), "Field 'mcp_servers\\[0\\]'"),
        (
            ("nodes:", "rest_servers: [{name: api, url: 'http://127.0.0.1:1', rest_tools: [{method: GET}]}]\nnodes:"),
            "Field 'rest_servers\\[0\\].rest_tools\\[0\\]': needs a 'name'",
        ),
        (("nodes:", "models: {m: {}}\nnodes:"), "Field 'models.m': needs one of 'factory' or 'model'"),
        (("output: Result", "output: Reslt"), "undeclared type 'Reslt'. Did you mean 'Result'"),
        (("next: loud}", "next: lound}"), "unknown node 'lound'. Did you mean 'loud'"),
    ],
)
def test_document_errors_are_clear(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    old, new = change
    assert old in GOOD
    path, _ = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(WorkflowDefinitionError, match=message):
        WorkflowEngine.from_yaml(path)


def test_document_must_be_a_mapping_and_file_must_exist(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(WorkflowDefinitionError, match="the document must be a mapping with a 'nodes' list"):
        WorkflowEngine.from_yaml(path)
    with pytest.raises(WorkflowDefinitionError, match="Cannot read workflow file .*missing.yaml"):
        WorkflowEngine.from_yaml(tmp_path / "missing.yaml")


def test_duplicate_type_names_are_refused(tmp_path: Path) -> None:
    path, _ = _write(tmp_path, GOOD.replace("types:\n", "types:\n  string: {type: string}\n"))
    with pytest.raises(WorkflowDefinitionError, match="Type 'string' is declared twice"):
        WorkflowEngine.from_yaml(path)


async def test_rest_tools_are_registered(tmp_path: Path, text_api_url: str) -> None:
    body = f"""
    name: rest
    input: object
    output: object
    rest_servers:
      - name: api
        url: {text_api_url}
        rest_tools:
          - name: reading_time
            method: POST
            path: /reading-time
            input_schema:
              type: object
              properties: {{words: {{type: integer}}, wpm: {{type: integer}}}}
              required: [words]
    nodes:
      - {{id: start, kind: start, next: time}}
      - {{id: time, kind: function, tool: "rest://api.reading_time", inputs: {{words: input.words, wpm: 100}},
         next: end}}
      - {{id: end, kind: end, outputs: {{minutes: time.result.minutes}}}}
    """
    path, _ = _write(tmp_path, body)
    async with WorkflowEngine.from_yaml(path) as engine:
        result = await engine.run({"words": 250})
    assert result.ok, result.error
    assert result.output == {"minutes": 3}


async def test_openapi_spec_next_to_the_yaml_file_is_imported_once(tmp_path: Path, text_api_url: str) -> None:
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "text", "version": "1"},
        "paths": {
            "/reading-time": {
                "post": {
                    "operationId": "reading_time",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"words": {"type": "integer"}},
                                    "required": ["words"],
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {
                                    "schema": {"type": "object", "properties": {"minutes": {"type": "integer"}}}
                                }
                            },
                        }
                    },
                }
            }
        },
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    body = f"""
    name: openapi
    input: object
    output: object
    rest_servers:
      - {{name: api, url: "{text_api_url}", openapi: spec.json}}
    nodes:
      - {{id: start, kind: start, next: time}}
      - {{id: time, kind: function, tool: "rest://api.reading_time", inputs: {{words: input.words}}, next: end}}
      - {{id: end, kind: end, outputs: {{minutes: time.minutes}}}}
    """
    path, _ = _write(tmp_path, body)
    engine = WorkflowEngine.from_yaml(path)
    # A spec in a file is read at load time (registration records configuration; only a URL waits for connect).
    assert engine.kernel.list_tools("rest://*") == ["rest://api.reading_time"]
    async with engine:
        assert engine.kernel.list_tools("rest://*") == ["rest://api.reading_time"]
        results = [await engine.run({"words": n}) for n in (100, 1000)]
    assert [r.output for r in results] == [{"minutes": 1}, {"minutes": 5}]


async def test_relative_paths_are_relative_to_the_yaml_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "note.txt").write_text("hello", encoding="utf-8")
    body = """
    name: relative
    input: object
    output: object
    tools: [{group: fs, root: data}]
    nodes:
      - {id: start, kind: start, next: read}
      - {id: read, kind: function, tool: "python://fs.read", inputs: {path: note.txt}, next: end}
      - {id: end, kind: end, outputs: {text: read.content}}
    """
    path, _ = _write(tmp_path, body)
    async with WorkflowEngine.from_yaml(path) as engine:  # the tests run in another directory
        result = await engine.run({})
    assert result.output == {"text": "hello"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nospec.json", "Cannot read the OpenAPI spec file '.*nospec.json'"),
        ("bad.json", "The OpenAPI spec '.*bad.json' has a 'paths' entry that is not an object"),
    ],
)
def test_an_openapi_spec_file_that_cannot_be_used_fails_at_load_naming_the_field(
    tmp_path: Path, text_api_url: str, spec: str, message: str
) -> None:
    (tmp_path / "bad.json").write_text('{"openapi": "3.0.3", "paths": 5}', encoding="utf-8")
    body = f"""
    name: openapi
    input: object
    output: object
    rest_servers:
      - {{name: api, url: "{text_api_url}", openapi: {spec}}}
    nodes:
      - {{id: start, kind: start, next: end}}
      - {{id: end, kind: end}}
    """
    path, _ = _write(tmp_path, body)
    with pytest.raises(WorkflowDefinitionError, match=f"Field 'rest_servers\\[0\\].openapi': {message}") as caught:
        WorkflowEngine.from_yaml(path)
    assert caught.value.field == "rest_servers[0].openapi"


@pytest.mark.parametrize(
    ("change", "hint"),
    [
        (("kind: function", "kind: fucntion"), "Did you mean 'function'?"),
        (("output: Result", "otuput: Result"), "Did you mean 'output'?"),
    ],
)
def test_misspelt_keys_and_kinds_get_did_you_mean(tmp_path: Path, change: tuple[str, str], hint: str) -> None:
    source = GOOD.replace(*change, 1)
    assert source != GOOD
    path, _ = _write(tmp_path, source)
    with pytest.raises(WorkflowDefinitionError, match=re.escape(hint)):
        WorkflowEngine.from_yaml(path)
