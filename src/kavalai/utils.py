"""Kaval.AI 1.0's ``kavalai.utils``: :func:`to_plain`, kept so that code written for Kaval.AI runs unchanged."""

from __future__ import annotations

from kavalai.compat import to_plain

__all__ = ["to_plain"]
