"""Python tools for ``support_triage.yaml``: plain functions the workflow registers by dotted path."""

from __future__ import annotations

import re
import zlib

from kavalai import pythontool

_WORD = re.compile(r"\S+")
_URGENT = ("outage", "down", "data loss", "security", "breach", "cannot log in")


@pythontool
def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(_WORD.findall(text))


@pythontool
def urgent_terms(text: str) -> list[str]:
    """The urgent phrases found in a text (outage, data loss, security, ...)."""
    lowered = text.lower()
    return [term for term in _URGENT if term in lowered]


@pythontool
def open_ticket(title: str, priority: str, queue: str) -> dict[str, str]:
    """Open a support ticket in a queue and return its reference."""
    reference = f"{queue.upper()}-{zlib.crc32(f'{title}|{priority}'.encode()) % 10_000:04d}"
    return {"reference": reference, "queue": queue, "priority": priority}
