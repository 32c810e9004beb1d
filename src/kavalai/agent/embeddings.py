"""Embeddings for tool search: the meaning of a query, where BM25 only sees its words.

BM25 finds ``send a message to the team channel`` -> ``slack.chat-post-message`` only if the words overlap.
An embedder maps texts to vectors whose cosine says how close their meanings are; :class:`~kavalai.agent.search.
ToolSearch` fuses both rankings. Any callable taking a list of texts and returning one vector per text is an
embedder (a sentence-transformers model's ``encode``, an embeddings API behind a cache). :func:`local_embedder`
is a small static model that needs no download: WordLlama's ``l2_supercat`` weights (256 dimensions, 16 MB), which
its wheel ships (the ``embeddings`` extra: ``pip install 'kavalai[embeddings]'``), run by :mod:`kavalai.agent.
_wordllama` without importing the ``wordllama`` package (whose import configures the root logger).
:func:`minilm_embedder` is a stronger one, a sentence-transformer (all-MiniLM-L6-v2, int8, on ONNX Runtime; the
``minilm`` extra), whose document vectors are kept on disk (see :mod:`kavalai.agent._minilm`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias

__all__ = ["Embedder", "local_embedder", "minilm_embedder"]

#: Texts in, one vector per text out (any sequence of floats; numpy arrays too).
Embedder: TypeAlias = Callable[[Sequence[str]], Any]

_lock = threading.Lock()
_local: Embedder | None = None
_minilm: dict[Path, Embedder] = {}


def local_embedder() -> Embedder:
    """The bundled local embedder (WordLlama ``l2_supercat``, 256 dimensions), loaded once per process from the
    installed wheel; nothing is downloaded.

    Raises:
        ImportError: ``wordllama`` is not installed (``pip install 'kavalai[embeddings]'``).
        FileNotFoundError: the installed wordllama does not carry its weights.
    """
    global _local
    with _lock:
        if _local is None:
            _local = _load_wordllama()
        return _local


def minilm_embedder(*, cache_dir: str | os.PathLike[str] | None = None) -> Embedder:
    """all-MiniLM-L6-v2 (384 dimensions, int8 weights on ONNX Runtime), loaded once per process (per cache
    directory) from installed wheels; nothing is downloaded. Tools' vectors are kept on disk, keyed by the hash of
    the text embedded, so a catalog is embedded once per machine.

    Args:
        cache_dir: where tools' vectors are kept (default: ``$XDG_CACHE_HOME/kavalai`` or ``~/.cache/kavalai``).

    Raises:
        ImportError: the ``minilm`` extra is not installed (``pip install 'kavalai[minilm]'``).
    """
    from kavalai.agent._minilm import MiniLmEmbedder, default_cache_dir

    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    with _lock:
        found = _minilm.get(folder)
        if found is None:
            found = _minilm[folder] = MiniLmEmbedder(folder)
        return found


def _load_wordllama() -> Embedder:
    # Not through ``wordllama.WordLlama``: importing that package configures the root logger (see _wordllama).
    from kavalai.agent._wordllama import WordLlamaEmbedder, package_folder

    return WordLlamaEmbedder(package_folder())
