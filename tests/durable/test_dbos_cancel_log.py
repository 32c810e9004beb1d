"""A cancelled DBOS run is an expected outcome: awaited in the process that executes it, it is reported as
:class:`RunCancelledError` and logs no ERROR (DBOS's own "Exception encountered in asynchronous workflow" with a
traceback is dropped at kavalai's boundary, :class:`kavalai.durable._dbos_local.QuietCancels`); any other exception of
a workflow still reaches DBOS's log. Counted: the ERROR records of every logger."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kavalai.durable import DbosRunner
from kavalai.errors import RunCancelledError
from tests.durable.conftest import on_every_logger
from tests.durable.test_cancel import Approver

pytestmark = pytest.mark.timeout(240)


class Errors(logging.Handler):
    """The ERROR records handed to it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if all(record is not seen for seen in self.records):  # DBOS's logger may propagate to the root's
            self.records.append(record)


@pytest.fixture
def errors() -> Iterator[Errors]:
    """Counts ERROR records on the root logger and on DBOS's (which does not propagate)."""
    handler = Errors()
    with on_every_logger(handler):
        yield handler


async def test_a_cancelled_run_awaited_in_process_logs_no_error(tmp_path: Path, errors: Errors) -> None:
    from kavalai.durable.dbos import DbosClient

    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    runner = DbosRunner(url)
    client = DbosClient(url)
    try:
        done = asyncio.ensure_future(runner.run(Approver(), {"order": "A"}, run_id="quiet-1"))
        for _ in range(1200):  # bounded: until the question is published
            if await runner.pending("quiet-1") or done.done():
                break
            await asyncio.sleep(0.05)
        assert list(await runner.pending("quiet-1")) == ["approval-1"]
        await asyncio.to_thread(client.cancel, "quiet-1")
        with pytest.raises(RunCancelledError, match=r"^Run quiet-1 is cancelled"):
            await asyncio.wait_for(done, 120)  # bounded: liveness only
        with pytest.raises(RunCancelledError):  # awaited again: still no error logged
            await runner.result("quiet-1")
        assert client.describe("quiet-1").state == "cancelled"
    finally:
        client.close()
        await runner.aclose()
    assert [(r.name, r.getMessage()) for r in errors.records] == []


def test_another_exception_of_a_workflow_is_still_logged(errors: Errors) -> None:
    import kavalai.durable.dbos  # noqa: F401  (installs the filter on DBOS's logger)

    try:
        raise ValueError("a bug in a workflow")
    except ValueError:
        logging.getLogger("dbos").error("Exception encountered in asynchronous workflow:", exc_info=sys.exc_info())
    assert [r.getMessage() for r in errors.records] == ["Exception encountered in asynchronous workflow:"]
