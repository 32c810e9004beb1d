"""What Kaval.AI 1.0 nodes share at run time: the run context keyed by ``output`` names, prompt rendering,
input resolution, and the pluggable history and retriever.

Upstream keeps one mutable context per run in which every node writes its result under its ``output`` name.
Ours stores node outputs by node id; the translated nodes keep upstream's context beside it, in the run's values
under a key no node id can take, so both views exist in one run.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from kavalai.kernel import current_deadline
from kavalai.workflow._expressions import _Evaluator, _Missing, compile_expression, read_key
from kavalai.workflow._meter import Meter, _SliceSpent, current_meter
from kavalai.workflow._meter import evaluate as metered
from kavalai.workflow.errors import ExpressionError, NodeError, failure_text, quoted

if TYPE_CHECKING:
    from kavalai.llm.messages import Message
    from kavalai.workflow._runners import NodeEnv
    from kavalai.workflow.kaval._models import KavalArgument

__all__ = [
    "History",
    "InMemoryHistory",
    "KavalRuntime",
    "RagHit",
    "Retriever",
    "context_of",
]

#: The key of upstream's context in a run's values: not a Python identifier, so never a node id.
CONTEXT_KEY = "@kaval"
PLACEHOLDER = re.compile(r"\{\{\s*(templates|context|history)\.(.+?)\s*\}\}")


@runtime_checkable
class History(Protocol):
    """Earlier runs of a session: what ``{type: history}`` inputs, ``{{ history.x }}`` and ``use_history`` read.

    Upstream reads these from its database-backed ``AgentService``; here any object with these two methods will do
    (:class:`InMemoryHistory` is one).
    """

    async def value(self, path: str) -> Any:
        """The value at ``path`` (``answer.text``) in the latest earlier run that has it; ``None`` if none has."""
        ...

    async def messages(self, *, limit: int, max_chars: int | None) -> Sequence[Message]:
        """The last ``limit`` chat messages, oldest first, trimmed from the oldest end to ``max_chars``."""
        ...


@dataclass
class InMemoryHistory:
    """A :class:`History` held in memory: earlier run contexts and chat messages, added by the caller.

    Attributes:
        contexts: earlier runs' contexts, oldest first (``{"output": {...}, ...}``).
        chat: the chat messages of the session, oldest first.
    """

    contexts: list[dict[str, Any]] = field(default_factory=list)
    chat: list[Message] = field(default_factory=list)

    async def value(self, path: str) -> Any:
        """The value at ``path`` in the newest context that has it."""
        expression = compile_expression(path)
        for context in reversed(self.contexts):
            try:
                return await expression.evaluate_async(context)
            except ExpressionError:
                continue
        return None

    async def messages(self, *, limit: int, max_chars: int | None) -> Sequence[Message]:
        """The newest ``limit`` messages, dropping whole messages from the oldest end to fit ``max_chars``."""
        chosen = self.chat[-limit:] if limit else []
        if max_chars is not None:
            while chosen and sum(len(str(getattr(m, "content", "") or "")) for m in chosen) > max_chars:
                chosen = chosen[1:]
        return list(chosen)


class RagHit(BaseModel):
    """One passage a retriever found (upstream's ``RagServiceResult``, with ``metadata`` for ``rag_metadata``)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str
    content: str | None = None
    similarity: float = 0.0
    source_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict, alias="rag_metadata")

    @classmethod
    def of(cls, hit: Any) -> RagHit:
        """A hit from a mapping or from any object with these attributes."""
        if isinstance(hit, RagHit):
            return hit
        if not isinstance(hit, Mapping):
            hit = {name: getattr(hit, name) for name in (*cls.model_fields, "rag_metadata") if hasattr(hit, name)}
        data = dict(hit)
        data["id"] = str(data.get("id", ""))
        return cls.model_validate(data)


@runtime_checkable
class Retriever(Protocol):
    """What a ``rag_query`` node queries (upstream's ``BaseRagService.query``, read-only)."""

    async def query(
        self,
        text: str,
        *,
        top_k: int,
        collection_name: str | None,
        source_ids: Sequence[str] | None,
        keep_best: bool,
        match: Mapping[str, Any] | None,
    ) -> Sequence[Any]:
        """The ``top_k`` passages closest to ``text`` (:class:`RagHit`, mappings, or objects with its fields)."""
        ...


