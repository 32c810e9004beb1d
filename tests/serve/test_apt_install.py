"""The load-balancer tests' installer (``tests/servers/apt.py``) with stand-ins for apt-get on a ``PATH`` of their
own: a failing apt-get skips the test with its exit status and last line, a hanging one is killed (its children too)
and the test skipped, never left waiting; an install that works gives the installed executable."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest
from tests.servers.apt import apt_install

pytestmark = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="apt_install installs as root only")


def _stand_in(folder: Path, body: str) -> Path:
    """An ``apt-get`` in ``folder`` running ``body`` (sh; it logs each command line to ``calls``) and ``folder``
    alone on the ``PATH``."""
    script = folder / "apt-get"
    script.write_text(f'#!/bin/sh\necho "$*" >> {folder / "calls"}\n{body}\n', encoding="utf-8")
    script.chmod(0o755)
    return folder / "calls"


def test_a_failing_apt_get_skips_with_its_status_and_last_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = 'case "$1" in update) exit 0;; esac\necho "Reading package lists..."\n'
    calls = _stand_in(tmp_path, failing + 'echo "E: Unable to locate package haproxy" >&2\nexit 100')
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.skip.Exception) as skipped:
        apt_install("haproxy")
    assert str(skipped.value) == (
        "haproxy cannot be installed: apt-get install haproxy failed (exit 100): E: Unable to locate package haproxy"
    )
    tried = calls.read_text(encoding="utf-8").splitlines()  # the install, the index refreshed, the install again
    assert [line.split()[0] for line in tried] == ["install", "update", "install"]
    assert tried[0].endswith("--no-install-recommends -o DPkg::Lock::Timeout=120 haproxy")


def test_a_hanging_apt_get_is_killed_with_its_children_and_the_test_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_in(tmp_path, f"/bin/sleep 1000 &\necho $! > {tmp_path / 'child'}\nexec /bin/sleep 1000")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.skip.Exception) as skipped:
        apt_install("haproxy", timeout=2)
    assert (
        str(skipped.value) == "haproxy cannot be installed: apt-get install haproxy did not finish within 2 s (killed)"
    )
    child = int((tmp_path / "child").read_text(encoding="utf-8"))
    assert _ends(child), "the stand-in's child outlived it"


def _ends(pid: int) -> bool:
    """Whether process ``pid`` is gone or dead (a zombie nobody reaped yet), within a generous bounded wait."""
    for _ in range(300):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_an_install_gives_the_installed_executable_and_a_present_one_installs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = tmp_path / "nginx"
    calls = _stand_in(tmp_path, f'printf "#!/bin/sh\\n" > {installed}\n/bin/chmod 755 {installed}')
    monkeypatch.setenv("PATH", str(tmp_path))
    assert apt_install("nginx-light", "nginx") == str(installed)
    assert apt_install("nginx-light", "nginx") == str(installed)
    assert [line.split()[-1] for line in calls.read_text(encoding="utf-8").splitlines()] == ["nginx-light"]
