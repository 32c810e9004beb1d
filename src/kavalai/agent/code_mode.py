"""Code mode: the model writes one Python snippet that calls the agent's tools as async functions.

Instead of one model step per tool call, the model gets a single ``run_python`` tool whose description lists every
tool it may use as a typed stub (``async def math_add(*, a: int, b: int) -> int``). The snippet runs in the
``pydantic-monty`` sandbox (a separate worker process: no file system, no network, no host modules; bounded in
time and memory) and calls the tools with ``await``; each call goes back through the agent's tool runner, so the
allowed tools, the approval hook, the timeouts and the output budget apply to every inner call. The snippet's last
expression and what it printed are the ``run_python`` result.
"""

from __future__ import annotations

import atexit
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kavalai.errors import DeadlineExceededError
from kavalai.kernel import deadline, limit_seconds
from kavalai.llm.names import provider_name

__all__ = ["RUN_PYTHON", "CodeMode", "function_names", "stubs"]

#: The name of the one tool a code-mode agent offers.
RUN_PYTHON: Final = "run_python"
_JSON_TYPES: Final = {
    "integer": "int",
    "number": "float",
    "string": "str",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


@dataclass(frozen=True)
class CodeMode:
    """Code mode's limits.

    Attributes:
        max_seconds: how long one snippet may run, the tools it awaits included: a deadline that every tool call
            the snippet makes inherits (a call still running then ends with ``ToolTimeoutError``, later ones are
            refused), and after which the snippet is stopped with an error.
        max_memory: the most memory (bytes) one snippet may use.
        max_calls: the most tool calls one snippet may make.
        max_output_chars: how much printed output is kept: past it, what the snippet prints is counted, not kept, and
            the output ends with a line saying how much was cut (the snippet runs on).
    """

    max_seconds: float = 30.0
    max_memory: int = 128 * 1024 * 1024
    max_calls: int = 50
    max_output_chars: int = 20_000

    def __post_init__(self) -> None:
        seconds = limit_seconds(self.max_seconds, what="CodeMode max_seconds")
        if seconds is None:
            raise ValueError("CodeMode max_seconds must be positive (in seconds), got None")
        object.__setattr__(self, "max_seconds", seconds)  # clamped under the one rule for limits

    def spec(self, descriptions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The description of ``run_python``, with the stubs of ``descriptions``."""
        return {
            "name": RUN_PYTHON,
            "description": (
                "Run a Python snippet that calls your tools. Each tool is an async function: call it with keyword "
                "arguments and `await` (e.g. `total = await math_add(a=1, b=2)`). The snippet's last expression is "
                "the result; print() output is returned too. No imports of modules, files or network; a failing "
                "tool raises an exception you may catch. Your tools:\n\n" + stubs(descriptions)
            ),
            "inputSchema": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The Python snippet to run."}},
                "required": ["code"],
            },
        }

    async def run(self, code: str, functions: Mapping[str, Callable[..., Awaitable[Any]]]) -> dict[str, Any]:
        """Run ``code`` in the sandbox with ``functions`` as its tools; the result and the printed output.

        Raises:
            CodeModeError: the snippet failed (its error, as the sandbox reports it) or made too many calls.
        """
        from pydantic_monty import AsyncMonty, MontyError, ResourceLimits

        _settle_at_exit()
        calls = [0]

        def limited(function: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def call(**kwargs: Any) -> Any:
                calls[0] += 1
                if calls[0] > self.max_calls:
                    raise RuntimeError(f"the snippet made more than {self.max_calls} tool calls")
                return await function(**kwargs)

            return call

        limits = ResourceLimits(max_feed_duration_secs=self.max_seconds, max_memory=self.max_memory)
        printed = _KeptOutput(self.max_output_chars)
        try:
            # The sandbox's own limit counts its CPU time; the deadline counts the wall clock, awaited tools and all.
            with deadline(self.max_seconds, what="code-mode snippet"):
                async with AsyncMonty(min_processes=1, max_processes=1) as pool, pool.checkout(limits=limits) as box:
                    value = await box.feed_run(
                        code,
                        external_lookup={name: limited(f) for name, f in functions.items()},
                        print_callback=printed,
                    )
        except MontyError as exc:
            raise CodeModeError(str(exc), printed.output) from None
        except DeadlineExceededError:
            message = (
                f"the snippet ran past its time limit of {self.max_seconds:g} s (max_seconds), tool calls included"
            )
            raise CodeModeError(message, printed.output) from None
        return {"result": value, "output": printed.output, "tool_calls": calls[0]}


class _KeptOutput:
    """What a snippet prints (the sandbox's ``print_callback``), up to ``limit`` characters; past it the rest is only
    counted, so the host's memory is bounded however much the snippet prints, and :attr:`output` says how much was
    cut. (pydantic-monty's ``CollectString`` fails the snippet instead, with a "memory limit exceeded" message that
    would send the model after the wrong problem.)"""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self._cut = 0

    def __call__(self, stream: str, text: str) -> None:
        room = self._limit - self._kept
        if room > 0:
            part = text[:room]
            self._parts.append(part)
            self._kept += len(part)
            self._cut += len(text) - len(part)
        else:
            self._cut += len(text)

    @property
    def output(self) -> str:
        """What was kept, and a last line naming how many characters were cut, if any."""
        kept = "".join(self._parts)
        if not self._cut:
            return kept
        return f"{kept}\n[{self._cut} more characters printed, not kept: max_output_chars={self._limit}]"


#: How long the interpreter's exit lets the sandbox's own threads leave Python (see :func:`_settle_at_exit`).
_EXIT_SETTLE_SECONDS: Final = 0.25
_exit_hook = threading.Lock()
_exit_hook_set = False


def _settle_at_exit() -> None:
    """Register, once, a hook that lets pydantic-monty's threads leave Python before the interpreter finalizes.

    ``AsyncMonty`` hands each result to the event loop from one of its own (Rust) threads with
    ``loop.call_soon_threadsafe``; that call wakes the loop through a socket, with the GIL released, and takes the
    GIL back afterwards. When the program has meanwhile finished, the thread asks for the GIL while the interpreter
    finalizes, CPython ends it with ``pthread_exit``, and a thread that is not Python's cannot be unwound: the process
    aborts (SIGABRT, after its output was printed; seen under load now and then). Those threads are the library's, so
    they cannot be joined; releasing the GIL for a moment at exit, before finalization starts, lets any such thread
    finish its call. Only the exit of a process that ran a snippet waits, :data:`_EXIT_SETTLE_SECONDS` once.
    """
    global _exit_hook_set
    with _exit_hook:
        if not _exit_hook_set:
            atexit.register(time.sleep, _EXIT_SETTLE_SECONDS)
            _exit_hook_set = True


class CodeModeError(Exception):
    """A snippet failed; ``output`` is what it printed before."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


def function_names(uris: Sequence[str]) -> dict[str, str]:
    """A Python identifier for each URI (``python://math.add`` -> ``python_math_add``), unique, by URI."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for uri in uris:
        base = re.sub(r"\W", "_", provider_name(uri))
        if not base or base[0].isdigit():
            base = f"tool_{base}"
        name, n = base, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        names[uri] = name
    return names


def stubs(descriptions: Sequence[Mapping[str, Any]]) -> str:
    """Typed async stubs of the tools, one per tool, with their descriptions."""
    names = function_names([str(d["name"]) for d in descriptions])
    return "\n\n".join(_stub(names[str(d["name"])], d) for d in descriptions)


def _stub(name: str, description: Mapping[str, Any]) -> str:
    schema = description.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    params = [f"{key}: {_py_type(prop)}" + ("" if key in required else " = None") for key, prop in properties.items()]
    signature = f"*, {', '.join(params)}" if params else ""
    text = str(description.get("description") or "").strip().replace('"""', "'''")
    returns = _returns(description.get("outputSchema") or {})
    return f'async def {name}({signature}) -> {returns}:\n    """{text} ({description["name"]})"""'


def _returns(schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties") or {}
    if set(properties) == {"result"}:  # a wrapped return value: the function returns it bare
        return _py_type(properties["result"])
    return "dict"


def _py_type(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "Any"
    kind = schema.get("type")
    if isinstance(kind, str):
        return _JSON_TYPES.get(kind, "Any")
    return "Any"
