"""The resources, resource templates, prompts and completions of the kernel's MCP servers, served under names that
cannot collide, and each request routed to the server that offers what it names.

The rule is the tools' (:mod:`kavalai.serve._tools`). Prefixed (the default): a prompt is named like a tool of its
server (``mcp_github_review`` for the prompt ``review`` of ``github``), and a resource's URI (or template) gets the
server in front, ``mcp://github/<its URI>`` (``mcp://github/repo://octo/readme``). Own names: each as its server
names it, refused with :class:`~kavalai.errors.ConfigurationError` when two servers offer the same one. A request
for a URI without the prefix (a link a tool returned, say) goes to the one server that lists it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT

from kavalai.adapters.mcp import (
    McpAdapter,
    McpAudioContent,
    McpCompletion,
    McpImageContent,
    McpPromptContent,
    McpPromptResult,
    McpResourceContent,
    McpResourceLink,
    McpTextContent,
    keeping_wire_results,
)
from kavalai.errors import ConfigurationError, FunctionKernelException
from kavalai.kernel import ToolURI
from kavalai.llm.names import ToolNameMap
from kavalai.serve._errors import protocol_error, server_error
from kavalai.serve._tools import Naming, own_names

__all__ = ["ServedCatalog"]

#: What a request to a server runs within, given the server's name (the gateway: the host's call on it).
During = Callable[[str], contextlib.AbstractContextManager[object]]


def _nothing(server: str) -> contextlib.AbstractContextManager[object]:
    return contextlib.nullcontext()


_PREFIX: Final = re.compile(r"mcp://(?P<server>[A-Za-z0-9_-]+)/(?P<uri>.+)", re.DOTALL)
#: Completion values a host is sent at most (the protocol's own maximum): a server's longer list is cut, ``hasMore``.
MAX_COMPLETIONS: Final = 100


def _at_most(completion: types.Completion) -> types.Completion:
    """``completion`` with at most :data:`MAX_COMPLETIONS` values (a cut one says there are more)."""
    values = completion.values
    if len(values) <= MAX_COMPLETIONS:
        return completion
    total = max(completion.total or 0, len(values))
    return types.Completion(values=values[:MAX_COMPLETIONS], total=total, has_more=True)


class ServedCatalog:
    """What the MCP servers ``servers()`` names offer besides tools, as one server's.

    Args:
        adapter: the kernel's ``mcp://`` adapter.
        servers: the names of the servers whose catalogues are served (read at each request).
        naming: ``"prefixed"`` or ``"own"``.
    """

    def __init__(self, adapter: McpAdapter, servers: Callable[[], Sequence[str]], naming: Naming) -> None:
        self.adapter = adapter
        self.servers = servers
        self.naming: Naming = naming

    # ---------------------------------------------------------------------------------------- resources

    async def list_resources(self) -> types.ListResourcesResult:
        """Every server's resources, under their served URIs, with every field their server sent."""
        found = [
            types.Resource.model_validate({**_wire_fields(r), "uri": self.served_uri(server, str(r.uri))})
            for server, listed in await self._each_sent(self.adapter.list_resources, "resources/list")
            for r in listed
        ]
        self._check_own((str(r.uri) for r in found), "resource")
        return types.ListResourcesResult(resources=found)

    async def list_resource_templates(self) -> types.ListResourceTemplatesResult:
        """Every server's resource templates, under their served URIs, with every field their server sent."""
        listing = self.adapter.list_resource_templates
        found = [
            types.ResourceTemplate.model_validate(
                {**_wire_fields(t), "uriTemplate": self.served_uri(server, t.uri_template)}
            )
            for server, listed in await self._each_sent(listing, "resources/templates/list")
            for t in listed
        ]
        self._check_own((t.uri_template for t in found), "resource template")
        return types.ListResourceTemplatesResult(resource_templates=found)

    async def read_resource(
        self, uri: str, during: During = _nothing, progress: ProgressFnT | None = None
    ) -> types.ReadResourceResult:
        """The resource ``uri`` (a served URI) read from its server, as its server sent it but for the URI, within
        ``during(server)`` (as for :meth:`get_prompt`); ``progress``: given the server's progress of the read."""
        server, own = await self.route_uri(uri)
        with during(server), keeping_wire_results() as received:
            contents = await _asked(self.adapter.read_resource(server, own, progress=progress))
        sent = received.get("resources/read")
        if not isinstance(sent, types.ReadResourceResult):
            return types.ReadResourceResult(
                contents=[_resource_contents(item, uri if item.uri == own else None) for item in contents]
            )
        return sent.model_copy(
            update={
                "contents": [
                    item.model_copy(update={"uri": uri}) if str(item.uri) == own else item for item in sent.contents
                ]
            }
        )

    async def subscribe(self, uri: str, *, subscribe: bool) -> tuple[str, str]:
        """Subscribe to (or unsubscribe from) the resource ``uri`` at its server; its server and own URI."""
        server, own = await self.route_uri(uri)
        await _asked(self.adapter.subscribe_resource(server, own, subscribe=subscribe))
        return server, own

    async def unsubscribe(self, uri: str) -> None:
        """Unsubscribe from the resource ``uri`` (a served URI) at its server."""
        await self.subscribe(uri, subscribe=False)

    def served_uri(self, server: str, uri: str) -> str:
        """The URI (or template) ``uri`` of ``server`` as served."""
        return uri if self.naming == "own" else f"mcp://{server}/{uri}"

    async def route_uri(self, uri: str) -> tuple[str, str]:
        """The server of a served URI and the URI it knows.

        Raises:
            MCPError: no served server offers it (or several do, and the URI does not say which).
        """
        matched = _PREFIX.fullmatch(uri)
        if matched is not None and self.naming == "prefixed" and matched["server"] in self.servers():
            return matched["server"], matched["uri"]
        offering = [
            server for server, listed in await self._each(self.adapter.list_resources) if uri in {r.uri for r in listed}
        ]
        if not offering:
            offering = [
                server
                for server, listed in await self._each(self.adapter.list_resource_templates)
                if any(_template_matches(t.uri_template, uri) for t in listed)
            ]
        if len(offering) == 1:
            return offering[0], uri
        if not offering:
            raise protocol_error(types.INVALID_PARAMS, f"Unknown resource: {uri}")
        raise protocol_error(
            types.INVALID_PARAMS, f"The servers {', '.join(offering)} all offer {uri}; use its prefixed URI"
        )

    # ------------------------------------------------------------------------------------------ prompts

    async def list_prompts(self) -> types.ListPromptsResult:
        """Every server's prompts, under their served names, with every field their server sent."""
        listed = await self._each_sent(self.adapter.list_prompts, "prompts/list")
        names = self._prompt_names((server, p.name) for server, prompts in listed for p in prompts)
        found = [
            types.Prompt.model_validate({**_wire_fields(p), "name": names[(server, p.name)]})
            for server, prompts in listed
            for p in prompts
        ]
        return types.ListPromptsResult(prompts=found)

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None,
        during: During = _nothing,
        progress: ProgressFnT | None = None,
    ) -> types.GetPromptResult:
        """The prompt served as ``name``, rendered by its server (as its server sent it), within ``during(server)``
        (what the server asks meanwhile goes to the host, :meth:`kavalai.serve._hosts.HostSessions.calling`);
        ``progress``: given the server's progress of the rendering."""
        server, own = await self.route_prompt(name)
        with during(server), keeping_wire_results() as received:
            result: McpPromptResult = await _asked(self.adapter.get_prompt(server, own, arguments, progress=progress))
        sent = received.get("prompts/get")
        if isinstance(sent, types.GetPromptResult):
            return sent
        messages = [types.PromptMessage(role=m.role, content=_content_block(m.content)) for m in result.messages]
        return types.GetPromptResult(description=result.description, messages=messages)

    async def route_prompt(self, name: str) -> tuple[str, str]:
        """The server and own name of the prompt served as ``name``.

        Raises:
            MCPError: no served prompt has that name.
        """
        listed = await self._each(self.adapter.list_prompts)
        names = self._prompt_names((server, p.name) for server, prompts in listed for p in prompts)
        for (server, own), served in names.items():
            if served == name:
                return server, own
        raise protocol_error(types.INVALID_PARAMS, f"Unknown prompt: {name}")

    def _prompt_names(self, prompts: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        keyed = {str(ToolURI.build("mcp", server, name)): (server, name) for server, name in prompts}
        try:
            if self.naming == "own":
                named = own_names(keyed, "prompt")
            else:
                mapping = ToolNameMap(list(keyed))
                named = {uri: mapping.to_provider(uri) for uri in keyed}
        except ConfigurationError as exc:
            raise protocol_error(types.INTERNAL_ERROR, str(exc)) from None
        return {keyed[uri]: served for uri, served in named.items()}

    # ------------------------------------------------------------------------------------------ completion

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: dict[str, str] | None,
        during: During = _nothing,
    ) -> types.CompleteResult:
        """Completions of an argument of a served prompt or resource template, asked of its server (as its server
        sent them, with their ``_meta``), within ``during(server)`` (as for :meth:`get_prompt`)."""
        own: str
        if isinstance(ref, types.PromptReference):
            server, own = await self.route_prompt(ref.name)
        else:
            server, own = await self._route_template(ref.uri)
        with during(server), keeping_wire_results() as received:
            found: McpCompletion = await _asked(
                self.adapter.complete(server, own, argument.name, argument.value, context)
            )
        sent = received.get("completion/complete")
        if isinstance(sent, types.CompleteResult):
            if len(sent.completion.values) <= MAX_COMPLETIONS:
                return sent
            return sent.model_copy(update={"completion": _at_most(sent.completion)})
        completion = types.Completion(values=list(found.values), total=found.total, has_more=found.has_more)
        return types.CompleteResult(completion=_at_most(completion))

    async def _route_template(self, template: str) -> tuple[str, str]:
        matched = _PREFIX.fullmatch(template)
        if matched is not None and self.naming == "prefixed" and matched["server"] in self.servers():
            return matched["server"], matched["uri"]
        for server, listed in await self._each(self.adapter.list_resource_templates):
            if template in {t.uri_template for t in listed}:
                return server, template
        raise protocol_error(types.INVALID_PARAMS, f"Unknown resource template: {template}")

    # ------------------------------------------------------------------------------------------ helpers

    async def _each(self, listing: Callable[[str], Any]) -> list[tuple[str, Any]]:
        """``(server, listing(server))`` for each served server; a server that offers none of it (or cannot be
        reached) contributes nothing."""
        found = []
        for server in self.servers():
            try:
                found.append((server, await listing(server)))
            except FunctionKernelException:  # e.g. the server does not offer prompts: it has none to serve
                continue
        return found

    async def _each_sent(self, listing: Callable[[str], Any], method: str) -> list[tuple[str, list[Any]]]:
        """As :meth:`_each`, each server's items as it sent them (the SDK's types, every field kept)."""
        found = []
        for server in self.servers():
            with keeping_wire_results() as received:
                try:
                    converted = await listing(server)
                except FunctionKernelException:
                    continue
            sent = received.get(method)
            found.append((server, list(sent) if isinstance(sent, list) else converted))
        return found

    def _check_own(self, uris: Iterable[str], kind: str) -> None:
        if self.naming != "own":
            return
        seen: set[str] = set()
        for uri in uris:
            if uri in seen:
                raise protocol_error(
                    types.INTERNAL_ERROR,
                    f"two servers offer the {kind} {uri}; serve with prefixed names (--names prefixed)",
                )
            seen.add(uri)


