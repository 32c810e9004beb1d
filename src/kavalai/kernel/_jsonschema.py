"""JSON Schema -> Pydantic models: the one converter shared by MCP tools, REST tools and workflow data types.

Public functions:

- :func:`model_from_json_schema` turns an *object* schema into a model (tool inputs).
- :func:`output_model_from_json_schema` turns any schema into an output model; anything but an object schema with
  properties is wrapped in a model with a single required ``result`` field.
- :func:`type_from_json_schema` turns any schema into a type annotation.

The rules:

- ``type`` string/integer/number/boolean/null -> ``str``/``int``/``float``/``bool``/``None``; a list of types ->
  a union; no ``type`` is inferred from ``properties`` (object) or ``items``/``prefixItems`` (array), else ``Any``.
- ``"type": [..., "null"]``, ``anyOf``/``oneOf`` with a null branch and OpenAPI 3.0 ``nullable: true`` -> Optional.
- Objects with ``properties`` -> nested models named after the parent model plus the property; objects without
  properties -> ``dict[str, T]`` (``T`` from ``additionalProperties``, else ``Any``). ``additionalProperties``
  false -> ``extra="forbid"``; true or a schema -> ``"allow"``; absent -> ``"forbid"`` for inputs and data types
  (an unknown argument name is an error, not silently dropped) and ``"allow"`` for outputs (servers add fields),
  unless the caller says otherwise (``undeclared=``).
- ``items`` -> ``list[T]``; ``prefixItems`` (or draft-4 ``items: [...]``) closed by ``items: false`` or
  ``maxItems`` and with ``minItems`` equal to its length -> ``tuple[...]``, otherwise a list.
- ``enum`` and ``const`` -> ``Literal[...]``; ``anyOf``/``oneOf`` -> unions; ``allOf`` -> one merged schema
  (properties united, ``required`` united, the first value of every other keyword wins).
- ``$ref`` to a JSON pointer in the root document (``#/$defs/X``, ``#/definitions/X``, ``#/components/schemas/X``,
  ``#``) or in the ``root`` document given; each object target becomes one model reused at every reference, and
  recursive references become forward references resolved by ``model_rebuild``.
- ``required`` fields have no default; the others take the schema's ``default`` or ``None`` and stay unset, so
  ``model_dump(by_alias=True, exclude_unset=True, mode="json")`` gives back only what the caller set. OpenAPI
  ``readOnly`` properties are never required in inputs, nor ``writeOnly`` ones in outputs.
- ``description`` and ``title`` are kept on fields (and as the docstring of nested models), ``default`` on
  optional fields, ``format`` and ``examples`` in the JSON schema; formats are validated as plain strings.
- ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` (numbers, and the draft-4 booleans),
  ``multipleOf``, ``minLength``/``maxLength``/``pattern`` and ``minItems``/``maxItems`` become pydantic
  constraints. Patterns run on pydantic's default engine (Rust's ``regex`` crate), whose matching time is linear in
  the input: a server's ``^(a+)+$`` cannot stall the event loop. A pattern that engine cannot compile (look-around,
  back-references) is not enforced, and a warning on the ``kavalai`` logger says so.
- Property names that are not ASCII identifiers, are keywords, start with ``_`` or shadow ``BaseModel``
  attributes get a safe field name and keep the original as alias (``populate_by_name=True``), so dumps by alias
  and ``model_json_schema()`` show the original names.

For inputs only, an object given solely as ``anyOf``/``oneOf`` of object schemas becomes one model holding
every branch's properties; only those all branches require stay required.

Defaults are validated against their field: ``"7"`` for an integer becomes ``7``, ``{"deep": true}`` the nested
model; a default that does not fit its own schema is dropped (the field then defaults to ``None``).

What it falls back on: an unsupported or malformed part -- ``not``, ``if``/``then``/``else``,
``patternProperties``, ``propertyNames``, ``dependentSchemas``, ``min``/``maxProperties``, ``uniqueItems``,
``contains``, the schema of ``additionalProperties`` next to ``properties`` (extra values are allowed but not
validated), an ``enum`` of objects, a remote or dangling ``$ref``, a ``$ref`` cycle through non-object schemas, a
pattern Python cannot compile, a constraint of the wrong type -- is ignored, and where nothing else is left that
part is ``Any``; a field pydantic still refuses becomes ``Any`` with its name, alias and description kept.
Building never fails on such input. Nothing is cached between calls: each call builds fresh models.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, ForwardRef, Literal, Union
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import SchemaError

from kavalai.kernel._constraints import constrained, length_constraints, number_constraints, string_constraints
from kavalai.kernel._names import RESERVED_FIELD_NAMES, create_model_quietly
from kavalai.secrets import get_logger

__all__ = ["model_from_json_schema", "output_model_from_json_schema", "type_from_json_schema"]

logger = get_logger("kavalai")

Extra = Literal["forbid", "allow", "ignore"]

# "Config" is the pydantic v1 configuration class name, still refused next to model_config.
_LITERAL_TYPES = (str, int, float, bool, type(None))


def model_from_json_schema(
    schema: Mapping[str, Any],
    name: str,
    *,
    extra: Extra | None = None,
    root: Mapping[str, Any] | None = None,
    undeclared: Extra = "forbid",
) -> type[BaseModel]:
    """Build a model named ``name`` from an object schema.

    Args:
        schema: a JSON Schema of ``"type": "object"`` (or with ``properties``, or ``{}``).
        name: the model's class name (made a valid identifier if it is not one).
        extra: ``"forbid"``, ``"allow"`` or ``"ignore"``; ``None`` derives it from ``additionalProperties``
            (false -> forbid, true or a schema -> allow, absent -> ``undeclared``).
        root: the document ``$ref`` pointers resolve against; defaults to ``schema`` itself.
        undeclared: the ``extra`` of every object schema (nested ones too) that does not say
            (no ``additionalProperties``): ``"forbid"`` by default, so an unknown argument name is an error.

    Raises:
        ValueError: ``schema`` is not an object schema; use :func:`type_from_json_schema` for any other.
    """
    if root is None and schema.get("$ref") == "#":
        # A root that points at itself says nothing more than its siblings do: without this it is a loop.
        schema = {key: value for key, value in schema.items() if key != "$ref"}
    builder = _Builder(schema if root is None else root, output=False, undeclared=undeclared)
    flat = builder.merge_branches(builder.flatten(schema))
    if "$ref" in flat:
        # A reference that does not resolve: the arguments cannot be checked, so accept any.
        flat, extra = {"type": "object"}, extra or "allow"
    if not _is_object(flat):
        raise ValueError(
            f"Cannot build model {name!r}: the schema is not an object schema ({_describe(flat)}). "
            "Tool arguments are named fields, so the schema must be "
            '{"type": "object", "properties": {...}}; use type_from_json_schema() for any other schema.'
        )
    model = builder.top_model(schema, flat, name, extra=extra, is_root=root is None)
    builder.finish()
    return model


def output_model_from_json_schema(
    schema: Mapping[str, Any] | None,
    name: str,
    *,
    root: Mapping[str, Any] | None = None,
    undeclared: Extra | None = None,
) -> tuple[type[BaseModel], bool]:
    """Build the output model named ``name`` for a tool's output schema.

    Args:
        undeclared: ``None`` (the default): the top model allows fields its schema does not declare, whatever
            the schema says (servers add fields), and so do nested models whose schemas do not say (no
            ``additionalProperties``). Else the ``extra`` of every object schema that does not say, the top one
            included, and the top model follows its schema's ``additionalProperties`` like the others.

    Returns:
        ``(model, False)`` for an object schema with properties; otherwise ``(wrapper, True)``, where the wrapper
        has a single required ``result`` field of the converted type (``Any`` for ``None`` or ``{}``).
    """
    if schema is None or not isinstance(schema, Mapping):
        return _wrapper(name, Any, None), True
    builder = _Builder(schema if root is None else root, output=True, undeclared=undeclared or "allow")
    flat = builder.flatten(schema)
    if _is_record(flat):
        top_extra: Extra | None = "allow" if undeclared is None else None
        model = builder.top_model(schema, flat, name, extra=top_extra, is_root=root is None)
        builder.finish()
        return model, False
    result_type = builder.type_of(schema, f"{_identifier(name)}Result")
    wrapper = _wrapper(name, result_type, _text(flat.get("description")))
    builder.models.append(wrapper)
    builder.finish()
    return wrapper, True


def type_from_json_schema(schema: Mapping[str, Any], name: str, *, root: Mapping[str, Any] | None = None) -> Any:
    """The Python type annotation (a model, ``list[...]``, ``Literal[...]``, a union, ...) for any schema.

    Object schemas with properties become models named ``name`` (``extra`` as in :func:`model_from_json_schema`).
    """
    builder = _Builder(schema if root is None else root, output=False)
    flat = builder.flatten(schema)
    if _is_record(flat):
        result: Any = builder.top_model(schema, flat, name, extra=None, is_root=root is None)
    else:
        result = builder.type_of(schema, _identifier(name))
    builder.finish()
    return result


class _Builder:
    """Converts the schemas of one document; holds the models built so far, by ``$ref``, for reuse and recursion."""

    def __init__(self, root: Mapping[str, Any], *, output: bool, undeclared: Extra | None = None) -> None:
        self.root = root
        self.output = output
        # Inputs refuse names the schema does not declare; outputs keep what a newer server adds.
        self.default_extra: Extra = undeclared or ("allow" if output else "forbid")
        self.models: list[type[BaseModel]] = []
        self._done: dict[str, Any] = {}
        # ref -> forward-reference identifier while its model is being built; None for non-object targets.
        self._pending: dict[str, str | None] = {}
        self._namespace: dict[str, Any] = {}
        self._names: set[str] = set()
        self._counter = 0
        self._inlining: set[str] = set()
        # Models by the identity of the schema object they were built from. A document parsed from YAML shares one
        # object wherever an alias repeats it, and a tree walk would build 2**n models for n nested aliases (a
        # 1 KB spec taking minutes); each shared object is built once. The schema is kept to pin its id.
        self._by_identity: dict[tuple[int, Extra | None], tuple[Mapping[str, Any], type[BaseModel]]] = {}

    # -- the entry points --------------------------------------------------------------------------------------

    def top_model(
        self, schema: Mapping[str, Any], flat: Mapping[str, Any], name: str, *, extra: Extra | None, is_root: bool
    ) -> type[BaseModel]:
        """The model of the top-level object schema ``schema``, flattened as ``flat``.

        References back to it (``#`` when it is the root document, or the ``$ref`` it is itself given by) reuse
        it rather than building a copy.
        """
        _, refs = self._follow(schema, frozenset())
        keys = list(dict.fromkeys([*refs, "#"] if is_root else refs))
        ident = self._forward_ident()
        self._pending.update(dict.fromkeys(keys, ident))
        model = self.object_model(flat, name, extra=extra)
        self._namespace[ident] = model
        for key in keys:
            self._done[key] = model
            del self._pending[key]
        return model

    def finish(self) -> None:
        """Resolve the forward references of recursive models."""
        for model in self.models:
            if not model.__pydantic_complete__:
                model.model_rebuild(_types_namespace=self._namespace)

    # -- schemas to types --------------------------------------------------------------------------------------

    def type_of(self, schema: Any, name: str) -> Any:
        """The annotation for ``schema``; ``name`` names the models built for it."""
        if not isinstance(schema, Mapping):
            return Any
        if "allOf" in schema:
            return self._all_of(schema, name)
        if isinstance(schema.get("$ref"), str):
            return _nullable(schema, self._ref(schema["$ref"]))
        if "const" in schema:
            return _nullable(schema, _literal([schema["const"]]))
        if isinstance(schema.get("enum"), list):
            return _nullable(schema, _literal(schema["enum"]))
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                types = [self.type_of(branch, f"{name}{i}") for i, branch in enumerate(branches)]
                return _nullable(schema, _union(types))
        kind = schema.get("type")
        if isinstance(kind, list):
            return _nullable(schema, _union([self._typed(schema, k, name) for k in kind]))
        if not isinstance(kind, str):
            kind = _infer_type(schema)
        return _nullable(schema, self._typed(schema, kind, name))

    def _all_of(self, schema: Mapping[str, Any], name: str) -> Any:
        parts = schema["allOf"] if isinstance(schema["allOf"], list) else []
        refs = {p["$ref"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("$ref"), str)}
        looping = sorted(r for r in refs if r in self._pending or r in self._inlining)
        if looping:
            # The schema contains itself through allOf: refer to its model instead of inlining it forever.
            return _nullable(schema, self._ref(looping[0]))
        added = refs - self._inlining
        self._inlining |= added
        try:
            return self.type_of(self._merge_all_of(schema, frozenset()), name)
        finally:
            self._inlining -= added

    def _typed(self, schema: Mapping[str, Any], kind: Any, name: str) -> Any:
        if kind == "string":
            return constrained(str, string_constraints(schema), schema)
        if kind in ("integer", "number"):
            base: type = int if kind == "integer" else float
            return constrained(base, number_constraints(schema, integer=kind == "integer"), schema)
        if kind == "boolean":
            return bool
        if kind == "null":
            return None
        if kind == "array":
            return self._array(schema, name)
        if kind == "object":
            return self._object_type(schema, name)
        return Any

    def _array(self, schema: Mapping[str, Any], name: str) -> Any:
        items = schema.get("items")
        prefix = schema.get("prefixItems", items if isinstance(items, list) else None)
        if isinstance(prefix, list):
            tail = schema.get("items") if "prefixItems" in schema else schema.get("additionalItems")
            closed = tail is False or schema.get("maxItems") == len(prefix)
            if prefix and closed and schema.get("minItems") == len(prefix):
                members = [self.type_of(item, f"{name}{i}") for i, item in enumerate(prefix)]
                return tuple[tuple(members)]  # type: ignore[misc]
            return list[Any]
        item_type = self.type_of(items, f"{name}Item") if isinstance(items, Mapping) else Any
        return constrained(list[item_type], length_constraints(schema, "minItems", "maxItems"), schema)  # type: ignore[valid-type]

    def _object_type(self, schema: Mapping[str, Any], name: str) -> Any:
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and properties:
            return self.object_model(schema, name, extra=None)
        additional = schema.get("additionalProperties")
        if additional is False:
            return self.object_model(schema, name, extra="forbid")
        value_type = self.type_of(additional, f"{name}Value") if isinstance(additional, Mapping) else Any
        return dict[str, value_type]  # type: ignore[valid-type]

    def object_model(self, schema: Mapping[str, Any], name: str, *, extra: Extra | None) -> type[BaseModel]:
        """A model with one field per property of an object schema (built once per schema object)."""
        known = self._by_identity.get((id(schema), extra))
        if known is not None and known[0] is schema:
            return known[1]
        model = self._build_object_model(schema, name, extra=extra)
        self._by_identity[(id(schema), extra)] = (schema, model)
        return model

    def _build_object_model(self, schema: Mapping[str, Any], name: str, *, extra: Extra | None) -> type[BaseModel]:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            properties = {}
        required = {prop for prop in _strings(schema.get("required")) if not self._one_way(properties.get(prop))}
        model_name = self._unique_name(name)
        specs: dict[str, tuple[Any, Any, bool, str | None]] = {}
        for prop, field_name in _field_names(properties).items():
            sub = properties[prop]
            annotation = self.type_of(sub, f"{model_name}{_camel(prop)}")
            specs[field_name] = (annotation, sub, prop in required, prop if field_name != prop else None)
        config = ConfigDict(
            extra=extra or self._extra_of(schema),
            populate_by_name=True,
            protected_namespaces=(),
            regex_engine="rust-regex",
            # JSON has no NaN or Infinity: refuse them in number fields, and keep them visible (not null) in open
            # ones, so a JSON body holding one is refused rather than changed.
            allow_inf_nan=False,
            ser_json_inf_nan="constants",
        )
        title = _text(schema.get("title"))
        if title:
            config["title"] = title
        doc = _text(schema.get("description"))
        fields = {key: (ann, self._field_info(sub, req, alias)) for key, (ann, sub, req, alias) in specs.items()}
        model = _create(model_name, config, doc, fields)
        invalid = _invalid_defaults(model)
        if invalid:
            for key in invalid:
                ann, sub, _, alias = specs[key]
                fields[key] = (ann, self._field_info(sub, False, alias, use_default=False))
            model = _create(model_name, config, doc, fields)
        self.models.append(model)
        return model

    def _field_info(self, schema: Any, required: bool, alias: str | None, *, use_default: bool = True) -> Any:
        meta = self._metadata_view(schema)
        kwargs: dict[str, Any] = {}
        for key in ("description", "title"):
            text = _text(meta.get(key))
            if text:
                kwargs[key] = text
        if isinstance(meta.get("examples"), list) and not _has_ref_key(meta["examples"]):
            kwargs["examples"] = meta["examples"]
        if alias is not None:
            kwargs["alias"] = alias
        if required:
            return Field(..., **kwargs)
        if "default" not in meta or not use_default:
            # None is only the "not given" marker: the JSON schema should not claim the server defaults to null.
            return Field(None, json_schema_extra=_drop_default, **kwargs)
        # Validated, so that a default such as {"deep": true} becomes the nested model and dumps do not warn;
        # defaults that do not fit are found by _invalid_defaults and dropped.
        if _has_ref_key(meta["default"]):
            # pydantic's JSON schema generator would take a "$ref" inside the default for a reference.
            kwargs["json_schema_extra"] = _drop_default
        return Field(meta["default"], validate_default=True, **kwargs)

    def _one_way(self, schema: Any) -> bool:
        """Whether a property only travels the other way (OpenAPI ``readOnly`` in inputs, ``writeOnly`` in outputs).

        Such a property is never required: a client cannot send a read-only id, nor expect a write-only password.
        """
        flag = "writeOnly" if self.output else "readOnly"
        return self._metadata_view(schema).get(flag) is True

    def _extra_of(self, schema: Mapping[str, Any]) -> Extra:
        additional = schema.get("additionalProperties", schema.get("unevaluatedProperties"))
        if additional is False:
            return "forbid"
        if additional is True or isinstance(additional, Mapping):
            return "allow"
        return self.default_extra

    # -- references and merging --------------------------------------------------------------------------------

    def _ref(self, ref: str) -> Any:
        if ref in self._done:
            return self._done[ref]
        if ref in self._pending:
            ident = self._pending[ref]
            return Any if ident is None else ForwardRef(ident)
        target = self._resolve(ref)
        if target is None:
            return Any
        name = _identifier(unquote(ref.rsplit("/", 1)[-1]) or "Root")
        flat = self.flatten(target)
        if _is_record(flat):
            ident = self._forward_ident()
            self._pending[ref] = ident
            result: Any = self.object_model(flat, name, extra=None)
            self._namespace[ident] = result
        else:
            self._pending[ref] = None
            result = self.type_of(target, name)
        del self._pending[ref]
        self._done[ref] = result
        return result

    def _resolve(self, ref: str) -> Mapping[str, Any] | None:
        """The schema a local JSON pointer points at in the root document; ``None`` if remote or missing."""
        if not ref.startswith("#"):
            return None
        pointer = unquote(ref[1:])
        node: Any = self.root
        if pointer:
            if not pointer.startswith("/"):
                return None
            for token in pointer[1:].split("/"):
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(node, Mapping) and token in node:
                    node = node[token]
                elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                    node = node[int(token)]
                else:
                    return None
        return node if isinstance(node, Mapping) else None

    def flatten(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """``schema`` with a leading ``$ref`` chain followed and ``allOf`` merged, for deciding what it is.

        A ``$ref`` that does not resolve stays in the result.
        """
        followed, seen = self._follow(schema, frozenset())
        if followed is None:
            return schema
        return self._merge_all_of(followed, seen) if "allOf" in followed else followed

    def _follow(
        self, schema: Mapping[str, Any], seen: frozenset[str]
    ) -> tuple[Mapping[str, Any] | None, frozenset[str]]:
        """Follow a ``$ref`` chain, sibling keywords winning; ``None`` if it leads nowhere or in a circle."""
        while isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            target = None if ref in seen else self._resolve(ref)
            if target is None:
                return None, seen
            seen = seen | {ref}
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return schema, seen

    def _merge_all_of(self, schema: Mapping[str, Any], seen: frozenset[str]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        parts = schema.get("allOf")
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, Mapping):
                continue
            followed, part_seen = self._follow(part, seen)
            if followed is None:
                continue
            if "allOf" in followed:
                followed = self._merge_all_of(followed, part_seen)
            _merge_into(merged, followed)
        return merged

    def merge_branches(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """An object given only as ``anyOf``/``oneOf`` of object schemas, as one object schema.

        Every branch's properties are kept (a property in several branches with different schemas becomes their
        ``anyOf``); only the properties every branch requires stay required. Any other schema is returned as is.
        """
        if isinstance(schema.get("properties"), Mapping) and schema["properties"]:
            return schema
        key = next((k for k in ("anyOf", "oneOf") if isinstance(schema.get(k), list) and schema[k]), None)
        if key is None:
            return schema
        branches = [self.flatten(b) if isinstance(b, Mapping) else {} for b in schema[key]]
        if not all(_is_object(b) and isinstance(b.get("properties"), Mapping) for b in branches):
            return schema
        variants: dict[str, list[Any]] = {}
        for branch in branches:
            for prop, sub in branch["properties"].items():
                if sub not in variants.setdefault(prop, []):
                    variants[prop].append(sub)
        required = set.intersection(*(set(_strings(b.get("required"))) for b in branches))
        merged = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        merged["type"] = "object"
        merged["properties"] = {p: subs[0] if len(subs) == 1 else {"anyOf": subs} for p, subs in variants.items()}
        merged["required"] = [*_strings(schema.get("required")), *sorted(required)]
        return merged

    def _metadata_view(self, schema: Any) -> Mapping[str, Any]:
        """The keywords describing a property: its own, else those of the schema its ``$ref`` points at."""
        if not isinstance(schema, Mapping):
            return {}
        if isinstance(schema.get("$ref"), str):
            target = self._resolve(schema["$ref"]) or {}
            return {**target, **schema}
        return schema

    # -- names -------------------------------------------------------------------------------------------------

    def _forward_ident(self) -> str:
        # Not a model's display name: a builtin or module name such as "str" must never resolve instead.
        self._counter += 1
        return f"kavalai_ref_{self._counter}"

    def _unique_name(self, name: str) -> str:
        base = _identifier(name)
        candidate, n = base, 2
        while candidate in self._names:
            candidate, n = f"{base}{n}", n + 1
        self._names.add(candidate)
        return candidate


# -- helpers ---------------------------------------------------------------------------------------------------


_BUILD_ERRORS = (TypeError, ValueError, RuntimeError, NameError, AttributeError, SchemaError)


def _create(name: str, config: ConfigDict, doc: str | None, fields: Mapping[str, Any]) -> type[BaseModel]:
    try:
        return _new_model(name, config, doc, fields)
    except _BUILD_ERRORS:
        # A constraint or default pydantic refuses: find the fields at fault and make them Any, keeping their
        # names, aliases, defaults and descriptions.
        kept = {key: spec if _builds(key, spec, config) else (Any, spec[1]) for key, spec in fields.items()}
        try:
            return _new_model(name, config, doc, kept)
        except _BUILD_ERRORS:
            return _new_model(name, config, doc, {key: (Any, spec[1]) for key, spec in fields.items()})


def _builds(key: str, spec: tuple[Any, Any], config: ConfigDict) -> bool:
    try:
        _new_model("Probe", config, None, {key: spec})
    except _BUILD_ERRORS:
        return False
    return True


def _new_model(name: str, config: ConfigDict, doc: str | None, fields: Mapping[str, Any]) -> type[BaseModel]:
    definitions: dict[str, Any] = dict(fields)
    return create_model_quietly(name, __config__=config, __doc__=doc, **definitions)


def _invalid_defaults(model: type[BaseModel]) -> set[str]:
    """The fields of ``model`` whose schema default does not validate against the field's own type."""
    checked = {f.alias or key: key for key, f in model.model_fields.items() if f.validate_default}
    if not checked or not model.__pydantic_complete__:
        # A model waiting for a forward reference cannot validate yet; its defaults stay as given.
        return set()
    try:
        model.model_validate({})
    except ValidationError as exc:
        return {
            checked[error["loc"][0]]
            for error in exc.errors()
            if error["loc"] and error["loc"][0] in checked and (error["type"] != "missing" or len(error["loc"]) > 1)
        }
    return set()


