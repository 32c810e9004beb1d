"""Bundled tool groups, registered explicitly on a kernel (nothing is registered at import time).

Each group is a module with a ``register(kernel, ...)`` function that returns the URIs it registered:

- :mod:`kavalai.tools.fs`: files under one root directory (``fs.ls``, ``fs.read``, ``fs.stat``, ``fs.find``,
  and when writable ``fs.write``, ``fs.mkdir``, ``fs.delete``).
- :mod:`kavalai.tools.http`: ``http.request``, guarded against SSRF.
- :mod:`kavalai.tools.web`: ``web.fetch``, a page as Markdown, through the same guard.
- :mod:`kavalai.tools.time`: ``time.now`` and ``time.convert``.

This package imports none of them, so importing it costs nothing::

    from kavalai.tools import fs, http
    fs.register(kernel, root="./data")
    http.register(kernel)
"""

__all__: list[str] = []
