"""The one JSON writer of the durable layer: every value a journal keeps, a result store holds or a step's key hashes
is written by :func:`journal_json`.

Python text may hold lone surrogates (``os.listdir`` gives a file name that is not UTF-8 so, ``\\udcff``), which
``json.dumps(..., ensure_ascii=False)`` writes as they are and which no database, file or hash then takes
(``UnicodeEncodeError``, raised out of the step as if the tool had failed). Here they are written as their JSON
escapes, which ``json.loads`` reads back as the same text, so a run keeps whatever its tools return.
What DBOS serializes itself (a run's input and its outcome) cannot be written so: those values cross
:func:`utf8_safe` on their way to DBOS, each lone surrogate kept as the text of its escape (``\\udcff``, six
characters). ``tests/durable/test_journal_text.py`` finds every JSON written in the package's durable modules and
fails when one bypasses :func:`journal_json`. On Temporal the same rule holds without a step of ours: temporalio's
JSON payload converter writes with ``ensure_ascii``, so a lone surrogate in a run's input, a step's result or a
failure's message crosses the history as its escape and is read back the same (``tests/durable/test_temporal_text.py``
against the dev server); what goes to the result store crosses :func:`journal_json`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from kavalai._utf8 import LONE_SURROGATE, escape_surrogate, utf8_safe

__all__ = ["ESCAPED_KEY", "engine_outcome", "journal_json", "outcome_read", "utf8_safe"]

#: The key under which a run's outcome no UTF-8 can hold is handed to DBOS, as escaped JSON text (engine_outcome).
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


def engine_outcome(value: Any) -> Any:
    """A run's outcome as DBOS can write it (its serializer writes text as it is, and a lone surrogate then fails the
    write after every step was made): the value itself, or, when it holds a lone surrogate, its escaped JSON text
    under :data:`ESCAPED_KEY`, which :func:`outcome_read` turns back into the same value (lossless, unlike
    :func:`utf8_safe`: an outcome carries its steps' results, which the run's caller must get back as they were)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return value  # not JSON: DBOS's own error says so
    if not LONE_SURROGATE.search(text):
        return value
    return {ESCAPED_KEY: json.dumps(value, separators=(",", ":"))}


def outcome_read(value: Any) -> Any:
    """The outcome :func:`engine_outcome` handed to DBOS, as the run returned it."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(ESCAPED_KEY), str):
        return json.loads(value[ESCAPED_KEY])
    return value
