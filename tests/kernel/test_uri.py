"""ToolURI parsing: the one place URIs are understood."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
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
        ("http://x.y", "unknown scheme 'http'"),
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


_server = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=20)
_segment = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)
_tool = st.lists(_segment, min_size=1, max_size=4).map(".".join)


@given(scheme=st.sampled_from(["rest", "mcp"]), server=_server, tool=_tool)
def test_server_uris_round_trip(scheme: str, server: str, tool: str) -> None:
    uri = f"{scheme}://{server}.{tool}"
    parsed = ToolURI.parse(uri)
    assert parsed.server == server
    assert parsed.tool == tool
    assert str(parsed) == uri


@given(tool=_tool)
def test_python_uris_keep_every_dot_in_the_tool_name(tool: str) -> None:
    parsed = ToolURI.parse(f"python://{tool}")
    assert parsed.server is None
    assert parsed.tool == tool


@given(text=st.text(max_size=40))
def test_arbitrary_text_parses_or_raises_invalid_uri(text: str) -> None:
    try:
        parsed = ToolURI.parse(text)
    except InvalidToolURIError as exc:
        assert "Invalid tool URI" in str(exc)
    else:
        assert str(parsed) == text
