"""The peer of kavalai's Temporal runner in ``bench/durable.py``: a workflow of bare activities that add one
(Temporal refuses workflow classes defined inside a function, so they live in this module)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench.add_one")
async def add_one(x: int) -> int:
    """Add one."""
    return x + 1


@workflow.defn(name="bench.raw", sandboxed=False)
class Raw:
    """``count`` activities in a row, each adding one."""

    @workflow.run
    async def run(self, count: int) -> int:
        """Run the activities; return the total."""
        x = 0
        for _ in range(count):
            x = await workflow.execute_activity(add_one, x, start_to_close_timeout=timedelta(seconds=60))
        return x
