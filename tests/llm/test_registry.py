"""make_client: provider ids, keys from the environment, clear errors."""

from __future__ import annotations

import sys

import pytest

from kavalai.llm.anthropic import AnthropicClient
from kavalai.llm.errors import LLMConfigurationError
from kavalai.llm.openai import OpenAIClient
from kavalai.llm.registry import make_client


async def test_openai_reads_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    client = make_client("openai/gpt-4.1-mini")
    assert isinstance(client, OpenAIClient)
    assert (client.provider, client.model) == ("openai", "gpt-4.1-mini")
    assert "sk-test" not in repr(client)
    await client.aclose()
    assert client._client.is_closed()  # the SDK client's connection pool is gone


async def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LLMConfigurationError, match="set the ANTHROPIC_API_KEY environment variable"):
        make_client("anthropic/claude-sonnet-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-test-secret")
    client = make_client("anthropic/claude-sonnet-4-5")
    assert isinstance(client, AnthropicClient)
    assert "ak-test" not in repr(client)
    await client.aclose()


async def test_local_compatible_servers_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_BASE_URL", raising=False)
    client = make_client("ollama/llama3.2")
    assert isinstance(client, OpenAIClient)
    assert client.provider == "ollama"
    assert client.base_url.startswith("http://localhost:11434/v1")
    await client.aclose()
    monkeypatch.setenv("VLLM_BASE_URL", "http://127.0.0.1:9999/v1")
    vllm = make_client("vllm/meta-llama/Llama-3.1-8B-Instruct")
    assert vllm.base_url.startswith("http://127.0.0.1:9999/v1")  # type: ignore[attr-defined]
    assert vllm.model == "meta-llama/Llama-3.1-8B-Instruct"  # only the first "/" separates the provider
    await vllm.aclose()


def test_bad_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    with pytest.raises(LLMConfigurationError, match="has no provider"):
        make_client("gpt-4.1-mini")
    with pytest.raises(LLMConfigurationError, match="Did you mean 'openai'"):
        make_client("opnai/gpt-4.1-mini")
    with pytest.raises(LLMConfigurationError, match="No base URL"):
        make_client("openai-compatible/some-model")


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if the extra were not installed
    with pytest.raises(LLMConfigurationError, match=r"pip install 'kavalai\[anthropic\]'") as caught:
        make_client("anthropic/claude-sonnet-4-5", api_key="ak-test-secret")
    assert isinstance(caught.value.__cause__, ImportError)
