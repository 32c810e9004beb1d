"""Hostile review round 10 (issue 34, tests/hostile/CASES_round10.md): where a bound cuts a text and the secret gate
masks it, the mask comes first. Each case broke before: a cut through a secret left a piece of it (its beginning,
its end, the lines of a private key) that the mask no longer recognised, and that piece was shown.

The gate: ``kavalai.secrets.excerpt`` (mask, then cut) and ``mask_edges`` (a window cut from a stream before it
could be masked: a secret's piece at either end masked).
"""

from __future__ import annotations

import ast
import io
import re
import sys
from pathlib import Path

import pytest

from kavalai import FunctionKernel, pythontool
from kavalai.adapters.mcp import McpServer
from kavalai.cli._boundary import guarded, terminal_text
from kavalai.config import KernelConfig, build_kernel
from kavalai.durable._runner import lost_answer
from kavalai.errors import FunctionKernelException, ServerConnectionError, ToolInputError, ToolOutputError
from kavalai.secrets import MASK, excerpt, mask_edges, redacting_stderr, register_secret

SECRET = "r10-Sk7Qm2Xr9Lp4Vt8Zw3Nb6Hc1Jd5Fg0Ea"


def _pieces(text: str, secret: str, shortest: int = 6) -> list[str]:
    """The pieces of ``secret`` (its beginnings and endings of ``shortest`` characters or more) shown in ``text``."""
    sizes = range(shortest, len(secret) + 1)
    return [piece for size in sizes for piece in (secret[:size], secret[-size:]) if piece in text]


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    register_secret(SECRET)


@pythontool
def returns_a_long_text() -> int:
    return "x" * 60 + SECRET + "y" * 40  # type: ignore[return-value]


@pythontool
def takes_a_number(n: int) -> int:
    return n


async def test_a_value_quoted_in_an_output_error_is_masked_before_it_is_cut(kernel: FunctionKernel) -> None:
    """Case 1: ``value_excerpt`` cut the repr at 80 characters, then the error masked it: the secret's first 16
    characters showed (``'xxx...xr10-Sk7Qm2Xr9Lp4V...``)."""
    kernel.register_python_tool("long", returns_a_long_text)
    with pytest.raises(ToolOutputError) as info:
        await kernel.call_tool("python://long")
    assert _pieces(str(info.value), SECRET) == []
    assert MASK in str(info.value)


async def test_an_argument_quoted_in_an_input_error_is_masked_before_it_is_cut(kernel: FunctionKernel) -> None:
    """Case 2: the same through the "(got ...)" of a refused argument."""
    kernel.register_python_tool("number", takes_a_number)
    with pytest.raises(ToolInputError) as info:
        await kernel.call_tool("python://number", {"n": "x" * 60 + SECRET})
    assert _pieces(str(info.value), SECRET) == []


def test_a_lost_answer_quoting_the_winner_is_masked_before_it_is_cut() -> None:
    """Case 9: the winner's JSON was cut at 197 characters, then masked."""
    error = lost_answer("run-1", "approve", {"note": "x" * 170 + SECRET})
    assert _pieces(str(error), SECRET) == []


PEM_LINES = [f"MIIEv{i:02d}QIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC" for i in range(30)]
PRIVATE_KEY = "\n".join(["-----BEGIN PRIVATE KEY-----", *PEM_LINES, "-----END PRIVATE KEY-----"])
STDERR_TOKEN = "r10-stderr-Q7m2Xr9Lp4Vt8Zw3Nb6Hc1Jd5Fg0EaK"


