"""Which field names a generated model may use as they are, and building models that use them quietly.

Tool schemas name their properties freely. A name that would break the model (a dunder, a private name, or one of
pydantic's own ``model_*`` API that the kernel itself calls) is renamed with a trailing underscore and keeps its
name as the alias. A name that only shadows a deprecated pydantic v1 method (``json``, ``dict``, ``schema``,
``copy``, ...) is kept: ``result.json`` reads the field, as the schema names it.
"""

from __future__ import annotations

import warnings
from typing import Any, Final

from pydantic import BaseModel, create_model

__all__ = ["RESERVED_FIELD_NAMES", "create_model_quietly"]

#: Deprecated pydantic v1 methods: a field may shadow them, since nothing in pydantic v2 or kavalai calls them.
_V1_ONLY: Final = frozenset(
    {
        "construct",
        "copy",
        "dict",
        "from_orm",
        "json",
        "parse_file",
        "parse_obj",
        "parse_raw",
        "schema",
        "schema_json",
        "update_forward_refs",
        "validate",
    }
)
#: Names a generated model must not use for a field (``Config`` is v1's configuration class, still refused).
RESERVED_FIELD_NAMES: Final = (frozenset(dir(BaseModel)) - _V1_ONLY) | {"Config"}


def create_model_quietly(name: str, /, **kwargs: Any) -> type[BaseModel]:
    """``pydantic.create_model``, without the warning that a field shadows a deprecated v1 method (on purpose)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Field name .* shadows an attribute in parent", category=UserWarning)
        return create_model(name, **kwargs)
