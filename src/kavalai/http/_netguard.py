"""The SSRF guard of the bundled HTTP tools: which hosts and addresses a request may reach.

Two checks share one address policy (:func:`refusal_reason`):

- :func:`check_url` runs before anything is sent. It refuses non-HTTP schemes, local-only host names
  (``localhost``, ``*.internal``, ...) and IP literals in every spelling a resolver would accept: canonical
  addresses are judged by the policy, while odd IPv4 spellings (``2130706433``, ``0x7f.1``, ``0177.0.0.1``,
  ``127.1``) are refused outright, whatever they decode to.
- :class:`GuardedResolver` wraps the DNS resolver the HTTP client dials through, so the addresses a host name
  resolves to are judged at the moment of connecting. aiohttp dials exactly what the resolver returns, which is
  why DNS rebinding cannot get around it. A name that resolves to any refused address is refused as a whole.

Only public unicast addresses pass. Refused: unspecified, loopback, private (RFC 1918, unique-local), shared/CGNAT
``100.64.0.0/10``, link-local (and with it ``169.254.169.254``), cloud metadata addresses, multicast, broadcast,
documentation, benchmarking and reserved ranges; IPv4-mapped, NAT64 (``64:ff9b::/96``) and 6to4 (``2002::/16``)
IPv6 addresses are judged by the IPv4 address they embed; Teredo and IPv4-compatible IPv6 are refused.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from typing import Final

from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

__all__ = [
    "GuardedResolver",
    "IPAddress",
    "IPNetwork",
    "check_url",
    "host_address",
    "host_refusal_reason",
    "parse_networks",
    "refusal_reason",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_ALLOWED_SCHEMES: Final = frozenset({"http", "https"})
_LOCAL_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "metadata", "instance-data"})
_LOCAL_SUFFIXES: Final = (".localhost", ".local", ".internal", ".home.arpa")
_DECIMAL_DIGITS: Final = frozenset("0123456789")
_OCTAL_DIGITS: Final = frozenset("01234567")
_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def _table(*rows: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(net), reason) for net, reason in rows)


# First match wins, so specific entries (metadata) come before the ranges that contain them.
_V4_REFUSED: Final = _table(
    ("169.254.169.254/32", "a cloud metadata address"),
    ("168.63.129.16/32", "a cloud metadata address (Azure)"),
    ("100.100.100.200/32", "a cloud metadata address (Alibaba)"),
    ("192.0.0.192/32", "a cloud metadata address (Oracle)"),
    ("0.0.0.0/8", "an unspecified ('this network') address"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "an IETF protocol-assignment address"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a 6to4 relay address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("255.255.255.255/32", "the broadcast address"),
    ("240.0.0.0/4", "a reserved address"),
)
_V6_REFUSED: Final = _table(
    ("fd00:ec2::254/128", "a cloud metadata address (AWS)"),
    ("::/128", "the unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "an IPv4-compatible IPv6 address (deprecated)"),
    ("64:ff9b:1::/48", "a local-use NAT64 address"),
    ("100::/64", "a discard-only address"),
    ("2001::/32", "a Teredo tunnel address"),
    ("2001:db8::/32", "a documentation address"),
    ("fc00::/7", "a unique-local (private) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address (deprecated)"),
    ("ff00::/8", "a multicast address"),
    ("::/8", "a reserved address"),
)
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


def refusal_reason(address: IPAddress, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why the guard refuses ``address``, or ``None`` when it may be dialled.

    Args:
        address: the address to judge.
        allowed: networks let through despite the policy (the group's ``allowed_networks``).
    """
    if any(address.version == net.version and address in net for net in allowed):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        embedded, kind = _embedded_ipv4(address)
        if embedded is not None:
            inner = refusal_reason(embedded, allowed)
            return None if inner is None else f"{kind} of {embedded}, {inner}"
        table: tuple[tuple[IPNetwork, str], ...] = _V6_REFUSED
    else:
        table = _V4_REFUSED
    for network, reason in table:
        if address.version == network.version and address in network:
            return reason
    return None if address.is_global else "not a public address"


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address | None, str]:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "an IPv4-mapped IPv6 address"
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "a NAT64 address"
    if address.sixtofour is not None:
        return address.sixtofour, "a 6to4 address"
    return None, ""


