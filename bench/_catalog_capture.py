"""What the catalogue capture scripts (bench/tool_search_catalog_third.py, ..._fourth.py) share: loading the untuned
capture's way of listing a server's tools, and installing the npm packages and the wheel a catalogue is taken from.

One-off scripts, run by hand to make bench/data/tool_catalog_*.json; nothing in the suite runs them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def untuned() -> Any:
    """bench/tool_search_catalog_untuned.py, for its way of listing a server's tools."""
    return capture_script("untuned")


def capture_script(which: str) -> Any:
    """bench/tool_search_catalog_``which``.py as a module (the fourth's converts a Swagger 2.0 document)."""
    path = Path(__file__).with_name(f"tool_search_catalog_{which}.py")
    spec = importlib.util.spec_from_file_location(which, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def list_npm(
    scratch: Path, npm: Mapping[str, tuple[str, str, str, list[str], dict[str, str]]]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every tool the npm servers ``npm`` (``package -> (version, server, script, arguments, environment)``) list,
    each started from ``scratch`` over stdio with its placeholder environment; and ``package -> version`` of those
    that listed (one that did not is said on stderr)."""
    from kavalai import McpServer

    home = Path(tempfile.mkdtemp())  # a server that writes its settings under HOME writes them here
    modules = scratch / "node_modules"
    found: list[dict[str, Any]] = []
    listed: dict[str, str] = {}
    for name, (version, server, script, args, env) in npm.items():
        config = McpServer(
            name=server, command="node", args=[str(modules / name / script), *args], env={"HOME": str(home), **env}
        )
        tools = await untuned()._list(config)
        print(f"{server}: {len(tools)} tools")
        if tools:
            listed[name] = version
        found.extend(tools)
    return found, listed


def install(scratch: Path, npm: Mapping[str, tuple[Any, ...]], wheel_pin: str = "", wheel_glob: str = "") -> None:
    """The npm packages (``name -> (version, ...)``) and the wheel ``wheel_pin`` (if any) into ``scratch``, once."""
    scratch.mkdir(parents=True, exist_ok=True)
    if not (scratch / "node_modules").exists():
        packages = [f"{name}@{spec[0]}" for name, spec in npm.items()]
        command = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--ignore-scripts", *packages]
        subprocess.run(command, cwd=scratch, check=True)
    if wheel_pin and not list(scratch.glob(wheel_glob)):
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", wheel_pin, "-d", str(scratch)]
        subprocess.run(command, check=True)