def _has_ref_key(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "$ref" in value or any(_has_ref_key(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_ref_key(v) for v in value)
    return False


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _wrapper(name: str, annotation: Any, description: str | None) -> type[BaseModel]:
    return create_model_quietly(
        _identifier(name),
        __config__=ConfigDict(protected_namespaces=(), regex_engine="rust-regex"),
        result=(annotation, Field(..., description=description)),
    )


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(kind, list):
        return "object" in kind
    if kind is not None:
        return bool(kind == "object")
    return "properties" in schema or not any(k in schema for k in ("anyOf", "oneOf", "enum", "const", "items"))


def _is_record(schema: Mapping[str, Any]) -> bool:
    """An object schema with properties that does not also allow null: the schemas that become a model."""
    if schema.get("nullable") is True or (isinstance(schema.get("type"), list) and "null" in schema["type"]):
        return False
    properties = schema.get("properties")
    return _is_object(schema) and isinstance(properties, Mapping) and bool(properties)


def _describe(schema: Mapping[str, Any]) -> str:
    if "type" in schema:
        return f"its type is {schema['type']!r}"
    keywords = [k for k in ("anyOf", "oneOf", "enum", "const", "items") if k in schema]
    return f"it is given by {', '.join(keywords)}"


def _infer_type(schema: Mapping[str, Any]) -> str | None:
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    return None


def _strings(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _merge_into(merged: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if key == "properties" and isinstance(value, Mapping):
            mine = merged.get("properties")
            merged["properties"] = {**value, **(mine if isinstance(mine, Mapping) else {})}
        elif key == "required" and isinstance(value, list):
            merged["required"] = list(dict.fromkeys([*_strings(merged.get("required")), *_strings(value)]))
        else:
            merged.setdefault(key, value)


def _literal(values: Iterable[Any]) -> Any:
    members = list(values)
    if not members or not all(isinstance(v, _LITERAL_TYPES) for v in members):
        return Any
    if any(isinstance(v, float) and not math.isfinite(v) for v in members):
        return Any
    return Literal[tuple(members)]


def _union(types: list[Any]) -> Any:
    unique: list[Any] = []
    if not types:
        return Any
    for t in types:
        if t is Any:
            return Any
        if t not in unique:
            unique.append(t)
    return Union[tuple(unique)]  # noqa: UP007 -- the members are only known at run time


def _nullable(schema: Mapping[str, Any], annotation: Any) -> Any:
    if schema.get("nullable") is True and annotation is not Any:
        return _union([annotation, None])
    return annotation


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _field_names(properties: Mapping[str, Any]) -> dict[str, str]:
    """Map each property name to a field name that is safe on a model, keeping safe names unchanged."""
    names = {prop: prop for prop in properties if isinstance(prop, str) and _is_safe(prop)}
    taken = set(names.values())
    for prop in properties:
        if not isinstance(prop, str) or prop in names:
            continue
        base = re.sub(r"[^0-9A-Za-z_]", "_", prop).strip("_") or "field"
        if base[0].isdigit():
            base = f"field_{base}"
        candidate, n = base, 1
        while candidate in taken or not _is_safe(candidate):
            candidate, n = f"{base}_{n}" if n > 1 else f"{base}_", n + 1
        names[prop] = candidate
        taken.add(candidate)
    return {prop: names[prop] for prop in properties if prop in names}


def _is_safe(name: str) -> bool:
    return (
        name.isascii()
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        and name not in RESERVED_FIELD_NAMES
    )


def _identifier(name: str) -> str:
    """``name`` as a CamelCase ASCII identifier, for model class names."""
    words = re.sub(r"[^0-9A-Za-z]", " ", name).split()
    ident = "".join(w[:1].upper() + w[1:] for w in words) or "Model"
    return f"M{ident}" if ident[0].isdigit() else ident


def _camel(name: str) -> str:
    words = re.sub(r"[^0-9A-Za-z]", " ", name).split()
    return "".join(w[:1].upper() + w[1:] for w in words) or "Field"
