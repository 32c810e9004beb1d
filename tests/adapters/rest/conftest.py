"""Fixtures of the ``rest://`` tests: the test shop served by uvicorn, and a kernel that knows it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.servers.rest_app import create_app
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, RestServer


@pytest.fixture(scope="module")
def shop_url() -> Iterator[str]:
    """The base URL of a fresh test shop, shared by one test module."""
    with serve(create_app()) as url:
        yield url


@pytest.fixture
def shop(kernel: FunctionKernel, shop_url: str) -> FunctionKernel:
    """A kernel with the test shop registered as REST server ``shop`` (no tools yet)."""
    kernel.register_rest_server(RestServer(name="shop", url=shop_url))
    return kernel