def parse_networks(networks: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Parse ``allowed_networks`` entries (``"10.1.0.0/16"``, ``"127.0.0.1"``); raises ``ValueError`` on a bad one."""
    parsed: list[IPNetwork] = []
    for entry in networks:
        try:
            parsed.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ValueError(f"allowed_networks entry {entry!r} is not an IP network: {exc}") from exc
    return tuple(parsed)


def check_url(url: URL, allowed: Sequence[IPNetwork] = ()) -> None:
    """Refuse ``url`` before connecting if its scheme, host name or literal address is not allowed.

    Raises:
        PermissionError: with a message that names the URL, what was refused and why.
    """
    shown = without_userinfo(url)  # the URL's password is never shown
    if url.scheme not in _ALLOWED_SCHEMES:
        raise PermissionError(f"Refused {shown}: only http:// and https:// URLs may be fetched.")
    host = (url.raw_host or "").lower()
    if not host:
        raise PermissionError(f"Refused {shown}: the URL has no host.")
    reason = host_refusal_reason(host, allowed)
    if reason is not None:
        raise PermissionError(f"Refused {shown}: host {host!r} is {reason}.")


def without_userinfo(url: URL) -> URL:
    """``url`` as a refusal names it: without its userinfo (the password a URL carries is never shown)."""
    return url.with_user(None) if url.raw_user or url.raw_password else url


_USERINFO: Final = re.compile(r"(//)[^/?#@]*@")


def shown_url(text: str) -> str:
    """A URL given as text, as an error quotes it: without its userinfo, even when it cannot be parsed."""
    return _USERINFO.sub(r"\1", text)


def host_refusal_reason(host: str, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why the guard refuses ``host`` (a name or literal, lower case) before any lookup, or ``None``."""
    bare = host.rstrip(".")
    if ":" in bare:
        try:
            address: IPAddress = ipaddress.IPv6Address(bare.split("%", 1)[0])
        except ValueError:
            return "not a valid IPv6 address"
        return refusal_reason(address, allowed)
    if "%" in bare:
        return "percent-encoded, which a host name may not be"
    loose = _loose_ipv4(bare)
    if loose is not None:
        if bare != str(loose) or host != bare:
            inner = refusal_reason(loose, allowed)
            meaning = f"{loose}, {inner}" if inner else str(loose)
            return f"an unusual spelling of an IPv4 address (it means {meaning}); write it as {loose}"
        return refusal_reason(loose, allowed)
    if bare in _LOCAL_NAMES or bare.endswith(_LOCAL_SUFFIXES):
        return "a local-only host name"
    return None


def host_address(host: str) -> IPAddress | None:
    """The address ``host`` (a URL's host, lower case) means, read as ``getaddrinfo`` and curl read it, or ``None``
    for a name: an IPv6 literal (brackets and a zone dropped), or IPv4 in any spelling ``inet_aton`` takes (``10.1``,
    ``0x0a000001``, ``2130706433``, ``0177.0.0.1`` are ``10.0.0.1``, ``10.0.0.1``, ``127.0.0.1``, ``127.0.0.1``).

    Every comparison of a host with an address or a network (the trusted hosts, ``NO_PROXY``, an endpoint's literal
    address) reads the host through this one function, so no spelling is compared as a name.
    """
    bare = host.strip("[]").rstrip(".")
    if ":" in bare:
        try:
            return ipaddress.IPv6Address(bare.split("%", 1)[0])
        except ValueError:
            return None
    return _loose_ipv4(bare) if bare[:1].isdigit() else None


def _loose_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Decode ``host`` the way ``inet_aton`` does (1-4 parts, each decimal, 0x-hex or 0-octal), else ``None``."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        number = _inet_aton_part(part)
        if number is None:
            return None
        numbers.append(number)
    *head, last = numbers
    if any(n > 0xFF for n in head) or last >= 1 << (8 * (5 - len(numbers))):
        return None
    value = last
    for index, number in enumerate(head):
        value |= number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _inet_aton_part(part: str) -> int | None:
    # Checked digit by digit: int() would also take signs, spaces and underscores, which inet_aton does not.
    if part[:2] in ("0x", "0X"):
        digits, base, allowed = part[2:], 16, _HEX_DIGITS
    elif len(part) > 1 and part.startswith("0"):
        digits, base, allowed = part[1:], 8, _OCTAL_DIGITS
    else:
        digits, base, allowed = part, 10, _DECIMAL_DIGITS
    if not digits or not allowed.issuperset(digits):
        return None
    return int(digits, base)


class GuardedResolver(AbstractResolver):
    """Resolves through ``inner`` and refuses a host name whose addresses the guard does not allow.

    Every resolution is judged, and the client dials only what this returns, so a name that changes its answer
    between lookups (DNS rebinding) is judged again each time.
    """

    def __init__(self, inner: AbstractResolver, allowed: Sequence[IPNetwork] = (), *, owns_inner: bool) -> None:
        self._inner = inner
        self._allowed = tuple(allowed)
        self._owns_inner = owns_inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host`` and return its addresses, or raise ``PermissionError`` if any one is refused."""
        reason = host_refusal_reason(host.lower(), self._allowed)
        if reason is not None:
            raise PermissionError(f"host {host!r} is {reason}")
        results = await self._inner.resolve(host, port, family)
        refused = [
            f"{result['host']} ({why})"
            for result in results
            if (why := _result_refusal(result["host"], self._allowed)) is not None
        ]
        if refused:
            raise PermissionError(f"host {host!r} resolves to refused addresses: {', '.join(refused)}")
        return results

    async def close(self) -> None:
        """Close the wrapped resolver when this guard created it."""
        if self._owns_inner:
            await self._inner.close()


def _result_refusal(host: str, allowed: Sequence[IPNetwork]) -> str | None:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    return refusal_reason(address, allowed)
