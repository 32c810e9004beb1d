"""Kaval.AI 1.0's ``kavalai.utils``: :func:`to_plain` and :func:`clean_text`, kept so that code written for
Kaval.AI runs unchanged."""

from __future__ import annotations

from kavalai.compat import clean_text, to_plain

__all__ = ["clean_text", "to_plain"]
