"""Kaval.AI 1.0's ``kavalai.utils``: ``to_plain`` (plain data, clean text, metadata keys dropped) and
``clean_text``."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from uuid import UUID

from pydantic import BaseModel

from kavalai.utils import clean_text, to_plain


class Simple(BaseModel):
    name: str
    value: int


class Nested(BaseModel):
    simple: Simple
    tags: list[str]


def test_scalars_containers_and_models() -> None:
    assert [to_plain(v) for v in (1, 1.5, "test", True, None)] == [1, 1.5, "test", True, None]
    assert to_plain(True) is True
    assert to_plain(None) is None
    assert to_plain({"a": 1, "b": {"c": 2}}) == {"a": 1, "b": {"c": 2}}
    assert to_plain([1, [2, 3], {"a": 4}]) == [1, [2, 3], {"a": 4}]
    assert to_plain((1, 2)) == [1, 2]
    assert to_plain(Simple(name="t", value=1)) == {"name": "t", "value": 1}
    model = Nested(simple=Simple(name="inner", value=1), tags=["a"])
    plain = {"simple": {"name": "inner", "value": 1}, "tags": ["a"]}
    assert to_plain({"model": model, "list": [model, {"direct": 1}]}) == {
        "model": plain,
        "list": [plain, {"direct": 1}],
    }


def test_datetimes_and_uuids_become_their_text() -> None:
    moment, identifier = datetime(2026, 8, 11, 9, 30), UUID("11111111-2222-3333-4444-555555555555")
    assert to_plain({"at": moment, "id": identifier}) == {"at": "2026-08-11 09:30:00", "id": str(identifier)}


def test_yaml_metadata_keys_are_dropped_at_any_depth() -> None:
    data = {
        "name": "task",
        "__line__": 10,
        "nested": {"value": 1, "__line__": 11},
        "list": [{"item": 1, "__line__": 12}],
    }
    assert to_plain(data) == {"name": "task", "nested": {"value": 1}, "list": [{"item": 1}]}
    assert to_plain({"_id": 7}) == {"_id": 7}  # deliberate: Kaval.AI dropped every key starting with "_"


def test_clean_text_normalises_and_drops_control_characters() -> None:
    assert [clean_text(v) for v in (123, None, True)] == [123, None, True]
    assert clean_text("e\u0301") == "\u00e9"
    assert unicodedata.is_normalized("NFC", clean_text("a\u0308o\u0308"))
    assert clean_text("\u0000\u0000a\u0000b\u0000") == "ab"
    assert clean_text("Line1\nLine2\r\t\x07\x1b") == "Line1\nLine2\r\t"
    assert clean_text("a\u0085b") == "ab"
    assert clean_text("") == ""
    assert clean_text("  ") == "  "
    assert clean_text("hi 👋\u00a0there") == "hi 👋\u00a0there"
    assert to_plain({"key": "Hello\u0000World", "list": ["e\u0301", {"inner": "x\u0000"}]}) == {
        "key": "HelloWorld",
        "list": ["\u00e9", {"inner": "x"}],
    }
    assert to_plain(Simple(name="a\u0000b", value=1)) == {"name": "ab", "value": 1}
