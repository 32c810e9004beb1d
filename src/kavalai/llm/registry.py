"""``make_client("openai/gpt-4.1-mini")``: a client from a model id, with its API key read from the environment.

Model ids are ``<provider>/<model>``. ``openai`` and ``anthropic`` talk to those APIs; ``ollama``, ``lmstudio``,
``vllm`` and ``openai-compatible`` talk to an OpenAI-compatible Chat Completions server at a base URL.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from kavalai.llm.base import LLMClient
from kavalai.llm.errors import LLMConfigurationError

__all__ = ["PROVIDERS", "ProviderInfo", "make_client"]


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """How to build a client for one model id prefix.

    Attributes:
        api: which client speaks to it: ``"openai"`` (Chat Completions) or ``"anthropic"`` (Messages).
        key_env: the environment variable holding the API key.
        key_required: whether a missing key is an error (local servers need none).
        base_url_env: the environment variable that overrides the base URL.
        default_base_url: the base URL when neither the argument nor the variable gives one.
    """

    api: Literal["openai", "anthropic"]
    key_env: str
    key_required: bool
    base_url_env: str
    default_base_url: str | None = None


#: The model id prefixes :func:`make_client` knows.
PROVIDERS: Final[Mapping[str, ProviderInfo]] = {
    "openai": ProviderInfo("openai", "OPENAI_API_KEY", True, "OPENAI_BASE_URL"),
    "anthropic": ProviderInfo("anthropic", "ANTHROPIC_API_KEY", True, "ANTHROPIC_BASE_URL"),
    "ollama": ProviderInfo("openai", "OLLAMA_API_KEY", False, "OLLAMA_BASE_URL", "http://localhost:11434/v1"),
    "lmstudio": ProviderInfo("openai", "LMSTUDIO_API_KEY", False, "LMSTUDIO_BASE_URL", "http://localhost:1234/v1"),
    "vllm": ProviderInfo("openai", "VLLM_API_KEY", False, "VLLM_BASE_URL", "http://localhost:8000/v1"),
    "openai-compatible": ProviderInfo("openai", "OPENAI_COMPATIBLE_API_KEY", False, "OPENAI_COMPATIBLE_BASE_URL"),
}

# Local servers ignore the key, but the SDK insists on one.
_PLACEHOLDER_KEY: Final = "not-needed"


def make_client(
    model_id: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    api: Literal["chat", "responses"] | None = None,
    **options: Any,
) -> LLMClient:
    """Build the client for ``model_id``, e.g. ``"openai/gpt-4.1-mini"`` or ``"anthropic/claude-sonnet-4-5"``.

    Args:
        model_id: ``<provider>/<model>``; providers are the keys of :data:`PROVIDERS`.
        api_key: the key; by default read from the provider's variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``).
        base_url: the API's base URL; by default the provider's variable (``OPENAI_BASE_URL``, ...) or default.
        api: for OpenAI and compatible servers, ``"chat"`` (Chat Completions, the default) or ``"responses"``
            (the Responses API: :class:`~kavalai.llm.openai_responses.OpenAIResponsesClient`, with OpenAI's
            hosted tool search).
        options: passed to the client (``timeout``, ``max_retries``, ``http_client``, ...).

    Raises:
        LLMConfigurationError: an id without a known provider, a missing key, a missing base URL for
            ``openai-compatible``, an ``api`` the provider does not speak, or the provider's SDK not installed.
    """
    provider, model = _split(model_id)
    info = PROVIDERS[provider]
    if api not in (None, "chat", "responses") or (api is not None and info.api != "openai"):
        raise LLMConfigurationError(
            f"api={api!r} is not an API of {provider!r}: 'chat' and 'responses' are OpenAI's and compatible servers'.",
            provider=provider,
            model=model,
        )
    key = api_key or os.environ.get(info.key_env)
    if not key:
        if info.key_required:
            raise LLMConfigurationError(
                f"No API key for {model_id!r}: set the {info.key_env} environment variable, or pass api_key=.",
                provider=provider,
                model=model,
            )
        key = _PLACEHOLDER_KEY
    url = base_url or os.environ.get(info.base_url_env) or info.default_base_url
    if provider == "openai-compatible" and not url:
        raise LLMConfigurationError(
            f"No base URL for {model_id!r}: set {info.base_url_env} or pass base_url= "
            "(e.g. 'http://localhost:8000/v1').",
            provider=provider,
            model=model,
        )
    if info.api == "anthropic":
        from kavalai.llm.anthropic import AnthropicClient

        return AnthropicClient(model, api_key=key, base_url=url, **options)
    if api == "responses":
        from kavalai.llm.openai_responses import OpenAIResponsesClient

        return OpenAIResponsesClient(model, api_key=key, base_url=url, provider=provider, **options)
    from kavalai.llm.openai import OpenAIClient

    return OpenAIClient(model, api_key=key, base_url=url, provider=provider, **options)


def _split(model_id: str) -> tuple[str, str]:
    provider, sep, model = model_id.partition("/")
    if not sep or not model:
        raise LLMConfigurationError(
            f"Model id {model_id!r} has no provider: write '<provider>/<model>', e.g. 'openai/gpt-4.1-mini'. "
            f"Providers: {', '.join(PROVIDERS)}."
        )
    if provider not in PROVIDERS:
        close = difflib.get_close_matches(provider, list(PROVIDERS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else f" Providers: {', '.join(PROVIDERS)}."
        raise LLMConfigurationError(f"Unknown provider {provider!r} in model id {model_id!r}.{hint}", model=model)
    return provider, model
