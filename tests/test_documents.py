"""The bounded document reader: every configuration and workflow file is read through ``read_document``, which
reads at most its limit, so a file over it (or a pipe that never ends) is refused before it is held in memory."""

from __future__ import annotations

import concurrent.futures
import os
import threading
from pathlib import Path

import pytest

from kavalai.config import KernelConfig
from kavalai.documents import MAX_DOCUMENT_BYTES, read_document
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
