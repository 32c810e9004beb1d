"""Debian packages for the tests that need a real program (a load balancer, a proxy): :func:`apt_install`.

Usage::

    binary = apt_install("haproxy")              # the path of ``haproxy``, installed with apt-get when missing
    binary = apt_install("nginx-light", "nginx") # when the executable is named apart from its package

How it behaves:
- An executable already on the ``PATH`` is returned as it is; nothing is installed.
- Otherwise ``apt-get install -y`` runs (as root, non-interactive, recommends left out, waiting at most
  ``lock_seconds`` for another apt's lock); if it fails, the package index is refreshed (``apt-get update``) and
  the install tried once more.
- Where it cannot be had the calling test is skipped with the reason, never failed and never left waiting: no
  ``apt-get`` or not root; an apt-get that failed (its exit status and the last line it wrote); an apt-get still
  running after ``timeout`` seconds (it and every process it started are killed first); an install that succeeded
  without putting the executable on the ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile

import pytest

__all__ = ["apt_install"]

#: Seconds one apt-get run may take (a download on a slow mirror included) before it is killed and the test skipped.
INSTALL_TIMEOUT = 600.0


def apt_install(
    package: str, executable: str | None = None, *, timeout: float = INSTALL_TIMEOUT, lock_seconds: int = 120
) -> str:
    """The path of ``executable`` (default: named as ``package``), installing ``package`` with apt-get when it is
    missing; skips the calling test with the reason when it cannot be had."""
    name = executable or package
    found = shutil.which(name)
    if found is not None:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip(f"{name} is not installed and cannot be: no apt-get, or not root")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", f"DPkg::Lock::Timeout={lock_seconds}"]
    status, said = _apt_get([*install, package], timeout)
    if status != 0:  # a stale package index: refresh it once
        status, said = _apt_get(["apt-get", "update", "-q", "-o", f"DPkg::Lock::Timeout={lock_seconds}"], timeout)
        if status == 0:
            status, said = _apt_get([*install, package], timeout)
    if status != 0:
        pytest.skip(f"{name} cannot be installed: apt-get install {package} {said}")
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} cannot be installed: apt-get install {package} succeeded but {name} is not on the PATH")
    return found


def _apt_get(command: list[str], timeout: float) -> tuple[int, str]:
    """``command``'s exit status (-1 when it ran out of time) and what to say of a failure. Its output goes to a
    file, not a pipe, so a grandchild holding the pipe open cannot keep the wait going; on a timeout its whole
    process group is killed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=env, start_new_session=True
        )
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return -1, f"did not finish within {timeout:g} s (killed)"
        output.seek(0)
        lines = output.read().decode(errors="replace").strip().splitlines()
    return status, f"failed (exit {status}): {lines[-1] if lines else '(no output)'}"
