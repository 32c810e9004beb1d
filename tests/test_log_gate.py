"""The log gate holds whatever log record factory the application sets (issue 34): the secret gate wrapped the
factory in place when a secret was first registered, so a factory set later that does not call the one before it
made records the gate never saw. Each case runs in a fresh interpreter (the logging module is process-wide)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SECRET = "Sup3rS3cretLogValue-0123"

_SETUP = f"""
import io, logging
from kavalai.secrets import register_secret
shown = io.StringIO()
def plain(*args, **kwargs):  # a factory that does not call the one before it
    return logging.LogRecord(*args, **kwargs)
SECRET = {SECRET!r}
"""

CASES = {
    "a factory set after the registration, then a new logger and a new handler": """
register_secret(SECRET)
logging.setLogRecordFactory(plain)
logging.getLogger().addHandler(logging.StreamHandler(shown))
logging.getLogger("httpx2.made.later").warning("token %s", SECRET)
""",
    "a factory put in place past the setter, an existing dependency logger": """
dependency = logging.getLogger("mcp.client.auth.oauth2")
register_secret(SECRET)
logging._logRecordFactory = plain  # noqa: SLF001 (past logging.setLogRecordFactory)
dependency.addHandler(logging.StreamHandler(shown))
dependency.warning("token %s", SECRET)
""",
    "a factory put in place past the setter, a handler that existed": """
logging.getLogger().addHandler(logging.StreamHandler(shown))
register_secret(SECRET)
logging._logRecordFactory = plain  # noqa: SLF001
logging.getLogger("aiohttp.made.later").warning("token %s", SECRET)
""",
    "a traceback through a factory set later": """
register_secret(SECRET)
logging.setLogRecordFactory(plain)
logging.getLogger().addHandler(logging.StreamHandler(shown))
try:
    raise RuntimeError("failed with " + SECRET)
except RuntimeError:
    logging.getLogger("temporalio.x").exception("it failed")
""",
    "a factory set before kavalai registers anything": """
logging.setLogRecordFactory(plain)
register_secret(SECRET)
logging.getLogger().addHandler(logging.StreamHandler(shown))
logging.getLogger("dbos.x").warning("token %s", SECRET)
""",
    # records made without the factory at all: a logger class whose _log builds the record itself (on main it
    # reached a handler made after the registration unmasked), a record made by hand and handed to a logger
    "a logger class that bypasses makeRecord, a logger and a handler made later": """
class Direct(logging.Logger):
    def _log(self, level, msg, args, exc_info=None, extra=None, stack_info=False, stacklevel=1):
        self.handle(logging.LogRecord(self.name, level, "x.py", 1, msg, args, None))
register_secret(SECRET)
logging.setLoggerClass(Direct)
logging.getLogger().addHandler(logging.StreamHandler(shown))
logging.getLogger("app.direct").warning("token %s", SECRET)
""",
    "a record made by hand, handed to a handler made later": """
register_secret(SECRET)
handler = logging.StreamHandler(shown)
handler.handle(logging.LogRecord("app", logging.WARNING, "x.py", 1, "token %s", (SECRET,), None))
""",
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_record_is_masked_whatever_factory_made_it(case: str) -> None:
    code = _SETUP + CASES[case] + "\nprint(repr(shown.getvalue()))\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "***" in result.stdout, result.stdout
    assert SECRET not in result.stdout + result.stderr


def test_a_chaining_factory_still_runs_and_a_record_is_masked_once() -> None:
    code = (
        _SETUP
        + """
register_secret(SECRET)
made = []
before = logging.getLogRecordFactory()
def chaining(*args, **kwargs):
    record = before(*args, **kwargs)
    made.append(record)
    return record
logging.setLogRecordFactory(chaining)
logging.getLogger().addHandler(logging.StreamHandler(shown))
logging.getLogger("x").warning("token %s", SECRET)
print(len(made), repr(shown.getvalue()), made[0].msg)
"""
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(" ", 1)[0] == "1"
    assert SECRET not in result.stdout
    assert result.stdout.strip().endswith("token ***")
