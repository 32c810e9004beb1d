"""Helpers of the Kaval.AI 1.0 workflow tests: the data folder and a retriever over a fixed list of passages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"


class ListRetriever:
    """A real (tiny) retriever: ranks passages by how many query words they share; records every query."""

    def __init__(self, passages: Mapping[str, str], metadata: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.passages = dict(passages)
        self.metadata = {key: dict(value) for key, value in (metadata or {}).items()}
        self.queries: list[dict[str, Any]] = []

    async def query(
        self,
        text: str,
        *,
        top_k: int,
        collection_name: str | None,
        source_ids: Sequence[str] | None,
        keep_best: bool,
        match: Mapping[str, Any] | None,
    ) -> list[dict[str, Any]]:
        self.queries.append({"text": text, "top_k": top_k, "collection": collection_name, "match": match})
        words = set(text.lower().split())
        hits = []
        for source, content in self.passages.items():
            meta = self.metadata.get(source, {})
            if match and any(meta.get(key) != value for key, value in match.items()):
                continue
            shared = len(words & set(content.lower().split()))
            hits.append(
                {"id": source, "source_id": source, "content": content, "similarity": shared / 10, "rag_metadata": meta}
            )
        hits.sort(key=lambda hit: -hit["similarity"])
        return hits[:top_k]
