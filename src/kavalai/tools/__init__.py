"""Bundled tool groups, registered explicitly on a kernel (nothing is registered at import time).

Each group is a module with a ``register(kernel, ...)`` function that returns the URIs it registered:

- :mod:`kavalai.tools.fs`: files under one root directory (``fs.ls``, ``fs.read``, ``fs.stat``, ``fs.find``,
  and when writable ``fs.write``, ``fs.mkdir``, ``fs.delete``).
- :mod:`kavalai.tools.http`: ``http.request``, guarded against SSRF.
- :mod:`kavalai.tools.web`: ``web.fetch``, a page as Markdown, through the same guard.
- :mod:`kavalai.tools.time`: ``time.now`` and ``time.convert``.

This package imports none of them until one is used, so importing it costs nothing::

    from kavalai.tools import fs, http
    fs.register(kernel, root="./data")
    http.register(kernel)

    import kavalai.tools
    kavalai.tools.time.register(kernel)     # imported on first use
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kavalai.tools import fs, http, time, web

__all__ = ["fs", "http", "time", "web"]


def __getattr__(name: str) -> ModuleType:
    """Import a group module on first access (``kavalai.tools.fs``), so that importing this package is free."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
