"""The bundled ``http`` tool group: ``http.request``, guarded against SSRF by default.

Register it explicitly::

    from kavalai.tools import http
    http.register(kernel)                      # -> ["python://http.request"]

Only public addresses are reached unless the group is registered with ``allow_private_networks=True``; see
:mod:`kavalai.http._netguard` for what the guard refuses and ``docs/bundled_tools.md`` for the limits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Literal

from aiohttp.abc import AbstractResolver
from pydantic import BaseModel, Field, JsonValue

from kavalai.adapters.python import pythontool
from kavalai.tools._fetch import DEFAULT_USER_AGENT, open_client, parse_url
from kavalai.tools._register import default_timeout_of, register_all

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = ["HttpResponse", "register"]

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
QueryScalar = str | int | float | bool
QueryValue = QueryScalar | list[QueryScalar]


class HttpResponse(BaseModel):
    """The response to ``http.request``. A 4xx or 5xx status is a normal response, not an error."""

    status: int = Field(description="The HTTP status code, e.g. 200 or 404.")
    reason: str = Field(description="The status reason phrase, e.g. 'OK' or 'Not Found'.")
    url: str = Field(description="The final URL, after any redirects.")
    headers: dict[str, str] = Field(
        description="Response headers, names in lower case; repeated headers are joined with ', '."
    )
    text: str = Field(description="The body decoded as text (its declared charset, else UTF-8).")
    json_data: JsonValue = Field(default=None, description="The body parsed as JSON when it is JSON, otherwise null.")
    redirects: list[str] = Field(default_factory=list, description="The URLs redirected to, in order.")


def register(
    kernel: FunctionKernel,
    *,
    prefix: str = "http",
    allow_private_networks: bool = False,
    allowed_networks: Iterable[str] = (),
    resolver: AbstractResolver | None = None,
    max_redirects: int = 5,
    max_response_bytes: int = 2 * 1024 * 1024,
    default_timeout: float = 30.0,
    user_agent: str = DEFAULT_USER_AGENT,
) -> list[str]:
    """Register ``python://<prefix>.request`` on ``kernel`` and return its URI in a list.

    Args:
        kernel: the kernel to register on; its ``close()`` closes the group's pooled HTTP session.
        prefix: the tool-name prefix.
        allow_private_networks: lift the SSRF guard so loopback and private addresses can be reached.
        allowed_networks: networks (``"10.1.0.0/16"``) reachable despite the guard.
        resolver: the aiohttp DNS resolver to dial through (the guard still judges its answers).
        max_redirects: redirects followed per request.
        max_response_bytes: the largest response body accepted.
        default_timeout: the default of the tool's ``timeout`` argument, in seconds (at most 600: more is clamped).
        user_agent: the ``User-Agent`` header sent unless the caller sets one.

    Raises:
        ConfigurationError: an ``allowed_networks`` entry that is not a network, or a size limit not above 0.
        ValueError: ``default_timeout`` is not a positive number of seconds, ``None`` included (one above 600 is
            clamped to 600).
        ToolRegistrationError: the tool's name is taken (use another ``prefix``).
    """
    default_timeout = default_timeout_of(default_timeout, group=prefix)
    client = open_client(
        prefix,
        allow_private_networks=allow_private_networks,
        allowed_networks=allowed_networks,
        resolver=resolver,
        max_redirects=max_redirects,
        max_response_bytes=max_response_bytes,
        user_agent=user_agent,
    )

    @pythontool
    async def request(
        url: Annotated[str, Field(description="The absolute http:// or https:// URL to request.")],
        method: Annotated[Method, Field(description="The HTTP method.")] = "GET",
        query: Annotated[dict[str, QueryValue] | None, Field(description="Query parameters added to the URL.")] = None,
        headers: Annotated[dict[str, str] | None, Field(description="Request headers.")] = None,
        json: Annotated[JsonValue, Field(description="A JSON request body (not with `body`).")] = None,
        body: Annotated[str | None, Field(description="A text request body (not with `json`).")] = None,
        timeout: Annotated[
            float, Field(gt=0, le=600, description="Seconds for the whole exchange, redirects included.")
        ] = default_timeout,
    ) -> HttpResponse:
        """Send an HTTP request and return the status, headers, text and parsed JSON of the response.

        A 4xx or 5xx status is returned, not raised; only a failure to get a response (refused address,
        connection error, timeout, oversized body) is an error. Private and local addresses are refused.
        """
        target = parse_url(url)
        if query:
            target = target.extend_query(_query_pairs(query))
        fetched = await client.request(method, target, headers=headers, json=json, body=body, timeout=timeout)
        return HttpResponse(
            status=fetched.status,
            reason=fetched.reason,
            url=fetched.url,
            headers=fetched.headers,
            text=fetched.text(),
            json_data=fetched.json(),
            redirects=fetched.redirects,
        )

    uris = register_all(kernel, prefix, {"request": request})
    kernel.on_close(client.aclose)  # the pooled session opens on first use; close() closes it
    return uris


def _query_pairs(query: dict[str, QueryValue]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for key, value in query.items():
        for item in value if isinstance(value, list) else [value]:
            pairs.append((key, _query_text(item)))
    return pairs


def _query_text(value: QueryScalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
