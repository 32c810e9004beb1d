"""npm packages for the tests that run a real Node program: :func:`npm_installed`.

Usage::

    folder = npm_installed("server-everything-2026.8.31", ["@modelcontextprotocol/server-everything@2026.8.31"])
    entry = folder / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"

The packages go once into a folder of the system's temp dir, kept across runs. Two test runs at once (the suite on
Python 3.11 and 3.13 side by side, say) must not both run ``npm install`` into one folder: npm writes
``node_modules`` in place, and a second install racing the first leaves half-written packages that fail with odd
errors. So an install holds an exclusive ``flock`` on a lock file beside the folder, and a marker file written
after npm succeeded says the folder is whole; a run that finds the marker installs nothing.
"""

from __future__ import annotations

import fcntl
import subprocess
import tempfile
from pathlib import Path

__all__ = ["npm_installed"]

#: Seconds one ``npm install`` may take (downloads included) before it is stopped and the test fails.
INSTALL_TIMEOUT = 600.0


def npm_installed(name: str, packages: list[str], *, timeout: float = INSTALL_TIMEOUT) -> Path:
    """The folder ``kavalai-test-<name>`` of the temp dir with ``packages`` installed by npm, once across runs."""
    folder = Path(tempfile.gettempdir()) / f"kavalai-test-{name}"
    done = folder / ".kavalai-installed"
    folder.mkdir(parents=True, exist_ok=True)
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when this process dies
        if not done.exists():
            command = ["npm", "install", "--silent", "--no-audit", "--no-fund", *packages]
            subprocess.run(command, cwd=folder, check=True, timeout=timeout)
            done.write_text("\n".join(packages), encoding="utf-8")
    return folder
