"""A function node's ``method`` reaches the REST tool it names, against the example REST API on loopback."""

from __future__ import annotations

from kavalai.workflow import WorkflowEngine

DOCUMENT = """
name: reading
rest_servers:
  - {name: text, url: "%s"}
data_types:
  input: {type: object, properties: {words: {type: integer}}}
  timing: {type: object, properties: {minutes: {type: integer}, words: {type: integer}}}
nodes:
  - {name: begin, type: start, next: time}
  - name: time
    type: function
    tool: rest://text.reading-time
    method: post
    inputs:
      words: {type: context, value: input.words}
    output: timing
    next: finish
  - {name: finish, type: end, output: timing}
"""


async def test_method_selects_the_registered_rest_tool(text_api_url: str) -> None:
    engine = WorkflowEngine.from_yaml(DOCUMENT % text_api_url)
    engine.kernel.register_rest_tool(
        "text",
        "reading-time",
        "POST",
        input_schema={"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]},
        output_schema={"type": "object", "properties": {"minutes": {"type": "integer"}, "words": {"type": "integer"}}},
        description="Minutes a text takes to read.",
    )
    async with engine:
        result = await engine.run({"words": 420})
    assert result.completed, result.error
    assert result.output_data == {"minutes": 3, "words": 420}
    assert result.result.trace[1].inputs == {"words": 420}
