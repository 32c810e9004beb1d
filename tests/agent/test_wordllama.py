"""The bundled local embedder: WordLlama's model run from its wheel's files, without importing wordllama."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from kavalai.agent._search_text import summary
from kavalai.agent._wordllama import MAX_TEXT_CHARS, WordLlamaEmbedder, _tokens_stop_at_spaces, package_folder
from kavalai.agent.embeddings import local_embedder

TEXTS = [
    "Terminate workflow execution",
    "kill that stuck job, now!",
    "",
    "   ",
    "read file",
    "Get a recursive tree view of files and directories as a JSON structure. " * 40,
    "ünïcödé — emoji 🚀 and 中文",
]

# wordllama's own loader and embed, in a process of its own: importing wordllama configures the root logger.
REFERENCE = """
import json, sys
from pathlib import Path
import wordllama
model = wordllama.WordLlama.load("l2_supercat", cache_dir=Path(wordllama.__file__).parent, disable_download=True)
print(json.dumps(model.embed(json.loads(sys.stdin.read()), norm=True).tolist()))
"""


def _wordllamas_own(texts: list[str]) -> np.ndarray:
    done = subprocess.run(
        [sys.executable, "-c", REFERENCE], input=json.dumps(texts), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return np.array(json.loads(done.stdout), dtype=np.float32)


def test_vectors_equal_wordllamas_own() -> None:
    texts = [text for text in TEXTS if text.strip()]  # wordllama divides an empty text's zero vector by zero
    ours = local_embedder()(texts)  # a few texts: each tokenized whole
    assert ours.shape == (len(texts), 256)
    np.testing.assert_allclose(ours, _wordllamas_own(texts), atol=1e-5)


def test_a_catalogues_texts_tokenized_word_by_word_equal_wordllamas_own() -> None:
    catalogue = json.loads((Path(__file__).parents[2] / "bench" / "data" / "tool_catalog.json").read_text())
    texts = [summary(tool) for tool in catalogue["tools"]]  # single spaces: each distinct word tokenized once
    texts += ["a  b", "tab\there", "  lead", "trail ", "ünïcödé 🚀 中文 ok", "x" * 300]  # and these whole
    embed = local_embedder()
    assert isinstance(embed, WordLlamaEmbedder)
    assert embed._words_apart
    reference = _wordllamas_own(texts)
    np.testing.assert_allclose(embed(texts), reference, atol=1e-5)
    # One text alone (a query) is tokenized word by word too, each word's tokens kept: the same vectors, twice.
    for _ in range(2):
        alone = np.stack([embed([text])[0] for text in texts])
        np.testing.assert_allclose(alone, reference, atol=1e-5)
    assert "terminate" in embed._word_ids


def test_word_by_word_is_used_only_where_the_tokenizer_allows_it() -> None:
    config = json.loads(local_embedder()._tokenizer.to_str())  # type: ignore[attr-defined]
    assert _tokens_stop_at_spaces(config)
    merged = {**config, "model": {**config["model"], "vocab": {**config["model"]["vocab"], "a\u2581b": 32000}}}
    assert not _tokens_stop_at_spaces(merged)  # a token across a space: words must be tokenized together
    assert not _tokens_stop_at_spaces({**config, "pre_tokenizer": {"type": "Whitespace"}})
    assert not _tokens_stop_at_spaces({**config, "normalizer": None})


def test_an_empty_text_gets_a_zero_vector_and_others_unit_ones() -> None:
    vectors = local_embedder()(TEXTS)
    norms = np.linalg.norm(vectors, axis=1)
    assert norms[2] == 0.0
    assert np.allclose(np.delete(norms, 2), 1.0, atol=1e-5)
    assert local_embedder()([]).shape == (0, 256)


def test_a_long_text_is_cut_and_memory_stays_bounded() -> None:
    embed = local_embedder()
    huge = "word " * 1_000_000  # five million characters
    tracemalloc.start()
    (vector,) = embed([huge])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * 2**20  # a million tokens' ids alone would be 8 MB
    np.testing.assert_allclose(vector, embed([huge[:MAX_TEXT_CHARS]])[0], atol=1e-6)


def test_many_texts_are_summed_in_bounded_slices_with_the_same_result() -> None:
    embed = local_embedder()
    texts = [f"tool number {i} reads and writes files in folders" for i in range(3_000)]  # > one slice of 4,096
    together = embed(texts)
    one_by_one = np.stack([embed([text])[0] for text in texts[:50] + texts[-50:]])
    np.testing.assert_allclose(together[:50], one_by_one[:50], atol=1e-6)
    np.testing.assert_allclose(together[-50:], one_by_one[50:], atol=1e-6)


LOAD = """
import logging, sys
from kavalai.agent.embeddings import local_embedder
local_embedder()(["delete a file"])
logging.getLogger("some.library").info("an info line nobody asked for")
print(len(logging.getLogger().handlers), "wordllama" in sys.modules)
"""


def test_loading_it_leaves_the_applications_logging_alone() -> None:
    done = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["0", "False"]  # no root handler added; wordllama's code never ran
    assert "an info line nobody asked for" not in done.stderr


def test_a_folder_without_the_model_files_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="l2_supercat_256.safetensors"):
        WordLlamaEmbedder(tmp_path)
    assert (package_folder() / "weights").is_dir()


def test_one_text_alone_gets_the_vector_it_gets_in_a_batch() -> None:
    embed = local_embedder()
    batch = embed(TEXTS * 3)  # a batch long enough to tokenize word by word
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(embed([text])[0], batch[i], atol=1e-6)
