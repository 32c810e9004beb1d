"""The bounded document reader: every configuration and workflow file is read through ``read_document``, which
reads at most its limit, so a file over it (or a pipe that never ends) is refused before it is held in memory."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
from pathlib import Path

import pytest

from kavalai.config import KernelConfig
from kavalai.documents import MAX_DOCUMENT_BYTES, load_json_or_yaml, read_document
from kavalai.errors import ConfigurationError
from kavalai.workflow import WorkflowDefinitionError, WorkflowEngine


def test_a_file_at_the_limit_is_read_and_one_byte_past_it_is_refused_naming_the_limit(tmp_path: Path) -> None:
    at_limit = tmp_path / "at.yaml"
    at_limit.write_bytes(b"a" * 100)
    assert read_document(at_limit, "the file 'at.yaml'", max_bytes=100) == "a" * 100
    past = tmp_path / "past.yaml"
    past.write_bytes(b"a" * 101)
    with pytest.raises(ConfigurationError, match=r"^Cannot read the file 'past.yaml': it is over the limit of 100 "):
        read_document(past, "the file 'past.yaml'", max_bytes=100)


def test_line_endings_are_read_as_read_text_reads_them(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.yaml"
    mixed.write_bytes("a: 1\r\nb: 'é'\rc: 3\n\r\n".encode())
    assert read_document(mixed, "mixed") == mixed.read_text(encoding="utf-8") == "a: 1\nb: 'é'\nc: 3\n\n"


def test_a_pipe_that_never_ends_is_refused_once_past_the_limit_without_waiting_for_its_end(tmp_path: Path) -> None:
    fifo = tmp_path / "endless.yaml"
    os.mkfifo(fifo)
    done = threading.Event()

    def write() -> None:  # writes past the limit, then holds the pipe open: it never ends
        with open(fifo, "wb") as pipe:
            pipe.write(b"x" * 1_001)
            pipe.flush()
            done.wait(60)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        reading = pool.submit(read_document, fifo, "the workflow file 'endless.yaml'", max_bytes=1_000)
        with pytest.raises(ConfigurationError, match="over the limit of 1,000 bytes"):
            reading.result(timeout=30)  # a reader waiting for the end of the pipe never returns
    finally:
        done.set()
        writer.join(10)
        pool.shutdown(wait=False)
    assert not writer.is_alive()


def test_configuration_and_workflow_files_over_the_default_limit_are_refused_as_their_kind(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(ConfigurationError, match=r"configuration file .*big\.yaml.* over the limit of 33,554,432"):
        KernelConfig.from_file(big)
    with pytest.raises(WorkflowDefinitionError, match=r"workflow file .*big\.yaml.* over the limit of 33,554,432"):
        WorkflowEngine.from_yaml(big)


def test_a_fifo_nobody_writes_to_is_refused_within_the_timeout_not_waited_on_in_open(tmp_path: Path) -> None:
    """``kavalai tools list -c FIFO`` with no writer waited in ``open()`` for ever (issue 34): the file is opened
    without waiting, and its data waited for within the read's timeout."""
    fifo = tmp_path / "nobody.yaml"
    os.mkfifo(fifo)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        reading = pool.submit(read_document, fifo, "the configuration file 'nobody.yaml'", timeout=0.5)
        with pytest.raises(ConfigurationError, match=r"'nobody.yaml': it is not a regular file, .* within 0.5 s"):
            reading.result(timeout=60)  # an open() waiting for a writer never returns
    finally:
        pool.shutdown(wait=False)
        with contextlib.suppress(OSError):  # release an open() still waiting (the bug), so the test process ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_writer_that_never_finishes_is_refused_within_the_timeout(tmp_path: Path) -> None:
    fifo = tmp_path / "half.yaml"
    os.mkfifo(fifo)
    done = threading.Event()

    def write() -> None:  # half a document, then the pipe held open
        with open(fifo, "wb") as pipe:
            pipe.write(b"python_functions:\n")
            pipe.flush()
            done.wait(60)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        with pytest.raises(ConfigurationError, match="did not end within 0.5 s"):
            read_document(fifo, "the configuration file 'half.yaml'", timeout=0.5)
    finally:
        done.set()
        writer.join(10)


