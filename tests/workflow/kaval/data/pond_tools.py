"""The Python tool of ponds.yaml (test data)."""

from __future__ import annotations

from kavalai import pythontool

DEPTHS = {"mill": 140, "duck": 40}


@pythontool
def measure_pond(name: str, unit: str) -> dict[str, object]:
    """The depth of a pond of the village."""
    return {"depth_cm": DEPTHS[name], "unit": unit}
