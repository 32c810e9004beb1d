"""Helpers the provider clients share: the request's name map, decoding tool arguments, safe error excerpts."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

from kavalai.llm.errors import LLMConfigurationError
from kavalai.llm.messages import AssistantMessage, Message, ToolResultMessage, ToolSpec
from kavalai.llm.names import ToolNameMap

__all__ = ["decode_arguments", "import_sdk", "name_map", "safe_excerpt"]

_SECRET: Final = re.compile(r"\b(sk|key|ak)-[A-Za-z0-9_\-*]{6,}")
_EXCERPT_LIMIT: Final = 500


def import_sdk(module: str, extra: str, *, provider: str, model: str) -> ModuleType:
    """Import a provider SDK, or explain which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise LLMConfigurationError(
            f"The {module!r} package is needed for {provider}/{model}: pip install 'kavalai[{extra}]'.",
            provider=provider,
            model=model,
        ) from exc


def name_map(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ToolNameMap:
    """The name map of one request: the offered tools and every tool named in the conversation."""
    uris = [tool.name for tool in tools]
    for message in messages:
        if isinstance(message, AssistantMessage):
            uris.extend(call.name for call in message.tool_calls)
        elif isinstance(message, ToolResultMessage):
            uris.append(message.name)
    return ToolNameMap(uris)


def decode_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """Decode a tool call's JSON arguments: ``(arguments, None)``, or ``({}, what is wrong)``."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON: {exc.msg} at position {exc.pos}"
    if not isinstance(value, dict):
        return {}, f"expected a JSON object, got {type(value).__name__}"
    return value, None


def safe_excerpt(value: object) -> str:
    """A bounded excerpt of an error body or message, with anything that looks like a key masked."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = _SECRET.sub(lambda match: f"{match.group(1)}-***", text)
    return text if len(text) <= _EXCERPT_LIMIT else f"{text[: _EXCERPT_LIMIT - 3]}..."
