"""WordLlama's ``l2_supercat`` model, run from the files its wheel ships, without importing the ``wordllama`` package.

The model is a table of token vectors (32,000 tokens x 256 dimensions); a text's vector is the mean of its tokens'
vectors, scaled to unit length. Written here rather than called through ``wordllama.WordLlama`` for two reasons:

- importing ``wordllama`` calls ``logging.basicConfig(level=logging.INFO)``, which gives any program that loads tool
  search a root handler printing every library's INFO lines on stderr;
- its ``embed`` tokenizes every text whole and pads each batch of 64 to the longest: for a catalogue of short,
  uneven texts with few distinct words, most of that work is repeated or padding. Here a batch's distinct words are
  tokenized once each (exact for this tokenizer, checked when the model loads) and each text's vectors summed as
  they are (``np.add.reduceat``), in slices of at most :data:`_SLICE_TOKENS` rows, so memory stays bounded.

The weights (``weights/l2_supercat_256.safetensors``) and the tokenizer (``tokenizers/l2_supercat_tokenizer_config
.json``) are read from the installed package's folder, found with :func:`importlib.util.find_spec` (which runs none
of the package's code); nothing is downloaded. The vectors equal ``WordLlama.load("l2_supercat").embed(texts,
norm=True)`` to float32 rounding (tests/agent/test_wordllama.py compares them).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Final

__all__ = ["WordLlamaEmbedder", "package_folder"]

_WEIGHTS: Final = "weights/l2_supercat_256.safetensors"
_TOKENIZER: Final = "tokenizers/l2_supercat_tokenizer_config.json"
_TENSOR: Final = "embedding.weight"
#: A text is read up to this many characters: tools' texts are far shorter, and a caller's megabyte is cut, not
#: tokenized whole.
MAX_TEXT_CHARS: Final = 8_192
_SLICE_TOKENS: Final = 4_096  # rows gathered at once: 4 MB of float32 vectors
_BY_WORD_FROM: Final = 16  # texts in one call from which tokenizing each distinct word once pays
_WORDS_KEPT: Final = 20_000  # queries' words whose tokens are kept (a query's words are mostly ones seen before)


def package_folder() -> Path:
    """The installed ``wordllama`` package's folder, found without importing it.

    Raises:
        ImportError: ``wordllama`` is not installed.
    """
    spec = importlib.util.find_spec("wordllama")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ImportError("The local embedder needs wordllama: pip install 'kavalai[embeddings]'.")
    return Path(locations[0])


class WordLlamaEmbedder:
    """An :data:`~kavalai.agent.embeddings.Embedder`: texts in, one unit vector (256 float32) per text out.

    Args:
        folder: the ``wordllama`` package's folder, holding its weights and tokenizer.

    Raises:
        FileNotFoundError: the folder does not hold the model's files.
    """

    def __init__(self, folder: Path) -> None:
        import numpy as np

        try:
            from safetensors import safe_open
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(f"The local embedder needs {exc.name}: pip install 'kavalai[embeddings]'.") from exc
        weights, tokenizer = folder / _WEIGHTS, folder / _TOKENIZER
        for path in (weights, tokenizer):
            if not path.is_file():
                raise FileNotFoundError(f"The installed wordllama does not carry {path.name} (looked in {folder}).")
        with safe_open(str(weights), framework="np") as file:
            self._table = np.ascontiguousarray(file.get_tensor(_TENSOR), dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self.dimensions: int = int(self._table.shape[1])
        self._words_apart = _tokens_stop_at_spaces(json.loads(self._tokenizer.to_str()))
        self._word_ids: dict[str, list[int]] = {}  # a query's word -> its tokens' rows of the table

    def __call__(self, texts: Sequence[str]) -> Any:
        """The texts' unit vectors, one row each (a text with no token gets a zero row)."""
        import numpy as np

        cut = [str(text)[:MAX_TEXT_CHARS] for text in texts]
        if len(cut) == 1:  # a query: one text, no batch to arrange
            sums, counts = self._one(cut[0])
        else:
            sums, counts = self._batch(cut)
        sums /= np.maximum(counts, 1.0)[:, None]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        sums /= np.where(norms == 0, 1.0, norms)
        return sums

    def _one(self, text: str) -> tuple[Any, Any]:
        """One text's token vectors summed (one row), and its number of tokens. A text of words separated by single
        spaces (a search's query) is tokenized word by word, each word once: the tokenizer's call cost more than the
        rest of a query's vector."""
        import numpy as np

        if self._words_apart and text and text == " ".join(text.split()):
            ids = np.fromiter(chain.from_iterable(map(self._ids_of, text.split(" "))), dtype=np.int64)
        else:
            ids = np.asarray(self._tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
            np.clip(ids, 0, len(self._table) - 1, out=ids)
        sums = self._table[ids].sum(axis=0, keepdims=True, dtype=np.float32)
        return sums, np.array([len(ids)], dtype=np.float32)

    def _ids_of(self, word: str) -> list[int]:
        """``word``'s tokens' rows of the table, tokenized once (the last :data:`_WORDS_KEPT` words kept)."""
        found = self._word_ids.get(word)
        if found is None:
            last = len(self._table) - 1
            found = [min(i, last) for i in self._tokenizer.encode(word, add_special_tokens=False).ids]
            if len(self._word_ids) >= _WORDS_KEPT:
                self._word_ids.clear()
            self._word_ids[word] = found
        return found

    def _batch(self, texts: list[str]) -> tuple[Any, Any]:
        """Each text's token vectors summed, and its number of tokens: word by word where that is exact and pays,
        whole otherwise."""
        import numpy as np

        sums = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        counts = np.zeros(len(texts), dtype=np.float32)
        spaced = [i for i, text in enumerate(texts) if text and text == " ".join(text.split())]
        if not self._words_apart or len(spaced) < _BY_WORD_FROM:
            spaced = []
        rest = sorted(set(range(len(texts))) - set(spaced))
        for rows, pooled in ((spaced, self._by_words), (rest, self._by_tokens)):
            if rows:
                sums[rows], counts[rows] = pooled([texts[i] for i in rows])
        return sums, counts

    def _by_tokens(self, texts: list[str]) -> tuple[Any, Any]:
        """Each text's token vectors summed, and its number of tokens."""
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=int(lengths.sum()))
        np.clip(ids, 0, len(self._table) - 1, out=ids)
        return _pool(self._table, ids, lengths), lengths.astype(np.float32)

    def _by_words(self, texts: list[str]) -> tuple[Any, Any]:
        """:meth:`_by_tokens` for texts of words separated by single spaces, tokenizing each distinct word once: a
        catalogue's 20,000 texts hold about 1,300 distinct words, and tokenizing was four fifths of the work."""
        import numpy as np

        split = [text.split(" ") for text in texts]
        distinct = list(dict.fromkeys(chain.from_iterable(split)))
        word_sums, word_counts = self._by_tokens(distinct)
        place = {word: j for j, word in enumerate(distinct)}
        lengths = np.fromiter((len(words) for words in split), dtype=np.int64, count=len(split))
        flat = np.fromiter((place[w] for words in split for w in words), dtype=np.int64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(len(split)), lengths)
        return _pool(word_sums, flat, lengths), np.bincount(owner, weights=word_counts[flat], minlength=len(split))


