"""``time.now`` and ``time.convert`` with real IANA zones from zoneinfo."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Any

import pytest

from kavalai import FunctionKernel, ToolExecutionError, ToolInputError, ToolRegistrationError
from kavalai.tools import time


@pytest.fixture
def clock(kernel: FunctionKernel) -> FunctionKernel:
    time.register(kernel)
    return kernel


async def call(kernel: FunctionKernel, tool: str, **arguments: Any) -> Any:
    return await kernel.call_tool(f"python://time.{tool}", arguments=arguments)


async def test_register_returns_both_uris(kernel: FunctionKernel) -> None:
    assert time.register(kernel) == ["python://time.now", "python://time.convert"]


async def test_now_in_a_zone_carries_that_zones_offset(clock: FunctionKernel) -> None:
    before = dt.datetime.now(dt.UTC)
    result = await call(clock, "now", timezone="Asia/Kolkata")
    after = dt.datetime.now(dt.UTC)
    assert result.timezone == "Asia/Kolkata"
    assert result.utc_offset == "+05:30"
    assert result.abbreviation == "IST"
    assert result.is_dst is False
    assert result.datetime.utcoffset() == dt.timedelta(hours=5, minutes=30)
    assert before <= result.datetime <= after
    assert result.weekday == result.datetime.strftime("%A")
    assert result.unix_time == pytest.approx(result.datetime.timestamp())


async def test_now_defaults_to_utc(clock: FunctionKernel) -> None:
    result = await call(clock, "now")
    assert (result.timezone, result.utc_offset) == ("UTC", "+00:00")


async def test_convert_a_wall_clock_time_across_a_dst_change(clock: FunctionKernel) -> None:
    result = await call(
        clock, "convert", time="2025-03-30T14:00:00", from_timezone="Europe/Paris", to_timezone="America/New_York"
    )
    assert result.source.datetime == dt.datetime(2025, 3, 30, 14, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    assert (result.source.abbreviation, result.source.utc_offset, result.source.is_dst) == ("CEST", "+02:00", True)
    assert result.target.datetime.replace(tzinfo=None) == dt.datetime(2025, 3, 30, 8)
    assert (result.target.abbreviation, result.target.utc_offset) == ("EDT", "-04:00")
    assert result.source.unix_time == result.target.unix_time == 1743336000


async def test_convert_a_time_with_an_offset(clock: FunctionKernel) -> None:
    result = await call(clock, "convert", time="2024-12-31T23:30:00-05:00", to_timezone="Asia/Tokyo")
    assert result.source.timezone == "UTC-05:00"
    assert result.target.datetime.replace(tzinfo=None) == dt.datetime(2025, 1, 1, 13, 30)
    assert result.target.weekday == "Wednesday"
    utc = await call(clock, "convert", time="2024-06-01T12:00:00Z", to_timezone="UTC")
    assert utc.source.timezone == "UTC"


async def test_a_naive_time_needs_a_source_zone(clock: FunctionKernel) -> None:
    with pytest.raises(ToolExecutionError, match="has no UTC offset; pass from_timezone") as caught:
        await call(clock, "convert", time="2025-01-01T10:00:00", to_timezone="UTC")
    assert isinstance(caught.value.__cause__, ValueError)


async def test_a_time_skipped_by_dst_is_refused(clock: FunctionKernel) -> None:
    with pytest.raises(ToolExecutionError, match="does not exist in Europe/Paris: the clocks skip it"):
        await call(clock, "convert", time="2025-03-30T02:30:00", from_timezone="Europe/Paris", to_timezone="UTC")


@pytest.mark.parametrize("zone", ["Europe/Pariss", "Mars/Olympus", "../../etc/passwd", "", "/etc/localtime"])
async def test_an_unknown_zone_is_a_clear_error(clock: FunctionKernel, zone: str) -> None:
    with pytest.raises(ToolExecutionError, match=f"Unknown time zone {zone!r}: use an IANA name") as caught:
        await call(clock, "now", timezone=zone)
    assert isinstance(caught.value.__cause__, ValueError)


async def test_an_unknown_zone_suggests_close_names(clock: FunctionKernel) -> None:
    with pytest.raises(ToolExecutionError, match="Did you mean 'Europe/Paris'"):
        await call(clock, "convert", time="2025-01-01T10:00:00Z", to_timezone="Europe/Pariss")


async def test_a_bad_time_is_an_input_error(clock: FunctionKernel) -> None:
    with pytest.raises(ToolInputError, match="time"):
        await call(clock, "convert", time="next tuesday", to_timezone="UTC")


async def test_a_repeated_wall_clock_time_is_read_as_its_first_occurrence(clock: FunctionKernel) -> None:
    # 02:30 happens twice in Paris on 2025-10-26; the first time is still summer time (+02:00).
    result = await call(clock, "convert", time="2025-10-26T02:30:00", from_timezone="Europe/Paris", to_timezone="UTC")
    assert (result.source.utc_offset, result.source.abbreviation, result.source.is_dst) == ("+02:00", "CEST", True)
    assert result.target.datetime.replace(tzinfo=None) == dt.datetime(2025, 10, 26, 0, 30)


async def test_registering_twice_needs_another_prefix(clock: FunctionKernel) -> None:
    with pytest.raises(ToolRegistrationError, match="already registered. Give this group another prefix"):
        time.register(clock)
    assert time.register(clock, prefix="clock") == ["python://clock.now", "python://clock.convert"]
