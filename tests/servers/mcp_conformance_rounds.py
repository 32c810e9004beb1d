"""A real MCP server (the SDK's ``MCPServer``) of the 2026-07-28 era offering the tools the conformance suite's
input-required scenarios call (``test_input_required_result_*``), written from the requirements each scenario states.
Each asks in ``InputRequiredResult`` rounds of its own, under its own keys and ``requestState``; ``kavalai serve``
fronting it (``tests/serve/test_conformance.py``) answers those rounds by asking its host in rounds of the gateway's,
under the same keys.

Run it over stdio: ``python -m tests.servers.mcp_conformance_rounds``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field


def _schema(field: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


def _elicit(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": _schema(field, kind)}}


def _sample(text: str, max_tokens: int) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {"method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": max_tokens}}


_ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


def _ask(requests: dict[str, Any], state: str | None = None) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate({"inputRequests": requests, "requestState": state})


def _answers(ctx: Context, *keys: str) -> dict[str, Any] | None:
    """The answers to ``keys`` when every one came, else ``None`` (they are asked again)."""
    given = ctx.input_responses or {}
    if not all(key in given for key in keys):
        return None
    return {key: given[key].model_dump(by_alias=True, exclude_none=True) for key in keys}


def _greeting(ctx: Context) -> str | types.InputRequiredResult:
    """Ask the user's name (a round), then greet them."""
    found = _answers(ctx, "user_name")
    if found is None:
        return _ask({"user_name": _elicit("What is your name?", "name")})
    return f"Hello, {found['user_name'].get('content', {}).get('name', 'stranger')}!"


#: An input schema using the JSON Schema 2020-12 vocabulary the suite checks a server keeps (``$schema``, ``$defs``
#: with an ``$anchor``, ``allOf``/``anyOf``, ``if``/``then``/``else``, ``additionalProperties``).
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


#: The tools this server runs as tasks of its own (listed with ``taskSupport: "required"``): it asks in rounds first,
#: and answers the round that has every answer with a task (the suite's ``tasks-mrtr-composition``).
OWN_TASKS = frozenset({"test_tool_with_task", "counted_task"})


class _TaskId(BaseModel):
    task_id: str = Field(alias="taskId")


