"""The demo's ``python://`` section: a sync, an async and a model-returning tool, coercion and a caught error."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from kavalai import FunctionKernel
from kavalai.adapters.python import pythontool
from kavalai.cli._console import DemoConsole
from kavalai.errors import ToolInputError

__all__ = ["python_section"]


class Forecast(BaseModel):
    """A weather forecast."""

    city: str
    celsius: float = Field(description="Temperature in degrees Celsius.")
    summary: str


@pythontool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@pythontool
async def slow_echo(text: str, delay: float = 0.01) -> str:
    """Echo the text back after a short pause (an async tool).

    Args:
        text: What to echo.
        delay: Seconds to wait first.
    """
    await asyncio.sleep(delay)
    return text


@pythontool
def forecast(city: str) -> Forecast:
    """Look up today's forecast for a city (made up, offline).

    Args:
        city: The city name.
    """
    return Forecast(city=city, celsius=len(city) * 2.5, summary="sunny spells")


@pythontool
def percent(part: float, whole: float) -> int:
    """Return part/whole as a whole percentage; deliberately returns a string to show coercion.

    Args:
        part: The part.
        whole: The whole.
    """
    return str(round(100 * part / whole))  # type: ignore[return-value]  # the kernel coerces "50" -> 50


async def python_section(kernel: FunctionKernel, out: DemoConsole) -> None:
    """Register the demo's Python tools, describe them, call them and show a validation error."""
    out.heading("python:// tools")
    kernel.register_python_tool("math.add", add)
    kernel.register_python_tool("text.echo", slow_echo)
    kernel.register_python_tool("weather.forecast", forecast)
    kernel.register_python_tool("math.percent", percent)
    for description in await kernel.get_tool_descriptions(["python://*"]):
        params = ", ".join(description["inputSchema"].get("properties", {}))
        out.line(f"{description['name']}({params}): {description['description'].splitlines()[0]}")
    out.line()
    out.show("math.add(2, '40')", await kernel.call_tool("python://math.add", {"a": 2, "b": "40"}))
    out.show("text.echo (async)", await kernel.call_tool("python://text.echo", {"text": "hello"}))
    out.show("weather.forecast", await kernel.call_tool("python://weather.forecast", {"city": "Lisbon"}))
    # call_tool_as: the wrapped result, typed as int for a type checker (and checked to be one).
    coerced = await kernel.call_tool_as(int, "python://math.percent", {"part": 1, "whole": 2})
    out.show("math.percent returned '50', coerced to", f"{coerced!r} ({type(coerced).__name__})")
    try:
        await kernel.call_tool("python://math.add", {"a": "two", "c": 3})
    except ToolInputError as exc:
        out.line(f"caught {type(exc).__name__}: {exc}")