async def _asked(request: Any) -> Any:
    """The answer of a request to a server; its failure as the protocol error a client reads (a backend's -32021 as
    itself, its data kept)."""
    try:
        return await request
    except FunctionKernelException as exc:
        raise server_error(exc) from None


def _wire_fields(item: Any) -> dict[str, Any]:
    """An item's fields by their wire names (a kernel model's, or the SDK's with annotations, icons, ``_meta``)."""
    if isinstance(item, types.Resource | types.ResourceTemplate | types.Prompt):
        return item.model_dump(by_alias=True, exclude_none=True)
    fields: dict[str, Any] = item.model_dump(exclude_none=True)
    return {_CAMEL.get(key, key): value for key, value in fields.items()}


_CAMEL: Final = {"mime_type": "mimeType", "uri_template": "uriTemplate"}


def _template_matches(template: str, uri: str) -> bool:
    """Whether ``uri`` is an expansion of the RFC 6570 ``template`` (simple ``{name}`` expressions)."""
    pattern = "".join(
        "[^/]+" if part.startswith("{") else re.escape(part) for part in re.split(r"(\{[^}]*\})", template) if part
    )
    return re.fullmatch(pattern, uri) is not None


def _resource_contents(
    item: McpResourceContent, served: str | None
) -> types.TextResourceContents | types.BlobResourceContents:
    uri = served if served is not None else item.uri
    if item.blob is not None:
        return types.BlobResourceContents(uri=uri, mime_type=item.mime_type, blob=item.blob)
    return types.TextResourceContents(uri=uri, mime_type=item.mime_type, text=item.text or "")


def _content_block(content: McpPromptContent) -> Any:
    if isinstance(content, McpTextContent):
        return types.TextContent(text=content.text)
    if isinstance(content, McpImageContent):
        return types.ImageContent(data=content.data, mime_type=content.mime_type)
    if isinstance(content, McpAudioContent):
        return types.AudioContent(data=content.data, mime_type=content.mime_type)
    if isinstance(content, McpResourceContent):
        return types.EmbeddedResource(resource=_resource_contents(content, None))
    if isinstance(content, McpResourceLink):
        return types.ResourceLink(
            uri=content.uri, name=content.name, description=content.description, mime_type=content.mime_type
        )
    raise TypeError(f"unexpected prompt content {type(content).__name__}")  # pragma: no cover
