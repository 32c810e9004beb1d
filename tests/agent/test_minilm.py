"""The optional MiniLM embedder: a real sentence model from installed wheels, its tools' vectors kept on disk."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np

from kavalai.agent._minilm import MiniLmEmbedder
from kavalai.agent.embeddings import minilm_embedder
from kavalai.agent.search import ToolSearch


def test_it_places_a_request_near_the_tool_that_does_it(tmp_path: Path) -> None:
    embed = minilm_embedder(cache_dir=tmp_path)
    request, right, wrong = embed(["kill that workflow, it's stuck", "Terminate a workflow execution.", "Read a file."])
    assert right.shape == (384,)
    assert np.isclose(np.linalg.norm(right), 1.0, atol=1e-4)
    assert request @ right > request @ wrong + 0.3
    assert minilm_embedder(cache_dir=tmp_path) is embed  # loaded once per cache directory


def test_tools_vectors_are_kept_on_disk_and_read_back_without_the_model(tmp_path: Path) -> None:
    texts = ["Terminate a workflow execution.", "Read a file.", "Terminate a workflow execution."]
    first = MiniLmEmbedder(tmp_path).embed_documents(texts)
    with closing(sqlite3.connect(tmp_path / "all-MiniLM-L6-v2-onnx-int8.sqlite3")) as db:  # closed (3.13 warns)
        assert db.execute("SELECT count(*) FROM vectors").fetchone() == (2,)  # keyed by the text's hash
    again = MiniLmEmbedder(tmp_path)
    again._session = None  # type: ignore[assignment]  # any use of the model now fails: only the disk answers
    assert np.array_equal(again.embed_documents(texts), first)


def test_an_agent_style_search_with_minilm_finds_a_tool_by_meaning(tmp_path: Path) -> None:
    tools = [
        {"name": "rest://temporal.TerminateWorkflowExecution", "description": "Terminates a workflow execution."},
        {"name": "python://fs.delete", "description": "Delete a file or a directory."},
        {"name": "mcp://everything.get-sum", "description": "Returns the sum of two numbers."},
    ]
    search = ToolSearch(tools, embedder=minilm_embedder(cache_dir=tmp_path))
    assert search.search("throw away scratch.log")[0]["name"] == "python://fs.delete"
    assert search.search("kill that workflow, it's stuck")[0]["name"] == "rest://temporal.TerminateWorkflowExecution"
