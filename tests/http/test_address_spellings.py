"""An address is an address in every spelling ``getaddrinfo`` and curl take (``10.1``, ``0x0a000001``,
``2130706433``, ``0177.0.0.1``): the outbound gate reads a host through one function (``host_address``) wherever it
compares it with an address or a network — the trusted hosts, ``NO_PROXY``, an endpoint's literal address — so no
spelling is compared as a name. Also: one ``NO_PROXY`` reading for every client (the OTLP ``requests`` session
included), a SOCKS proxy for OTLP refused, a URL's userinfo never in a refusal, and the demo's browser judged."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from yarl import URL

from kavalai.errors import ConfigurationError, OutboundRefusedError
from kavalai.http import LOCAL_NETWORKS, HopRefusedError, Outbound, environment_proxy, requests_session
from tests.http.test_outbound import serving
from tests.http.test_outbound_clients import otlp_refused, plain_proxy


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("10.1", "10.0.0.1"),
        ("0x0a000001", "10.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("169.254.169.254.", "169.254.169.254"),
        ("[::ffff:a9fe:a9fe]", "::ffff:a9fe:a9fe"),
        ("[fe80::1%eth0]", "fe80::1"),
        ("example.com", None),
        ("10.0.0.1.example", None),
        ("0x0a000001.example", None),
        ("1e3", None),
        ("4294967296", None),  # past 32 bits: inet_aton takes no such address; a name
    ],
)
def test_a_host_is_read_as_getaddrinfo_reads_it(host: str, address: str | None) -> None:
    from kavalai.http._netguard import host_address

    assert host_address(host) == (None if address is None else ipaddress.ip_address(address))


@pytest.mark.parametrize("written", ["http://10.1:8000", "http://0x0a000001:8000", "http://167772161:8000"])
def test_a_configured_address_is_trusted_in_every_spelling(written: str) -> None:
    """The user configured the server at an odd spelling of 10.0.0.1: the same address, learned in its canonical
    form (a redirect, OAuth metadata), is the user's host, not a private address learned from a server."""
    outbound = Outbound("api", [written], kind="REST server")
    assert outbound.trusted("10.0.0.1")
    outbound.check(URL("http://10.0.0.1:8000/next"))
    outbound.hop_check(URL(written + "/same"))  # the hot path: the host as written
    with pytest.raises(OutboundRefusedError, match="10.0.0.2"):
        outbound.check(URL("http://10.0.0.2/"))


def test_a_learned_odd_spelling_is_refused_outright() -> None:
    """Not trusted: the fetch tools' rules refuse an odd spelling of an address whatever it means."""
    outbound = Outbound("api", ["http://api.example"], allowed_networks=LOCAL_NETWORKS, kind="REST server")
    for host in ("10.1", "0x0a000001", "0177.0.0.1"):
        with pytest.raises(OutboundRefusedError, match="unusual spelling"):
            outbound.check(URL(f"http://{host}/"))


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://0xa9fea9fe:4318",
        "http://2852039166:4318",
        "http://0251.0376.0251.0376:4318",
        "http://169.254.43518:4318",
        "http://127.1:4318",  # allowed when written as 127.0.0.1; an odd spelling is refused with the way to write it
    ],
)
def test_an_otlp_endpoint_at_an_odd_spelling_of_an_address_is_judged_when_tracing_is_set_up(endpoint: str) -> None:
    """It was waved through as a host name (judged only at connect, and through a proxy not at all)."""
    from kavalai._tracing_setup import _exporter

    with pytest.raises(ConfigurationError, match="OTEL_EXPORTER_OTLP_ENDPOINT: Refused .*unusual spelling"):
        _exporter("otlp_proto_http", {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})


