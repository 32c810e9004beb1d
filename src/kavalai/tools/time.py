"""The bundled ``time`` tool group: the current time in a time zone, and conversion between zones.

Register it explicitly::

    from kavalai.tools import time
    time.register(kernel)                       # -> ["python://time.now", "python://time.convert"]

Time zones are IANA names (``"Europe/Paris"``, ``"America/New_York"``, ``"UTC"``) resolved by :mod:`zoneinfo`.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import zoneinfo
from typing import TYPE_CHECKING, Annotated

import anyio.to_thread
from pydantic import BaseModel, Field

from kavalai.adapters.python import pythontool
from kavalai.tools._register import register_all

if TYPE_CHECKING:
    from kavalai import FunctionKernel

__all__ = ["ZonedTime", "ZonedTimeConversion", "register"]


class ZonedTime(BaseModel):
    """An instant as seen in one time zone."""

    timezone: str = Field(description="The IANA time zone name.")
    datetime: dt.datetime = Field(description="The local date and time with its UTC offset (ISO 8601).")
    utc_offset: str = Field(description="The offset from UTC, e.g. '+02:00'.")
    abbreviation: str = Field(description="The zone's abbreviation at that instant, e.g. 'CEST'.")
    is_dst: bool = Field(description="Whether daylight saving time is in effect.")
    weekday: str = Field(description="The local day of the week, e.g. 'Monday'.")
    unix_time: float = Field(description="Seconds since 1970-01-01T00:00:00Z.")


class ZonedTimeConversion(BaseModel):
    """The result of ``time.convert``: the same instant in the source and the target zone."""

    source: ZonedTime = Field(description="The instant in the source time zone.")
    target: ZonedTime = Field(description="The instant in the target time zone.")


def register(kernel: FunctionKernel, *, prefix: str = "time") -> list[str]:
    """Register ``python://<prefix>.now`` and ``python://<prefix>.convert`` on ``kernel``; return their URIs.

    Raises:
        ToolRegistrationError: a tool is already registered under one of the names (use another ``prefix``).
    """

    @pythontool
    async def now(
        timezone: Annotated[str, Field(description="An IANA time zone such as 'Europe/Paris'.")] = "UTC",
    ) -> ZonedTime:
        """The current date and time in a time zone."""
        zone = await zone_info(timezone)
        return zoned(dt.datetime.now(zone), timezone)

    @pythontool
    async def convert(
        time: Annotated[
            dt.datetime,
            Field(description="An ISO 8601 date and time, e.g. '2025-03-30T14:00:00' or '...T14:00:00+02:00'."),
        ],
        to_timezone: Annotated[str, Field(description="The IANA time zone to convert to.")],
        from_timezone: Annotated[
            str | None,
            Field(description="The IANA zone `time` is in; required when `time` has no UTC offset."),
        ] = None,
    ) -> ZonedTimeConversion:
        """Convert a date and time from one time zone to another."""
        target_zone = await zone_info(to_timezone)
        if from_timezone is not None:
            source_zone = await zone_info(from_timezone)
            source = time.astimezone(source_zone) if time.tzinfo else _localize(time, source_zone, from_timezone)
            source_name = from_timezone
        elif time.tzinfo is not None:
            source, source_name = time, _offset_name(time)
        else:
            raise ValueError(
                f"The time {time.isoformat()} has no UTC offset; pass from_timezone (e.g. 'UTC') or add an "
                "offset such as '+02:00'."
            )
        return ZonedTimeConversion(
            source=zoned(source, source_name), target=zoned(source.astimezone(target_zone), to_timezone)
        )

    return register_all(kernel, prefix, {"now": now, "convert": convert})


async def zone_info(name: str) -> zoneinfo.ZoneInfo:
    """The zone called ``name``; an unknown name raises ``ValueError`` with close matches."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        pass
    # Listing every zone reads the whole tz database (~0.1 s), so it happens off the event loop.
    names = await anyio.to_thread.run_sync(_zone_names)
    matches = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
    raise ValueError(
        f"Unknown time zone {name!r}: use an IANA name such as 'Europe/Paris', 'America/New_York' or 'UTC'.{hint}"
    )


def zoned(moment: dt.datetime, name: str) -> ZonedTime:
    """Describe the aware ``moment`` as a :class:`ZonedTime` labelled ``name``."""
    offset = moment.utcoffset() or dt.timedelta(0)
    return ZonedTime(
        timezone=name,
        datetime=moment,
        utc_offset=_format_offset(offset),
        abbreviation=moment.tzname() or _format_offset(offset),
        is_dst=bool(moment.dst()),
        weekday=moment.strftime("%A"),
        unix_time=moment.timestamp(),
    )


def _localize(naive: dt.datetime, zone: zoneinfo.ZoneInfo, name: str) -> dt.datetime:
    """Attach ``zone`` to a wall-clock time, refusing one that a DST change skips."""
    local = naive.replace(tzinfo=zone)
    if local.astimezone(dt.UTC).astimezone(zone).replace(tzinfo=None) != naive:
        raise ValueError(
            f"{naive.isoformat()} does not exist in {name}: the clocks skip it (a daylight saving change)."
        )
    return local


def _offset_name(moment: dt.datetime) -> str:
    offset = moment.utcoffset() or dt.timedelta(0)
    return "UTC" if not offset else f"UTC{_format_offset(offset)}"


def _format_offset(offset: dt.timedelta) -> str:
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{mins:02d}"


@functools.cache
def _zone_names() -> list[str]:
    return sorted(zoneinfo.available_timezones())
