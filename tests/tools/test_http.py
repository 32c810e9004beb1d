"""``http.request`` against a real local server: with the guard lifted it works, with the guard on it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.servers.tools_app import create_app
from tests.servers.uvicorn_server import serve
from tests.tools.conftest import LocalServer, StaticResolver

from kavalai import ConfigurationError, FunctionKernel, ToolExecutionError, ToolRegistrationError
from kavalai.tools import http

REQUEST = "python://http.request"


async def call(kernel: FunctionKernel, **arguments: Any) -> Any:
    return await kernel.call_tool(REQUEST, arguments=arguments)


async def refused(kernel: FunctionKernel, exc_type: type[Exception], **arguments: Any) -> str:
    """Call, expect the execution error, check its cause type and return its message."""
    with pytest.raises(ToolExecutionError) as caught:
        await call(kernel, **arguments)
    assert isinstance(caught.value.__cause__, exc_type)
    assert "Traceback" not in str(caught.value)
    return str(caught.value)


@pytest.fixture
def open_kernel(kernel: FunctionKernel) -> FunctionKernel:
    """A kernel whose http group may reach the loopback test server."""
    http.register(kernel, allow_private_networks=True, max_redirects=3, max_response_bytes=64 * 1024)
    return kernel


# ------------------------------------------------------------------------------------------ guard lifted


async def test_register_returns_the_uri_and_nothing_is_registered_at_import(kernel: FunctionKernel) -> None:
    assert kernel.list_tools() == []
    assert http.register(kernel) == [REQUEST]
    assert http.register(kernel, prefix="net") == ["python://net.request"]


async def test_the_parameters_are_described_for_a_model(kernel: FunctionKernel) -> None:
    http.register(kernel)
    properties = kernel.get_input_model(REQUEST).model_json_schema()["properties"]
    assert set(properties) == {"url", "method", "query", "headers", "json", "body", "timeout"}
    assert all(field.get("description") for field in properties.values())
    output = kernel.get_output_model(REQUEST).model_json_schema()["properties"]
    assert "4xx" in kernel.get_tool_definition(REQUEST).description
    assert all(field.get("description") for field in output.values())


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"allowed_networks": ["intranet"]}, "allowed_networks entry 'intranet' is not an IP network"),
        ({"max_redirects": -1}, "max_redirects must be at least 0, got -1"),
        ({"max_response_bytes": 0}, "max_response_bytes must be a whole number above 0, got 0"),
    ],
)
def test_bad_settings_are_refused_at_registration(options: dict[str, Any], why: str) -> None:
    kernel = FunctionKernel()
    with pytest.raises(ConfigurationError, match=why):
        http.register(kernel, **options)
    assert kernel.list_tools() == []


async def test_concurrent_requests_share_the_group(open_kernel: FunctionKernel, server: LocalServer) -> None:
    statuses: list[int] = []

    async def one(index: int) -> None:
        result = await call(open_kernel, url=server.url("/echo"), query={"i": index})
        assert result.json_data["query"] == [["i", str(index)]]
        statuses.append(result.status)

    async with anyio.create_task_group() as group:
        for index in range(20):
            group.start_soon(one, index)
    assert statuses == [200] * 20


async def test_get_json_returns_status_headers_text_and_parsed_json(
    open_kernel: FunctionKernel, server: LocalServer
) -> None:
    result = await call(open_kernel, url=server.url("/json"))
    assert result.status == 200
    assert result.reason == "OK"
    assert result.headers["x-tools-test"] == "yes"
    assert result.headers["content-type"] == "application/json"
    assert result.json_data == {"hello": "world", "items": [1, 2, 3]}
    assert '"hello":"world"' in result.text
    assert result.url == server.url("/json")
    assert result.redirects == []


async def test_post_json_query_and_headers_reach_the_server(open_kernel: FunctionKernel, server: LocalServer) -> None:
    result = await call(
        open_kernel,
        url=server.url("/echo?fixed=1"),
        method="POST",
        query={"tag": ["a", "b"], "flag": True, "n": 3},
        headers={"X-Trace": "abc"},
        json={"name": "kaval", "n": [1, 2]},
    )
    echo = result.json_data
    assert echo["method"] == "POST"
    assert echo["query"] == [["fixed", "1"], ["tag", "a"], ["tag", "b"], ["flag", "true"], ["n", "3"]]
    assert echo["headers"]["x-trace"] == "abc"
    assert echo["headers"]["content-type"] == "application/json"
    assert echo["headers"]["user-agent"].startswith("kavalai-tools/")
    assert echo["body"] == '{"name": "kaval", "n": [1, 2]}'


async def test_text_body_is_sent_as_utf8_text(open_kernel: FunctionKernel, server: LocalServer) -> None:
    result = await call(open_kernel, url=server.url("/echo"), method="PUT", body="h\u00e9llo")
    assert result.json_data["method"] == "PUT"
    assert result.json_data["body"] == "h\u00e9llo"
    assert result.json_data["headers"]["content-type"] == "text/plain; charset=utf-8"


async def test_json_and_body_together_are_refused(open_kernel: FunctionKernel, server: LocalServer) -> None:
    message = await refused(open_kernel, ValueError, url=server.url("/echo"), method="POST", json={}, body="x")
    assert "either a JSON body (json) or a text body (body), not both" in message


async def test_the_declared_charset_decodes_the_text(open_kernel: FunctionKernel, server: LocalServer) -> None:
    result = await call(open_kernel, url=server.url("/text"))
    assert result.text == "caf\u00e9 au lait"
    assert result.json_data is None


@pytest.mark.parametrize("code", [404, 500, 503])
async def test_error_statuses_are_returned_not_raised(
    open_kernel: FunctionKernel, server: LocalServer, code: int
) -> None:
    result = await call(open_kernel, url=server.url(f"/status/{code}"))
    assert result.status == code
    assert result.text == f"status {code}"


async def test_head_returns_no_body(open_kernel: FunctionKernel, server: LocalServer) -> None:
    result = await call(open_kernel, url=server.url("/json"), method="HEAD")
    assert result.status == 200
    assert result.text == ""


async def test_redirects_are_followed_and_listed(open_kernel: FunctionKernel, server: LocalServer) -> None:
    result = await call(open_kernel, url=server.url("/chain/3"))
    assert result.status == 200
    assert result.json_data == {"done": True}
    assert result.redirects == [server.url("/chain/2"), server.url("/chain/1"), server.url("/chain/0")]
    assert result.url == server.url("/chain/0")


async def test_too_many_redirects_stop_with_a_clear_error(open_kernel: FunctionKernel, server: LocalServer) -> None:
    message = await refused(open_kernel, ConnectionError, url=server.url("/chain/4"))
    assert "more than 3 redirects (max_redirects)" in message


async def test_303_turns_a_post_into_a_get(open_kernel: FunctionKernel, server: LocalServer) -> None:
    target = server.url("/echo")
    result = await call(
        open_kernel, url=server.url("/redirect"), method="POST", query={"to": target, "status": 303}, json={"a": 1}
    )
    assert result.json_data["method"] == "GET"
    assert result.json_data["body"] == ""


async def test_307_keeps_the_method_and_body(open_kernel: FunctionKernel, server: LocalServer) -> None:
    target = server.url("/echo")
    result = await call(
        open_kernel, url=server.url("/redirect"), method="POST", query={"to": target, "status": 307}, body="kept"
    )
    assert result.json_data["method"] == "POST"
    assert result.json_data["body"] == "kept"


async def test_credentials_are_dropped_when_a_redirect_changes_origin(
    open_kernel: FunctionKernel, server: LocalServer
) -> None:
    secret = {"Authorization": "Bearer s3cret", "X-Other": "kept"}
    same = await call(open_kernel, url=server.url("/redirect"), query={"to": "/echo"}, headers=secret)
    assert same.json_data["headers"]["authorization"] == "Bearer s3cret"
    other_origin = f"http://localhost:{server.port}/echo"
    moved = await call(open_kernel, url=server.url("/redirect"), query={"to": other_origin}, headers=secret)
    assert "authorization" not in moved.json_data["headers"]
    assert moved.json_data["headers"]["x-other"] == "kept"


async def test_a_streamed_body_over_the_cap_is_refused(open_kernel: FunctionKernel, server: LocalServer) -> None:
    small = await call(open_kernel, url=server.url("/stream"), query={"size": 64 * 1024})
    assert len(small.text) == 64 * 1024
    message = await refused(open_kernel, ValueError, url=server.url("/stream"), query={"size": 64 * 1024 + 1})
    assert "larger than the 65536-byte limit (max_response_bytes; the body kept coming)" in message


async def test_a_declared_length_over_the_cap_is_refused(open_kernel: FunctionKernel, server: LocalServer) -> None:
    message = await refused(open_kernel, ValueError, url=server.url("/sized"), query={"size": 100_000})
    assert "it declares 100000 bytes" in message


async def test_connection_refused_raises(open_kernel: FunctionKernel, closed_port: int) -> None:
    message = await refused(open_kernel, ConnectionError, url=f"http://127.0.0.1:{closed_port}/")
    assert f"Could not connect to http://127.0.0.1:{closed_port}/" in message


async def test_a_stalled_response_times_out(open_kernel: FunctionKernel, server: LocalServer) -> None:
    message = await refused(open_kernel, TimeoutError, url=server.url("/slow"), timeout=0.3)
    assert f"No complete response from {server.url('/slow')} within 0.3 s" in message


@pytest.mark.parametrize("url", ["not a url", "/relative/path", "ftp://example.com/x"])
async def test_a_bad_url_is_refused(open_kernel: FunctionKernel, url: str) -> None:
    message = await refused(open_kernel, ValueError, url=url)
    assert "is not an absolute http:// or https:// URL" in message


async def test_the_session_is_closed_with_the_kernel_and_reopened(server: LocalServer) -> None:
    kernel = FunctionKernel()
    http.register(kernel, allow_private_networks=True)
    try:
        first = await call(kernel, url=server.url("/json"))
        await kernel.close()
        second = await call(kernel, url=server.url("/json"))
        assert first.status == second.status == 200
    finally:
        await kernel.close()


# --------------------------------------------------------------------------------------------- guard on

# Every spelling here means an address on this machine, so even a broken guard would reach only loopback.
LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.0.0.2",
    "2130706433",
    "0x7f.1",
    "0177.0.0.1",
    "127.1",
    "0.0.0.0",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::]",
    "localhost",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
async def test_the_default_guard_refuses_the_local_server(
    kernel: FunctionKernel, server: LocalServer, host: str
) -> None:
    http.register(kernel)
    before = len(server.hits)
    message = await refused(kernel, PermissionError, url=f"http://{host}:{server.port}/json")
    # yarl normalises some spellings (an IPv4-mapped address is shown in hex), so only the start is fixed.
    assert message.startswith(f"Tool {REQUEST} failed: PermissionError: Refused http://")
    assert f":{server.port}/json: host " in message
    assert len(server.hits) == before  # nothing reached the server


async def test_a_public_looking_name_resolving_to_loopback_is_refused(
    kernel: FunctionKernel, server: LocalServer
) -> None:
    resolver = StaticResolver({"api.example.com": ["127.0.0.1"]})
    http.register(kernel, resolver=resolver)
    before = len(server.hits)
    message = await refused(kernel, PermissionError, url=f"http://api.example.com:{server.port}/json")
    assert "'api.example.com' resolves to refused addresses: 127.0.0.1 (a loopback address)" in message
    assert resolver.lookups == ["api.example.com"]
    assert len(server.hits) == before


@pytest.fixture
def redirect_kernel(kernel: FunctionKernel) -> tuple[FunctionKernel, StaticResolver]:
    """A guarded group that may reach 127.0.0.1 only (so the first hop reaches the test server), and whose
    resolver maps a public-looking name to 127.0.0.1 and an intranet name to a private address."""
    resolver = StaticResolver({"public.example.com": ["127.0.0.1"], "intranet.example.com": ["10.20.30.40"]})
    http.register(kernel, allowed_networks=["127.0.0.1/32"], resolver=resolver)
    return kernel, resolver


async def test_an_allowed_network_is_reached_by_name(
    redirect_kernel: tuple[FunctionKernel, StaticResolver], server: LocalServer
) -> None:
    kernel, resolver = redirect_kernel
    result = await call(kernel, url=f"http://public.example.com:{server.port}/json")
    assert result.status == 200
    assert "public.example.com" in resolver.lookups


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("http://169.254.169.254/latest/meta-data/", "host '169.254.169.254' is a cloud metadata address"),
        ("http://127.0.0.2:{port}/json", "host '127.0.0.2' is a loopback address"),
        ("http://[::1]:{port}/json", "host '::1' is a loopback address"),
        ("http://localhost:{port}/json", "host 'localhost' is a local-only host name"),
        ("http://0x7f.1:{port}/json", "unusual spelling of an IPv4 address"),
        ("http://intranet.example.com:{port}/json", "resolves to refused addresses: 10.20.30.40 (a private"),
        ("file:///etc/passwd", "only http:// and https://"),
    ],
)
async def test_a_redirect_to_a_refused_address_is_refused(
    redirect_kernel: tuple[FunctionKernel, StaticResolver], server: LocalServer, target: str, why: str
) -> None:
    kernel, _ = redirect_kernel
    target = target.format(port=server.port)
    before = len(server.hits)
    message = await refused(kernel, PermissionError, url=server.url("/redirect"), query={"to": target})
    assert why in message
    assert server.hits[before:] == ["/redirect"]  # the first hop arrived, the refused one did not


# ------------------------------------------------------------------------------------- hardening (review)


async def test_a_second_group_needs_its_own_prefix(kernel: FunctionKernel) -> None:
    http.register(kernel)
    with pytest.raises(ToolRegistrationError, match=r"python://http\.request is already registered.*prefix='http2'"):
        http.register(kernel, allow_private_networks=True)
    assert kernel.list_tools() == [REQUEST]


@pytest.mark.parametrize(
    "headers",
    [{"X-A": "a\r\nX-Injected: 1"}, {"X-A\nX-Injected": "1"}, {"X-A": "nul\x00byte"}, {" ": "blank name"}],
)
async def test_header_injection_is_refused_before_sending(
    open_kernel: FunctionKernel, server: LocalServer, headers: dict[str, str]
) -> None:
    before = len(server.hits)
    message = await refused(open_kernel, ValueError, url=server.url("/echo"), headers=headers)
    assert f"Refused header {next(iter(headers))!r}: " in message
    assert len(server.hits) == before


async def test_rebinding_between_connections_is_caught_at_the_next_lookup(
    kernel: FunctionKernel, server: LocalServer
) -> None:
    # The name first resolves to the (allowed) test server, then to a private address. Closing the kernel drops
    # the pooled connection and the DNS cache, so the second call must look the name up again, and is refused.
    resolver = StaticResolver({"rebind.example.com": [["127.0.0.1"], ["10.9.8.7"]]})
    http.register(kernel, allowed_networks=["127.0.0.1/32"], resolver=resolver)
    url = f"http://rebind.example.com:{server.port}/json"
    assert (await call(kernel, url=url)).status == 200
    hits = len(server.hits)
    await kernel.close()
    message = await refused(kernel, PermissionError, url=url)
    assert "'rebind.example.com' resolves to refused addresses: 10.9.8.7 (a private address)" in message
    assert resolver.lookups == ["rebind.example.com", "rebind.example.com"]
    assert len(server.hits) == hits


async def test_a_name_with_one_refused_answer_among_allowed_ones_is_refused(
    kernel: FunctionKernel, server: LocalServer
) -> None:
    resolver = StaticResolver({"mixed.example.com": ["127.0.0.1", "169.254.169.254"]})
    http.register(kernel, allowed_networks=["127.0.0.1/32"], resolver=resolver)
    before = len(server.hits)
    message = await refused(kernel, PermissionError, url=f"http://mixed.example.com:{server.port}/json")
    assert "169.254.169.254 (a cloud metadata address)" in message
    assert len(server.hits) == before


def _established_to(port: int) -> int:
    """How many TCP connections on this machine are established to ``port`` (client side), from /proc/net."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        lines = path.read_text().splitlines()[1:] if path.exists() else []
        for line in lines:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                count += 1
    return count


async def test_close_closes_the_pooled_connections() -> None:
    with serve(create_app(), lifespan="off") as base_url:
        port = int(base_url.rsplit(":", 1)[1])
        kernel = FunctionKernel()
        http.register(kernel, allow_private_networks=True)
        try:
            assert (await call(kernel, url=f"{base_url}/json")).status == 200
            assert _established_to(port) >= 1  # kept alive in the pool
        finally:
            await kernel.close()
        for _ in range(500):  # a bounded wait: the transports close on the next turns of the loop
            if _established_to(port) == 0:
                break
            await anyio.sleep(0.01)
        assert _established_to(port) == 0