class KavalRuntime:
    """Per-workflow settings the translated nodes read (one per loaded document).

    Attributes:
        workflow: the workflow's name.
        llm_model: the document's default model.
        templates: ``{{ templates.x }}`` values.
        rag_services: retrievers by service name.
        rag_service: the document's default service name.
        rag_collection: the document's default collection.
        history: earlier runs of the session, when the caller gives them.
    """

    def __init__(
        self,
        workflow: str,
        *,
        llm_model: str | None = None,
        templates: Mapping[str, str] | None = None,
        rag_services: Mapping[str, Retriever] | None = None,
        rag_service: str | None = None,
        rag_collection: str | None = None,
        history: History | None = None,
    ) -> None:
        self.workflow = workflow
        self.llm_model = llm_model
        self.templates = dict(templates or {})
        self.rag_services = dict(rag_services or {})
        self.rag_service = rag_service
        self.rag_collection = rag_collection
        self.history = history

    def __repr__(self) -> str:
        return f"<KavalRuntime {self.workflow!r}>"

    def retriever(self, service: str | None, node: str) -> tuple[str, Retriever]:
        """The retriever for a ``rag_query`` node: node service, else the document's, else ``"default"``."""
        name = service or self.rag_service or "default"
        found = self.rag_services.get(name)
        if found is None:
            given = ", ".join(sorted(self.rag_services)) or "none"
            raise NodeError(
                f"Node {node!r} (rag_query) needs the RAG service {name!r}, but none is configured (given: {given}). "
                f"Pass rag_services={{{name!r}: retriever}} (or one retriever, used as 'default') to "
                "WorkflowEngine.from_yaml / from_dict; a retriever is any object with an async query(...) method.",
                node=node,
                field="service",
            )
        return name, found


def context_of(env: NodeEnv) -> dict[str, Any]:
    """Upstream's run context (output name -> value), created on first use with the validated ``input``."""
    context = env.values.get(CONTEXT_KEY)
    if context is None:
        context = {"input": env.values.get("input")}
        env.values[CONTEXT_KEY] = context
    return context


def plain(value: Any) -> Any:
    """Models as dicts (by alias), the rest as is: the form values take in the context."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True)
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def as_text(value: Any) -> str:
    """A value as prompt text: containers and models as JSON, the rest with ``str``."""
    if isinstance(value, dict | list | tuple | BaseModel):
        return json.dumps(to_jsonable_python(value, by_alias=True, fallback=str), ensure_ascii=False)
    return str(value)


class _Lenient(_Evaluator):
    """Upstream's reading: a missing name, key or field, or any read of ``None``, gives ``None``."""

    def _Name(self, node: ast.Name) -> Any:
        return self._context.get(node.id)

    def _Attribute(self, node: ast.Attribute) -> Any:
        return _read(self.eval(node.value), node.attr)

    def _Subscript(self, node: ast.Subscript) -> Any:
        if isinstance(node.slice, ast.Slice):
            return super()._Subscript(node)
        return _read(self.eval(node.value), self.eval(node.slice))


def _read(value: Any, key: Any) -> Any:
    if value is None:
        return None
    try:
        return read_key(value, key)
    except _Missing:
        return None


@lru_cache(maxsize=1024)
def _tree(source: str) -> ast.expr:
    compile_expression(source)  # the whitelist and the bounds apply as to our own expressions
    return ast.parse(source.strip(), mode="eval").body


def evaluate(source: str, context: Mapping[str, Any], *, node: str, field: str) -> Any:
    """Evaluate an upstream expression or path (names are context variables) with upstream's reading of
    missing values; anything the whitelist refuses, or a failing operation, fails the node."""
    return _lenient(source, context, Meter(deadline=current_deadline()), node, field)


async def evaluate_async(source: str, context: Mapping[str, Any], *, node: str, field: str) -> Any:
    """:func:`evaluate`, holding the event loop for at most a slice (and never for one operation on a huge list),
    then begun again in a worker thread (:func:`kavalai.workflow._meter.evaluate`)."""
    return await metered(lambda: _lenient(source, context, current_meter(), node, field))


