"""A tiny output helper for the demo: headings, labelled lines and JSON, to a text stream."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from pydantic import BaseModel

__all__ = ["DemoConsole"]


class DemoConsole:
    """Writes the demo's output; every section of ``kavalai demo`` prints through one of these."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout

    def heading(self, title: str) -> None:
        """Print a section heading."""
        self.line()
        self.line(f"== {title} ==")

    def line(self, text: str = "") -> None:
        """Print one line."""
        print(text, file=self.stream, flush=True)

    def show(self, label: str, value: Any) -> None:
        """Print ``label: value``, models and containers as compact JSON."""
        self.line(f"{label}: {_render(value)}")


def _render(value: Any) -> str:
    if isinstance(value, BaseModel):
        return f"{type(value).__name__}({value.model_dump_json()})"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)
