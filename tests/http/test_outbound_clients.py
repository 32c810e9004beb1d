"""The outbound gate under the clients kavalai configures but does not write: the LLM provider SDKs' HTTP clients
and the OTLP trace exporter's session. A real server on 127.0.0.1 redirects to a metadata address; the redirect is
refused before any connect, naming the owner, and the server saw only the first request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from yarl import URL

from kavalai.errors import ConfigurationError, OutboundRefusedError
from kavalai.http import LOCAL_NETWORKS, Outbound, check_endpoint, environment_proxy, requests_session
from kavalai.llm.anthropic import AnthropicClient
from kavalai.llm.errors import LLMConnectionError
from kavalai.llm.messages import UserMessage
from kavalai.llm.openai import OpenAIClient
from tests.http.test_outbound import serving
from tests.servers.llm_openai import completion

METADATA = "http://169.254.169.254"


def otlp_refused(url: str, match: str) -> OutboundRefusedError:
    """POST spans to ``url`` with the OTLP exporter's session, expecting the gate's refusal matching ``match``."""
    session = requests_session(Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing"))
    try:
        with pytest.raises(OutboundRefusedError, match=match) as caught:
            session.post(url, data=b"spans", timeout=10)
    finally:
        session.close()
    return caught.value


@asynccontextmanager
async def redirecting(target: str, seen: list[str]) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that answers every request with a 307 to ``target`` + the path."""

    async def handler(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        return web.Response(status=307, headers={"Location": f"{target}{request.path}"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with serving(app) as base:
        yield base


@pytest.mark.parametrize("target", [METADATA, "http://[::ffff:169.254.169.254]"])
async def test_an_openai_redirect_to_a_metadata_address_is_refused(target: str) -> None:
    seen: list[str] = []
    async with redirecting(target, seen) as base:
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url=f"{base}/v1", max_retries=0)
        try:
            with pytest.raises(LLMConnectionError, match="refused") as caught:
                await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert "169.254.169.254" in str(caught.value)
    assert "openai/gpt-fake" in str(caught.value)
    assert seen == ["POST /v1/chat/completions"]


async def test_an_anthropic_redirect_to_a_metadata_address_is_refused() -> None:
    seen: list[str] = []
    async with redirecting(METADATA, seen) as base:
        llm = AnthropicClient("claude-fake", api_key="sk-ant-test-0123456789", base_url=base, max_retries=0)
        try:
            with pytest.raises(LLMConnectionError, match="refused"):
                await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert seen == ["POST /v1/messages"]


async def test_a_refusal_is_not_retried_by_the_sdk() -> None:
    seen: list[str] = []
    async with redirecting(METADATA, seen) as base:
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url=f"{base}/v1", max_retries=1)
        try:
            with pytest.raises(LLMConnectionError, match="refused"):
                await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert seen == ["POST /v1/chat/completions"]  # the refusal is final: no second attempt


async def test_a_client_the_user_passes_is_theirs() -> None:
    import httpx2

    mine = httpx2.AsyncClient()
    llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url="http://127.0.0.1:9/v1", http_client=mine)
    try:
        assert llm._client._client is mine
    finally:
        await llm.aclose()


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://169.254.169.254:4318",
        "http://[::ffff:169.254.169.254]:4318",
        "http://224.0.0.1:4318",
        "ftp://127.0.0.1:4318",
    ],
)
def test_an_otlp_endpoint_at_a_refused_address_is_a_configuration_error(endpoint: str) -> None:
    from kavalai._tracing_setup import _exporter

    with pytest.raises(ConfigurationError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        _exporter("otlp_proto_http", {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:4318", "http://10.1.2.3:4318", "http://localhost:4318"])
def test_a_collector_on_loopback_or_a_private_network_is_allowed(endpoint: str) -> None:
    from kavalai._tracing_setup import _exporter

    exporter = _exporter("otlp_proto_http", {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    exporter.shutdown()


async def test_the_otlp_session_refuses_a_redirect_to_a_metadata_address() -> None:
    seen: list[str] = []
    outbound = Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing")
    async with redirecting(METADATA, seen) as base:
        session = requests_session(outbound)
        try:
            with pytest.raises(OutboundRefusedError, match="169.254.169.254"):
                await asyncio.to_thread(session.post, f"{base}/v1/traces", data=b"spans", timeout=10)
        finally:
            session.close()
    assert seen == ["POST /v1/traces"]


def test_a_host_name_is_judged_by_its_addresses_at_connect() -> None:
    outbound = Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing")
    check_endpoint(outbound, URL("http://collector.example:4318/v1/traces"))  # a name: judged at connect
    with pytest.raises(OutboundRefusedError, match="resolves to 169.254.169.254"):
        outbound.check_addresses("collector.example", ["169.254.169.254"])
    outbound.check_addresses("collector.example", ["10.0.0.7"])


async def test_an_llm_client_sends_through_the_environments_proxy_and_still_judges_redirects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The SDKs read HTTP(S)_PROXY themselves; given the gate's client they would not, so the gate reads it."""
    seen: list[str] = []
    async with redirecting(METADATA, seen) as proxy:  # a plain HTTP proxy gets the absolute URL
        for name in ("NO_PROXY", "no_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy)
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url="http://llm.invalid/v1", max_retries=0)
        try:
            with pytest.raises(LLMConnectionError, match="refused"):
                await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert seen == ["POST /v1/chat/completions"]  # reached the proxy; its redirect to a metadata address refused


@asynccontextmanager
async def answering(status: int, text: str, seen: list[str]) -> AsyncIterator[str]:
    """A server on 127.0.0.1 (a model server, or a plain HTTP proxy given absolute URLs) answering every request."""

    async def handler(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        return web.json_response(completion(text), status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with serving(app) as base:
        yield base


@pytest.mark.parametrize(
    ("no_proxy", "route"),
    [
        ("127.0.0.1", "direct"),
        ("127.0.0.0/8", "direct"),
        ("10.0.0.0/8, 127.0.0.0/8", "direct"),
        ("127.0.0.1/32,::1", "direct"),
        ("10.0.0.0/8,::1/128,127.0.0.2", "proxied"),
    ],
)
async def test_no_proxy_decides_for_the_host_the_sdk_resolved_itself(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, route: str
) -> None:
    """``base_url=None``: the SDK takes its host from ``OPENAI_BASE_URL`` (else its default); when ``NO_PROXY`` names
    that host, or a network holding its address (as curl and requests read it), the request goes to it directly,
    else through the proxy the environment names."""
    seen: dict[str, list[str]] = {"proxied": [], "direct": []}
    async with answering(200, "proxied", seen["proxied"]) as proxy, answering(200, "direct", seen["direct"]) as model:
        for name in ("no_proxy", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(name, proxy)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{model}/v1")
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url=None, max_retries=0)
        try:
            response = await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert response.text == route
    assert seen == {route: ["POST /v1/chat/completions"], ("direct" if route == "proxied" else "proxied"): []}


@pytest.mark.parametrize(
    ("no_proxy", "url", "route"),
    [
        ("[::1]:8080", "http://[::1:8080]/", "proxied"),  # a bracketed entry with a port is no network
        ("[::1]:8080", "http://[::1]/", "proxied"),  # nor a port-less ::1 (urllib ignores ports in entries too)
        ("[fd00::]/8", "http://[fd12::1]/", "direct"),
        ("[fd00::1]", "http://[fd00::1]:9/", "direct"),
        ("[fd00::1", "http://[fd00::1]/", "proxied"),
        ("10.0.0.0/33", "http://10.0.0.1/", "proxied"),
        ("10.0.0.0/8", "http://[::ffff:10.0.0.1]/", "direct"),
        (" , ,10.0.0.0/8 ", "http://10.2.3.4/", "direct"),
        ("FD00::/8", "http://[fd00::1]/", "direct"),
        ("10.0.0.0/8", "http://localhost/", "proxied"),  # names are compared as names, as curl does
    ],
)
def test_no_proxy_networks_are_read_as_written(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, url: str, route: str
) -> None:
    """Hostile ``NO_PROXY`` entries: a malformed network or a bracketed address with a port bypasses nothing (it
    once matched the different address ``::1:8080``); an IPv4-mapped address is judged by the address it embeds."""
    for name in ("no_proxy", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert environment_proxy(url) == (None if route == "direct" else "http://proxy.invalid:3128")


async def test_a_host_the_sdk_resolved_and_no_proxy_does_not_name_goes_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxied: list[str] = []
    async with answering(200, "proxied", proxied) as proxy:
        for name in ("no_proxy", "NO_PROXY", "http_proxy", "all_proxy", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("OPENAI_BASE_URL", "http://llm.invalid/v1")
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url=None, max_retries=0)
        try:
            response = await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert response.text == "proxied"
    assert proxied == ["POST /v1/chat/completions"]


def test_the_otlp_session_dials_the_address_it_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebinding name: its first answer is a collector on 127.0.0.1, every later one a metadata address. The
    session resolves once, judges that answer and dials it; a second lookup at connect would dial the metadata
    address (the old session's window between the check and ``requests``' connect)."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    received: list[str] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            received.append(f"{self.headers['Host']} {self.path}")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    real = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding(host: object, *args: object, **kwargs: object) -> object:
        if host == "collector.test":
            lookups.append(str(host))
            host = "127.0.0.1" if len(lookups) == 1 else "169.254.169.254"
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setenv("NO_PROXY", "*")
    outbound = Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing")
    session = requests_session(outbound)
    try:
        response = session.post(f"http://collector.test:{port}/v1/traces", data=b"spans", timeout=10)
    finally:
        session.close()
        server.shutdown()
        server.server_close()
    assert response.status_code == 200
    assert received == [f"collector.test:{port} /v1/traces"]  # the name kept in the Host header
    assert lookups == ["collector.test"]


def test_the_otlp_session_refuses_a_name_that_resolves_to_a_metadata_address(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    real = socket.getaddrinfo

    def metadata(host: object, *args: object, **kwargs: object) -> object:
        return real("169.254.169.254" if host == "collector.test" else host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", metadata)
    otlp_refused("http://collector.test:4318/v1/traces", "resolves to 169.254.169.254")


@pytest.mark.parametrize(
    "endpoint", ["http://collector.example:4317", "https://otel.internal.", "http://LOCALHOST.example"]
)
def test_an_otlp_grpc_endpoint_naming_a_host_is_a_configuration_error(endpoint: str) -> None:
    """The gRPC channel resolves a name itself, past the gate: only an address or localhost is accepted."""
    from kavalai._tracing_setup import _checked_endpoint

    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
    with pytest.raises(ConfigurationError, match="OTEL_EXPORTER_OTLP_ENDPOINT: OTLP over gRPC needs") as caught:
        _checked_endpoint("otlp_proto_grpc", env)
    assert "resolves a name itself" in str(caught.value)
    _checked_endpoint("otlp_proto_http", env)  # OTLP/HTTP judges the name's addresses at connect


@pytest.mark.parametrize(
    "endpoint", ["http://localhost:4317", "http://127.0.0.1:4317", "http://[::1]:4317", "https://10.2.3.4:4317", ""]
)
def test_an_otlp_grpc_endpoint_at_an_address_or_localhost_is_accepted(endpoint: str) -> None:
    from kavalai._tracing_setup import _checked_endpoint

    assert _checked_endpoint("otlp_proto_grpc", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}) is None


def test_an_otlp_grpc_endpoint_at_a_metadata_address_is_refused() -> None:
    from kavalai._tracing_setup import _checked_endpoint

    with pytest.raises(ConfigurationError, match="169.254.169.254"):
        _checked_endpoint("otlp_proto_grpc", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://169.254.169.254:4317"})


@asynccontextmanager
async def plain_proxy(seen: list[str]) -> AsyncIterator[int]:
    """A plain HTTP proxy on 127.0.0.1 that answers every request itself (recording the host asked for and the
    path), as a collector behind it would: its port."""

    async def handler(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.headers.get('Host')}{request.path}")
        return web.Response(status=200)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with serving(app) as base:
        yield int(URL(base).port or 0)


def _through_proxy(monkeypatch: pytest.MonkeyPatch, proxy: str, answers: dict[str, str]) -> list[str]:
    """``HTTP_PROXY`` set to ``proxy`` (no ``NO_PROXY``), and names resolved as ``answers`` say (each lookup
    recorded, a name's second lookup answered with a metadata address: a rebinding name)."""
    import socket

    for name in ("NO_PROXY", "no_proxy", "http_proxy", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    real = socket.getaddrinfo
    lookups: list[str] = []

    def resolving(host: object, *args: object, **kwargs: object) -> object:
        if host in answers:
            host = answers[str(host)] if str(host) not in lookups else "169.254.169.254"
            lookups.append(str(host))
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolving)
    return lookups


async def test_the_otlp_session_dials_the_environments_proxy_at_the_address_it_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through ``HTTP_PROXY``, the proxy is what is dialled: its name resolved once, judged, and the address judged
    dialled (a rebinding proxy name cannot move the connection); the collector's name goes to the proxy unresolved."""
    seen: list[str] = []
    async with plain_proxy(seen) as port:
        lookups = _through_proxy(monkeypatch, f"http://proxy.test:{port}", {"proxy.test": "127.0.0.1"})
        session = requests_session(Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing"))
        try:
            response = await asyncio.to_thread(
                session.post, "http://collector.test:4318/v1/traces", data=b"spans", timeout=10
            )
        finally:
            session.close()
    assert response.status_code == 200
    assert seen == ["POST collector.test:4318/v1/traces"]  # the proxy was asked for the collector by name
    assert lookups == ["127.0.0.1"]  # one lookup, of the proxy's name; never the collector's


@pytest.mark.parametrize(
    ("proxy", "answers"),
    [
        ("http://169.254.169.254:3128", {}),
        ("http://proxy.test:3128", {"proxy.test": "169.254.169.254"}),
        ("169.254.169.254:3128", {}),  # no scheme: requests reads it as http://
        ("http://user:pr0xy-s3cret@169.254.169.254:3128", {}),  # registered as a secret: a word no other test uses
        ("HTTP://169.254.169.254:3128", {}),
        ("http://[::ffff:169.254.169.254]:3128", {}),  # IPv4-mapped: judged by the address it embeds
    ],
)
def test_the_otlp_session_refuses_a_proxy_at_a_metadata_address(
    monkeypatch: pytest.MonkeyPatch, proxy: str, answers: dict[str, str]
) -> None:
    _through_proxy(monkeypatch, proxy, answers)
    otlp_refused("http://collector.test:4318/v1/traces", "169.254.169.254")
