"""The SSRF guard's policy, without any network: URLs judged before sending, and resolver answers judged."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from yarl import URL

from kavalai.http._netguard import (
    GuardedResolver,
    _loose_ipv4,
    check_url,
    host_refusal_reason,
    parse_networks,
    refusal_reason,
)
from tests.tools.conftest import StaticResolver

# (URL, a fragment the refusal message must contain)
SSRF_MATRIX = [
    ("http://127.0.0.1/", "loopback"),
    ("http://127.8.9.10:8080/x", "loopback"),
    ("http://2130706433/", "unusual spelling of an IPv4 address (it means 127.0.0.1"),
    ("http://0x7f.1/", "it means 127.0.0.1"),
    ("http://0x7f000001/", "it means 127.0.0.1"),
    ("http://0X7F.0.0.1/", "it means 127.0.0.1"),
    ("http://0177.0.0.1/", "it means 127.0.0.1"),
    ("http://0177.1/", "it means 127.0.0.1"),
    ("http://127.1/", "it means 127.0.0.1"),
    ("http://127.0.1/", "it means 127.0.0.1"),
    ("http://127.0.0.1./", "unusual spelling"),
    ("http://017700000001/", "it means 127.0.0.1"),
    ("http://0/", "it means 0.0.0.0"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://[::]/", "unspecified"),
    ("http://[::1]/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "IPv4-mapped IPv6 address of 127.0.0.1"),
    ("http://[::ffff:7f00:1]/", "IPv4-mapped IPv6 address of 127.0.0.1"),
    ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
    ("http://[::127.0.0.1]/", "IPv4-compatible"),
    ("http://[64:ff9b::7f00:1]/", "NAT64 address of 127.0.0.1"),
    ("http://[64:ff9b::a00:1]/", "NAT64 address of 10.0.0.1, a private address"),
    ("http://[64:ff9b:1::1]/", "local-use NAT64"),
    ("http://[2002:7f00:1::]/", "6to4 address of 127.0.0.1"),
    ("http://[2002:c0a8:101::1]/", "6to4 address of 192.168.1.1"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"),
    ("http://10.0.0.1/", "private"),
    ("http://172.16.5.4/", "private"),
    ("http://172.31.255.255/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://100.127.255.254/", "carrier-grade NAT"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://169.254.10.20/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    ("http://[fd00:ec2::254]/", "cloud metadata"),
    ("http://[fc00::1]/", "unique-local"),
    ("http://[fd12:3456::1]/", "unique-local"),
    ("http://[fec0::1]/", "site-local"),
    ("http://168.63.129.16/", "cloud metadata"),
    ("http://100.100.100.200/", "cloud metadata"),
    ("http://224.0.0.1/", "multicast"),
    ("http://239.255.255.250/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://192.0.2.1/", "documentation"),
    ("http://[2001:db8::1]/", "documentation"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://192.0.0.8/", "IETF protocol-assignment"),
    ("http://localhost/", "local-only host name"),
    ("http://LOCALHOST./", "local-only host name"),
    ("http://api.localhost/", "local-only host name"),
    ("http://printer.local/", "local-only host name"),
    ("http://metadata.google.internal/computeMetadata/v1/", "local-only host name"),
    ("http://user:pw@127.0.0.1/", "loopback"),
    ("http://example.com@127.0.0.1/", "loopback"),
    ("http://127.0.0.1#@example.com/", "loopback"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "loopback"),
    ("http://127\u30020\u30020\u30021/", "loopback"),
    ("http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/", "local-only host name"),
    ("http://%31%32%37.0.0.1/", "percent-encoded"),
    ("http://[::ffff:127.0.0.1%25lo]/", "IPv4-mapped IPv6 address of 127.0.0.1"),
    ("https://127.0.0.1:443/", "loopback"),
    ("ftp://example.com/file", "only http:// and https://"),
    ("file:///etc/passwd", "only http:// and https://"),
    ("gopher://example.com/", "only http:// and https://"),
]


@pytest.mark.parametrize(("url", "why"), SSRF_MATRIX, ids=[url for url, _ in SSRF_MATRIX])
def test_the_ssrf_matrix_is_refused_before_sending(url: str, why: str) -> None:
    with pytest.raises(PermissionError) as caught:
        check_url(URL(url))
    message = str(caught.value)
    assert message.startswith("Refused ")
    assert why in message


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/",
        "http://8.8.8.8/",
        "http://93.184.216.34:8080/path?q=1",
        "http://[2606:4700:4700::1111]/",
        "http://[::ffff:8.8.8.8]/",
        "http://[64:ff9b::808:808]/",
        "http://[2002:808:808::1]/",
        "http://100.63.255.255/",
        "http://100.128.0.1/",
        "http://172.32.0.1/",
        "http://sub.example.org./",
    ],
)
def test_public_addresses_and_names_pass(url: str) -> None:
    check_url(URL(url))  # raises if refused


def test_odd_spellings_are_refused_even_when_they_mean_a_public_address() -> None:
    with pytest.raises(PermissionError, match=r"it means 8\.8\.8\.8\); write it as 8\.8\.8\.8"):
        check_url(URL("http://0x08080808/"))


def test_allowed_networks_let_exactly_those_addresses_through() -> None:
    allowed = parse_networks(["127.0.0.1", "10.1.0.0/16"])
    check_url(URL("http://127.0.0.1:8000/"), allowed)
    check_url(URL("http://10.1.2.3/"), allowed)
    check_url(URL("http://[::ffff:127.0.0.1]/"), allowed)
    for url in ("http://127.0.0.2/", "http://10.2.0.1/", "http://[::1]/"):
        with pytest.raises(PermissionError):
            check_url(URL(url), allowed)


def test_a_bad_allowed_network_is_named() -> None:
    with pytest.raises(ValueError, match="allowed_networks entry 'intranet' is not an IP network"):
        parse_networks(["intranet"])


def test_refusal_reason_is_none_only_for_public_unicast() -> None:
    assert refusal_reason(ipaddress.ip_address("1.1.1.1")) is None
    assert refusal_reason(ipaddress.ip_address("127.0.0.1")) == "a loopback address"
    assert refusal_reason(ipaddress.ip_address("169.254.169.254")) == "a cloud metadata address"


async def test_resolver_refuses_a_public_looking_name_that_resolves_to_a_private_address() -> None:
    guard = GuardedResolver(StaticResolver({"api.example.com": ["10.0.0.7"]}), owns_inner=False)
    with pytest.raises(PermissionError, match=r"'api\.example\.com' resolves to refused addresses: 10\.0\.0\.7"):
        await guard.resolve("api.example.com", 443)


async def test_resolver_refuses_a_name_when_any_answer_is_refused() -> None:
    inner = StaticResolver({"mixed.example.com": ["93.184.216.34", "169.254.169.254"]})
    guard = GuardedResolver(inner, owns_inner=False)
    with pytest.raises(PermissionError, match=r"169\.254\.169\.254 \(a cloud metadata address\)"):
        await guard.resolve("mixed.example.com", 80)


async def test_resolver_judges_every_lookup_so_rebinding_is_caught() -> None:
    inner = StaticResolver({"rebind.example.com": [["93.184.216.34"], ["127.0.0.1"]]})
    guard = GuardedResolver(inner, owns_inner=False)
    first = await guard.resolve("rebind.example.com", 80)
    assert [answer["host"] for answer in first] == ["93.184.216.34"]
    with pytest.raises(PermissionError, match="127.0.0.1 \\(a loopback address\\)"):
        await guard.resolve("rebind.example.com", 80)
    assert inner.lookups == ["rebind.example.com", "rebind.example.com"]


async def test_resolver_refuses_local_names_and_odd_spellings_without_a_lookup() -> None:
    inner = StaticResolver({})
    guard = GuardedResolver(inner, owns_inner=False)
    for host in ("localhost", "0x7f.1", "metadata.google.internal"):
        with pytest.raises(PermissionError, match=f"host '{host}' is"):
            await guard.resolve(host, 80)
    assert inner.lookups == []


async def test_resolver_passes_public_answers_through() -> None:
    guard = GuardedResolver(StaticResolver({"ok.example.com": ["93.184.216.34", "2606:2800::1"]}), owns_inner=False)
    answers = await guard.resolve("ok.example.com", 80)
    assert [answer["host"] for answer in answers] == ["93.184.216.34", "2606:2800::1"]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789abcdefxX._+-", min_size=1, max_size=20))
def test_the_guard_decodes_numeric_hosts_as_the_c_library_does(host: str) -> None:
    # No whitespace in the alphabet: inet_aton ignores whatever follows a space, and a URL host has none.
    try:
        expected = ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        expected = None
    decoded = _loose_ipv4(host)
    assert decoded == expected
    if decoded is not None:
        assert host_refusal_reason(host) is not None or host == str(decoded)


@pytest.mark.parametrize(
    "url",
    [
        "http://u:Hunter2-r10-pass@169.254.169.254/latest/",
        "http://u:Hunter2-r10-pass@[fe80::1]/",
        "ftp://u:Hunter2-r10-pass@example.com/",
        "http://Hunter2-r10-pass@[::ffff:a9fe:a9fe]/",
    ],
)
async def test_a_fetch_refusal_names_the_url_without_its_userinfo(url: str) -> None:
    """Hostile round 10 (E2, found running case 26): the fetch tools' refusal showed the URL whole, its password
    too, where the outbound gate's refusals name it without (docs/safety.md); a URL a model gives goes to the log and
    spans with the error."""
    from kavalai.config import KernelConfig, build_kernel
    from kavalai.errors import ToolExecutionError
    from kavalai.tools._fetch import parse_url

    kernel = build_kernel(KernelConfig.from_dict({"tools": ["http"]}))
    try:
        with pytest.raises(ToolExecutionError, match="Refused|not an absolute") as info:
            await kernel.call_tool("python://http.request", {"url": url})
    finally:
        await kernel.aclose()
    assert "Hunter2" not in str(info.value)
    with pytest.raises(PermissionError) as direct:
        check_url(URL(url))
    assert "Hunter2" not in str(direct.value)
    with pytest.raises(ValueError, match="is not a valid URL") as unparsed:
        parse_url("http://u:Hunter2-r10-pass@example.com:99999999/")  # unreadable: quoted without its userinfo too
    assert "Hunter2" not in str(unparsed.value)
