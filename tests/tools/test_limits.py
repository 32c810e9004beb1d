"""The bundled tool groups' limits under the one rule of ``kavalai.kernel.limit_seconds`` (issue 36): a group's
``default_timeout`` and the guarded client's ``timeout``."""

from __future__ import annotations

import math
from typing import Any

import pytest
from tests.tools.conftest import LocalServer

from kavalai import FunctionKernel
from kavalai.errors import ConfigurationError
from kavalai.kernel import MAX_SECONDS
from kavalai.tools import http, web
from kavalai.tools._kaval_fetch import fetch

_BAD = (math.nan, -1, -math.inf, 0, "5", True)


@pytest.mark.parametrize("group", [http, web])
@pytest.mark.parametrize("value", [*_BAD, math.inf, 1e308, 10**400, 601])
def test_a_groups_default_timeout_outside_its_range_is_a_configuration_error(group: Any, value: Any) -> None:
    kernel = FunctionKernel()
    with pytest.raises(ConfigurationError, match="default_timeout must be above 0 and at most 600 seconds"):
        group.register(kernel, default_timeout=value)
    assert kernel.list_tools() == []


async def test_the_guarded_clients_timeout_follows_the_one_rule(server: LocalServer) -> None:
    for bad in _BAD:
        with pytest.raises(ValueError, match="timeout must be positive"):
            await fetch("GET", server.url("/"), allow_private_networks=True, timeout=bad)  # type: ignore[arg-type]
    for huge in (math.inf, 1e308, 10**400):  # a year: the request is sent and answered (was an OverflowError)
        assert huge >= MAX_SECONDS
        fetched = await fetch("GET", server.url("/json"), allow_private_networks=True, timeout=huge)
        assert fetched.status == 200
