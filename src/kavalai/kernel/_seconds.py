"""One rule for every timeout and deadline, wherever it comes from.

A limit reaches kavalai from a caller (``call_tool(timeout=)``, ``start_tool(timeout=)``, ``deadline(seconds)``,
``Agent.run(timeout=)``, a workflow's ``timeout``), from a declaration (``@pythontool(timeout=)``, a ``RestServer``
or ``McpServer`` field, a config file), or from the wire (an MCP client's ``_meta["io.kavalai/deadline"]`` in
milliseconds). Each passes :func:`limit_seconds`, and the rule is the same:

- a limit is a finite number of seconds (``int`` or ``float``, never ``bool``) above 0; a *remaining* time (a
  deadline block, a wire deadline) may be 0, meaning it has already passed; a subclass of ``int`` or ``float`` is
  read as the number it holds, never through a ``__float__`` or comparison of its own; ``numpy.int64``,
  ``Decimal`` and ``Fraction`` are neither, and are refused with a message saying to convert them; so is a
  ``datetime.timedelta`` (its ``.total_seconds()`` is the number);
- above :data:`MAX_SECONDS` (one year) it is clamped to :data:`MAX_SECONDS`, and so is ``math.inf`` (for no limit
  at all, give ``None``);
- from a caller or a declaration, anything else (``nan``, a negative number, ``"5"``, ``True``) is refused with
  ``ValueError`` naming the value;
- from the wire, anything that is not a number is ignored (as if no deadline were sent) with one log line on the
  ``kavalai`` logger, and never fails the request; a negative number is a deadline that has passed (0).
"""

from __future__ import annotations

from datetime import timedelta
from numbers import Number
from typing import Annotated, Final, TypeAlias

from pydantic import AfterValidator, BeforeValidator, Field

from kavalai.secrets import get_logger

__all__ = ["MAX_SECONDS", "Seconds", "limit_seconds", "required_seconds"]

logger = get_logger("kavalai")

#: The largest limit kept, in seconds (366 days); a larger one, ``math.inf`` included, is clamped to it.
MAX_SECONDS: Final = 366 * 24 * 3600.0
_SHOWN: Final = 60  # characters of a refused value quoted in a message


def limit_seconds(
    value: object, *, what: str = "timeout", remaining: bool = False, wire: bool = False, unit: float = 1.0
) -> float | None:
    """``value`` as seconds under the one rule (see the module docstring), or ``None`` for no limit.

    Args:
        value: the limit as given: ``None``, or a number of ``unit`` (seconds by default).
        what: what the value is, for the message (``"timeout"``, ``"_meta io.kavalai/deadline"``).
        remaining: the value is the time left of a deadline, so 0 (already passed) is valid.
        wire: the value came from the wire: not a number is ignored (``None``) with one log line, a negative
            number is 0, and nothing raises.
        unit: seconds per unit of ``value`` (``0.001`` for milliseconds).

    Raises:
        ValueError: (not from the wire) ``value`` is not ``None`` nor a finite number above 0 (at least 0 when
            ``remaining``), naming it.
    """
    if value is None:
        return None
    kind = type(value)  # never isinstance: an object's own __class__ may claim a type it is not
    if kind is bool or not issubclass(kind, int | float) or not isinstance(value, int | float):
        if wire:
            logger.warning("Ignored the %s sent: %s is not a number.", what, _shown(value))
            return None
        if kind is not bool and issubclass(kind, Number):  # Decimal, Fraction, numpy's: not "positive"
            raise ValueError(
                f"{what} must be a number of seconds (an int or a float) or None, got {_shown(value)}"
                f" ({_kind(value)}; give int(...) or float(...) of it)"
            )
        if issubclass(kind, timedelta):  # a duration, maybe positive: "must be positive" would mislead
            raise ValueError(
                f"{what} must be a number of seconds (an int or a float) or None, got {_shown(value)}"
                f" (a duration; give its .total_seconds())"
            )
        raise ValueError(f"{what} must be positive (in seconds) or None, got {_shown(value)}")
    if kind is not float and kind is not int:  # a subclass: its own number, never its hooks' answer
        value = float.__float__(value) if isinstance(value, float) else int.__index__(value)
    if value != value:
        if wire:
            logger.warning("Ignored the %s sent: %s is not a number.", what, _shown(value))
            return None
        raise ValueError(f"{what} must be positive (in seconds) or None, got {_shown(value)}")
    if value >= MAX_SECONDS / unit:  # compared before any conversion: a 400-digit integer is not a float
        return MAX_SECONDS
    if value > 0:
        return float(value) * unit
    if wire or (remaining and value == 0):
        return 0.0
    needed = "at least 0" if remaining else "positive"
    raise ValueError(f"{what} must be {needed} (in seconds) or None, got {_shown(value)}")


def required_seconds(value: object, *, what: str) -> float:
    """:func:`limit_seconds` for a limit that must be given: ``None`` is refused as any other bad value.

    Raises:
        ValueError: ``value`` is not a finite number above 0, naming it.
    """
    try:
        seconds = None if value is None else limit_seconds(value, what=what)
    except ValueError as exc:  # the optional limit's message, less its "or None": None is refused here too
        raise ValueError(str(exc).replace(" or None, got ", ", got ", 1)) from None
    if seconds is None:
        raise ValueError(f"{what} must be positive (in seconds), got None")
    return seconds


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ names nothing
        return f"a {type(value).__name__}"
    if len(text) > _SHOWN:
        return f"{text[:_SHOWN]}... ({type(value).__name__})"
    return text


def _kind(value: object) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _as_given(value: object) -> object:
    """Before pydantic reads a declared limit as a float: a bool is refused (``timeout: yes`` is not one second),
    and an integer too large for a float is clamped (a float cannot hold it; the rule clamps it)."""
    if isinstance(value, bool):
        raise ValueError("a limit must be a number of seconds, not true or false")  # quotes no value, as settings
    if isinstance(value, int) and value >= MAX_SECONDS:
        return MAX_SECONDS
    return value


def _declared(value: float) -> float:
    return limit_seconds(value) or 0.0  # a float is never None: the `or` is for the type checker


#: A declared limit in a pydantic model (a ``RestServer`` or ``McpServer`` field, a config file): a float checked
#: and clamped by :func:`limit_seconds` (write ``Seconds | None`` where ``None`` means no limit). A bool is refused
#: and an integer of any size above the maximum clamped before pydantic reads the float; a number written as text
#: (``"30"``, as a ``${VAR}`` in a config file expands) is read as pydantic reads it. Pydantic refuses a value that
#: is not above 0 first (``gt=0``), in its own message, which quotes no value: settings hide theirs.
Seconds: TypeAlias = Annotated[float, BeforeValidator(_as_given), Field(gt=0), AfterValidator(_declared)]
