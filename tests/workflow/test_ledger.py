"""The run ledger's own counting of common values agrees with the general size walk it short-cuts."""

from __future__ import annotations

from typing import Any

import pytest

from kavalai.workflow._ledger import RunLedger, _size
from kavalai.workflow._sizes import text_size
from kavalai.workflow.errors import RunMemoryError

SHORT_CUT: list[Any] = [
    {},
    {"result": 5},
    {"result": "a text", "n": None, "f": 1.5, "b": False},
    {str(i): i for i in range(16)},
]
WALKED: list[Any] = [
    {str(i): i for i in range(17)},  # past the short cut's 16 keys
    {1: "a key that is no text"},
    {"nested": {"result": 5}},
    {"items": [1, 2, 3]},
    [1, "two", {"three": 3}],
]


@pytest.mark.parametrize("value", SHORT_CUT, ids=repr)
def test_a_flat_dict_is_counted_no_lower_than_the_general_walk_counts_it(value: Any) -> None:
    assert _size(value, 10**9) >= text_size(value, 10**9)


@pytest.mark.parametrize("value", WALKED, ids=repr)
def test_other_values_are_counted_by_the_general_walk(value: Any) -> None:
    assert _size(value, 10**9) == text_size(value, 10**9)


def test_numbers_and_texts_are_counted_at_once() -> None:
    assert [_size(value, 10**9) for value in (5, 2.5, True, None, "", "a text")] == [8, 8, 8, 8, 0, 6]


def test_holding_a_growing_value_fails_the_run_naming_the_node() -> None:
    ledger = RunLedger(max_value_size=10)  # a run budget of 640
    ledger.hold("grow", {"result": "x" * 300})
    ledger.hold("grow", {"result": "x" * 600})  # replaces the earlier value: 600 + a little, under 640
    with pytest.raises(RunMemoryError) as caught:
        ledger.hold("other", {"result": "x" * 100})
    assert caught.value.node == "other"
