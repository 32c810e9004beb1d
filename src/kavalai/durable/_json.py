"""The one JSON writer of the durable layer: every value a journal keeps, a result store holds or a step's key hashes
is written by :func:`journal_json`.

Python text may hold lone surrogates (``os.listdir`` gives a file name that is not UTF-8 so, ``\\udcff``), which
``json.dumps(..., ensure_ascii=False)`` writes as they are and which no database, file or hash then takes
(``UnicodeEncodeError``, raised out of the step as if the tool had failed). Here they are written as their JSON
escapes, which ``json.loads`` reads back as the same text, so a run keeps whatever its tools return.
What DBOS serializes itself (a run's input and its outcome) cannot be written so: both cross one rule,
:func:`engine_value` on their way to DBOS and :func:`engine_read` on their way back, lossless both ways (a run's
input was once made lossy text by ``utf8_safe``: a tool given ``"\\ud800"`` got six characters, while tool results
kept the code point). ``tests/durable/test_journal_text.py`` finds every JSON written in the package's durable
modules and fails when one bypasses :func:`journal_json`. On Temporal the same rule holds without a step of ours:
temporalio's JSON payload converter writes with ``ensure_ascii``, so a lone surrogate in a run's input, a step's
result or a failure's message crosses the history as its escape and is read back the same
(``tests/durable/test_temporal_text.py`` against the dev server); what goes to the result store crosses
:func:`journal_json`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from kavalai._utf8 import LONE_SURROGATE, escape_surrogate

__all__ = ["ESCAPED_KEY", "engine_read", "engine_value", "journal_json"]

#: The key under which a run's input or outcome no UTF-8 can hold is handed to DBOS, as escaped JSON text
#: (engine_value).
ESCAPED_KEY: Final = "$kavalai_escaped_json"


def journal_json(
    value: Any,
    *,
    sort_keys: bool = False,
    compact: bool = False,
    default: Callable[[Any], Any] | None = None,
    allow_nan: bool = True,
) -> str:
    """``value`` as JSON text (non-ASCII kept) that encodes as UTF-8: a lone surrogate is written as its escape
    (``"\\udcff"``), the same value for ``json.loads``."""
    separators = (",", ":") if compact else None
    text = json.dumps(
        value, ensure_ascii=False, sort_keys=sort_keys, separators=separators, default=default, allow_nan=allow_nan
    )
    return LONE_SURROGATE.sub(escape_surrogate, text)


def engine_value(value: Any) -> Any:
    """A run's input or outcome as DBOS can write it (its serializer writes text as it is, and a lone surrogate
    then fails the write): the value itself, or, when it holds a lone surrogate or has the shape of this very form,
    its escaped JSON text under :data:`ESCAPED_KEY`, which :func:`engine_read` turns back into the same value
    (lossless, unlike ``utf8_safe``: a run's steps must get its input, and its caller its outcome, as they were)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return value  # not JSON: DBOS's own error says so
    if not LONE_SURROGATE.search(text) and not _escaped(value):
        return value
    return {ESCAPED_KEY: json.dumps(value, separators=(",", ":"))}


def engine_read(value: Any) -> Any:
    """The input or outcome :func:`engine_value` handed to DBOS, as it was given."""
    return json.loads(value[ESCAPED_KEY]) if _escaped(value) else value


def _escaped(value: Any) -> bool:
    """Whether ``value`` has the form :func:`engine_value` gives (a value of that shape is escaped too, so it is
    read back as itself)."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(ESCAPED_KEY), str)
