"""Kaval.AI 1.0's ``http_request`` tool, on kavalai's SSRF-guarded HTTP layer.

``kernel.register_python_tool("http_request", http_request)``. Private and local addresses are refused; build a
tool that may reach them with ``make_http_request(allow_private_networks=True)``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import BaseModel

from kavalai.adapters.python import pythontool
from kavalai.tools._kaval_fetch import fetch

__all__ = ["HttpResponse", "http_request", "make_http_request"]


class HttpResponse(BaseModel):
    """A response, as Kaval.AI 1.0 described it: a 4xx or 5xx status is a response, not an error."""

    status_code: int
    headers: dict[str, str]
    text: str
    json_data: dict[str, Any] | list[Any] | None = None


def make_http_request(*, allow_private_networks: bool = False) -> Callable[..., Coroutine[Any, Any, HttpResponse]]:
    """An ``http_request`` tool; ``allow_private_networks=True`` lifts the SSRF guard (trusted callers only)."""

    @pythontool
    async def http_request(
        method: str,
        url: str,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        json_body: dict[str, Any] | list[Any] | None = None,
        data_body: str | None = None,
        auth_user: str | None = None,
        auth_password: str | None = None,
        timeout: float = 30.0,
        use_proxy: bool = False,
    ) -> HttpResponse:
        """Send an HTTP request and return its status code, headers, text and parsed JSON.

        Args:
            method: GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS.
            url: the absolute http(s) URL.
            params: query parameters.
            headers: request headers.
            json_body: a JSON body (not with data_body).
            data_body: a text body (not with json_body).
            auth_user: a Basic auth user (with auth_password).
            auth_password: the Basic auth password.
            timeout: seconds for the whole exchange.
            use_proxy: Kaval.AI's TOR proxy; not supported here (refused when true).
        """
        if use_proxy:
            raise ValueError("use_proxy is not supported by kavalai's http_request")
        sent = dict(headers or {})
        if auth_user is not None and auth_password is not None:
            token = base64.b64encode(f"{auth_user}:{auth_password}".encode()).decode("ascii")
            sent["Authorization"] = f"Basic {token}"
        target = url
        if params:
            from yarl import URL

            target = str(URL(url).update_query({k: str(v) for k, v in params.items()}))
        fetched = await fetch(
            method.upper(),
            target,
            allow_private_networks=allow_private_networks,
            timeout=timeout,
            headers=sent,
            json=json_body,
            body=data_body,
        )
        parsed = fetched.json()
        return HttpResponse(
            status_code=fetched.status,
            headers=fetched.headers,
            text=fetched.text(),
            json_data=parsed if isinstance(parsed, dict | list) else None,
        )

    return http_request


http_request = make_http_request()
