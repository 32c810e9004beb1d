"""Fixtures shared by the whole suite.

``KAVALAI_TEST_LOOP=uvloop`` runs every asyncio test on uvloop's event loop instead of asyncio's (the loop
``kavalai serve --loop uvloop`` serves on; it needs the ``kavalai[fast]`` extra and pytest-asyncio 1.4 or later).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from kavalai import FunctionKernel

# One example database per Python: CI runs the suite on 3.11 and 3.13 at the same time in one working tree, and an
# example saved under one interpreter replayed under the other made Hypothesis report a flaky strategy.
settings.register_profile(
    "kavalai", database=DirectoryBasedExampleDatabase(f".hypothesis/examples-{sys.implementation.cache_tag}")
)
settings.load_profile("kavalai")


@pytest.fixture
async def kernel() -> AsyncIterator[FunctionKernel]:
    """A fresh kernel, closed after the test."""
    k = FunctionKernel()
    try:
        yield k
    finally:
        await k.close()


if os.environ.get("KAVALAI_TEST_LOOP") == "uvloop":

    def pytest_asyncio_loop_factories(
        config: pytest.Config, item: Any
    ) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
        """Every asyncio test on uvloop's loop (pytest-asyncio's hook; defined only when asked for)."""
        import uvloop

        return {"uvloop": uvloop.new_event_loop}


@pytest.fixture(autouse=True, scope="module")
def _no_dbos_runner_left_started() -> Iterator[None]:
    """Fail the module that leaves a DBOS runner started, where it happens. DBOS runs one engine per process: a
    runner left open fails every later DBOS test ("another DbosRunner is started here"), and its queue thread draws
    from the global ``random`` module, which Hypothesis reports in unrelated tests as a strategy using ``random``."""
    yield
    dbos_module = sys.modules.get("kavalai.durable.dbos")
    left = getattr(dbos_module, "_active", None)
    assert left is None, f"this module left a DbosRunner started ({left!r}): close it (await runner.close())"
