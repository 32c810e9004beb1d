"""The HTTP plumbing shared by the REST adapter and the bundled web tools.

- :class:`LoopSession`: one pooled aiohttp session per event loop, opened on first use, closed by ``aclose()`` or
  by the loop's shutdown.
- :func:`origin_guard`: a client middleware (a session's or a request's) that judges every hop, redirects included:
  it keeps credential headers at their origin and can refuse a hop (the outbound gate's check for a REST server,
  the web tools' SSRF guard).
- :class:`Outbound` (the outbound gate, :mod:`kavalai.http._outbound`): every HTTP client is made by
  :func:`aiohttp_session`, :func:`httpx_client`, :func:`httpx_transport` or :func:`requests_session` (the LLM
  SDKs' clients and the OTLP exporter's session too), and every URL a server gave is judged by the address rules of
  :mod:`kavalai.http._netguard` before it is sent and again at connect.
- :func:`read_limited`: a body read in chunks and refused as soon as it passes a byte limit, counted after
  decompression.

aiohttp is used directly (not httpx): it is several times faster on the small requests tools make. Its errors are
mapped to kavalai's by each caller, in one table per protocol (REST: ``kavalai.adapters.rest``; the web tools map
them to the built-in exceptions a model reads).
"""

from kavalai.http._body import BodyTooLargeError, read_limited
from kavalai.http._guard import CREDENTIAL_HEADERS, HopCheck, HopRefusedError, origin_guard
from kavalai.http._netguard import GuardedResolver, IPNetwork, check_url, parse_networks, shown_url
from kavalai.http._outbound import (
    LOCAL_NETWORKS,
    Outbound,
    aiohttp_session,
    check_endpoint,
    environment_proxies,
    environment_proxy,
    httpx_client,
    httpx_transport,
    judged_proxy,
    requests_session,
)
from kavalai.http._pool import LoopSession, SessionFactory

__all__ = [
    "CREDENTIAL_HEADERS",
    "LOCAL_NETWORKS",
    "BodyTooLargeError",
    "GuardedResolver",
    "HopCheck",
    "HopRefusedError",
    "IPNetwork",
    "LoopSession",
    "Outbound",
    "SessionFactory",
    "aiohttp_session",
    "check_endpoint",
    "check_url",
    "environment_proxies",
    "environment_proxy",
    "httpx_client",
    "httpx_transport",
    "judged_proxy",
    "origin_guard",
    "parse_networks",
    "read_limited",
    "requests_session",
    "shown_url",
]
