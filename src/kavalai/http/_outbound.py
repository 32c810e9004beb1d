"""The outbound gate: every HTTP client kavalai makes is made here, and every URL it sends to is judged here.

A URL is *configured* when the user wrote it (a server's ``url``, a REST ``base_url``, an OAuth ``issuer``): its host
is trusted as given. Any other host was *learned from a server* (protected-resource and authorization-server
metadata, a ``WWW-Authenticate`` parameter, a redirect) and gets the fetch tools' address rules
(:mod:`kavalai.http._netguard`): http/https only; no link-local, metadata, multicast or reserved address; loopback
and private ranges only when the user allowed them (``allowed_networks``); IPv4-mapped IPv6 judged by the address it
embeds. The rules are applied twice: to the URL before anything is sent (:meth:`Outbound.check`), and to the
addresses a learned host name resolves to at the moment of connecting (the clients' resolver / network backend).

A refusal is :class:`~kavalai.errors.OutboundRefusedError`, naming the server and the field the URL came from.

The clients:

- :func:`aiohttp_session`: an aiohttp session (REST servers, the bundled fetch tools, the demo's browser);
- :func:`httpx_transport` / :func:`httpx_client`: the ``httpx2`` transport and client of an MCP server's HTTP
  transports, of the OAuth flows' own requests (discovery, registration, tokens) and of the LLM providers' SDKs;
- :func:`requests_session`: the OTLP/HTTP trace exporter's ``requests`` session (its endpoint judged by
  :func:`check_endpoint` when tracing is set up and on every request).
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import aiohttp
import anyio
import httpcore2
import httpx2
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from kavalai.errors import OutboundRefusedError
from kavalai.http._dialled import DialledTransport
from kavalai.http._netguard import (
    IPNetwork,
    host_address,
    host_refusal_reason,
    refusal_reason,
    without_userinfo,
)

__all__ = [
    "LOCAL_NETWORKS",
    "Outbound",
    "aiohttp_session",
    "check_endpoint",
    "environment_proxies",
    "environment_proxy",
    "httpx_client",
    "httpx_transport",
    "judged_proxy",
    "requests_session",
]

_SCHEMES: Final = frozenset({"http", "https"})
#: The fields of OAuth metadata (RFC 9728, RFC 8414, OpenID discovery) that hold URLs the client may follow.
_URL_FIELDS: Final = (
    "authorization_servers",
    "resource",
    "issuer",
    "authorization_endpoint",
    "token_endpoint",
    "registration_endpoint",
    "revocation_endpoint",
    "introspection_endpoint",
    "jwks_uri",
    "userinfo_endpoint",
)
_MAX_LEARNED: Final = 64
_MAX_METADATA: Final = 256 * 1024


class Outbound:
    """Where the requests of one server (or tool group) may go.

    Args:
        server: the name of the server (or tool group) the requests are for.
        configured: the URLs the user configured; their hosts are trusted as given.
        allowed_networks: networks a learned URL may reach although private or loopback (the user's choice).
        kind: what ``server`` is, as messages name it (``"MCP server"``).
        resolver: the resolver learned hosts are looked up with (the system's by default; its owner closes it).
    """

    __slots__ = ("_allowed", "_learned", "_trusted", "owner", "resolver", "server")

    def __init__(
        self,
        server: str,
        configured: Iterable[str | URL | None] = (),
        *,
        allowed_networks: Sequence[IPNetwork] = (),
        kind: str = "server",
        resolver: AbstractResolver | None = None,
    ) -> None:
        self.server = server
        self.resolver = resolver
        self.owner = f"{kind} {server!r}"
        self._trusted = frozenset(
            form for url in configured if url is not None and (host := URL(str(url)).raw_host) for form in _forms(host)
        )
        self._allowed = tuple(allowed_networks)
        self._learned: dict[str, str] = {}

    def trusted(self, host: str | None) -> bool:
        """Whether ``host`` is one the user configured (an address in any spelling of it: ``10.1`` is ``10.0.0.1``)."""
        return host is not None and (host in self._trusted or _host_of(host) in self._trusted)

    def configure(self, url: str | URL) -> None:
        """Trust ``url``'s host as configured by the user (a base URL an SDK resolved from the user's settings)."""
        host = URL(str(url)).raw_host
        if host:
            self._trusted = self._trusted | _forms(host)

    def learn(self, url: object, field: str) -> None:
        """Record that ``url`` came from ``field`` of something a server sent (named in a refusal)."""
        if isinstance(url, str) and len(self._learned) < _MAX_LEARNED:
            try:
                key = _key(URL(url))
            except ValueError:
                return
            self._learned.setdefault(key, field)

    def field_of(self, url: URL) -> str:
        """The field ``url`` was learned from, or a general description."""
        return self._learned.get(_key(url), "a URL learned from a server")

    def check(self, url: URL) -> None:
        """Refuse ``url`` before anything is sent if its host is not configured and the address rules refuse it.

        Raises:
            OutboundRefusedError: naming the owner, the URL's field and why.
        """
        if self.trusted(url.raw_host):
            return
        if url.scheme not in _SCHEMES:
            raise self._refusal(url, f"it is a {url.scheme or 'scheme-less'} URL (only http and https are followed)")
        host = (url.raw_host or "").lower()
        if not host:
            raise self._refusal(url, "it has no host")
        # As written, not canonical: the fetch tools' rules refuse an odd spelling of an address outright.
        reason = host_refusal_reason(host, self._allowed)
        if reason is not None:
            raise self._refusal(url, f"its host {host!r} is {reason}")

    def hop_check(self, url: URL) -> None:
        """:meth:`check` as a :data:`~kavalai.http.HopCheck` of :func:`~kavalai.http.origin_guard`: a refusal is a
        ``PermissionError`` (which the guard raises as ``HopRefusedError``, a type aiohttp does not wrap)."""
        if url.raw_host in self._trusted:  # the hot path: a request to the configured host, as written
            return
        try:
            self.check(url)
        except OutboundRefusedError as exc:
            raise PermissionError(str(exc)) from None

    def check_addresses(self, host: str, addresses: Iterable[str]) -> None:
        """At connect: refuse a learned ``host`` whose resolved ``addresses`` include one the rules refuse."""
        if self.trusted(host):
            return
        for address in addresses:
            try:
                parsed = ipaddress.ip_address(address.split("%", 1)[0])
            except ValueError:
                reason: str | None = "not an IP address"
            else:
                reason = refusal_reason(parsed, self._allowed)
            if reason is not None:
                raise OutboundRefusedError(
                    f"Refused to connect to {host!r} for {self.owner}: it resolves to {address}, {reason}. "
                    "Only the hosts you configured are trusted as given.",
                    server=self.server,
                    url=host,
                    field="a URL learned from a server",
                )

    def learn_metadata(self, document: Mapping[str, Any], source: URL) -> None:
        """Record the URL fields of an OAuth metadata document fetched from ``source``."""
        for name in _URL_FIELDS:
            value = document.get(name)
            values = value if isinstance(value, list) else [value]
            for index, item in enumerate(values[:_MAX_LEARNED]):
                label = f"{name}[{index}]" if isinstance(value, list) else name
                self.learn(item, f"{label} of the metadata at {source}")

    def _refusal(self, url: URL, why: str) -> OutboundRefusedError:
        field = self.field_of(url)
        shown = without_userinfo(url)  # a proxy's or an endpoint's password
        return OutboundRefusedError(
            f"Refused {shown} for {self.owner}: the URL came from {field}, and {why}. Only the hosts you configured "
            "are trusted as given; allow a private network with allowed_networks.",
            server=self.server,
            url=str(shown),
            field=field,
        )


def _host(url: URL) -> str | None:
    host = url.raw_host
    return _host_of(host) if host else None


def _host_of(host: str) -> str:
    """``host`` as the gate compares it: a name in lower case without a final dot; an address in its canonical form,
    however it was spelt (:func:`~kavalai.http._netguard.host_address`)."""
    name = host.lower().rstrip(".")
    address = host_address(name)
    return name if address is None else str(address)


def _forms(host: str) -> frozenset[str]:
    """The forms of a configured ``host`` the trusted set holds: as written (the hot path compares ``raw_host``) and
    as compared."""
    return frozenset({host, _host_of(host)})


def _key(url: URL) -> str:
    return str(url.origin()) if url.is_absolute() else str(url)


# ------------------------------------------------------------------------------------------------------ aiohttp


class OutboundResolver(AbstractResolver):
    """Resolves through aiohttp's default resolver and judges the addresses of learned hosts at connect."""

    def __init__(self, outbound: Outbound) -> None:
        self._outbound = outbound
        self._owned = outbound.resolver is None
        self._inner = outbound.resolver if outbound.resolver is not None else aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host``; refuse it when it is learned and resolves to a refused address."""
        results = await self._inner.resolve(host, port, family)
        if not self._outbound.trusted(host):
            try:
                self._outbound.check_addresses(host, [result["host"] for result in results])
            except OutboundRefusedError as exc:
                raise PermissionError(str(exc)) from None
        return results

    async def close(self) -> None:
        """Close the wrapped resolver, when this one made it."""
        if self._owned:
            await self._inner.close()


def aiohttp_session(
    outbound: Outbound | None = None, *, resolver: AbstractResolver | None = None, **options: Any
) -> tuple[aiohttp.ClientSession, AbstractResolver | None]:
    """A new aiohttp session (the only place one is made), and the resolver the caller must close with it.

    Args:
        outbound: the policy whose learned hosts are judged at connect; ``None`` when ``resolver`` judges them
            (the fetch tools' own guard) or every URL is the user's.
        resolver: a resolver to dial through instead (its owner closes it).
        options: passed to ``aiohttp.ClientSession``; ``connector_options`` go to its ``TCPConnector``.
    """
    connector_options = options.pop("connector_options", {})
    owned: AbstractResolver | None = None
    if resolver is None and outbound is not None:
        resolver = owned = OutboundResolver(outbound)
    connector = aiohttp.TCPConnector(resolver=resolver, **connector_options)
    return aiohttp.ClientSession(connector=connector, **options), owned


# ------------------------------------------------------------------------------------------------------- httpx2


class _Backend(httpcore2.AsyncNetworkBackend):
    """Resolves a learned host itself, judges its addresses and dials the one it judged (no second lookup)."""

    def __init__(self, outbound: Outbound) -> None:
        self._outbound = outbound
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        if not self._outbound.trusted(host):
            with anyio.fail_after(timeout):
                addresses = await self._addresses(host, port)
            self._outbound.check_addresses(host, addresses)
            host = addresses[0] if addresses else host
        return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def _addresses(self, host: str, port: int) -> list[str]:
        resolver = self._outbound.resolver
        if resolver is not None:
            return [result["host"] for result in await resolver.resolve(host, port, socket.AF_UNSPEC)]
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [str(info[4][0]) for info in found]

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GateTransport(httpx2.AsyncBaseTransport):
    """Checks every request's URL, and records the URLs OAuth metadata and challenges name."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, outbound: Outbound) -> None:
        self._inner = inner
        self._outbound = outbound

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._outbound.check(URL(str(request.url)))
        response = await self._inner.handle_async_request(request)
        if response.status_code == 401:
            _learn_challenge(self._outbound, response.headers.get("www-authenticate", ""))
        elif "/.well-known/" in request.url.path and response.status_code == 200:
            body = await response.aread()
            if len(body) <= _MAX_METADATA:
                try:
                    document = json.loads(body)
                except ValueError:
                    document = None
                if isinstance(document, dict):
                    self._outbound.learn_metadata(document, URL(str(request.url)))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _learn_challenge(outbound: Outbound, challenge: str) -> None:
    for part in challenge.split(","):
        name, _, value = part.strip().partition("=")
        if name.strip().lower().endswith("resource_metadata"):
            outbound.learn(value.strip().strip('"'), "resource_metadata of the server's WWW-Authenticate challenge")


def httpx_transport(
    outbound: Outbound,
    wrap: Any = None,
    *,
    limits: httpx2.Limits | None = None,
    proxy: str | None = None,
    environment_proxies: bool = False,
) -> httpx2.AsyncBaseTransport:
    """The ``httpx2`` transport every request of ``outbound``'s owner goes through.

    Args:
        outbound: the policy.
        wrap: called with the network transport, returns the transport to put under the gate (a byte limit).
        limits: the connection pool's limits.
        proxy: the user's proxy to send through (its URL checked as given; the addresses behind it are its own).
        environment_proxies: send each request through the proxy the environment names for its host
            (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, less ``NO_PROXY``), as clients that read the environment
            themselves do, else directly through the gate; read once, when the transport is made.
    """
    limits = limits or httpx2.Limits(max_connections=100, max_keepalive_connections=20)
    network: httpx2.AsyncBaseTransport = (
        _EnvironmentProxies(outbound, limits) if environment_proxies else _network(outbound, limits, proxy)
    )
    inner = network if wrap is None else wrap(network)
    return _GateTransport(inner, outbound)


def _network(
    outbound: Outbound, limits: httpx2.Limits, proxy: str | None, pinned: Outbound | None = None
) -> httpx2.AsyncBaseTransport:
    """The network transport: directly, dialling through the gate's backend; or through ``proxy``, the user's own
    (trusted as given: ``httpx2``'s transport dials it) or, with ``pinned`` (:func:`judged_proxy`), the
    environment's, whose connections dial the address ``pinned`` judged. The pools that dial through the gate are
    built here and owned by a :class:`~kavalai.http._dialled.DialledTransport`."""
    sizes: dict[str, Any] = {
        "ssl_context": httpx2.create_ssl_context(),
        "max_connections": limits.max_connections,
        "max_keepalive_connections": limits.max_keepalive_connections,
        "keepalive_expiry": limits.keepalive_expiry,
    }
    if proxy is None:
        return DialledTransport(httpcore2.AsyncConnectionPool(network_backend=_Backend(outbound), **sizes))
    through = httpx2.Proxy(url=proxy)
    if pinned is None or through.url.scheme not in _SCHEMES:
        return httpx2.AsyncHTTPTransport(limits=limits, proxy=through)
    url = through.url
    pool = httpcore2.AsyncHTTPProxy(
        proxy_url=httpcore2.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
        proxy_auth=through.raw_auth,
        proxy_headers=through.headers.raw,
        proxy_ssl_context=through.ssl_context,
        network_backend=_Backend(pinned),  # the environment's proxy: its name resolved and judged here
        **sizes,
    )
    return DialledTransport(pool)


class _EnvironmentProxies(httpx2.AsyncBaseTransport):
    """Sends each request through the proxy the environment names for its scheme and host, ``NO_PROXY`` honoured
    (the environment read once, when made, by :func:`environment_proxies`), or directly through the gate. A proxy is
    judged by :func:`judged_proxy` before it is first used, and its connections dial the address judged."""

    def __init__(self, outbound: Outbound, limits: httpx2.Limits) -> None:
        self._outbound = outbound
        self._limits = limits
        self._proxies = environment_proxies()
        self._routes: dict[tuple[str, str], str | None] = {}
        self._transports: dict[str | None, httpx2.AsyncBaseTransport] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        key = (request.url.scheme, request.url.host)
        if key not in self._routes:
            if len(self._routes) >= _MAX_LEARNED:
                self._routes.clear()
            self._routes[key] = _proxy_for(self._proxies, *key)
        proxy = self._routes[key]
        transport = self._transports.get(proxy)
        if transport is None:
            pinned = None if proxy is None else judged_proxy(self._outbound, proxy)
            transport = self._transports[proxy] = _network(self._outbound, self._limits, proxy, pinned)
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()


def httpx_client(
    outbound: Outbound,
    wrap: Any = None,
    *,
    proxy: str | None = None,
    environment_proxies: bool = False,
    **options: Any,
) -> httpx2.AsyncClient:
    """A new ``httpx2`` client (the only place one is made) whose requests cross the gate; see
    :func:`httpx_transport` for ``proxy`` and ``environment_proxies``."""
    transport = httpx_transport(outbound, wrap, proxy=proxy, environment_proxies=environment_proxies)
    return httpx2.AsyncClient(transport=transport, **options)


def environment_proxies() -> dict[str, str]:
    """The proxies the environment names (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, either case),
    read as ``urllib`` reads them: the one place a client of kavalai reads the environment's proxy settings."""
    import urllib.request

    return dict(urllib.request.getproxies())


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, less
    ``NO_PROXY``), as clients that read the environment themselves would use: a client made here is given a
    transport, which makes ``httpx2`` read none. Every client that sends through the environment's proxy takes it
    from here (the LLM clients' transport, the OTLP session) and judges it with :func:`judged_proxy`."""
    parsed = URL(url)
    return _proxy_for(environment_proxies(), parsed.scheme, parsed.raw_host or "")


def judged_proxy(outbound: Outbound, proxy: str) -> Outbound:
    """Judge a proxy the environment names for ``outbound``'s owner, the one policy of every client that sends
    through one (the LLM clients, the OTLP exporter): a SOCKS proxy is refused (its connection dials past the
    gate, and ``socks5://`` resolves the destination's name unjudged); an HTTP proxy's URL is judged as an endpoint
    the environment names (:func:`check_endpoint`: loopback and private ranges allowed, never a link-local, metadata,
    multicast or reserved address, an odd spelling of an address refused). Its userinfo is registered with the secret
    gate first, and no refusal shows it.

    Returns:
        the policy its connections are dialled with: a name is resolved once per connection, its addresses judged
        and the address judged dialled.

    Raises:
        OutboundRefusedError: naming the owner, the proxy (without its userinfo) and ``the environment's proxy``.
    """
    from kavalai.secrets import register_url_credentials

    register_url_credentials(proxy)
    field = "the environment's proxy"
    try:
        parsed = URL(proxy if "://" in proxy else f"http://{proxy}")  # urllib's reading: a bare host:port is http
        origin = str(parsed.origin())  # "http://" (no host) parses, and has no origin
    except ValueError:
        raise OutboundRefusedError(
            f"Refused the environment's proxy for {outbound.owner}: it is not a URL.",
            server=outbound.server,
            url="",
            field=field,
        ) from None
    shown = parsed.with_user(None) if parsed.raw_user or parsed.raw_password else parsed
    if parsed.scheme.lower().startswith("socks"):
        raise OutboundRefusedError(
            f"Refused the SOCKS proxy {shown} for {outbound.owner}: the environment names it (ALL_PROXY, "
            "HTTPS_PROXY or HTTP_PROXY), and the outbound gate cannot judge the addresses a SOCKS connection "
            "dials. Name an HTTP proxy, or add the destination's host to NO_PROXY.",
            server=outbound.server,
            url=str(shown),
            field=field,
        )
    pinned = Outbound(outbound.server, allowed_networks=LOCAL_NETWORKS)
    pinned.owner = outbound.owner
    for policy in (outbound, pinned):  # a refusal at connect names the field too
        policy.learn(origin, field)
    check_endpoint(pinned, parsed if parsed.scheme in _SCHEMES else parsed.with_scheme("http"))
    return pinned


def _proxy_for(proxies: Mapping[str, str], scheme: str, host: str) -> str | None:
    import urllib.request

    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or (host and urllib.request.proxy_bypass_environment(host, dict(proxies))):  # type: ignore[attr-defined]
        return None
    if host and _in_no_proxy_networks(host, proxies.get("no", "")):
        return None
    return proxy


def _in_no_proxy_networks(host: str, no_proxy: str) -> bool:
    """Whether ``host``, an IP address, is in an address or network ``NO_PROXY`` lists (``10.0.0.0/8``, ``::1``,
    ``[fd00::]/8``), as curl and requests read it; urllib's rules, applied first, match names and name suffixes only.
    An entry's address, as the host's, is read in any spelling (``10.1``, ``0x0a000001``: 10.0.0.1;
    :func:`~kavalai.http._netguard.host_address`); IPv4-mapped IPv6 is matched by the address it embeds."""
    address = _unmapped(host_address(host.lower()))  # 10.1 and 0x0a000001 are 10.0.0.1, as curl reads the URL's host
    if address is None:
        return False
    for entry in no_proxy.split(","):
        network = _no_proxy_network(entry.strip())
        if network is not None and address.version == network.version and address in network:
            return True
    return False


def _unmapped(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> Any:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _no_proxy_network(written: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """The network a ``NO_PROXY`` entry names (an address is one of a single address), or ``None`` for a name."""
    if written.startswith("["):  # [fd00::1] or [fd00::]/8; [::1]:8080 (a port) is no network, nor is ::1:8080
        inside, bracket, prefix = written[1:].partition("]")
        if not bracket or (prefix and not prefix.startswith("/")):
            return None
        written = inside + prefix
    base, slash, prefix = written.partition("/")
    address = host_address(base.lower()) if base else None
    if address is None:
        return None  # a name (urllib's rules judged it), or nothing
    try:
        network = ipaddress.ip_network(f"{address}/{prefix}" if slash else str(address), strict=False)
        if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96 and _unmapped(address) != address:
            # ::ffff:10.0.0.0/104 is 10.0.0.0/8: the host is compared by the IPv4 address it embeds
            return ipaddress.ip_network(f"{_unmapped(address)}/{network.prefixlen - 96}", strict=False)
        return network
    except ValueError:
        return None  # 10.0.0.0/33


# ------------------------------------------------------------------------- endpoints named by the environment

#: Where a collector or model server the environment names may be: loopback and private ranges, never a link-local,
#: metadata, multicast or reserved address.
LOCAL_NETWORKS: Final = tuple(
    ipaddress.ip_network(net)
    for net in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "::1/128", "fc00::/7")
)


def check_endpoint(outbound: Outbound, url: URL) -> None:
    """Judge an endpoint the environment names (``OTEL_EXPORTER_OTLP_ENDPOINT``): http/https only, and a literal
    address by the rules (with ``outbound``'s allowed networks); a host name is judged by its addresses at connect.

    Raises:
        OutboundRefusedError: naming the owner and the variable the URL came from.
    """
    host = (url.raw_host or "").lower()
    if url.scheme not in _SCHEMES or not host or host_address(host) is not None:
        # An address in any spelling getaddrinfo takes (``0xa9fea9fe``, ``2852039166``): judged now, as the rules
        # judge it (an odd spelling refused outright), never waved through as a name.
        outbound.check(url)


def requests_session(outbound: Outbound) -> Any:
    """A new ``requests`` session (the OTLP/HTTP exporter's; the only place one is made) whose every request,
    redirects included, is judged by :func:`check_endpoint`, and whose connections to a learned host name resolve it
    once, judge its addresses and dial the address judged (no second lookup between the check and the connect).

    Through a proxy the environment names (``HTTPS_PROXY``, ``HTTP_PROXY``, less ``NO_PROXY``, read by ``requests``),
    the proxy is what is dialled: its URL is judged as the endpoint's is and its name pinned the same way; the
    endpoint's literal address is still judged before sending, but a name is resolved by the proxy, not here."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def pinned(connection: Any, connect: Any) -> Any:
        host = connection._dns_host  # the name urllib3 would resolve at connect
        if outbound.trusted(host):
            return connect()
        found = socket.getaddrinfo(host.strip("[]"), connection.port, type=socket.SOCK_STREAM)
        addresses = [str(info[4][0]) for info in found]
        outbound.check_addresses(host, addresses)
        connection._dns_host = addresses[0]  # TLS still verifies (and SNI names) connection.host
        try:
            return connect()
        finally:
            connection._dns_host = host

    class _Connection(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return pinned(self, super()._new_conn)  # type: ignore[no-any-return]

    class _TLSConnection(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return pinned(self, super()._new_conn)  # type: ignore[no-any-return]

    class _Pool(HTTPConnectionPool):
        ConnectionCls = _Connection

    class _TLSPool(HTTPSConnectionPool):
        ConnectionCls = _TLSConnection

    class _GateAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}

        def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
            # A proxy the environment names (HTTPS_PROXY, ...) is judged by the one policy (judged_proxy: SOCKS
            # refused, a literal address by the rules) and its name pinned at connect as the endpoint's is. The
            # collector's own name is then resolved by the proxy, past the gate (documented).
            judged_proxy(outbound, proxy)
            manager = super().proxy_manager_for(proxy, **proxy_kwargs)
            manager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}
            return manager

        def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            check_endpoint(outbound, URL(str(request.url)))
            # The proxy the gate's reading of the environment names (NO_PROXY's addresses and IPv6 networks as the
            # LLM clients read them), not requests' own (IPv4 networks only): one reading for every client.
            proxy = environment_proxy(str(request.url))
            kwargs["proxies"] = {} if proxy is None else {URL(str(request.url)).scheme: proxy}
            try:
                return super().send(request, *args, **kwargs)
            except requests.ConnectionError as exc:  # a refusal at connect, wrapped by urllib3 and requests
                refusal = _refusal_in(exc)
                if refusal is None:
                    raise
                raise refusal from None

    session = requests.Session()
    session.mount("http://", _GateAdapter())
    session.mount("https://", _GateAdapter())
    return session


def _refusal_in(exc: BaseException, depth: int = 6) -> OutboundRefusedError | None:
    """The gate's refusal that ``exc`` wraps in its arguments or its ``reason`` (as urllib3 and requests wrap an
    ``OSError``: a proxy's in ``ProxyError(MaxRetryError(reason=ProxyError(..., refusal)))``)."""
    if isinstance(exc, OutboundRefusedError):
        return exc
    if depth:
        for inner in (*exc.args, getattr(exc, "reason", None)):
            if isinstance(inner, BaseException) and (found := _refusal_in(inner, depth - 1)) is not None:
                return found
    return None