class _OwnTasks(Extension):
    """The tasks extension, as this server runs its own tasks: a call of a tool of :data:`OWN_TASKS` whose rounds
    are over becomes a task holding its result, completed at once, which ``tasks/get`` shows."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", _TaskId, self._get),
            MethodBinding("tasks/cancel", _TaskId, self._cancel),
        ]

    async def intercept_tool_call(self, params: types.CallToolRequestParams, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if params.name not in OWN_TASKS or not isinstance(result, types.CallToolResult):
            return result  # a round asking for input, or a tool run at once
        task_id = f"own-{len(self.results) + 1}"
        self.results[task_id] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {"resultType": "task", **self._envelope(task_id, "working")}

    @staticmethod
    def _envelope(task_id: str, status: str) -> dict[str, Any]:
        now = "2026-07-28T00:00:00.000Z"
        return {"taskId": task_id, "status": status, "createdAt": now, "lastUpdatedAt": now, "ttlMs": 60_000}

    async def _get(self, ctx: Any, params: _TaskId) -> dict[str, Any]:
        if params.task_id not in self.results:
            raise MCPError(code=types.INVALID_PARAMS, message="Unknown taskId")
        return {**self._envelope(params.task_id, "completed"), "result": self.results[params.task_id]}

    async def _cancel(self, ctx: Any, params: _TaskId) -> dict[str, Any]:
        return {}


class _Server(MCPServer):
    """The SDK's server, listing one tool under a hand-written schema (the SDK derives the others' from their
    signatures), and those it runs as tasks of its own as such."""

    async def list_tools(self) -> list[types.Tool]:
        listed = await super().list_tools()
        required = types.ToolExecution(task_support="required")
        return [
            tool.model_copy(update={"input_schema": SCHEMA_2020_12})
            if tool.name == "json_schema_2020_12_tool"
            else tool.model_copy(update={"execution": required})
            if tool.name in OWN_TASKS
            else tool
            for tool in listed
        ]


def build_server() -> MCPServer:
    """The server."""
    server = _Server("conformance-rounds", extensions=[_OwnTasks()])

    @server.tool()
    def json_schema_2020_12_tool(**arguments: Any) -> str:
        """Tool with JSON Schema 2020-12 features."""
        return "ok"

    @server.tool()
    def test_header_tool(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Echo a region that is also sent as the Mcp-Param-Region header."""
        return f"region: {region}"

    @server.tool()
    def test_input_required_result_elicitation(ctx: Context) -> str | types.InputRequiredResult:
        """Ask the user's name."""
        return _greeting(ctx)

    @server.tool()
    def test_input_required_result_sampling(ctx: Context) -> str | types.InputRequiredResult:
        """Ask the client's model a question."""
        found = _answers(ctx, "capital_question")
        if found is None:
            return _ask({"capital_question": _sample("What is the capital of France?", 100)})
        return f"LLM response: {found['capital_question'].get('content', {}).get('text')}"

    @server.tool()
    def test_input_required_result_list_roots(ctx: Context) -> str | types.InputRequiredResult:
        """Ask the client's roots."""
        found = _answers(ctx, "client_roots")
        if found is None:
            return _ask({"client_roots": _ROOTS})
        return "Roots: " + ", ".join(root["uri"] for root in found["client_roots"].get("roots", []))

    @server.tool()
    def test_input_required_result_request_state(ctx: Context) -> str | types.InputRequiredResult:
        """Ask a confirmation, with a state to echo."""
        found = _answers(ctx, "confirm")
        if found is None or ctx.request_state != "confirm-state":
            return _ask({"confirm": _elicit("Please confirm", "ok", "boolean")}, "confirm-state")
        return f"state-ok: {json.dumps(found['confirm'], sort_keys=True)}"

    @server.tool()
    def test_input_required_result_tampered_state(ctx: Context) -> str | types.InputRequiredResult:
        """Ask a confirmation, with a state to echo."""
        found = _answers(ctx, "confirm")
        if found is None or ctx.request_state != "tamper-state":
            return _ask({"confirm": _elicit("Please confirm", "ok", "boolean")}, "tamper-state")
        return "confirmed"

    @server.tool()
    def test_input_required_result_multiple_inputs(ctx: Context) -> str | types.InputRequiredResult:
        """Ask a name, a greeting and the roots at once."""
        found = _answers(ctx, "user_name", "greeting", "client_roots")
        if found is None or ctx.request_state != "three":
            requests = {
                "user_name": _elicit("What is your name?", "name"),
                "greeting": _sample("Generate a greeting", 50),
                "client_roots": _ROOTS,
            }
            return _ask(requests, "three")
        return "all three answered"

    @server.tool()
    def test_input_required_result_multi_round(ctx: Context) -> str | types.InputRequiredResult:
        """Ask a name, then a colour."""
        if ctx.request_state == "round-2" and _answers(ctx, "step2") is not None:
            return "both steps answered"
        if ctx.request_state == "round-1" and _answers(ctx, "step1") is not None:
            return _ask({"step2": _elicit("Step 2: What is your favorite color?", "color")}, "round-2")
        return _ask({"step1": _elicit("Step 1: What is your name?", "name")}, "round-1")

    @server.prompt()
    def test_input_required_result_prompt(ctx: Context) -> str | types.InputRequiredResult:
        """A prompt whose context the user is asked for."""
        found = _answers(ctx, "user_context")
        if found is None:
            return _ask({"user_context": _elicit("What context should the prompt use?", "context")})
        return f"Use this context: {found['user_context'].get('content', {}).get('context')}"

    @server.tool()
    def test_streaming_elicitation(ctx: Context) -> str | types.InputRequiredResult:
        """Ask the user a question (in a round: never a request of its own on the response stream)."""
        found = _answers(ctx, "answer")
        if found is None:
            return _ask({"answer": _elicit("Anything to add?", "text")})
        return "answered"

    @server.tool()
    def test_input_required_result_capabilities(ctx: Context) -> str | types.InputRequiredResult:
        """Ask the client's model and its user, each only when the client declared it can be asked."""
        offered = ctx.client_capabilities or types.ClientCapabilities()
        wanted = {"greeting": "sampling", "user_name": "elicitation"}
        keys = [key for key, capability in wanted.items() if getattr(offered, capability) is not None]
        if not keys or _answers(ctx, *keys) is not None:
            return f"answered: {', '.join(keys)}"
        requests = {"greeting": _sample("Generate a greeting", 50), "user_name": _elicit("What is your name?", "name")}
        return _ask({key: requests[key] for key in keys})

    @server.tool()
    def test_missing_capability(ctx: Context) -> str | types.InputRequiredResult:
        """Ask the client's model (a client that cannot sample is told it must declare sampling)."""
        found = _answers(ctx, "sample")
        if found is None:
            return _ask({"sample": _sample("Say hello", 20)})
        return "sampled"

    @server.tool()
    def ask_many(count: int, ctx: Context) -> str | types.InputRequiredResult:
        """Ask ``count`` questions in one round (a relay puts them to its host in one round too)."""
        keys = [f"ask{n + 1}" for n in range(count)]
        found = _answers(ctx, *keys)
        if found is None:
            return _ask({key: _elicit(f"Question {key}?", "name") for key in keys})
        return f"{len(found)} answered"

    @server.tool()
    async def test_logging_tool(ctx: Context) -> str:
        """Log three messages (sent only to a client that asked for a log level with its request)."""
        for n in range(3):
            await ctx.info(f"log message {n + 1}")
        return "logged"

    _task_fixtures(server)
    return server


