"""A small MCP server over stdio with text tools, for the example workflows.

Run by the kernel when a workflow declares it (``command: ${PYTHON}``, ``args: [${WORKFLOW_DIR}/text_mcp_server.py]``).
"""

from __future__ import annotations

import re
from collections import Counter

from mcp.server.mcpserver import MCPServer

server = MCPServer("text", log_level="WARNING")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_STOP = frozenset(re.findall(r"\w+", "a an and are as at be by for from in is it of on or that the this to with"))


@server.tool()
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(_WORD.findall(text))


@server.tool()
def top_words(text: str, top: int = 3) -> list[str]:
    """The most frequent words of a text (common English words left out), most frequent first."""
    words = [w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP]
    return [word for word, _ in Counter(words).most_common(top)]


if __name__ == "__main__":
    server.run("stdio")
