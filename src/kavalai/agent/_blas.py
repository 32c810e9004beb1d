"""Tool search's linear algebra on one thread: :func:`one_thread` bounds the BLAS library numpy uses while it runs.

numpy's OpenBLAS splits a product or an eigendecomposition over every core. Tool search's are small (a 256-wide Gram
matrix and its eigenvectors when an index is built; products of a query's vector with a few hundred rows per
search): split, they gain nothing, and on a machine busy with other work each waits for every core. At 10,000 tools
on the loaded 2-core machine, the coarse pass's set-up took 280-2,100 ms on OpenBLAS's threads against 50-96 ms on
one, and a search 4.6-6.0 ms against 3.4-3.9 ms (bench/tool_search.py).

The bound is ``threadpoolctl``'s (the ``embeddings`` extra installs it; without it, :func:`one_thread` changes
nothing), called directly on the BLAS libraries it found when first asked (a few microseconds a call, against
``threadpool_limits``' tens). BLAS's thread count is the process's, not a thread's: while any search or index build
runs, the process's other BLAS calls run on one thread too; the count in force before the first of them started is
restored when the last ends (concurrent searches share one count, under a lock).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["one_thread"]

_lock = threading.Lock()
_inside = 0  # searches and builds under the bound now
_saved: list[tuple[Any, int]] = []  # each BLAS library and its thread count before the first of them
_libraries: list[Any] | None = None  # threadpoolctl's controllers of the loaded BLAS libraries, found once


def _blas() -> list[Any]:
    """The BLAS libraries loaded in this process (numpy's), as threadpoolctl controls them; none without it."""
    global _libraries
    if _libraries is None:
        import numpy  # noqa: F401  (loaded first: threadpoolctl finds the libraries loaded when it looks)

        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # the search extra alone: BLAS keeps its threads
            _libraries = []
        else:
            _libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libraries


@contextmanager
def one_thread() -> Iterator[None]:
    """BLAS on one thread inside the block; the process's previous thread count back when the last block ends."""
    global _inside
    libraries = _blas()
    with _lock:
        if _inside == 0:
            _saved[:] = [(library, library.num_threads) for library in libraries]
            for library in libraries:
                library.set_num_threads(1)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                for library, count in _saved:
                    library.set_num_threads(count)
                _saved.clear()
