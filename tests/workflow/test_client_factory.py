"""``client_factory`` is checked when the engine is built, what it returns is checked when a run needs it, and a
client whose ``aclose()`` fails is logged: ``engine.run()`` returns a result (a failed one when the factory was
wrong), never raises. On main each of these raised out of ``engine.run()``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kavalai.testing import ScriptedLLM
from kavalai.workflow import NodeError, RunStatus, WorkflowBuilder, WorkflowDefinitionError, WorkflowEngine

MODEL = "fake/tiny"


def _engine(factory: Any) -> WorkflowEngine:
    workflow = (
        WorkflowBuilder("ask", output=str)
        .start(next="ask")
        .llm("ask", prompt="Hello", model=MODEL, next="end")
        .end("end")
        .build()
    )
    return WorkflowEngine(workflow, client_factory=factory)


class _BadClose(ScriptedLLM):
    async def aclose(self) -> None:
        raise RuntimeError("the connection pool was already gone")


@pytest.mark.parametrize("factory", [42, "openai/gpt-4.1-mini"])
def test_a_factory_that_is_not_callable_is_refused_when_the_engine_is_built(factory: object) -> None:
    with pytest.raises(WorkflowDefinitionError, match="client_factory must be a callable"):
        _engine(factory)


def test_an_async_factory_is_refused_when_the_engine_is_built() -> None:
    async def factory(model: str, parameters: Any, stats: Any) -> ScriptedLLM:
        return ScriptedLLM(["hi"])

    with pytest.raises(WorkflowDefinitionError, match="not a coroutine"):
        _engine(factory)


@pytest.mark.parametrize("made", [None, object(), "a client"])
async def test_a_factory_returning_what_is_not_a_client_fails_the_run(made: object) -> None:
    async with _engine(lambda *args: made) as engine:
        result = await engine.run({})
    assert result.status is RunStatus.FAILED
    assert isinstance(result.error, NodeError)
    assert f"client_factory returned a {type(made).__name__} for {MODEL!r}" in str(result.error)


async def test_a_coroutine_returned_by_a_lambda_fails_the_run_and_is_closed() -> None:
    async def make() -> ScriptedLLM:
        return ScriptedLLM(["hi"])

    coroutines: list[Any] = []

    def factory(*args: Any) -> Any:
        coroutines.append(make())
        return coroutines[-1]

    async with _engine(factory) as engine:
        result = await engine.run({})
    assert result.status is RunStatus.FAILED
    assert "returned a coroutine" in str(result.error)
    assert coroutines[0].cr_frame is None  # closed: no "never awaited" warning later


async def test_a_client_whose_aclose_fails_is_logged_and_the_result_kept(caplog: pytest.LogCaptureFixture) -> None:
    async with _engine(lambda *args: _BadClose(["hello back"])) as engine:
        with caplog.at_level(logging.WARNING, logger="kavalai.workflow"):
            result = await engine.run({})
    assert result.ok, result.error
    assert result.output == "hello back"
    assert "the connection pool was already gone" in caplog.text
