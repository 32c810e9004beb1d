"""One policy for the environment's proxy (issue 34): every client that sends through the proxy the environment
names (the LLM clients' httpx transport, the OTLP exporter's requests session) reads it in one place
(``environment_proxies``) and judges it with one function (``judged_proxy``): SOCKS refused, an HTTP proxy at a
link-local, metadata, multicast or reserved address refused (in any spelling), its name pinned at connect. The LLM
clients used to trust it as given. Also: ``NO_PROXY`` entries are read as the addresses they are (``10.1``,
``0x0a000001``), as hosts are."""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest

from kavalai.errors import OutboundRefusedError
from kavalai.http import LOCAL_NETWORKS, Outbound, environment_proxy, judged_proxy
from kavalai.llm.errors import LLMConnectionError
from kavalai.llm.messages import UserMessage
from kavalai.llm.openai import OpenAIClient
from tests.http.test_outbound_clients import answering, otlp_refused

SRC = Path(__file__).resolve().parents[2] / "src" / "kavalai"
_PROXY_VARIABLES = ("NO_PROXY", "no_proxy", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy")


def _only(monkeypatch: pytest.MonkeyPatch, **variables: str) -> None:
    for name in (*_PROXY_VARIABLES, "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


async def _llm_refused(match: str) -> LLMConnectionError:
    seen: list[str] = []
    async with answering(200, "direct", seen) as model:
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url=f"{model}/v1", max_retries=0)
        try:
            with pytest.raises(LLMConnectionError, match=match) as caught:
                await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert seen == []  # neither the model server nor anything behind the proxy was reached
    return caught.value


@pytest.mark.parametrize(
    "proxy",
    [
        "http://169.254.169.254:3128",
        "http://0xa9fea9fe:3128",  # 169.254.169.254 in another spelling
        "http://[::ffff:169.254.169.254]:3128",
        "169.254.169.254:3128",  # no scheme: read as http://
        "http://224.0.0.1:3128",
    ],
)
async def test_an_llm_client_refuses_a_proxy_at_a_refused_address(monkeypatch: pytest.MonkeyPatch, proxy: str) -> None:
    """The LLM clients trusted the environment's proxy as given while the OTLP session judged it: one policy now."""
    _only(monkeypatch, HTTP_PROXY=proxy)
    refusal = await _llm_refused("refused")
    assert "the environment's proxy" in str(refusal)


async def test_an_llm_client_pins_the_proxys_name_to_the_address_it_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy named by a host name that resolves to a metadata address is refused at connect."""
    real = socket.getaddrinfo

    def resolving(host: object, *args: object, **kwargs: object) -> object:
        named = host in ("proxy.test", b"proxy.test")  # anyio asks in IDNA bytes
        return real("169.254.169.254" if named else host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolving)
    _only(monkeypatch, HTTP_PROXY="http://proxy.test:3128")
    refusal = await _llm_refused("resolves to 169.254.169.254")
    assert "proxy.test" in str(refusal)


@pytest.mark.parametrize(
    "proxy", ["socks5://127.0.0.1:1080", "socks5h://proxy.test:1080", "SOCKS5://u:Pr0xyPassw0rd@127.0.0.1:1080"]
)
async def test_an_llm_client_refuses_a_socks_proxy_as_the_otlp_session_does(
    monkeypatch: pytest.MonkeyPatch, proxy: str
) -> None:
    _only(monkeypatch, ALL_PROXY=proxy)
    refusal = await _llm_refused("SOCKS proxy .*NO_PROXY")
    assert "Pr0xyPassw0rd" not in str(refusal)
    otlp = otlp_refused("http://collector.test:4318/v1/traces", "SOCKS proxy .*NO_PROXY")
    assert "Pr0xyPassw0rd" not in str(otlp)


async def test_an_llm_client_refusing_a_proxy_does_not_show_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, HTTP_PROXY="http://user:Pr0xyPassw0rd@169.254.169.254:3128")
    refusal = await _llm_refused("refused")
    assert "Pr0xyPassw0rd" not in str(refusal)
    assert "Pr0xyPassw0rd" not in repr(refusal)


async def test_an_llm_client_still_sends_through_a_proxy_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    async with answering(200, "proxied", seen) as proxy:
        _only(monkeypatch, HTTP_PROXY=proxy)
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url="http://llm.invalid/v1", max_retries=0)
        try:
            response = await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert response.text == "proxied"
    assert seen == ["POST /v1/chat/completions"]


@pytest.mark.parametrize(
    "proxy",
    [
        "http://169.254.169.254:3128",
        "socks5://10.0.0.1:1080",
        "http://0251.0376.0251.0376:80",
        "::nonsense",
        "http://",  # parses, has no host: its origin() raised a bare ValueError past the gate's error
        "https://:3128",
    ],
)
def test_the_one_judgement_refuses_the_same_proxies_for_every_owner(proxy: str) -> None:
    for owner in (
        Outbound("OTLP exporter", allowed_networks=LOCAL_NETWORKS, kind="tracing"),
        Outbound("openai/gpt", ["https://api.openai.com/v1"], kind="model"),
    ):
        with pytest.raises(OutboundRefusedError) as caught:
            judged_proxy(owner, proxy)
        assert caught.value.field == "the environment's proxy"
        assert owner.owner in str(caught.value)


@pytest.mark.parametrize(
    ("no_proxy", "url", "route"),
    [
        ("10.1", "http://10.0.0.1/", "direct"),  # an entry in an odd spelling is the address it is
        ("0x0a000001", "http://10.0.0.1:8000/", "direct"),
        ("167772161", "http://10.0.0.1/", "direct"),
        ("012.0.0.1", "http://10.0.0.1/", "direct"),
        ("10.1/8", "http://10.9.9.9/", "direct"),
        ("0x0a000000/8", "http://10.200.0.1/", "direct"),
        ("[::ffff:10.0.0.1]", "http://10.0.0.1/", "direct"),
        ("::ffff:a00:0/104", "http://10.3.2.1/", "direct"),
        ("0x0a000001", "http://10.0.0.2/", "proxied"),
        ("10.1/33", "http://10.0.0.1/", "proxied"),
        ("10.1.example", "http://10.0.0.1/", "proxied"),
    ],
)
def test_no_proxy_reads_an_entry_as_the_address_it_is(
    monkeypatch: pytest.MonkeyPatch, no_proxy: str, url: str, route: str
) -> None:
    _only(monkeypatch, HTTP_PROXY="http://proxy.invalid:3128", NO_PROXY=no_proxy)
    assert environment_proxy(url) == (None if route == "direct" else "http://proxy.invalid:3128")


async def test_an_odd_no_proxy_entry_sends_the_llm_client_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a client: ``NO_PROXY=0x7f000001`` (127.0.0.1) sends a request to 127.0.0.1 directly."""
    seen: dict[str, list[str]] = {"proxied": [], "direct": []}
    async with answering(200, "proxied", seen["proxied"]) as proxy, answering(200, "direct", seen["direct"]) as model:
        _only(monkeypatch, HTTP_PROXY=proxy, NO_PROXY="0x7f000001")
        llm = OpenAIClient("gpt-fake", api_key="sk-test-0123456789", base_url=f"{model}/v1", max_retries=0)
        try:
            response = await llm.complete([UserMessage(content="hi")])
        finally:
            await llm.aclose()
    assert response.text == "direct"
    assert seen == {"direct": ["POST /v1/chat/completions"], "proxied": []}


# ------------------------------------------------------------------------------------------------- enumeration

#: What reads the environment's proxy settings (a call of these names, ``trust_env=True``, or a string constant
#: naming a proxy variable), by file and function; anything else that reads them fails the enumeration below.
_READS = frozenset({"getproxies", "proxy_bypass", "proxy_bypass_environment", "getproxies_environment"})
#: Every reader, and how the proxy it reads is judged: the one reading, and its users, each judging with
#: ``judged_proxy``.
READERS = {
    "http/_outbound.py:environment_proxies": "the one reading (urllib's)",
    "http/_outbound.py:_proxy_for": "which proxy for a host, of that reading (NO_PROXY through host_address)",
    "http/_outbound.py:environment_proxy": "environment_proxies + _proxy_for",
    "http/_outbound.py:_EnvironmentProxies.__init__": "environment_proxies, read once",
    "http/_outbound.py:_EnvironmentProxies.handle_async_request": "_proxy_for per host; judged_proxy before first use",
    "http/_outbound.py:requests_session._GateAdapter.send": "environment_proxy; judged_proxy in proxy_manager_for",
}
#: The clients that send through the environment's proxy, and the method that judges it.
JUDGES = {
    "http/_outbound.py:_EnvironmentProxies.handle_async_request",
    "http/_outbound.py:requests_session._GateAdapter.proxy_manager_for",
}
_USERS = frozenset({"environment_proxies", "environment_proxy", "_proxy_for"})
_VARIABLES = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"})


def _owned(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    """Every node of ``tree`` with the qualified name of the innermost function holding it (walked with a stack:
    lists extended up through every level made the scan of ``src`` take a minute on 3.13 under load)."""
    found: list[tuple[str, ast.AST]] = []
    stack: list[tuple[ast.AST, str, str]] = [(tree, "<module>", "")]
    while stack:
        parent, owner, prefix = stack.pop()
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                stack.append((node, f"{prefix}{node.name}", f"{prefix}{node.name}."))
            elif isinstance(node, ast.ClassDef):
                stack.append((node, owner, f"{prefix}{node.name}."))
            else:
                found.append((owner, node))
                stack.append((node, owner, prefix))
    return found


def _proxy_readers(root: Path = SRC) -> tuple[dict[str, set[str]], set[str]]:
    readers: dict[str, set[str]] = {}
    judges: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)  # once a file: per node it took most of a minute on 3.13 under load
        for owner, node in _owned(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{relative}:{owner}"
            if isinstance(node, ast.Call):
                called = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if called in _READS | _USERS:
                    readers.setdefault(where, set()).add(str(called))
                if called == "judged_proxy":
                    judges.add(where)
                for keyword in node.keywords:
                    if keyword.arg == "trust_env" and not (
                        isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                    ):
                        readers.setdefault(where, set()).add("trust_env")
            elif isinstance(node, ast.Constant) and str(node.value).upper() in _VARIABLES:
                readers.setdefault(where, set()).add(str(node.value))
    return readers, judges


def test_every_client_that_reads_the_environments_proxy_crosses_the_one_policy() -> None:
    """The enumeration: a new place reading the environment's proxy (``getproxies``, ``trust_env=True``, an
    ``HTTPS_PROXY`` lookup) fails here; so does a client using the one reading without judging what it reads."""
    readers, judges = _proxy_readers()
    assert sorted(readers) == sorted(READERS)
    assert judges == JUDGES


def test_the_enumeration_sees_a_bypass(tmp_path: Path) -> None:
    (tmp_path / "sneaky.py").write_text(
        "import os\n\n\ndef f():\n    return os.environ.get('HTTPS_PROXY')\n\n\n"
        "class C:\n    def g(self, c):\n        return c(trust_env=1)\n\n    def h(self, c):\n"
        "        return c(trust_env=False)\n",
        encoding="utf-8",
    )
    readers, judges = _proxy_readers(tmp_path)
    assert readers == {"sneaky.py:f": {"HTTPS_PROXY"}, "sneaky.py:C.g": {"trust_env"}}
    assert judges == set()
