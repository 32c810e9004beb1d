"""A process whose durable run is interrupted (parked) because its Postgres journal went away for good, for
``tests/durable/test_parked.py``.

    python -m tests.servers.parked_run JOURNAL_URL SHOP_URL RUN_ID

It runs the charging workflow of ``tests/durable/test_journal_io.py`` (orders A, B, C at the shop ``SHOP_URL``) on a
:class:`~kavalai.durable.DbosRunner` of ``JOURNAL_URL`` with a short patience. The test stops Postgres while B is in
flight and does not start it again: the run is interrupted, this process prints ``interrupted: <message>``, closes
the runner and returns from ``main``. Nothing the runner or DBOS started may keep the interpreter alive after that:
the test waits (bounded) for this process to exit on its own.
"""

from __future__ import annotations

import asyncio
import sys

from kavalai.durable import DbosRunner
from kavalai.errors import RunInterruptedError
from tests.durable.test_journal_io import charging_engine


async def main(journal: str, shop: str, run_id: str) -> None:
    runner = DbosRunner(journal, journal_outage=0.5)
    try:
        try:
            result = await charging_engine(runner, shop).run({}, run_id=run_id)
        except RunInterruptedError as stopped:
            print(f"interrupted: {stopped}", flush=True)
        else:
            print(f"not interrupted: {result!r}", flush=True)
    finally:
        await runner.aclose()
    print("closed", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
