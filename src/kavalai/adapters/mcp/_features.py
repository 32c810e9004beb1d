"""Requests for what an MCP server offers besides tools: resources, resource templates, prompts and completion.

The results are the models of :mod:`kavalai.adapters.mcp._catalog`, converted from the SDK's types here; text stays
text, and images, audio and binary resources keep their bytes (base64, with ``decode()``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeAlias, TypeVar, cast

import mcp_types
from mcp.client import Client
from mcp.shared.dispatcher import ProgressFnT
from pydantic import TypeAdapter

from kavalai.adapters.mcp._asked import asked_meta
from kavalai.adapters.mcp._catalog import (
    McpCompletion,
    McpPrompt,
    McpPromptArgument,
    McpPromptContent,
    McpPromptMessage,
    McpPromptResult,
    McpResource,
    McpResourceTemplate,
)
from kavalai.adapters.mcp._content import (
    McpAudioContent,
    McpImageContent,
    McpResourceContent,
    McpResourceLink,
    McpTextContent,
)
from kavalai.adapters.mcp._era import drive_input_required
from kavalai.adapters.mcp._listing import all_pages
from kavalai.adapters.mcp._wire import keep

__all__ = [
    "complete",
    "get_prompt",
    "list_prompts",
    "list_resource_templates",
    "list_resources",
    "read_resource",
    "subscribe_resource",
]

T = TypeVar("T")
Send: TypeAlias = Callable[[Callable[[Client], Awaitable[T]], str], Awaitable[T]]
_MAX_PAGES = 1000  # a paginator that never ends cannot hang a listing
#: What a read or a prompt may be answered with (a 2026-07-28 server may ask for input first).
_READ: Final = TypeAdapter(mcp_types.ReadResourceResult | mcp_types.InputRequiredResult)
_PROMPT: Final = TypeAdapter(mcp_types.GetPromptResult | mcp_types.InputRequiredResult)


async def list_resources(send: Send[Any]) -> list[McpResource]:
    """Every resource the server lists (all pages)."""
    items = await _all_pages(send, "resources/list", lambda c, cursor: c.list_resources(cursor=cursor), "resources")
    keep("resources/list", items)  # for a gateway that passes the listing on as received (_wire.py)
    return [
        McpResource(
            uri=str(r.uri), name=r.name, title=r.title, description=r.description, mime_type=r.mime_type, size=r.size
        )
        for r in items
    ]


async def list_resource_templates(send: Send[Any]) -> list[McpResourceTemplate]:
    """Every resource template the server lists (all pages)."""
    items = await _all_pages(
        send,
        "resources/templates/list",
        lambda c, cursor: c.list_resource_templates(cursor=cursor),
        "resource_templates",
    )
    keep("resources/templates/list", items)
    return [
        McpResourceTemplate(
            uri_template=t.uri_template, name=t.name, title=t.title, description=t.description, mime_type=t.mime_type
        )
        for t in items
    ]


async def read_resource(send: Send[Any], uri: str, progress: ProgressFnT | None = None) -> list[McpResourceContent]:
    """The contents of the resource at ``uri`` (usually one; text kept as text, binary as base64); ``progress``:
    called with the server's progress notifications of the read (the request then carries a progress token)."""
    # The SDK's client answers a 2026-07-28 server's requests for input on the way, and honours ttlMs; a gateway's
    # host's capabilities ride in _meta (moved into place by SessionStreams), which also bypasses the SDK's cache.
    meta = cast("mcp_types.RequestParamsMeta | None", asked_meta(None))
    if progress is None:
        result = await send(lambda client: client.read_resource(uri, meta=meta), f"resources/read of {uri!r}")
    else:  # the SDK's read_resource takes no progress callback: the request is sent as it would send it

        async def read(client: Client) -> mcp_types.ReadResourceResult:
            async def retry(
                responses: mcp_types.InputResponses | None, state: str | None
            ) -> mcp_types.ReadResourceResult | mcp_types.InputRequiredResult:
                params = mcp_types.ReadResourceRequestParams(
                    uri=uri, input_responses=responses, request_state=state, _meta=meta
                )
                request = mcp_types.ReadResourceRequest(params=params)
                return await client.session.send_request(request, _READ, progress_callback=progress)

            return await drive_input_required(client.session, await retry(None, None), retry)

        result = await send(read, f"resources/read of {uri!r}")
    keep("resources/read", result)
    return [_resource_content(item) for item in result.contents]


async def list_prompts(send: Send[Any]) -> list[McpPrompt]:
    """Every prompt the server lists (all pages)."""
    items = await _all_pages(send, "prompts/list", lambda c, cursor: c.list_prompts(cursor=cursor), "prompts")
    keep("prompts/list", items)
    return [
        McpPrompt(
            name=p.name,
            title=p.title,
            description=p.description,
            arguments=tuple(
                McpPromptArgument(name=a.name, description=a.description, required=bool(a.required))
                for a in p.arguments or ()
            ),
        )
        for p in items
    ]