def _task_fixtures(server: MCPServer) -> None:
    """The tools the suite's tasks scenarios call. The server runs only those of :data:`OWN_TASKS` as tasks of its
    own: ``kavalai serve --tasks`` runs the others' calls as the gateway's tasks (``greet`` stays a plain call)."""

    @server.tool()
    def greet(name: str) -> str:
        """Greet someone (a plain call)."""
        return f"Hello, {name}!"

    @server.tool()
    async def slow_compute(seconds: float, label: str = "") -> str:
        """Work ``seconds`` seconds, then say so."""
        await anyio.sleep(seconds)
        return f"{label or 'compute'}: done after {seconds:g} s"

    @server.tool()
    async def failing_job() -> str:
        """Work a second, then fail as a tool (an error result)."""
        await anyio.sleep(1)
        raise ValueError("the job failed")

    @server.tool()
    async def protocol_error_job() -> str:
        """Fail at the protocol level (a JSON-RPC error, not a tool's result)."""
        raise MCPError(code=types.INTERNAL_ERROR, message="the job's worker crashed")

    @server.tool()
    def confirm_delete(filename: str, ctx: Context) -> str | types.InputRequiredResult:
        """Ask the user to confirm deleting ``filename``."""
        found = _answers(ctx, "confirm")
        if found is None:
            return _ask({"confirm": _elicit(f"Delete {filename}?", "confirm", "boolean")})
        return f"{filename}: {'deleted' if found['confirm'].get('action') == 'accept' else 'kept'}"

    @server.tool()
    def multi_input(ctx: Context) -> str | types.InputRequiredResult:
        """Ask two questions at once."""
        found = _answers(ctx, "first", "second")
        if found is None:
            return _ask({"first": _elicit("First?", "name"), "second": _elicit("Second?", "name")})
        return "both answered"

    @server.tool()
    def test_tool_with_task(ctx: Context) -> str | types.InputRequiredResult:
        """Ask the user's name, then greet them."""
        return _greeting(ctx)

    @server.tool()
    async def counted_task(ctx: Context) -> str | types.InputRequiredResult:
        """Report 5 of 10 and ask the user's name (a round), then report 1 and 2 of 2 and greet them (a task)."""
        if _answers(ctx, "user_name") is None:
            await ctx.report_progress(5, 10, "before the question")
        else:
            for step in (1, 2):
                await ctx.report_progress(step, 2, f"step {step}")
        return _greeting(ctx)


if __name__ == "__main__":
    build_server().run("stdio")
