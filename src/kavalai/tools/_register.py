"""What every bundled group's ``register`` shares: checking its limits and registering its tools all or none."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from kavalai.errors import ConfigurationError, ToolRegistrationError
from kavalai.kernel import required_seconds

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = ["MAX_TOOL_TIMEOUT", "check_limits", "default_timeout_of", "register_all"]

#: The largest ``timeout`` a bundled tool takes (its argument is ``0 < timeout <= 600``); a group's
#: ``default_timeout`` above it is clamped to it.
MAX_TOOL_TIMEOUT: Final = 600.0


def check_limits(group: str, **limits: int) -> None:
    """Refuse a count or size limit that is not a whole number above zero.

    Raises:
        ConfigurationError: a limit not a whole number above zero, naming the group, the setting and the value given.
    """
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:  # nan, True, "5" too
            raise ConfigurationError(
                f"Cannot register the {group} tools: {name} must be a whole number above 0, got {value!r}."
            )


def default_timeout_of(value: object, *, group: str) -> float:
    """A group's ``default_timeout`` under the one rule of ``kavalai.kernel.required_seconds`` with this tools' own
    maximum: the default of a tool's ``timeout`` argument must be a number, so ``None`` is refused like ``0``,
    ``-1``, ``nan``, ``"5"`` and ``True`` (``ValueError`` naming it); one above :data:`MAX_TOOL_TIMEOUT`
    (``math.inf`` and ``1e308`` too) is clamped to it, as the kernel clamps a limit above a year.

    Raises:
        ValueError: ``value`` is not a positive number of seconds, naming it.
    """
    return min(required_seconds(value, what=f"default_timeout of the {group} tools"), MAX_TOOL_TIMEOUT)


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
