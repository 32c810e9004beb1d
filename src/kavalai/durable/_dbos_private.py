"""The names kavalai takes from DBOS's private modules, all in this one module.

DBOS (3.4) exports no public name for the exceptions it raises when a workflow is cancelled: inside the workflow
(:class:`DBOSWorkflowCancelledError`, which kavalai also raises to leave a stopped run as it stands) and to whoever
awaits its result (:class:`DBOSAwaitedWorkflowCancelledError`). They live in ``dbos._error``. Nothing else in kavalai
imports a private DBOS module (``tests/durable/test_dbos_private.py`` checks the source), and that test pins the DBOS
releases these names were checked against to :data:`DBOS_RANGE`, the bounds of the ``dbos`` extra in
``pyproject.toml``: a DBOS release outside it is a change to check here first.
"""

from __future__ import annotations

from typing import Final

from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError

__all__ = ["DBOS_RANGE", "DBOSAwaitedWorkflowCancelledError", "DBOSWorkflowCancelledError"]

#: The DBOS releases the private names above were checked against: at least the first, below the second.
DBOS_RANGE: Final = ("3.4", "4")
