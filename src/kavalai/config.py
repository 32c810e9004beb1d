"""A configuration file -> a kernel: our YAML's tool sections, and the ``mcpServers`` JSON of MCP hosts.

One place turns configuration into a :class:`~kavalai.FunctionKernel`::

    config = KernelConfig.from_file("tools.yaml")   # or claude_desktop_config.json, .cursor/mcp.json, .vscode/mcp.json
    kernel = build_kernel(config)

Accepted, in one document or several keys of it:

- ``python_functions``: dotted paths (``pkg.mod.func``) or ``{function, name, timeout}``;
- ``tools``: bundled tool groups, ``fs`` or ``{group: fs, root: ./data, writable: true}``;
- ``rest_servers``: :class:`~kavalai.RestServer` fields plus ``rest_tools`` (``{name, method, path, input_schema,
  output_schema, description}``) and ``openapi`` (a file next to the configuration, or a path on the server);
- ``mcp_servers``: :class:`~kavalai.McpServer` fields;
- ``mcpServers`` (Claude Desktop, Cursor) or ``servers`` (VS Code): ``{name: {command, args, env, cwd} | {url,
  headers, type}}``; ``type`` is ``stdio``, ``http`` (streamable HTTP) or ``sse``; a server with ``"disabled": true``
  is left out; keys only a host understands (``autoApprove``, ``envFile``, ...) are ignored.

``${VAR}`` and ``${VAR:-default}`` in string values are read from the environment. Registration only records the
configuration: nothing connects until the kernel is used.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from kavalai.documents import load_json_or_yaml, read_document
from kavalai.errors import ConfigurationError, FunctionKernelException, ToolRegistrationError
from kavalai.function_kernel import FunctionKernel
from kavalai.kernel import Seconds
from kavalai.secrets import get_logger, register_variable

if TYPE_CHECKING:
    from kavalai.adapters.rest import RestServer
    from kavalai.agent.budget import OutputBudget
    from kavalai.llm.base import LLMClient

__all__ = [
    "BUNDLED_GROUPS",
    "BuiltDocument",
    "ConfigFieldError",
    "KernelConfig",
    "ServedApp",
    "UnsetVariableError",
    "build_document",
    "build_kernel",
    "configuration_problem",
    "expand_env",
    "import_dotted",
    "mcp_servers_from_host_config",
]

logger = get_logger("kavalai.config")

_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")
_HOST_TYPES = {"stdio": "stdio", "http": "streamable-http", "streamable-http": "streamable-http", "sse": "sse"}
_HOST_KEYS = ("command", "args", "env", "cwd", "url", "headers")


class KernelConfig(BaseModel):
    """The tool sections of a configuration document (see the module docstring)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    python_functions: list[str | dict[str, Any]] = Field(default_factory=list)
    tools: list[str | dict[str, Any]] = Field(default_factory=list)
    rest_servers: list[dict[str, Any]] = Field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    host_mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict, alias="mcpServers")
    vscode_servers: dict[str, dict[str, Any]] = Field(default_factory=dict, alias="servers")
    #: ``kavalai serve``'s switch for OpenTelemetry traces: on, off, or (absent) as the ``OTEL_*`` environment says.
    tracing: bool | None = None
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> KernelConfig:
        """Read a YAML or JSON file (bounded in size and alias expansion); relative paths in it are relative to
        the file's folder.

        Raises:
            ConfigurationError: the file cannot be read or does not describe tools.
        """
        file = Path(path)
        text = read_document(file, f"the configuration file {str(file)!r}")
        document = load_json_or_yaml(text, source=f"The configuration file {str(file)!r}")
        return cls.from_dict(document, base_dir=file.resolve().parent, source=str(file))

    @classmethod
    def from_dict(
        cls, document: Any, *, base_dir: str | os.PathLike[str] | None = None, source: str = "the configuration"
    ) -> KernelConfig:
        """Read a parsed document.

        Raises:
            ConfigurationError: it is not a mapping, or a section has the wrong shape.
        """
        if not isinstance(document, Mapping):
            raise ConfigurationError(f"{source} is not a mapping of sections (python_functions, mcpServers, ...).")
        try:
            return cls.model_validate({**document, "base_dir": Path(base_dir) if base_dir else Path.cwd()})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
            )
            raise ConfigurationError(f"{source}: {problems}") from None

    def all_mcp_servers(self) -> list[dict[str, Any]]:
        """Every MCP server, ours and the hosts' formats, as :class:`~kavalai.McpServer` keyword arguments."""
        return [
            *self.mcp_servers,
            *mcp_servers_from_host_config(self.host_mcp_servers),
            *mcp_servers_from_host_config(self.vscode_servers),
        ]


