"""A 2026-07-28 host through ``kavalai serve``: every request the gateway forwards for it tells a 2026-07-28 backend
the host's client capabilities (what it can be asked: sampling, elicitation, roots), not the gateway's client's:
``tools/call`` (``tests/serve/test_rounds.py``), and ``prompts/get``, ``resources/read`` and ``completion/complete``
here (``kavalai.serve._hosts.HostSessions.calling``, the one place each learns it).

The backend is a real stdio MCP server of the 2026-07-28 era (``tests/servers/mcp_asked_capabilities.py``) answering
each request with the capabilities it was told; the host is the official SDK's client.
"""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from tests.serve.test_relay import Host, _backend, _served

from kavalai import FunctionKernel
from mcp import Client


async def _told(client: Client) -> list[str]:
    """What the backend was told by a prompt rendered, a resource read and a completion asked through the gateway."""
    prompt = await client.get_prompt("asked", {})
    [message] = prompt.messages
    assert isinstance(message.content, types.TextContent)
    [contents] = (await client.read_resource("caps://asked")).contents
    assert isinstance(contents, types.TextResourceContents)
    completed = await client.complete(types.PromptReference(name="asked"), {"name": "x", "value": ""})
    return [message.content.text, contents.text, *completed.completion.values]


async def test_prompts_resources_and_completion_tell_the_backend_the_hosts_capabilities() -> None:
    """The gateway's client declares sampling, elicitation and roots (it relays them); a host that declared sampling
    alone has the backend told sampling alone on each request, and a host that declared nothing (but roots, which the
    SDK's client always offers) has it told that."""
    host = Host()
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_asked_capabilities", "asked", protocol="2026-07-28"))
    try:
        served = await _served(kernel, names="own")
        async with Client(served, mode="auto", sampling_callback=host.sample) as client:
            sampling = await _told(client)
        async with Client(served, mode="auto", sampling_callback=host.sample, elicitation_callback=host.elicit) as both:
            asking = await _told(both)
        async with Client(served, mode="auto") as bare:
            nothing = await _told(bare)
    finally:
        await kernel.close()
    assert sampling == ["sampling"] * 3
    assert asking == ["sampling,elicitation"] * 3
    assert "sampling" not in nothing[0]
    assert "elicitation" not in nothing[0]
    assert nothing[0] == nothing[1] == nothing[2].replace("none", "")


async def test_a_backends_missing_capability_error_reaches_the_host_as_itself() -> None:
    """A 2026-07-28 backend refusing a prompt with -32021 (the host did not declare sampling): the host gets -32021
    with the backend's ``requiredCapabilities``, not an internal error; a host that declared sampling gets the
    prompt."""
    host = Host()
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_asked_capabilities", "asked", protocol="2026-07-28"))
    try:
        served = await _served(kernel, names="own")
        async with Client(served, mode="auto") as bare:
            with pytest.raises(MCPError) as raised:
                await bare.get_prompt("needs_sampling", {})
        async with Client(served, mode="auto", sampling_callback=host.sample) as sampling:
            rendered = await sampling.get_prompt("needs_sampling", {})
    finally:
        await kernel.close()
    assert raised.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert raised.value.error.data == {"requiredCapabilities": {"sampling": {}}}
    assert "the prompt needs sampling" in raised.value.error.message
    [message] = rendered.messages
    assert message.content == types.TextContent(text="sampling")
