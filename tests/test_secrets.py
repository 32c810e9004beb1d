"""The one secret masker shared by the REST and MCP adapters."""

from __future__ import annotations

from kavalai.secrets import MASK, Redactor


def test_every_secret_is_masked_longest_first() -> None:
    redactor = Redactor(["abc123", "abc123-extended", ""])
    assert redactor.redact("token abc123-extended and abc123") == f"token {MASK} and {MASK}"
    assert redactor.holds("x abc123 y")
    assert not redactor.holds("nothing here")
    assert bool(redactor)
    assert not Redactor([])


def test_short_values_are_kept_when_a_minimum_is_set() -> None:
    redactor = Redactor(["1", "hunter22"], min_length=4)
    assert redactor.redact("retry 1 with hunter22") == f"retry 1 with {MASK}"
    assert not redactor.holds("1")


def test_any_object_is_read_as_text() -> None:
    redactor = Redactor(["s3cr3t"])
    assert redactor.redact(ValueError("bad s3cr3t")) == f"bad {MASK}"
    assert "s3cr3t" not in repr(redactor)
