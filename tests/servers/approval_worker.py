"""A Temporal worker process serving a run that charges order A, asks for an approval, and charges order B if
allowed, for the fault case "a worker killed while an answer is delivered"
(``tests/durable/test_temporal_answer_kill.py``).

    python -m tests.servers.approval_worker ADDRESS TASK_QUEUE SHOP_URL
    python -m tests.servers.approval_worker dbos DB_URL SHOP_URL

It prints ``serving`` once its worker polls (DBOS: ``serving <target name>`` once it serves the journal's queue,
having recovered the runs a killed worker left), then serves until killed. :class:`ApproveThenCharge` is also what the
test process submits (the same definition)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from kavalai import FunctionKernel, RestServer
from kavalai.durable import DurableRunner, TemporalRunner, current_run


class ApproveThenCharge:
    """Charges A, waits for ``approval`` (``{"action": "allow" | "deny"}``), charges B when allowed."""

    durable_name = "approve_then_charge"

    def __init__(self, shop: str) -> None:
        kernel = FunctionKernel()
        kernel.register_rest_server(RestServer(name="shop", url=shop))
        kernel.register_rest_tool(
            "shop",
            "charge",
            "POST",
            {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}}},
            path="/charge",
        )
        DurableRunner.attach(kernel)
        self.durable_kernel = kernel

    def durable_definition(self) -> list[tuple[str, Any]]:
        return [("a", "charge A"), ("approval", "ask"), ("b", "charge B if allowed")]

    async def run_journaled(self, payload: Any) -> Any:
        run = current_run()
        assert run is not None
        await self.durable_kernel.call_tool("rest://shop.charge", {"order": "A", "amount": 1})
        answer = await run.wait_for_answer("approval", {"charge": "B"})
        assert isinstance(answer, dict)
        if answer.get("action") == "allow":
            await self.durable_kernel.call_tool("rest://shop.charge", {"order": "B", "amount": 1})
        return {"answer": answer}


async def main(address: str, queue: str, shop: str) -> None:
    runner = TemporalRunner(address, task_queue=queue, heartbeat_timeout=2, step_timeout=10)
    target = ApproveThenCharge(shop)
    runner.register(target)
    await runner.start_worker()
    print("serving", flush=True)
    await runner.serve()


async def main_dbos(db: str, shop: str) -> None:
    from kavalai.durable import DbosRunner

    runner = DbosRunner(db)
    name = runner.register(ApproveThenCharge(shop))
    await runner.start()
    print(f"serving {name}", flush=True)
    await runner.serve()


if __name__ == "__main__":
    if sys.argv[1] == "dbos":
        asyncio.run(main_dbos(*sys.argv[2:4]))
    else:
        asyncio.run(main(*sys.argv[1:4]))