def mcp_servers_from_host_config(servers: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``mcpServers`` (or VS Code ``servers``) mapping as :class:`~kavalai.McpServer` keyword arguments."""
    converted = []
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            raise ConfigurationError(f"MCP server {name!r} of the host configuration is not a mapping.")
        if entry.get("disabled") is True:
            continue
        server: dict[str, Any] = {"name": name, **{key: entry[key] for key in _HOST_KEYS if key in entry}}
        kind = entry.get("type", entry.get("transport"))
        if kind is not None:
            if kind not in _HOST_TYPES:
                raise ConfigurationError(
                    f"MCP server {name!r}: unknown type {kind!r}; use 'stdio', 'http' (streamable HTTP) or 'sse'."
                )
            server["transport"] = _HOST_TYPES[kind]
        ignored = sorted(set(entry) - {*_HOST_KEYS, "type", "transport", "disabled"})
        if ignored:
            logger.debug("MCP server %r: ignoring host-only keys %s", name, ", ".join(ignored))
        converted.append(server)
    return converted


class UnsetVariableError(ConfigurationError):
    """A configuration reads ``${VAR}`` but the variable is not set (and has no ``:-default``).

    Attributes:
        variable: the variable's name.
    """

    def __init__(self, variable: str) -> None:
        super().__init__(f"the configuration reads ${{{variable}}}, but the environment variable {variable} is not set")
        self.variable = variable


def expand_env(value: Any, env: Mapping[str, str], *, public: Collection[str] = ()) -> Any:
    """``value`` with ``${VAR}`` and ``${VAR:-default}`` in its strings (at any depth) read from ``env``.

    The value of every secret variable read from ``env`` (:func:`kavalai.secrets.secret_variable`: its name looks
    secret, or ``KAVALAI_SECRET_VARIABLES`` lists it) and the credentials of every URL read are registered with the
    secret gate, so no message, log record, span or CLI line shows them; never the variables named in ``public`` (a
    workflow's ``WORKFLOW_DIR`` and ``PYTHON``).

    Raises:
        ConfigurationError: a variable without a default is not in ``env``; the message names it.
    """
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group("name"), match.group("default")
            if name in env:
                if name not in public:
                    register_variable(name, env[name], env)
                return env[name]
            if default is not None:
                if name not in public:  # the default stands for the variable: as secret as its value would be
                    register_variable(name, default, env)
                return default
            raise UnsetVariableError(name)

        return _VAR.sub(substitute, value)
    if isinstance(value, list):
        return [expand_env(item, env, public=public) for item in value]
    if isinstance(value, dict):
        return {key: expand_env(item, env, public=public) for key, item in value.items()}
    return value


class ConfigFieldError(ConfigurationError):
    """One entry of a configuration is invalid.

    Attributes:
        field: where, as a path into the document (``"tools[0]"``, ``"rest_servers[1].rest_tools[0]"``).
        reason: what is wrong with it.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"Configuration field {field!r}: {reason}")
        self.field = field
        self.reason = reason


#: The bundled tool groups a configuration can name.
BUNDLED_GROUPS: Final = ("fs", "http", "time", "web")


def build_kernel(
    config: KernelConfig, *, kernel: FunctionKernel | None = None, env: Mapping[str, str] | None = None
) -> FunctionKernel:
    """Register everything ``config`` declares on ``kernel`` (a new one by default) and return it.

    Nothing connects here: MCP servers start, and OpenAPI specs at a URL are fetched, when the kernel is first used.
    An OpenAPI spec in a file is read now.

    Raises:
        ConfigFieldError: an entry is invalid; ``field`` names its section and index.
        UnsetVariableError: an entry reads ``${VAR}`` and the variable is not set.
    """
    builder = _Builder(kernel or FunctionKernel(), config.base_dir, os.environ if env is None else env)
    builder.register(config)
    return builder.kernel


#: The variables :func:`build_document` sets itself: the document's folder and the running interpreter.
_DOCUMENT_VARIABLES: Final = frozenset({"WORKFLOW_DIR", "PYTHON"})
#: Registers a served app's REST server at ``url`` on a kernel; ``first`` is false on a restart.
RegisterApp = Callable[[FunctionKernel, str, bool], Awaitable[None]]


@dataclass(slots=True)
class ServedApp:
    """A REST app a workflow document serves itself for the length of its runs (``rest_servers: [{app: ...}]``).

    Attributes:
        app: an ``aiohttp.web.Application``, or what returns one.
        register: registers the REST server (on the first start its tools and OpenAPI import too) at the URL the
            app is served on; raises :class:`ConfigFieldError`.
        field: the document field that declared it (``rest_servers[1]``).
    """

    app: Any
    register: RegisterApp
    field: str


@dataclass(slots=True)
class BuiltDocument:
    """What a document's sections make besides its graph: the kernel, model client factories, served apps and
    the output budget (see :func:`build_document`)."""

    kernel: FunctionKernel
    models: dict[str, Callable[[], LLMClient]] = field(default_factory=dict)
    served: list[ServedApp] = field(default_factory=list)
    output_budget: OutputBudget | None = None


def build_document(
    sections: Mapping[str, Any],
    *,
    base_dir: Path,
    kernel: FunctionKernel | None = None,
    env: Mapping[str, str] | None = None,
) -> BuiltDocument:
    """A document's tool sections on ``kernel`` (a new one by default), and what only documents that run have:
    the ``models`` section's client factories, the REST apps served for a run (a ``rest_servers`` entry with an
    ``app``), and the ``output_budget`` section.

    ``${VAR}`` reads ``env`` (``os.environ`` by default), where ``${WORKFLOW_DIR}`` is ``base_dir`` and
    ``${PYTHON}`` the running interpreter; module paths are imported normally or from ``base_dir``.

    Raises:
        ConfigFieldError: an entry is invalid; ``field`` names its section and index in the document. A factory
            raises it too when it cannot make its client.
        UnsetVariableError: an entry reads ``${VAR}`` and the variable is not set.
    """
    env = {**(os.environ if env is None else env), "WORKFLOW_DIR": str(base_dir), "PYTHON": sys.executable}
    config = KernelConfig(
        python_functions=list(sections.get("python_functions") or []),
        tools=list(sections.get("tools") or []),
        rest_servers=list(sections.get("rest_servers") or []),
        mcp_servers=list(sections.get("mcp_servers") or []),
        base_dir=base_dir,
    )
    builder = _Builder(kernel or FunctionKernel(), base_dir, env, serve_apps=True)
    builder.register(config)
    return BuiltDocument(
        kernel=builder.kernel,
        models=builder.models(sections.get("models") or {}),
        served=builder.served,
        output_budget=_output_budget(sections.get("output_budget"), base_dir),
    )


def import_dotted(dotted: str, base_dir: str | os.PathLike[str]) -> Any:
    """The object at ``package.module.attribute``: imported normally, or else from ``module.py`` in ``base_dir``
    (a module next to the configuration or workflow file). A module loaded from a file is put in
    ``sys.modules``, so it is loaded once however many entries name it.

    Raises:
        ConfigurationError: the path is not dotted, the module cannot be found, or it lacks the attribute.
    """
    module_name, _, attribute = dotted.rpartition(".")
    if not module_name:
        raise ConfigurationError(f"{dotted!r} is not a dotted path such as 'package.module.function'")
    module = _module(module_name, Path(base_dir))
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigurationError(f"module {module_name!r} has no attribute {attribute!r}") from None


def _module(name: str, base_dir: Path) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not name.startswith(exc.name):
            raise  # the module exists but one of its own imports is missing
    if name in sys.modules:
        return sys.modules[name]
    path = base_dir.joinpath(*name.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(name, path) if path.is_file() else None
    if spec is None or spec.loader is None:
        raise ConfigurationError(
            f"cannot import module {name!r} (not importable, and no {path.name} next to the file)"
        ) from None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


class _Builder:
    def __init__(
        self, kernel: FunctionKernel, base_dir: Path, env: Mapping[str, str], *, serve_apps: bool = False
    ) -> None:
        self.kernel, self.base_dir, self.env = kernel, base_dir, env
        self.serve_apps = serve_apps  # a workflow document's REST servers may be apps it serves itself
        # Variables the loader sets itself (a workflow's folder, the interpreter) are no secrets to mask.
        self.public: frozenset[str] = _DOCUMENT_VARIABLES if serve_apps else frozenset()
        self.served: list[ServedApp] = []

    def register(self, config: KernelConfig) -> None:
        for i, entry in enumerate(config.python_functions):
            self._guard(f"python_functions[{i}]", lambda entry=entry: self._python_function(self._expand(entry)))
        for i, group in enumerate(config.tools):
            self._guard(f"tools[{i}]", lambda group=group: self._bundled(self._expand(group)))
        for i, server in enumerate(config.rest_servers):
            field = f"rest_servers[{i}]"
            self._guard(field, lambda server=server, field=field: self._rest_server(self._expand(dict(server)), field))
        for i, server in enumerate(config.all_mcp_servers()):
            self._guard(f"mcp_servers[{i}]", lambda server=server: self._mcp_server(self._expand(dict(server))))

    def _python_function(self, entry: str | Mapping[str, Any]) -> None:
        from kavalai.adapters.python import is_pythontool, pythontool

        spec: dict[str, Any] = {"function": entry} if isinstance(entry, str) else dict(entry)
        dotted = spec.pop("function", None) or spec.pop("path", None)
        if not isinstance(dotted, str):
            raise ConfigurationError("a python function needs 'function': a dotted path such as 'pkg.mod.func'")
        func = import_dotted(dotted, self.base_dir)
        if not callable(func):
            raise ConfigurationError(f"{dotted!r} is not a function (it is a {type(func).__name__})")
        if not is_pythontool(func):
            func = pythontool(func)
        name = spec.pop("name", None) or dotted.rsplit(".", 1)[-1]
        self.kernel.register_python_tool(name, func, timeout=_declared_limit(spec.pop("timeout", None)))

    def _bundled(self, entry: str | Mapping[str, Any]) -> None:
        options = {"group": entry} if isinstance(entry, str) else dict(entry)
        group = options.pop("group", None)
        if not isinstance(group, str) or group not in BUNDLED_GROUPS:
            hint = _did_you_mean(group, BUNDLED_GROUPS) if isinstance(group, str) else ""
            raise ConfigurationError(
                f"there is no bundled tool group {group!r} (groups: {', '.join(BUNDLED_GROUPS)}).{hint}"
            )
        if isinstance(options.get("root"), str):  # the fs group's folder, relative to the file
            options["root"] = str(self.base_dir / options["root"])
        module = importlib.import_module(f"kavalai.tools.{group}")
        module.register(self.kernel, **options)

    def _rest_server(self, raw: dict[str, Any], field: str) -> None:
        from kavalai.adapters.rest import RestServer

        tools = raw.pop("rest_tools", [])
        openapi = raw.pop("openapi", None)
        include, exclude = raw.pop("include", None), raw.pop("exclude", None)
        if "app" in raw:
            if not self.serve_apps:
                raise ConfigurationError("'app' (a REST app served for the length of a run) is for workflow files")
            self.served.append(self._served_app(raw, tools, openapi, include, exclude, field))
            return
        server = RestServer(**raw)
        self.kernel.register_rest_server(server)
        for j, tool in enumerate(tools):
            self._guard(f"{field}.rest_tools[{j}]", lambda tool=tool: self._rest_tool(server.name, dict(tool)))
        if isinstance(openapi, str) and not openapi.startswith("/") and "://" not in openapi:
            openapi = self.base_dir / openapi  # a Path: read now, as a file that must exist
        if openapi is not None:
            self._guard(
                f"{field}.openapi",
                lambda: self.kernel.register_openapi(server.name, openapi, include=include, exclude=exclude),
            )
        if not isinstance(openapi, str):  # its tools are known now (a spec at a URL is checked once imported)
            self._guard(f"{field}.tools_on_doubt", lambda: _check_doubt_keys(self.kernel, server))

    def _served_app(
        self, raw: dict[str, Any], tools: list[Any], openapi: Any, include: Any, exclude: Any, field: str
    ) -> ServedApp:
        from kavalai.adapters.rest import RestServer

        app = raw.pop("app")
        if "url" in raw or "url_env" in raw:
            raise ConfigurationError("give either 'app' (a REST app the engine serves) or 'url', not both")
        if isinstance(openapi, str) and not openapi.startswith("/") and "://" not in openapi:
            openapi = self.base_dir / openapi  # a Path: read as a file that must exist
        served = self._imported(app, f"{field}.app") if isinstance(app, str) else app
        RestServer(**raw, url="http://127.0.0.1")  # the other fields checked now, not at the first run

        async def register(kernel: FunctionKernel, url: str, first: bool) -> None:
            server = self._checked(field, lambda: RestServer(**raw, url=url))
            self._checked(field, lambda: kernel.register_rest_server(server, replace=not first))
            if not first:
                return
            for j, tool in enumerate(tools):
                self._rest_tool_checked(f"{field}.rest_tools[{j}]", server.name, dict(tool), kernel)
            if openapi is not None:
                try:
                    await kernel.register_openapi(server.name, openapi, include=include, exclude=exclude)
                except ToolRegistrationError as exc:  # an unreadable or invalid spec (not an unreachable server)
                    raise ConfigFieldError(f"{field}.openapi", str(exc)) from exc
            self._checked(f"{field}.tools_on_doubt", lambda: _check_doubt_keys(kernel, server))

        return ServedApp(app=served, register=register, field=f"{field}.app")

    def models(self, section: Mapping[str, Any]) -> dict[str, Callable[[], LLMClient]]:
        """The ``models`` section's client factories by name: ``{name: "provider/model"}`` or ``{name: {model:
        ...}}`` (a client of that model id), or ``{name: {factory: pkg.make_client}}`` (a function of yours)."""
        factories: dict[str, Callable[[], LLMClient]] = {}
        if not isinstance(section, Mapping):
            raise ConfigFieldError("models", "a mapping of model names to model ids or {factory: ...}")
        for name, entry in section.items():
            where = f"models.{name}"
            spec = {"model": entry} if isinstance(entry, str) else entry
            if not isinstance(spec, Mapping) or set(spec) - {"model", "factory"} or len(spec) != 1:
                raise ConfigFieldError(where, "needs one of 'factory' or 'model'.")
            if "factory" in spec:
                make = self._imported(self._expand(spec["factory"]), where)
                if not callable(make):
                    raise ConfigFieldError(where, f"{spec['factory']!r} is not a function returning an LLM client.")
            else:
                from kavalai.llm.registry import make_client

                model_id = self._expand(spec["model"])
                _check_model_id(model_id, where)
                make = functools.partial(make_client, model_id)
            factories[name] = _guarded_factory(make, where)
        return factories

    def _rest_tool_checked(self, where: str, server: str, tool: dict[str, Any], kernel: FunctionKernel) -> None:
        self._checked(where, lambda: self._rest_tool(server, tool, kernel))

    def _imported(self, dotted: str, where: str) -> Any:
        try:
            return import_dotted(dotted, self.base_dir)
        except ConfigurationError as exc:
            raise ConfigFieldError(where, f"{exc}.") from None

    def _checked(self, field: str, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except (ConfigFieldError, UnsetVariableError):
            raise
        except ToolRegistrationError as exc:
            raise ConfigFieldError(field, str(exc)) from None
        except (ValidationError, ValueError, TypeError) as exc:
            raise ConfigFieldError(field, configuration_problem(exc)) from None

    def _rest_tool(self, server: str, spec: dict[str, Any], kernel: FunctionKernel | None = None) -> None:
        name, method = spec.pop("name", None), spec.pop("method", "GET")
        if not isinstance(name, str):
            raise ConfigurationError("needs a 'name'")
        (kernel or self.kernel).register_rest_tool(server, name, method, **spec)

    def _mcp_server(self, raw: dict[str, Any]) -> None:
        from kavalai.adapters.mcp import McpServer

        if isinstance(raw.get("cwd"), str):
            raw["cwd"] = str(self.base_dir / raw["cwd"])
        self.kernel.register_mcp_server(McpServer(**raw))

    def _guard(self, field: str, action: Any) -> None:
        try:
            action()
        except (ConfigFieldError, UnsetVariableError):
            raise
        except FunctionKernelException as exc:
            raise ConfigFieldError(field, str(exc)) from exc
        except (ValidationError, ValueError, TypeError) as exc:
            raise ConfigFieldError(field, configuration_problem(exc)) from None

    def _expand(self, value: Any) -> Any:
        return expand_env(value, self.env, public=self.public)


def _check_doubt_keys(kernel: FunctionKernel, server: RestServer) -> None:
    """A REST server's ``tools_on_doubt`` names only its registered tools."""
    from kavalai.adapters._doubt import check_doubt_keys

    prefix = f"rest://{server.name}."
    names = [uri.removeprefix(prefix) for uri in kernel.registry.names_of("rest", server.name)]
    check_doubt_keys(server, f"REST server {server.name!r}", names)


@functools.cache
def _limit_field() -> TypeAdapter[float | None]:
    return TypeAdapter(Seconds | None)


def _declared_limit(value: object) -> float | None:
    """A limit the file declares outside a server's settings (a python function's ``timeout``), read as those
    settings read theirs (:data:`~kavalai.kernel.Seconds`): ``"30"``, as a ``${VAR}`` expands, is 30 seconds."""
    return _limit_field().validate_python(value)


def configuration_problem(exc: Exception) -> str:
    """The readable text of a configuration error: a server setting's own message(s) without pydantic's header
    (``1 validation error for McpServer``), or ``str(exc)`` for anything else."""
    if isinstance(exc, ValidationError):
        messages = [str(e["msg"]).removeprefix("Value error, ") for e in exc.errors(include_url=False)]
        if messages:
            return "; ".join(messages)
    return str(exc)


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _check_model_id(model_id: Any, field: str) -> None:
    from kavalai.llm.registry import PROVIDERS

    provider, _, model = str(model_id).partition("/")
    if not isinstance(model_id, str) or provider not in PROVIDERS or not model:
        raise ConfigFieldError(
            field,
            f"{model_id!r} is not a model id such as 'openai/gpt-4.1-mini' "
            f"(providers: {', '.join(PROVIDERS)}).{_did_you_mean(provider, list(PROVIDERS))}",
        )


def _guarded_factory(make: Callable[[], Any], field: str) -> Callable[[], LLMClient]:
    """``make``, whose failure (a missing API key, say) names the document field that declared it."""

    def factory() -> LLMClient:
        try:
            client: LLMClient = make()
        except Exception as exc:
            raise ConfigFieldError(field, str(exc)) from exc
        return client

    return factory


def _output_budget(section: Any, base_dir: Path) -> OutputBudget | None:
    """The ``output_budget`` section (already checked by the document's reader) as an ``OutputBudget``."""
    if section is None:
        return None
    from kavalai.agent.budget import FileArtifactStore, MemoryArtifactStore, OutputBudget

    values = dict(section)
    directory = values.get("artifact_dir")
    store = MemoryArtifactStore() if directory is None else FileArtifactStore(base_dir / directory)
    return OutputBudget(
        values.get("max_chars", 20_000), dict(values.get("per_tool") or {}), values.get("overflow", "truncate"), store
    )
