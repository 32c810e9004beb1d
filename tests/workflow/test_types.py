"""Workflow data types declared as JSON Schema."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from kavalai.workflow._types import TypeRegistry


def test_object_schema_with_properties_becomes_a_model() -> None:
    data_type = TypeRegistry().add_json_schema(
        "Folder", {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    )
    assert data_type.is_model
    value = data_type.validate({"path": "docs"})
    assert isinstance(value, BaseModel)
    with pytest.raises(ValidationError):
        data_type.validate({})


def test_object_schema_without_properties_accepts_any_mapping() -> None:
    data_type = TypeRegistry().add_json_schema("Payload", {"type": "object"})
    assert not data_type.is_model
    assert data_type.validate({"anything": [1, 2], "else": None}) == {"anything": [1, 2], "else": None}
    with pytest.raises(ValidationError):
        data_type.validate([1, 2])
