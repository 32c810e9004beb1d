"""One ``WorkflowBuilder`` at ``kavalai.workflow`` for both vocabularies: Kaval.AI code used one statement at a
time builds what it builds chained, the builder stays one object (``isinstance``, ``hasattr`` without side
effects), and it copies, deep-copies and pickles in either vocabulary."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from kavalai.testing import ScriptedLLM
from kavalai.workflow import Workflow, WorkflowBuilder
from kavalai.workflow.builder import WorkflowBuilder as KavalBuilder
from kavalai.workflow.models import WorkflowGraph


def _chained() -> Any:
    return (
        WorkflowBuilder("wf")
        .data_type("input", {"user_message": str})
        .data_type("output", {"agent_response": str})
        .start("reply")
        .llm("reply", prompt="Greet.", inputs={"input": "input"}, output="output", next="end")
        .end()
    )


def _statements() -> Any:
    builder: Any = WorkflowBuilder("wf")
    builder.data_type("input", {"user_message": str})
    builder.data_type("output", {"agent_response": str})
    builder.start("reply")
    builder.llm("reply", prompt="Greet.", inputs={"input": "input"}, output="output", next="end")
    builder.end()
    return builder


def test_statement_by_statement_builds_what_the_chain_builds() -> None:
    one, other = _chained().build(), _statements().build()
    assert isinstance(other, WorkflowGraph)
    assert other.model_dump() == one.model_dump()
    assert set(other.data_types) == {"input", "output"}  # the declared types are kept


async def test_statement_by_statement_build_engine_runs() -> None:
    builder = _statements()
    engine = builder.build_engine(llm=ScriptedLLM([{"agent_response": "Hello!"}]))
    state = await engine.run({"user_message": "hi"})
    assert state.ok, state.error
    assert state.output_data == {"agent_response": "Hello!"}


def test_a_kavalai_start_and_end_carry_over_when_kaval_calls_follow() -> None:
    builder: Any = WorkflowBuilder("wf")
    builder.start(next="e")
    builder.end("e")
    builder.data_type("input", {"x": str})  # Kaval.AI's: the start and the end read the same in both
    graph = builder.build()
    assert isinstance(graph, WorkflowGraph)
    assert [node.name for node in graph.nodes] == ["start", "e"]


@pytest.mark.parametrize("make", [_chained, _statements, lambda: WorkflowBuilder("t").start(next="e").end("e")])
def test_builders_copy_deepcopy_and_pickle(make: Any) -> None:
    builder = make()
    expected = builder.build()
    for clone in (copy.copy(builder), copy.deepcopy(builder), pickle.loads(pickle.dumps(builder))):
        assert isinstance(clone, WorkflowBuilder)
        assert clone.vocabulary == builder.vocabulary
        built = clone.build()
        assert type(built) is type(expected)
        if isinstance(built, Workflow):
            assert list(built.nodes) == list(expected.nodes)
        else:
            assert built.model_dump() == expected.model_dump()


def test_asking_for_an_attribute_never_changes_the_builder() -> None:
    builder = WorkflowBuilder("wf")
    for name in ("template", "data_type", "build_engine", "rag_query", "nonsense"):
        hasattr(builder, name)
        getattr(builder, name, None)
    assert builder.vocabulary == "kavalai"
    built = builder.start(next="e").end("e").build()
    assert isinstance(built, Workflow)


def test_isinstance_holds_for_every_way_of_making_one() -> None:
    for builder in (
        WorkflowBuilder("a"),
        WorkflowBuilder("b", llm_model="openai/x"),  # type: ignore[call-arg]
        WorkflowBuilder("c").data_type("input", {"x": str}),
        KavalBuilder("d"),
    ):
        assert isinstance(builder, WorkflowBuilder)


def test_kavalai_options_are_refused_in_kaval_ais_vocabulary() -> None:
    builder: Any = WorkflowBuilder("wf", llm_model="openai/x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"function\(timeout=\) is kavalai's"):
        builder.function("f", tool="python://x", output="out", next="end", timeout=3)
    with pytest.raises(TypeError, match="input= and output= are kavalai's"):
        WorkflowBuilder("typed", input=dict, llm_model="openai/x")  # type: ignore[call-arg]