async def get_prompt(
    send: Send[Any], name: str, arguments: Mapping[str, str] | None, progress: ProgressFnT | None = None
) -> McpPromptResult:
    """The prompt ``name`` rendered with ``arguments`` (MCP prompt arguments are strings); ``progress``: as for
    :func:`read_resource`."""
    args = {key: str(value) for key, value in (arguments or {}).items()}
    # a gateway's host's capabilities, when one is asking (moved into place by SessionStreams)
    meta = cast("mcp_types.RequestParamsMeta | None", asked_meta(None))

    async def rendered(client: Client) -> mcp_types.GetPromptResult:
        # A 2026-07-28 server's requests for input are answered by the kernel's driver (as a tool call's): each
        # under the server's own key, and those of one round together where a relay asks so (kavalai serve).
        async def retry(
            responses: mcp_types.InputResponses | None, state: str | None
        ) -> mcp_types.GetPromptResult | mcp_types.InputRequiredResult:
            # as the SDK's get_prompt sends it, with the progress callback it takes no argument for
            params = mcp_types.GetPromptRequestParams(
                name=name, arguments=args, input_responses=responses, request_state=state, _meta=meta
            )
            request = mcp_types.GetPromptRequest(params=params)
            return await client.session.send_request(request, _PROMPT, progress_callback=progress)

        return await drive_input_required(client.session, await retry(None, None), retry)

    result = await send(rendered, f"prompts/get of {name!r}")
    keep("prompts/get", result)
    return McpPromptResult(
        description=result.description,
        messages=tuple(McpPromptMessage(role=m.role, content=_content(m.content)) for m in result.messages),
    )


async def complete(
    send: Send[Any],
    ref: McpPrompt | McpResourceTemplate | str,
    argument: str,
    value: str,
    context: Mapping[str, str] | None = None,
) -> McpCompletion:
    """Completions for ``argument`` (typed so far: ``value``) of a prompt or resource template.

    ``ref`` is a prompt or template as listed, a prompt name, or a template URI (anything with ``{``).
    """
    reference: mcp_types.PromptReference | mcp_types.ResourceTemplateReference
    if isinstance(ref, McpPrompt) or (isinstance(ref, str) and "{" not in ref):
        reference = mcp_types.PromptReference(name=ref.name if isinstance(ref, McpPrompt) else ref)
    else:
        uri = ref.uri_template if isinstance(ref, McpResourceTemplate) else ref
        reference = mcp_types.ResourceTemplateReference(uri=uri)
    params = mcp_types.CompleteRequestParams(
        ref=reference,
        argument=mcp_types.CompletionArgument(name=argument, value=value),
        context=mcp_types.CompletionContext(arguments=dict(context or {})),
        _meta=asked_meta(None),  # a gateway's host's capabilities (the SDK's complete() takes no _meta)
    )
    request = mcp_types.CompleteRequest(params=params)
    result = await send(
        lambda client: client.session.send_request(request, mcp_types.CompleteResult),
        f"completion/complete of {argument!r}",
    )
    keep("completion/complete", result)
    found = result.completion
    return McpCompletion(values=tuple(found.values), total=found.total, has_more=bool(found.has_more))


async def subscribe_resource(send: Send[Any], uri: str, *, subscribe: bool = True) -> None:
    """Ask to be told (``notifications/resources/updated``) when the resource at ``uri`` changes, or to stop.

    Handshake era only (the 2026-07-28 era subscribes on its ``subscriptions/listen`` stream instead). Sent as the
    request itself: the SDK's helpers are deprecated for the new era's sake.
    """
    request: mcp_types.SubscribeRequest | mcp_types.UnsubscribeRequest
    if subscribe:
        request = mcp_types.SubscribeRequest(params=mcp_types.SubscribeRequestParams(uri=uri))
    else:
        request = mcp_types.UnsubscribeRequest(params=mcp_types.UnsubscribeRequestParams(uri=uri))
    await send(
        lambda client: client.session.send_request(request, mcp_types.EmptyResult), f"{request.method} of {uri!r}"
    )


async def _all_pages(
    send: Send[Any], what: str, request: Callable[[Client, str | None], Awaitable[Any]], field: str
) -> list[Any]:
    return await all_pages(
        lambda cursor: send(functools.partial(_page, request, cursor), what), field, what, max_pages=_MAX_PAGES
    )


def _page(
    request: Callable[[Client, str | None], Awaitable[Any]], cursor: str | None, client: Client
) -> Awaitable[Any]:
    return request(client, cursor)


def _resource_content(item: Any) -> McpResourceContent:
    return McpResourceContent(
        uri=str(item.uri), mime_type=item.mime_type, text=getattr(item, "text", None), blob=getattr(item, "blob", None)
    )


def _content(item: Any) -> McpPromptContent:
    if isinstance(item, mcp_types.TextContent):
        return McpTextContent(text=item.text)
    if isinstance(item, mcp_types.ImageContent):
        return McpImageContent(data=item.data, mime_type=item.mime_type)
    if isinstance(item, mcp_types.AudioContent):
        return McpAudioContent(data=item.data, mime_type=item.mime_type)
    if isinstance(item, mcp_types.EmbeddedResource):
        return _resource_content(item.resource)
    return McpResourceLink(uri=str(item.uri), name=item.name, description=item.description, mime_type=item.mime_type)