@pytest.mark.parametrize(
    "endpoint", ["http://tracer:Sup3rS3cretTok@169.254.169.254:4318", "http://u:Pw0rd1234@0xa9fea9fe"]
)
def test_a_refused_endpoint_is_named_without_its_userinfo(endpoint: str) -> None:
    from kavalai._tracing_setup import _exporter

    with pytest.raises(ConfigurationError) as caught:
        _exporter("otlp_proto_http", {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    message = str(caught.value)
    assert "Sup3rS3cretTok" not in message
    assert "Pw0rd1234" not in message
    assert "Refused http://" in message


def test_the_otlp_session_refuses_a_refused_endpoint_through_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a proxy the collector's name is the proxy's to resolve; an address in any spelling is judged here."""
    for name in ("NO_PROXY", "no_proxy", "http_proxy", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    otlp_refused("http://0xa9fea9fe:4318/v1/traces", "169.254.169.254")


@pytest.mark.parametrize(
    ("no_proxy", "url", "route"),
    [
        ("10.0.0.0/8", "http://10.1/", "direct"),
        ("10.0.0.0/8", "http://0x0a000001:8000/", "direct"),
        ("127.0.0.1", "http://2130706433/", "direct"),
        ("127.0.0.0/8", "http://0177.0.0.1/", "direct"),
        ("10.0.0.0/8", "http://0x0a000001.example/", "proxied"),  # a name
        ("192.168.0.0/16", "http://10.1/", "proxied"),
    ],
)
def test_no_proxy_reads_the_host_as_the_address_it_is(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, url: str, route: str
) -> None:
    """curl reads ``http://10.1/`` as 10.0.0.1 and bypasses the proxy for ``NO_PROXY=10.0.0.0/8``; it used to be
    compared as the name ``10.1`` and sent through the proxy."""
    for name in ("no_proxy", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert environment_proxy(url) == (None if route == "direct" else "http://proxy.invalid:3128")


@asynccontextmanager
async def collector(host: str, seen: list[str]) -> AsyncIterator[int]:
    """An OTLP collector (any POST answered 200) on ``host``: its port."""

    async def handler(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        return web.Response(status=200)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with serving(app, host) as base:
        yield int(base.rpartition(":")[2])


@pytest.mark.parametrize(
    ("no_proxy", "host", "bound"),
    [("::1/128", "[::1]", "::1"), ("[::]/0", "[::1]", "::1"), ("127.0.0.0/8", "[::ffff:127.0.0.1]", "127.0.0.1")],
)
async def test_the_otlp_session_reads_no_proxy_as_the_llm_clients_do(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, host: str, bound: str
) -> None:
    """IPv6 networks and IPv4-mapped addresses in ``NO_PROXY``: requests' own reading (IPv4 networks only) sent these
    through the proxy, while the LLM clients went direct. Now the collector is reached directly, the proxy unused."""
    direct: list[str] = []
    proxied: list[str] = []
    async with collector(bound, direct) as port, plain_proxy(proxied) as proxy_port:
        for name in ("no_proxy", "http_proxy", "all_proxy", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("NO_PROXY", no_proxy)
        session = requests_session(Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing"))
        try:
            response = await asyncio.to_thread(
                session.post, f"http://{host}:{port}/v1/traces", data=b"spans", timeout=10
            )
        finally:
            session.close()
    assert response.status_code == 200
    assert (direct, proxied) == (["POST /v1/traces"], [])
    assert environment_proxy(f"http://{host}:{port}/") is None  # the same reading as the LLM clients'


@pytest.mark.parametrize(
    "proxy", ["socks5://127.0.0.1:1080", "socks5h://proxy.test:1080", "SOCKS5://u:Pr0xyPassw0rd@127.0.0.1:1080"]
)
def test_the_otlp_session_refuses_a_socks_proxy_with_a_clear_error(monkeypatch: pytest.MonkeyPatch, proxy: str) -> None:
    """A SOCKS connection dials past the gate's pinning (and ``socks5://`` resolves the collector's name unjudged):
    refused, naming the proxy without its password and the way out, instead of judged by its literal address."""
    for name in ("NO_PROXY", "no_proxy", "http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", proxy)
    refusal = otlp_refused("http://collector.test:4318/v1/traces", "SOCKS proxy .*NO_PROXY")
    assert "Pr0xyPassw0rd" not in str(refusal)
    assert refusal.field == "the environment's proxy"


@pytest.mark.parametrize(
    "target", ["http://0.0.0.0:1/", "http://169.254.169.254/latest/", "http://[::ffff:169.254.169.254]/"]
)
async def test_the_demo_browser_judges_every_location_it_follows(target: str) -> None:
    """The demo's browser followed a server's ``Location`` unjudged (exempt in HOP_GUARDS); it is judged now, with
    loopback allowed, before it is sent."""
    from kavalai.demo.oauth import DemoAuthorizationServer, DemoOAuth

    seen: list[str] = []

    async def authorize(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(status=302, headers={"Location": target})

    app = web.Application()
    app.router.add_get("/authorize", authorize)
    async with serving(app) as base:
        demo = DemoOAuth(issuer=base, mcp_url="", rest_url="", server=DemoAuthorizationServer(base))
        with pytest.raises(HopRefusedError, match="Refused"):
            await demo.sign_in(f"{base}/authorize", "alice")
    assert seen == ["/authorize"]
