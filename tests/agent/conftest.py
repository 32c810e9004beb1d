"""Real kernel tools for the agent tests."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from kavalai import FunctionKernel, pythontool


class Forecast(BaseModel):
    """A weather forecast."""

    city: str
    celsius: int
    sky: str


class ToolBox:
    """Python tools with observable side effects, registered on a real kernel."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.left_ready = anyio.Event()
        self.right_ready = anyio.Event()

    def register(self, kernel: FunctionKernel) -> None:
        @pythontool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @pythontool
        async def forecast(city: str) -> Forecast:
            """The forecast for a city."""
            return Forecast(city=city, celsius=21, sky="clear")

        @pythontool
        def explode(reason: str) -> str:
            """Always fails."""
            raise RuntimeError(f"boom: {reason}")

        @pythontool
        def verbose() -> str:
            """Fails with a very long message."""
            raise RuntimeError("x" * 10_000)

        @pythontool(timeout=0.05)
        async def stall() -> str:
            """Never finishes in time."""
            await anyio.sleep_forever()
            return "never"

        @pythontool
        def delete(path: str) -> str:
            """Delete a file (recorded, not real)."""
            self.deleted.append(path)
            return f"deleted {path}"

        # Each waits for the other: both finish only if they run at the same time.
        @pythontool
        async def left() -> str:
            """Meets right."""
            self.left_ready.set()
            with anyio.fail_after(5):
                await self.right_ready.wait()
            return "left met right"

        @pythontool
        async def right() -> str:
            """Meets left."""
            self.right_ready.set()
            with anyio.fail_after(5):
                await self.left_ready.wait()
            return "right met left"

        kernel.register_python_tool("math.add", add)
        kernel.register_python_tool("weather.forecast", forecast)
        kernel.register_python_tool("fail.explode", explode)
        kernel.register_python_tool("fail.stall", stall)
        kernel.register_python_tool("fail.verbose", verbose)
        kernel.register_python_tool("fs.delete", delete)
        kernel.register_python_tool("meet.left", left)
        kernel.register_python_tool("meet.right", right)


@pytest.fixture
def toolbox(kernel: FunctionKernel) -> ToolBox:
    """The tools, registered on the shared ``kernel`` fixture."""
    box = ToolBox()
    box.register(kernel)
    return box
