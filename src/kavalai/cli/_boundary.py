"""The CLI's error boundary: every ``kavalai`` command runs inside :func:`guarded`, which ends any failure with one
line on stderr naming what was wrong and what to do, and a documented exit status, never a traceback.

Exit status of every command:

- 0: done;
- 1: the command failed (the line says why: a server, a file, a database that could not be used, a run that failed);
- 2: a usage error (a missing or malformed option: ``--db`` that is not a database URL);
- 1 too for a ``runs`` or ``answer`` command whose ``--db`` names no journal (no SQLite file, no Postgres database);
- 130: interrupted (Ctrl-C);
- 141: done, but the reader of its output went away before the end (``kavalai tools list | head -1``): 128 + SIGPIPE,
  the status a shell shows for ``yes | head -1``, so ``set -o pipefail`` tells a cut output from a whole one.

A reader that goes away never makes noise: the boundary owns the command's stdout and stderr (:class:`_PipeEnd`),
and a write to a pipe whose reader is gone drops the rest of that stream quietly (the descriptor pointed at
``/dev/null``) instead of raising into the command. So the command ends as it would have and its status is its own:
a failure told to a stderr nobody reads (``kavalai tools describe X 2>&1 | head -0``) still ends with the failure's
status; only a success whose stdout was cut becomes 141.

Before a command runs, the boundary checks what every command shares: ``--db`` is a database URL, and a command that
only reads or changes existing runs (``runs``, ``answer``) never creates a journal: a SQLite ``--db`` naming no
file or a file holding no runs (empty, another program's database), or a Postgres ``--db`` whose server has no such
database, is an error, not a new empty journal.
``KAVALAI_TRACEBACK=1`` prints the traceback too, for a bug report.

``tests/cli/test_boundary.py`` finds every command of the parser and runs each into a failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TextIO, cast

from kavalai.errors import FunctionKernelException
from kavalai.secrets import excerpt, redact

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OUTPUT_CUT",
    "EXIT_USAGE",
    "UsageError",
    "check_options",
    "count_option",
    "guarded",
    "json_argument",
    "json_text",
    "terminal_text",
]

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
EXIT_OUTPUT_CUT: Final = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away
#: The commands that read or change existing runs only: they never create a journal.
_EXISTING_JOURNAL: Final = frozenset({"runs", "answer"})
_DB_SCHEMES: Final = ("sqlite://", "postgresql://", "postgres://", "postgresql+psycopg://")
_MAX_LINE: Final = 2_000
_NO_SUCH_DATABASE: Final = re.compile(r'database "[^"]*" does not exist')  # Postgres's invalid_catalog_name
_DATABASE_MODULES: Final = frozenset({"sqlalchemy", "psycopg", "psycopg2", "sqlite3", "dbos"})


class UsageError(Exception):
    """An option the command cannot use: the message is the line; the exit status 2 unless ``status`` says."""

    def __init__(self, message: str, *, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def seconds_option(text: str) -> float:
    """An option given in seconds (``--timeout``), under the one rule of every limit
    (:func:`~kavalai.kernel.required_seconds`): a positive number, clamped to a year (``inf`` too); ``nan``, 0 or a
    negative number is a usage error naming the option's value, not an error of the command it would have run."""
    from kavalai.kernel import required_seconds  # the kernel loads with the command, not with the parser

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    try:
        return required_seconds(value, what="it")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of seconds") from None


#: The most a count option takes (``--limit``): SQLite's and Postgres's largest integer, which a journal's query is
#: bound to; a larger number reached the driver and failed there (``OverflowError``).
MAX_COUNT: Final = 2**63 - 1


