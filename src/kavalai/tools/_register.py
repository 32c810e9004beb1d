"""What every bundled group's ``register`` shares: checking its limits and registering its tools all or none."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kavalai.errors import ConfigurationError, ToolRegistrationError
from kavalai.kernel import limit_seconds

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = ["check_limits", "register_all"]


def check_limits(group: str, *, timeout: float | None = None, **limits: int) -> None:
    """Refuse a limit that is not above zero, or a default timeout outside ``(0, 600]`` seconds (or not a number:
    the one rule of ``kavalai.kernel.limit_seconds`` first, so ``math.inf`` is refused as more than 600).

    Raises:
        ConfigurationError: naming the group, the setting and the value given.
    """
    for name, value in limits.items():
        if value <= 0:
            raise ConfigurationError(f"Cannot register the {group} tools: {name} must be above 0, got {value!r}.")
    try:
        seconds = limit_seconds(timeout, what="default_timeout")  # the one rule first: "5", nan, True refused
    except ValueError:
        seconds = math.nan
    if seconds is not None and not 0 < seconds <= 600:
        raise ConfigurationError(
            f"Cannot register the {group} tools: default_timeout must be above 0 and at most 600 seconds, "
            f"got {timeout!r}."
        )


def register_all(kernel: FunctionKernel, prefix: str, tools: Mapping[str, Callable[..., Any]]) -> list[str]:
    """Register ``tools`` as ``python://<prefix>.<name>`` and return their URIs; if any name is taken, none.

    Raises:
        ToolRegistrationError: a tool is already registered under one of the names (the message suggests
            another ``prefix=``), or the kernel refuses a name.
    """
    names = {f"{prefix}.{name}": func for name, func in tools.items()}
    taken = [f"python://{name}" for name in names if kernel.has_tool(f"python://{name}")]
    if taken:
        raise ToolRegistrationError(
            f"Cannot register the {prefix} tools: {', '.join(taken)} {'is' if len(taken) == 1 else 'are'} already "
            f"registered. Give this group another "
            f"prefix (prefix='{prefix}2', say), or use another kernel.",
            uri=taken[0],
        )
    return [kernel.register_python_tool(name, func) for name, func in names.items()]
