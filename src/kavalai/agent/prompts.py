"""MCP prompts as an agent's templates: a server's prompt, rendered with arguments, becomes the start of a run.

An MCP prompt is a template the user picks (a slash command in most clients): the server renders it into messages.
:func:`prompt_messages` gets them through ``kernel.get_prompt`` as the agent's messages (text kept; embedded text
resources inlined; images, audio and binary resources named, since the agent's messages are text), and
``Agent.run_prompt(server, name, arguments)`` runs the agent on them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kavalai import FunctionKernel
from kavalai.adapters.mcp import (
    McpAudioContent,
    McpImageContent,
    McpPromptContent,
    McpResourceContent,
    McpResourceLink,
    McpTextContent,
)
from kavalai.agent.budget import model_text
from kavalai.llm.messages import AssistantMessage, Message, UserMessage

__all__ = ["prompt_messages", "split_prompt"]


async def prompt_messages(
    kernel: FunctionKernel, server: str, name: str, arguments: Mapping[str, str] | None = None
) -> list[Message]:
    """The messages of the prompt ``name`` of ``server``, rendered with ``arguments``, as the agent's messages.

    Raises:
        FunctionKernelException: the server is unknown or failed, or refused the prompt or its arguments.
    """
    rendered = await kernel.get_prompt(server, name, arguments)
    messages: list[Message] = []
    for message in rendered.messages:
        # What a server renders is model-facing text from outside: it crosses the model-facing gate.
        text = model_text(None, f"prompt {name!r} of MCP server {server!r}", _text(message.content), ours=True)
        if message.role == "assistant":
            messages.append(AssistantMessage(content=text))
        else:
            messages.append(UserMessage(content=text))
    return messages


def split_prompt(messages: list[Message], *, what: str = "the prompt") -> tuple[list[Message], str]:
    """``(history, prompt)`` of rendered prompt messages: everything before the last message, and that message's
    text, which must be the user's.

    Raises:
        ValueError: there are no messages, or the last one is not the user's (a prompt that ends with the
            assistant's words: pass all of them as ``history`` with a prompt of your own).
    """
    if not messages or not isinstance(messages[-1], UserMessage):
        last = "no messages" if not messages else f"a message of the {messages[-1].role}"
        raise ValueError(
            f"{what} ends with {last}, not the user's: pass its messages as history= with a prompt of your own."
        )
    return messages[:-1], messages[-1].content


def _text(content: McpPromptContent) -> str:
    if isinstance(content, McpTextContent):
        return content.text
    if isinstance(content, McpResourceContent):
        if content.text is not None:
            return f"[resource {content.uri}]\n{content.text}"
        return f"[binary resource {content.uri} ({content.mime_type or 'unknown type'}), not shown]"
    if isinstance(content, McpImageContent):
        return f"[image ({content.mime_type}), not shown]"
    if isinstance(content, McpAudioContent):
        return f"[audio ({content.mime_type}), not shown]"
    link: McpResourceLink = content
    return f"[resource link {link.uri}" + (f": {link.description}]" if link.description else "]")
