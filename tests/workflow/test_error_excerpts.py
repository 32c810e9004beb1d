"""Expression and template errors quote a bounded excerpt of their source, not the whole (issue 34): a 100 KB path
gave a 200 KB message. Every workflow error's message passes one place (``bounded_message``, in ``WorkflowError``),
which keeps the start (node and field) and the end (the reason), masked by the secret gate before it is cut."""

from __future__ import annotations

import pytest

from kavalai.secrets import register_secret
from kavalai.workflow._expressions import compile_expression
from kavalai.workflow._templates import check_template, render_template
from kavalai.workflow.errors import (
    MAX_MESSAGE,
    ExpressionError,
    NodeError,
    WorkflowDefinitionError,
    WorkflowError,
    bounded_message,
)

LONG = 100_000
BOUND = MAX_MESSAGE + 100


def _bounded(error: BaseException, ending: str) -> str:
    message = str(error)
    assert len(message) <= BOUND, len(message)
    assert message.endswith(ending), message[-300:]
    assert len(repr(error)) <= BOUND + 100
    return message


@pytest.mark.parametrize(
    ("source", "ending"),
    [
        ("input." + "a" * LONG + " +", "does not parse: invalid syntax"),
        ("input._" + "a" * LONG, "names starting with '_' are not allowed"),
        ("(lambda: input." + "a" * LONG + ")()", "only these functions may be called: "),
        ("[input." + "a" * LONG + " for x in y]", "not allowed in workflow expressions"),
        ("open(input." + "a" * LONG + ")", "only these functions may be called: "),
        ("get('" + "a b" * (LONG // 3) + "')", "'"),
    ],
)
def test_an_expression_that_is_refused_quotes_an_excerpt(source: str, ending: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source, node="n")
    message = str(caught.value)
    assert len(message) <= BOUND, len(message)
    assert message.startswith("Node 'n': ")
    assert ending.strip() in message[-700:]
    assert "get() needs a context path" in message or "get(" not in source
    assert "characters" in message  # the excerpt says how long the source is
    assert len(message) < 1_000


def test_an_expression_that_fails_when_run_quotes_an_excerpt() -> None:
    expression = compile_expression("input.a / input.zero + input." + "a" * LONG)
    with pytest.raises(ExpressionError) as caught:
        expression.evaluate({"input": {"a": 1, "zero": 0}}, node="n", field="condition")
    _bounded(caught.value, "ZeroDivisionError: division by zero")
    assert str(caught.value).startswith("Node 'n': field 'condition': expression 'input.a / input.zero + input.a")


def test_a_huge_foreign_error_text_is_cut() -> None:
    expression = compile_expression("input.d[input.k]")
    with pytest.raises(ExpressionError) as caught:
        expression.evaluate({"input": {"d": {}, "k": "k" * LONG}}, node="n", field="f")
    assert len(str(caught.value)) <= BOUND


def test_a_template_that_does_not_parse_quotes_an_excerpt() -> None:
    source = "{{ input.a }}" * (LONG // 13) + "{{ input.b "
    with pytest.raises(WorkflowDefinitionError) as caught:
        check_template(source, ["input"], node="n", field="prompt")
    message = str(caught.value)
    assert len(message) <= BOUND
    assert message.startswith("Node 'n': field 'prompt' is not a valid template")


def test_a_template_that_fails_when_rendered_quotes_an_excerpt() -> None:
    with pytest.raises(NodeError) as caught:
        render_template("{{ input.d[input.k] }}", {"input": {"d": {}, "k": "k" * LONG}}, node="n", field="prompt")
    assert len(str(caught.value)) <= BOUND


def test_the_cut_keeps_no_part_of_a_secret() -> None:
    secret = "Sup3rS3cretV4lue-0123456789-abcdef"
    register_secret(secret)
    for offset in range(1_150, 1_250, 7):  # the secret across where the head is cut
        message = "x" * offset + secret + "y" * 5_000
        shown = str(WorkflowError(message))
        assert secret[:8] not in shown
        assert secret[-8:] not in shown


def test_the_excerpt_of_a_source_keeps_no_part_of_a_secret() -> None:
    """quoted() cut the source before the message reached the secret gate: a secret across its cut (an expression
    holding a registered value, ``${VAR}`` expanded into the workflow file) left its start in the message."""
    secret = "sk-live-Qx7Zr0123456789abcdefghijklmn"
    register_secret(secret)
    for offset in range(120, 240, 9):  # across where the head (160) and the tail (60) of the excerpt are cut
        source = "x + '" + "a" * offset + secret + "'" + " + y" * 60 + " +"
        with pytest.raises(ExpressionError) as caught:
            compile_expression(source)
        assert "does not parse" in str(caught.value)
        assert secret[:8] not in str(caught.value)
        assert secret[-8:] not in str(caught.value)


def test_a_short_message_is_kept_whole() -> None:
    assert bounded_message("Node 'n': failed") == "Node 'n': failed"
    message = "a" * MAX_MESSAGE
    assert bounded_message(message) == message
    assert len(bounded_message("b" * (MAX_MESSAGE + 1))) <= BOUND


def test_every_evaluation_error_quotes_its_source_through_the_one_place() -> None:
    """The enumeration: every message in the workflow package that quotes an expression (``expression {...}``, a
    path a node reads) quotes it with ``quoted``; a new ``expression {source!r}`` fails here."""
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "workflow"
    unquoted: list[str] = []
    quoting = 0
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        quoting += text.count("{quoted(")
        for match in re.finditer(r"expression \{(?!quoted\()[^}]*\}|\{[\w.]*source!r\} reads", text):
            unquoted.append(f"{path.relative_to(package)}: {match.group(0)}")
    assert unquoted == []
    assert quoting >= 12  # the scan sees the messages of _expressions, _graph and the Kaval.AI runtime
