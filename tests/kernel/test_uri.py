"""ToolURI parsing: the one place URIs are understood."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kavalai import InvalidToolURIError, ToolURI
from kavalai.kernel._uri import validate_server_name


@pytest.mark.parametrize(
    ("uri", "scheme", "server", "tool"),
    [
        ("python://fs.ls", "python", None, "fs.ls"),
        ("python://add", "python", None, "add"),
        ("rest://weather.forecast", "rest", "weather", "forecast"),
        ("mcp://github.create_issue", "mcp", "github", "create_issue"),
        ("mcp://files.read.text", "mcp", "files", "read.text"),
        ("mcp://my-server_2.get-weather", "mcp", "my-server_2", "get-weather"),
    ],
)
def test_parse_valid(uri: str, scheme: str, server: str | None, tool: str) -> None:
    parsed = ToolURI.parse(uri)
    assert (parsed.scheme, parsed.server, parsed.tool) == (scheme, server, tool)
    assert str(parsed) == uri


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [
        ("fs.ls", "expected 'python://name'"),
        ("python://", "tool name is empty"),
        ("rest://server", "names a server and a tool"),
        ("mcp://server.", "names a server and a tool"),
        ("mcp://bad server.tool", "server name 'bad server'"),
        ("mcp://.tool", "server name ''"),
        ("python://has space", "may not contain spaces"),
        ("python://a..b", "empty dotted part"),
        ("python://a/b", "may not contain spaces, '/'"),
    ],
)
def test_parse_invalid_says_why(uri: str, fragment: str) -> None:
    with pytest.raises(InvalidToolURIError) as info:
        ToolURI.parse(uri)
    assert fragment in str(info.value)
    assert info.value.uri == uri


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(InvalidToolURIError, match="must be a string, not int"):
        ToolURI.parse(42)


def test_invalid_uri_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="Invalid tool URI"):
        ToolURI.parse("nope")


def test_parse_passes_tooluri_through_and_build_round_trips() -> None:
    uri = ToolURI.build("mcp", "files", "read")
    assert ToolURI.parse(uri) is uri
    assert uri == ToolURI.parse("mcp://files.read")
    assert ToolURI.build("python", None, "fs.ls").tool == "fs.ls"


def test_validate_server_name() -> None:
    assert validate_server_name("ok_name-1") == "ok_name-1"
    with pytest.raises(InvalidToolURIError, match="no dots"):
        validate_server_name("has.dot")


# No deadline: the machines that run this are shared, and a slow example is not a wrong one.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
_server = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=20)
_segment = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)
_tool = st.lists(_segment, min_size=1, max_size=4).map(".".join)


@PROPERTY
@given(scheme=st.sampled_from(["rest", "mcp"]), server=_server, tool=_tool)
def test_server_uris_round_trip(scheme: str, server: str, tool: str) -> None:
    uri = f"{scheme}://{server}.{tool}"
    parsed = ToolURI.parse(uri)
    assert parsed.server == server
    assert parsed.tool == tool
    assert str(parsed) == uri


@PROPERTY
@given(tool=_tool)
def test_python_uris_keep_every_dot_in_the_tool_name(tool: str) -> None:
    parsed = ToolURI.parse(f"python://{tool}")
    assert parsed.server is None
    assert parsed.tool == tool


_uri_text = st.one_of(
    st.text(max_size=40),
    st.builds(
        "{}://{}".format,
        st.sampled_from(["python", "rest", "mcp", "http", "MCP", ""]),
        st.text(alphabet=string.ascii_letters + string.digits + "_-. /\\\t:", max_size=30),
    ),
)


@PROPERTY
@given(text=_uri_text)
def test_arbitrary_text_parses_into_a_valid_uri_or_raises_naming_it(text: str) -> None:
    try:
        parsed = ToolURI.parse(text)
    except InvalidToolURIError as exc:
        assert str(exc).startswith(
            (f"Invalid tool URI format for {text!r}: ", f"Invalid tool path format in {text!r}: ")
        )
        assert exc.uri == text
    else:
        assert str(parsed) == text
        assert ToolURI.parse(str(parsed)) == parsed
        assert re.fullmatch(r"[a-z][a-z0-9+-]*", parsed.scheme)  # the set of schemes is open: adapters add theirs
        assert (parsed.server is None) == (parsed.scheme == "python")
        if parsed.server is not None:
            assert re.fullmatch(r"[A-Za-z0-9_-]+", parsed.server)
        assert parsed.tool
        assert "" not in parsed.tool.split(".")
        assert not any(c.isspace() or c in "/\\" for c in parsed.tool)


@PROPERTY
@given(scheme=st.sampled_from(["rest", "mcp"]), server=_server, tool=_tool)
def test_build_agrees_with_parse(scheme: str, server: str, tool: str) -> None:
    assert ToolURI.build(scheme, server, tool) == ToolURI.parse(f"{scheme}://{server}.{tool}")


@PROPERTY
@given(
    scheme=st.sampled_from(["rest", "mcp"]),
    server=st.text(min_size=1, max_size=12).filter(lambda s: not re.fullmatch(r"[A-Za-z0-9_-]+", s)),
    tool=_tool,
)
def test_a_server_name_outside_the_alphabet_is_refused(scheme: str, server: str, tool: str) -> None:
    uri = f"{scheme}://{server}.{tool}"
    try:
        parsed = ToolURI.parse(uri)
    except InvalidToolURIError as exc:
        assert repr(uri) in str(exc)
    else:
        # Only possible when the server text holds a dot: then the server is what stands before the first dot.
        assert "." in server
        assert parsed.server == server.split(".", 1)[0]