def _pool(table: Any, ids: Any, lengths: Any) -> Any:
    """Each run of ``lengths`` ids' rows of ``table`` summed, one row per run (a run of none sums to zero),
    gathering at most :data:`_SLICE_TOKENS` rows at a time."""
    import numpy as np

    out = np.zeros((len(lengths), table.shape[1]), dtype=np.float32)
    owner = np.repeat(np.arange(len(lengths)), lengths)  # the run each id belongs to
    for start in range(0, len(ids), _SLICE_TOKENS):
        part, parts = ids[start : start + _SLICE_TOKENS], owner[start : start + _SLICE_TOKENS]
        starts = np.flatnonzero(np.r_[True, parts[1:] != parts[:-1]])
        out[parts[starts]] += np.add.reduceat(table[part], starts, axis=0)
    return out


def _tokens_stop_at_spaces(config: dict[str, Any]) -> bool:
    """Whether a text of words separated by single spaces tokenizes as its words do one by one: the normalizer only
    puts "▁" before the text and for each space, nothing splits it before BPE, and no token holds a "▁" after its
    first character (but runs of "▁", which only several spaces make), so no merge crosses a space."""
    normalizer = config.get("normalizer") or {}
    expected = [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    ]
    model = config.get("model") or {}
    vocab = model.get("vocab") or {}
    return (
        normalizer.get("type") == "Sequence"
        and normalizer.get("normalizers") == expected
        and config.get("pre_tokenizer") is None
        and model.get("type") == "BPE"
        and bool(vocab)
        and not any("▁" in token[1:] and token.strip("▁") for token in vocab)
    )
