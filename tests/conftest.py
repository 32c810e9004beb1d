"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kavalai import FunctionKernel


@pytest.fixture
async def kernel() -> AsyncIterator[FunctionKernel]:
    """A fresh kernel, closed after the test."""
    k = FunctionKernel()
    try:
        yield k
    finally:
        await k.close()
