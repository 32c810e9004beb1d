"""Importing kavalai, its agent, its LLM layer and its test helpers must not import a provider SDK."""

from __future__ import annotations

import subprocess
import sys

import kavalai.llm


def test_light_imports() -> None:
    code = (
        "import sys, kavalai, kavalai.agent, kavalai.llm, kavalai.testing, kavalai.llm.openai, kavalai.llm.anthropic,"
        " kavalai.llm.openai_responses;"
        "print(sorted(m for m in ('openai', 'anthropic', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_llm_exports_exist() -> None:
    for name in kavalai.llm.__all__:
        assert hasattr(kavalai.llm, name), name
