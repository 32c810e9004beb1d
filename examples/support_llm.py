"""The scripted model behind ``support_triage.yaml``: no network, no API key.

A :class:`~kavalai.testing.ScriptedLLM` driven by a function of the request: on the first step it asks for the
``urgent_terms`` tool, then it answers with a triage decision built from the tool's result. Swap it for a real
model by setting the node's ``model`` to e.g. ``openai/gpt-4.1-mini``.
"""

from __future__ import annotations

import json
import re

from kavalai.testing import ScriptedLLM, ScriptedRequest, ScriptItem, tool_call


def _reply(request: ScriptedRequest) -> ScriptItem:
    last = request.last_message
    if last.role == "user":
        match = re.search(r"<message>(.*)</message>", last.content, re.DOTALL)
        return tool_call("python://urgent_terms", {"text": match.group(1) if match else last.content})
    terms = json.loads(last.content)["result"]
    if terms:
        return {"priority": "high", "summary": f"Urgent: mentions {', '.join(terms)}.", "terms": terms}
    return {"priority": "normal", "summary": "A routine request.", "terms": []}


def make_llm() -> ScriptedLLM:
    """The scripted triage model."""
    return ScriptedLLM(_reply, model="scripted-triage")