@pytest.mark.parametrize(
    "written",
    [
        "'x' * 480 + token + '\\n'",  # case 4: the line kept to 500 characters: the token's beginning
        "'y' * 10 + token + 'z' * 495",  # case 5: an unfinished line kept to its last 500: the token's end
        "key + '\\n'",  # case 6: the tail's last 20 lines of a 32-line private key
    ],
    ids=["line-cut", "unfinished-line-cut", "private-key-lines"],
)
async def test_a_servers_stderr_tail_shows_no_piece_of_its_secrets(written: str) -> None:
    """Cases 4-6: a stdio server writes its own secrets (its env) to stderr and exits; the "exited" error shows its
    stderr tail, cut by lines and characters before it was masked."""
    script = "import os, sys; token, key = os.environ['API_TOKEN'], os.environ['APP_KEY']; "
    script += f"sys.stderr.write({written}); sys.stderr.flush(); sys.exit(3)"
    env = {"API_TOKEN": STDERR_TOKEN, "APP_KEY": PRIVATE_KEY}
    kernel = FunctionKernel()
    kernel.register_mcp_server(McpServer(name="leaky", command=sys.executable, args=["-c", script], env=env))
    try:
        with pytest.raises(ServerConnectionError) as info:
            await kernel.call_tool("mcp://leaky.anything")
    finally:
        await kernel.aclose()
    message = str(info.value)
    assert "exited with code 3" in message
    assert _pieces(message, STDERR_TOKEN, shortest=5) == []
    assert not any(line in message for line in PEM_LINES)


def test_a_cli_line_masks_before_it_collapses_and_cuts() -> None:
    """Cases 10 and 11: the CLI's one line collapsed the whitespace of a foreign error's text and cut it at 2,000,
    before the stderr gate masked it: a secret holding a newline (a private key), or one across the cut, showed."""
    register_secret(PRIVATE_KEY)

    def fails() -> int:
        raise RuntimeError(f"could not sign with {PRIVATE_KEY}; also " + "x" * 1_975 + SECRET)

    captured = io.StringIO()
    previous, sys.stderr = sys.stderr, captured
    try:
        with redacting_stderr(also=terminal_text):
            guarded("run", fails)
    finally:
        sys.stderr = previous
    line = captured.getvalue()
    assert line.startswith("kavalai run: RuntimeError: could not sign with ***; also xxx")
    assert not any(pem in line for pem in PEM_LINES)
    assert _pieces(line, SECRET, shortest=4) == []


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("args", "mcp_servers: [{name: m, command: /nonexistent/bin/mcp-thing, args: ['${R10_API_KEY:-%s}']}]"),
        (
            "url",
            "rest_servers: [{name: api, url: 'http://127.0.0.1:1/bot${R10_BOT_TOKEN:-%s}', "
            "rest_tools: [{name: x, method: GET}]}]",
        ),
    ],
    ids=["args", "url"],
)
async def test_the_default_of_a_secret_variable_is_a_secret(tmp_path: Path, field: str, text: str) -> None:
    """Cases 15 and 16: ``${API_KEY:-default}`` with the variable unset gives the default, the value the server
    gets as its key: it was shown whole ("--api-key sk-dev-fallback-..." in the error of a server that cannot
    start; "cannot reach REST server 'api' at .../bot<default>")."""
    fallback = f"sk-dev-fallback-{field}-0123456789"
    path = tmp_path / "kavalai.yaml"
    path.write_text(text % fallback)
    kernel = build_kernel(KernelConfig.from_file(path), env={})
    uri = "mcp://m.x" if field == "args" else "rest://api.x"
    try:
        with pytest.raises(FunctionKernelException) as info:
            await kernel.call_tool(uri)
    finally:
        await kernel.aclose()
    assert fallback not in str(info.value)
    assert MASK in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"abc {SECRET[:9]}", f"abc {MASK}"),
        (f"{SECRET[-9:]} tail", f"{MASK} tail"),
        (f"{SECRET[-9:]} and {SECRET[:9]}", f"{MASK} and {MASK}"),
        ("hello world", "hello world"),
        (f"whole {SECRET} here", f"whole {MASK} here"),
    ],
)
def test_mask_edges_masks_a_secrets_piece_at_either_end(text: str, expected: str) -> None:
    assert mask_edges(text) == expected


