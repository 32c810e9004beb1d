"""Text that encodes as UTF-8: the one place that turns a lone surrogate into text every writer takes.

Python text may hold lone surrogates (``os.listdir`` gives ``"\\udcff"`` for a file name that is not UTF-8, and a
JSON text from a server may spell one, ``"\\\\udcff"``), which no UTF-8 writer takes: a database, a file, a hash,
pydantic's JSON (``PydanticSerializationError``). What kavalai hands to such a writer of another library crosses
:func:`utf8_safe`, which writes each lone surrogate as the text of its escape (``\\\\udcff``, six characters): the
durable layer's values DBOS writes (``kavalai.durable``), and every result and message ``kavalai serve`` sends a host
(``kavalai.serve._errors``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["LONE_SURROGATE", "escape_surrogate", "utf8_safe"]

#: A lone surrogate: a code point no UTF-8 text holds.
LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def escape_surrogate(found: re.Match[str]) -> str:
    """The JSON escape of a matched lone surrogate (``\\udcff``)."""
    return f"\\u{ord(found.group()):04x}"


def utf8_safe(value: Any, *, scanned: str | None = None) -> Any:
    """``value`` (JSON data) with every lone surrogate of its texts and keys written as the text of its escape;
    ``value`` itself when it holds none (the usual case: one scan of its JSON text, or of ``scanned``, that text
    when the caller has it already)."""
    text = json.dumps(value, ensure_ascii=False, default=str) if scanned is None else scanned
    if not LONE_SURROGATE.search(text):
        return value
    return _safe(value)


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return LONE_SURROGATE.sub(escape_surrogate, value)
    if isinstance(value, dict):
        return {_safe(key): _safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(item) for item in value]
    return value