def count_option(what: str) -> Callable[[str], int]:
    """An option given as a whole number of ``what`` (``--limit``): at least 1; a number past :data:`MAX_COUNT` is
    read as :data:`MAX_COUNT` (all there are), never handed on to a database that cannot hold it."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of {what}: give 1 or more")
        return min(value, MAX_COUNT)

    return parse


def json_argument(text: str, *, what: str) -> Any:
    """``text``, a JSON value given on the command line (``--input``, ``--result``, a tool's arguments, an answer),
    read; every command reads JSON arguments here. A text that is not JSON raises :class:`json.JSONDecodeError`
    (a ``ValueError``: the caller words it); one nested too deeply for the parser (``[[[[...]]]]``, which raised
    ``RecursionError`` out of the command) is a :class:`UsageError` naming ``what``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{what} is nested too deeply to read as JSON: give a flatter value") from None


def check_options(args: argparse.Namespace) -> None:
    """Refuse a ``--db`` that is not a database URL, and, for a command that only reads or changes existing runs,
    a SQLite journal that does not exist (opening it would create it)."""
    db = getattr(args, "db", None)
    if db is None:
        return
    if not isinstance(db, str) or not db.startswith(_DB_SCHEMES):
        hint = f"sqlite:///{db}" if isinstance(db, str) and "://" not in db else "sqlite:///PATH"
        raise UsageError(f"--db {db!r} is not a database URL: write {hint} or postgresql://USER@HOST/DB")
    if args.command not in _EXISTING_JOURNAL:
        return
    if db.startswith("sqlite://"):
        path = db.removeprefix("sqlite://").removeprefix("/")
        file = Path(path.split("?", 1)[0])
        if path and path != ":memory:" and (not file.is_file() or not _holds_runs(file)):
            raise UsageError(
                f"--db {db!r}: there is no journal at {path!r}: give the --db the runs were started with",
                status=EXIT_FAILED,
            )
    else:
        _check_postgres_journal(db)


def _holds_runs(file: Path) -> bool:
    """Whether the SQLite database ``file`` is a journal (DBOS's table of runs is in it), read without writing: an
    empty file or another program's database is no journal, and opening it as one would make the journal's tables
    in it. A file that is not a SQLite database raises ``sqlite3.DatabaseError`` (told as a database not usable)."""
    import sqlite3

    connection = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'workflow_status'")
        return found.fetchone() is not None
    finally:
        connection.close()


def _database_missing(sa: Any, url: Any) -> bool | None:
    """Whether the server of ``url`` has no database of its name, asked of its catalogue (``pg_database``) through a
    maintenance database; ``None`` when neither ``postgres`` nor ``template1`` can be read with these credentials."""
    for maintenance in ("postgres", "template1"):
        engine = sa.create_engine(url.set(database=maintenance))
        try:
            with engine.connect() as connection:
                query = sa.text("SELECT 1 FROM pg_database WHERE datname = :name")
                return connection.execute(query, {"name": url.database}).first() is None
        except sa.exc.SQLAlchemyError:
            continue
        finally:
            engine.dispose()
    return None


def _check_postgres_journal(db: str) -> None:
    """Refuse a Postgres ``--db`` whose server cannot be reached or has no such database, before the engine's client
    would create the database (or print its own lines about it)."""
    try:
        import sqlalchemy as sa
    except ImportError:
        return  # the command says which extra is missing
    scheme, _, rest = db.partition("://")
    url = sa.engine.make_url(f"postgresql+psycopg://{rest}" if scheme in ("postgresql", "postgres") else db)
    engine = sa.create_engine(url)
    try:
        with engine.connect():
            return
    except sa.exc.OperationalError as exc:
        reason = " ".join(str(exc.orig).split()) or type(exc.orig).__name__
        # At connect, psycopg gives no SQLSTATE: the server's catalogue says whether the database exists (its
        # message text, which a localised server translates, only when no maintenance database can be read).
        missing = _database_missing(sa, url)
        if missing is None:
            missing = _NO_SUCH_DATABASE.search(str(exc.orig)) is not None
        if not missing:
            raise UsageError(
                f"the database could not be used ({reason}): check --db and that it is running", status=EXIT_FAILED
            ) from None
    finally:
        engine.dispose()
    name = url.database or ""
    raise UsageError(
        f"--db: there is no journal database {name!r} on that server: give the --db the runs were started with",
        status=EXIT_FAILED,
    )


def guarded(command: str, run: Callable[[], int], *, stderr: TextIO | None = None) -> int:
    """Run one command and return its exit status; every failure ends with one line on stderr, and a reader that
    goes away ends the output quietly (the status: the command's own, or :data:`EXIT_OUTPUT_CUT` for a success whose
    stdout was cut)."""
    out = _PipeEnd(sys.stdout)
    errs = _PipeEnd(sys.stderr)
    sys.stdout, sys.stderr = out, errs  # text streams in all but name
    try:
        status = _run_told(command, run, stderr if stderr is not None else cast(TextIO, errs))
        out.flush()  # a reader gone away shows here, inside the boundary, not at interpreter exit
    finally:
        sys.stdout, sys.stderr = out.inner, errs.inner
    return EXIT_OUTPUT_CUT if status == 0 and out.gone else status


def _run_told(command: str, run: Callable[[], int], err: TextIO) -> int:
    try:
        return run()
    except KeyboardInterrupt:
        _say(err, command, "interrupted")
        return EXIT_INTERRUPTED
    except UsageError as exc:
        _say(err, command, str(exc))
        return exc.status
    except FunctionKernelException as exc:
        _say(err, command, exc.message)
        _traceback()
        return EXIT_FAILED
    except Exception as exc:
        _say(err, command, _describe(exc))
        _traceback()
        return EXIT_FAILED


class _PipeEnd:
    """One of the command's standard streams, as the boundary owns it: a write or flush that finds the reader gone
    (``BrokenPipeError``) drops the rest of the stream quietly: the descriptor is pointed at ``/dev/null``, so
    neither the command nor the interpreter's last flush raises or prints about it, and ``gone`` says so."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.inner.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._drop()
            except ValueError:  # closed by the command: nothing to flush
                pass

    def _drop(self) -> None:
        self.gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.inner.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):  # no descriptor (a test's capture): nothing more is written through us anyway
            return
        with contextlib.suppress(OSError, ValueError):
            self.inner.flush()  # what the failed write left buffered goes to /dev/null now

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _describe(exc: Exception) -> str:
    text = str(exc) or repr(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8"
    if type(exc).__module__.split(".")[0] in _DATABASE_MODULES:
        reason = str(getattr(exc, "orig", None) or text).split("\n")[0]
        return f"the database could not be used ({type(exc).__name__}: {reason}): check --db and that it is running"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    return f"{type(exc).__name__}: {text} (set KAVALAI_TRACEBACK=1 to see where)"


def _say(err: TextIO, command: str, message: str) -> None:
    # Masked before it is made one line and cut (the secret gate's excerpt): a secret holding a newline or a run of
    # spaces (a private key, a passphrase) no longer matches once its whitespace is collapsed, and a cut through
    # one leaves its beginning, which the stderr gate then cannot recognise.
    line = excerpt(" ".join(redact(message).split()), _MAX_LINE, marker="...")
    with contextlib.suppress(BrokenPipeError, ValueError):  # stderr gone too: nothing left to tell
        print(f"kavalai {command}: {line}", file=err, flush=True)


#: What a terminal reads as a command, not as text: the C0 controls but newline and tab (ESC starts a sequence that
#: can clear the screen, retitle the window or write the clipboard; CR and BS overwrite what was shown), DEL, the C1
#: controls, and the bidirectional overrides that show a text reordered; and the lone surrogates (a file name that
#: is not UTF-8, a server's ``\\udcff``), which no UTF-8 stream takes: written as their escape, never a raw byte.
_TERMINAL_COMMANDS: Final = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


#: What a terminal may still act on inside a JSON text written with ``ensure_ascii=False`` (JSON escapes the C0
#: controls itself): DEL, the C1 controls (U+009B is CSI) and the bidirectional overrides; and what is not UTF-8
#: text at all, a lone surrogate, which ``ensure_ascii=True`` would escape too (``"\\ud800"``: valid UTF-8 on stdout,
#: the same value for a program, never a raw 0xFF byte or an encoding error).
_JSON_COMMANDS: Final = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_text(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """``value`` as the indented JSON text a command prints (non-ASCII kept), every character a terminal would act on
    and every lone surrogate written as its JSON escape (``\\u009b``, ``\\ud800``): the same value, read by a
    program, valid UTF-8, and nothing a server or a run put in it drives the terminal of the user reading it. Every
    value a command prints on stdout (``tools call``, ``run``, ``runs show|list``, ``answer``) is written by it."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=default)
    return _JSON_COMMANDS.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def terminal_text(text: str) -> str:
    """``text`` with every character a terminal would act on written as its escape (``\\x1b``), so a server's or a
    tool's words shown on stderr cannot drive the user's terminal: everything the CLI writes to stderr passes it
    (``kavalai.cli.main``)."""
    return _TERMINAL_COMMANDS.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)


def _traceback() -> None:
    if os.environ.get("KAVALAI_TRACEBACK"):
        import traceback

        traceback.print_exc()