def test_excerpt_masks_then_cuts_and_marks_the_cut() -> None:
    assert excerpt("x" * 10 + SECRET, 15, marker="...") == "xxxxxxxxxx***"
    assert excerpt("x" * 10 + SECRET + "y" * 20, 15, marker="...") == "xxxxxxxxxx**..."
    assert excerpt("y" * 20 + SECRET, 6, tail=True) == f"yyy{MASK}"


#: Every text the source cuts to an excerpt by hand (a slice followed or preceded by ``...``) rather than through
#: ``excerpt``, with why no secret can be cut there: each masks first, or cuts a text no secret source reaches.
CUT_BY_HAND: dict[tuple[str, str], str] = {
    ("agent/_tools.py", "_error_message"): "a FunctionKernelException's message: masked whole when it was made",
    ("cli/_demo_agent.py", "_short"): "the demo's console lines of its own scripted run: no secret source",
    ("durable/_runner.py", "checked_run_id"): "a run id refused as not printable or too long: no secret source",
    ("kernel/_seconds.py", "_shown"): "the text of a timeout value given in Python: never a secret source",
    ("tracing.py", "_cut"): "called with redact(text) only: masked first",
    ("workflow/_load.py", "text_source"): "the first line of a workflow's YAML text, before ${VAR} is expanded",
    ("workflow/errors.py", "quoted"): "source = redact(source) first",
    ("workflow/errors.py", "bounded_message"): "called by WorkflowError with redact(message) only: masked first",
}


def _cuts_by_hand() -> set[tuple[str, str]]:
    """Each (module, innermost function) of the source that cuts an excerpt by hand; one walk per module that
    holds a slice and a ``...`` on one line."""
    source = Path(__file__).resolve().parents[1] / "src" / "kavalai"
    found: set[tuple[str, str]] = set()

    class Finder(ast.NodeVisitor):
        def __init__(self, module: str) -> None:
            self.module, self.functions = module, ["<module>"]

        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            self.functions.append(node.name)
            self.generic_visit(node)
            self.functions.pop()

        visit_AsyncFunctionDef = visit_FunctionDef

        def generic_visit(self, node: ast.AST) -> None:
            if _is_marked_cut(node):
                found.add((self.module, self.functions[-1]))
            super().generic_visit(node)

    for path in sorted(source.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if _SLICE_AND_MARKER.search(text):  # parsed only where a line holds both (parsing all of src: seconds)
            Finder(path.relative_to(source).as_posix()).visit(ast.parse(text))
    return found


#: A line holding a slice (``[...:...]``) and a ``...``, in either order: where an excerpt may be cut by hand.
_SLICE_AND_MARKER = re.compile(r"\[[^\]\n]*:[^\]\n]*\][^\n]*\.\.\.|\.\.\.[^\n]*\[[^\]\n]*:[^\]\n]*\]")


def _is_cut(value: object) -> bool:
    return (
        isinstance(value, ast.Subscript)
        and isinstance(value.slice, ast.Slice)
        and (value.slice.lower is None) != (value.slice.upper is None)
    )


def _is_marker(value: object) -> bool:
    return isinstance(value, ast.Constant) and isinstance(value.value, str) and "..." in value.value


def _is_marked_cut(node: object) -> bool:
    """``f"{text[:n]}..."``, ``text[:n] + "..."`` and their mirrors: an excerpt cut by hand."""
    if isinstance(node, ast.JoinedStr):
        parts = node.values
        return any(
            isinstance(part, ast.FormattedValue)
            and _is_cut(part.value)
            and any(_is_marker(other) for other in parts[max(0, index - 1) : index + 2])
            for index, part in enumerate(parts)
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return (_is_cut(node.left) and _is_marker(node.right)) or (_is_cut(node.right) and _is_marker(node.left))
    return False


def test_every_excerpt_cut_by_hand_is_listed_with_why_no_secret_is_cut() -> None:
    """The enumeration of the seam this round found broken: a text cut to a bound must be masked first, through
    ``kavalai.secrets.excerpt``; an excerpt cut by hand anywhere else in the source fails here until it crosses the
    gate or is listed with its reason."""
    assert _cuts_by_hand() == set(CUT_BY_HAND)