def test_a_fifo_whose_writer_comes_later_is_read_whole(tmp_path: Path) -> None:
    """A FIFO without a writer reads as ended at once when opened without waiting: its data is waited for, so a
    writer that opens it a moment later (``mkfifo f; kavalai ... -c f & write > f``) is read, not an empty file."""
    fifo = tmp_path / "later.yaml"
    os.mkfifo(fifo)
    opened = threading.Event()

    def write() -> None:
        opened.wait(10)
        with open(fifo, "wb") as pipe:
            for line in (b"a: 1\n", b"b: 2\n"):
                pipe.write(line)
                pipe.flush()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        reading = pool.submit(read_document, fifo, "the configuration file 'later.yaml'", timeout=60)
        opened.set()
        assert reading.result(timeout=60) == "a: 1\nb: 2\n"
    finally:
        pool.shutdown(wait=False)
        writer.join(10)


@pytest.mark.parametrize("timeout", [3e7, 1e9, float("inf")])
def test_a_fifo_read_with_a_timeout_past_what_one_poll_waits_is_read(tmp_path: Path, timeout: float) -> None:
    """The rule allows up to a year (and clamps ``inf`` to it); ``poll()`` takes at most 2**31-1 ms (24.8 days): such
    a timeout raised a bare ``OverflowError: timeout is too large`` instead of reading the FIFO."""
    fifo = tmp_path / "long.yaml"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as pipe:  # opening waits for the reader: no timing
            pipe.write(b"a: 1\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        assert read_document(fifo, "the configuration file 'long.yaml'", timeout=timeout) == "a: 1\n"
    finally:
        writer.join(10)


def test_a_process_substitution_pipe_is_read(tmp_path: Path) -> None:
    """``-c <(cat tools.yaml)``: the shell passes ``/dev/fd/N``, a pipe; it is read as it comes."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"python_functions: []\n")
        os.close(write_end)
        assert read_document(f"/dev/fd/{read_end}", "the configuration file") == "python_functions: []\n"
    finally:
        os.close(read_end)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "5", True])
def test_the_reads_timeout_follows_the_one_seconds_rule(tmp_path: Path, timeout: object) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("a: 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="timeout must be positive"):
        read_document(path, "the file", timeout=timeout)  # type: ignore[arg-type]


def test_a_directory_is_refused_as_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="Is a directory"):
        read_document(tmp_path, "the configuration file")


@pytest.mark.parametrize(
    "scalar",
    ["9" * 5_000, "-" + "1" * 4_301, "2001-13-01", "2001-02-30 10:00:00"],
    ids=["5000 digits", "4301 digits", "month 13", "february 30"],
)
def test_a_scalar_yaml_cannot_build_is_the_documents_error_for_every_reader(tmp_path: Path, scalar: str) -> None:
    """Hostile round 8, case 4: PyYAML's constructors raise a raw ``ValueError`` for an integer past Python's 4,300
    digits or a date that is no date; every reader of YAML (a workflow, a configuration file, an OpenAPI spec, a
    ``--input-file``) crosses :func:`load_yaml`, which names the document instead."""
    workflow = tmp_path / "w.yaml"
    workflow.write_text(f"name: w\nlimits:\n  timeout: {scalar}\nnodes: []\n", encoding="utf-8")
    with pytest.raises(WorkflowDefinitionError, match="holds a value YAML cannot read"):
        WorkflowEngine.from_yaml(workflow)
    config = tmp_path / "c.yaml"
    config.write_text(f"mcp_servers:\n  - name: m\n    command: echo\n    timeout: {scalar}\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="c.yaml.*holds a value YAML cannot read"):
        KernelConfig.from_file(config)
    with pytest.raises(ConfigurationError, match="The OpenAPI spec x holds a value YAML cannot read"):
        load_json_or_yaml(f"openapi: 3.1.0\ninfo: {scalar}\n", source="The OpenAPI spec x")
