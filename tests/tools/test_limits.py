"""The bundled tool groups' limits under the one rule of ``kavalai.kernel.limit_seconds`` (issue 36): a group's
``default_timeout`` (a value that is no limit refused with ``ValueError``, one above 600 s clamped to 600) and the
guarded client's ``timeout``."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from tests.tools.conftest import LocalServer

from kavalai import FunctionKernel
from kavalai.kernel import MAX_SECONDS
from kavalai.tools import http, web
from kavalai.tools._kaval_fetch import fetch
from kavalai.tools._register import MAX_TOOL_TIMEOUT

_BAD = (math.nan, -1, -math.inf, 0, "5", True)


@pytest.mark.parametrize("group", [http, web])
@pytest.mark.parametrize("value", [*_BAD, None])  # None too: a tool's timeout argument needs a default (was 600 s)
def test_a_groups_default_timeout_that_is_no_limit_is_a_value_error_naming_it(group: Any, value: Any) -> None:
    kernel = FunctionKernel()
    with pytest.raises(
        ValueError, match=rf"default_timeout of the \w+ tools must be positive.*got {re.escape(repr(value))}"
    ):
        group.register(kernel, default_timeout=value)
    assert kernel.list_tools() == []


@pytest.mark.parametrize("group", [http, web])
@pytest.mark.parametrize("value", [math.inf, 1e308, 10**400, 601, 600.5])
def test_a_groups_default_timeout_above_600_seconds_is_clamped_to_600(group: Any, value: Any) -> None:
    kernel = FunctionKernel()
    [uri] = group.register(kernel, default_timeout=value)
    assert kernel.get_tool_definition(uri).input_model.model_fields["timeout"].default == MAX_TOOL_TIMEOUT == 600


async def test_a_clamped_default_timeout_is_the_one_a_call_runs_under(server: LocalServer) -> None:
    kernel = FunctionKernel()
    [uri] = http.register(kernel, allow_private_networks=True, default_timeout=math.inf)
    try:
        response = await kernel.call_tool(uri, {"url": server.url("/json")})  # was refused at registration
        assert response.status == 200
    finally:
        await kernel.close()


async def test_the_guarded_clients_timeout_follows_the_one_rule(server: LocalServer) -> None:
    for bad in _BAD:
        with pytest.raises(ValueError, match="timeout must be positive"):
            await fetch("GET", server.url("/"), allow_private_networks=True, timeout=bad)  # type: ignore[arg-type]
    for huge in (math.inf, 1e308, 10**400):  # a year: the request is sent and answered (was an OverflowError)
        assert huge >= MAX_SECONDS
        fetched = await fetch("GET", server.url("/json"), allow_private_networks=True, timeout=huge)
        assert fetched.status == 200
