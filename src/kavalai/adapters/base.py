"""The adapter contract, re-exported from the kernel (where it lives, so that the kernel imports no adapter)."""

from __future__ import annotations

from kavalai.kernel import ToolAdapter, ToolRegistry

__all__ = ["ToolAdapter", "ToolRegistry"]