def _lenient(source: str, context: Mapping[str, Any], meter: Meter | None, node: str, field: str) -> Any:
    try:
        return _Lenient(context, meter or Meter(deadline=current_deadline())).eval(_tree(source))
    except _SliceSpent:
        raise  # out of its slice of the event loop: begun again in a worker thread
    except ExpressionError as exc:
        raise NodeError(f"Node {node!r}: field {field!r}: {exc.message}", node=node, field=field) from exc
    except Exception as exc:
        raise NodeError(
            f"Node {node!r}: field {field!r}: expression {quoted(source)} failed: {failure_text(exc)}",
            node=node,
            field=field,
        ) from exc


def read_path(env: NodeEnv, path: str, *, node: str, field: str) -> Any:
    """The value at ``path`` in the run context (``None`` where anything on the way is missing)."""
    return evaluate(path, context_of(env), node=node, field=field)


async def read_history(runtime: KavalRuntime, path: str, *, node: str, field: str) -> Any:
    """The value at ``path`` in earlier runs; fails the node when the engine was given no history."""
    if runtime.history is None:
        raise NodeError(
            f"Node {node!r}: field {field!r} reads history.{path}, but the engine has no history of earlier runs. "
            "Pass history=... (an InMemoryHistory or any History) to WorkflowEngine.from_yaml / from_dict.",
            node=node,
            field=field,
        )
    return await runtime.history.value(path)


async def placeholder(runtime: KavalRuntime, env: NodeEnv, prefix: str, path: str, *, node: str, field: str) -> Any:
    """The value behind one ``{{ prefix.path }}``; an unresolvable one fails the node."""
    if prefix == "templates":
        if path not in runtime.templates:
            known = ", ".join(sorted(runtime.templates)) or "none"
            raise NodeError(
                f"Node {node!r}: field {field!r} reads templates.{path}, which is not declared (templates: {known}).",
                node=node,
                field=field,
            )
        return runtime.templates[path]
    if prefix == "context":
        value = read_path(env, path, node=node, field=field)
    else:
        value = await read_history(runtime, path, node=node, field=field)
    if value is None:
        raise NodeError(f"Node {node!r}: field {field!r}: {prefix}.{path} has no value.", node=node, field=field)
    return value


async def render(runtime: KavalRuntime, env: NodeEnv, source: str, *, node: str, field: str) -> str:
    """Replace every ``{{ templates.x }}``, ``{{ context.x }}`` and ``{{ history.x }}`` in ``source``."""
    pieces: list[str] = []
    last = 0
    for match in PLACEHOLDER.finditer(source):
        pieces.append(source[last : match.start()])
        value = await placeholder(runtime, env, match.group(1), match.group(2).strip(), node=node, field=field)
        pieces.append(as_text(value))
        last = match.end()
    pieces.append(source[last:])
    return "".join(pieces)


async def render_value(runtime: KavalRuntime, env: NodeEnv, source: str, *, node: str, field: str) -> Any:
    """A template that is exactly one placeholder gives the value itself (a number stays a number)."""
    whole = PLACEHOLDER.fullmatch(source.strip())
    if whole is None:
        return await render(runtime, env, source, node=node, field=field)
    return await placeholder(runtime, env, whole.group(1), whole.group(2).strip(), node=node, field=field)


async def resolve_inputs(
    runtime: KavalRuntime, env: NodeEnv, inputs: Mapping[str, KavalArgument], *, node: str
) -> dict[str, Any]:
    """A node's ``inputs``: literals as given, context and history paths read (the key is the default path)."""
    resolved: dict[str, Any] = {}
    for key, argument in inputs.items():
        field = f"inputs.{key}"
        if argument.type == "literal":
            resolved[key] = argument.value
            continue
        path = argument.value if argument.value is not None else argument.name or key
        if argument.type == "history":
            resolved[key] = plain(await read_history(runtime, str(path), node=node, field=field))
        else:
            resolved[key] = plain(read_path(env, str(path), node=node, field=field))
    return resolved
