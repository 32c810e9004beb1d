"""Input-required rounds: how ``kavalai serve`` asks a host of the 2026-07-28 era what a backend asks during a call.

Such a host cannot be sent a request; a server that needs an answer returns an ``InputRequiredResult`` instead of
the tool's result, and the host calls again with its answers (``inputResponses``) and the ``requestState`` it was
given. The gateway's call of a backend cannot be paused that way, so it runs on, owned by :class:`InputRounds`,
between the host's requests:

```
host: tools/call ─► gateway starts the kernel call (a task of InputRounds)
                      backend asks (sampling, elicitation, roots) ─► the host's request answers
                      InputRequiredResult {inputRequests: {q1: ...}, requestState: <token>}
host: tools/call + inputResponses {q1: ...} + requestState ─► the answer goes to the backend; the call goes on
                      ... the tool's result (or the next round)
```

Every part ends bounded: a host that does not call again within :data:`ANSWER_WINDOW` seconds leaves its
questions refused (the backend is told so, and its call ends as the backend decides, within the call's own
timeout); a host that cancels a round's request ends the call; a call ended is forgotten, so its token is refused
from then on; closing the server (its lifespan) cancels every call still running. The token is random and names one
round of one call of one tool: a retry naming another tool is refused, and only one request may answer a round (a
second one while the first is in, or one naming a round already answered, is refused with ``INVALID_PARAMS``).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp_types.version import is_version_at_least

from kavalai.adapters.mcp import INPUT_KEY, INPUT_ROUND, InputRound
from kavalai.serve._errors import protocol_error, refusal, tool_error_result

__all__ = [
    "ANSWER_WINDOW",
    "ELSEWHERE",
    "ESCALATED",
    "InputRounds",
    "RoundsCall",
    "Servings",
    "resumed",
    "takes_rounds",
]

#: Seconds a backend's question waits for the host's next request (carrying its answer) before it is refused.
ANSWER_WINDOW: Final = 300.0

_ROUNDS_ERA: Final = "2026-07-28"

#: The refusal of a round whose call another process holds (``{tool}``: the tool's name).
ELSEWHERE: Final = (
    "The requestState for {tool} belongs to a call held by another kavalai serve process (another worker or "
    "replica): send each round of a call to the process that started it (sticky routing), or retry the call "
    "without requestState"
)


R = TypeVar("R", bound=types.Result)


class _Escalated(types.Result):
    """What :meth:`RoundsCall.next_round` returns once the call has become a host's task."""


#: The call has become a host's task (:meth:`RoundsCall.escalate`): its round is answered with the task.
ESCALATED: Final = _Escalated()


def takes_rounds(protocol_version: str) -> bool:
    """Whether a host speaking ``protocol_version`` is asked through input-required rounds (not on its session)."""
    return is_version_at_least(protocol_version, _ROUNDS_ERA)


@dataclass(eq=False)
class _Question:
    key: str
    request: types.InputRequest
    together: InputRound | None = None  # the backend's round it was asked in, with others to ask at once
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None


class RoundsCall:
    """One host call running across rounds: its questions to the host, and its end."""

    def __init__(self, token: str, tool: str, answer_window: float = ANSWER_WINDOW) -> None:
        self.token = token
        self.tool = tool
        self.answer_window = answer_window
        self.ctx: Any = None  # the host's request of the latest round
        self.round = 0  # the latest round put to the host (its requestState is the token and this number)
        self.answering = False  # a host request of this call is in (only one at a time)
        self.result: types.Result | None = None
        self.error: Exception | None = None  # the request failed (a prompt or resource the backend refused)
        self._pending: list[_Question] = []  # asked by the backend, not yet put to the host
        self._sent: dict[str, _Question] = {}  # put to the host, not yet answered
        self._news = anyio.Event()  # a question asked, or the call ended
        self._count = 0
        self.scope = anyio.CancelScope()
        self.collected = anyio.Event()  # the host was given the result
        self.escalated = False  # the call is a host's task from now on (its backend's task exists, or it began as one)

    async def ask(self, request: types.InputRequest, result_type: type[Any]) -> Any:
        """Put ``request`` to the host in the next round; its answer (as ``result_type``) or an ``ErrorData``."""
        self._count += 1
        key = INPUT_KEY.get()  # the backend's own key, when it asked in a round of its own (and it is free)
        taken = key in self._sent or any(question.key == key for question in self._pending)
        question = _Question(key if key is not None and not taken else f"q{self._count}", request, INPUT_ROUND.get())
        self._pending.append(question)
        if question.together is not None and key is not None:
            question.together.arrived(key)  # held here: the host's round waits for the rest of the backend's
        self._news.set()
        try:
            with anyio.move_on_after(self.answer_window):
                await question.answered.wait()
        finally:  # answered, not answered in time, or given up (a sibling request refused): not asked any more
            self._sent.pop(question.key, None)
            if question in self._pending:
                self._pending.remove(question)
        if question.answer is None:
            return refusal(f"the host of kavalai serve did not answer within {self.answer_window:g} s")
        try:
            return result_type.model_validate(question.answer.model_dump(by_alias=True, exclude_unset=True))
        except ValueError as exc:
            return refusal(f"the host of kavalai serve answered with something else: {exc}")

    def ended(self, result: types.Result) -> None:
        self.result = result
        self._news.set()

    def escalate(self) -> None:
        """The call becomes a host's task (its backend answered with a task of its own): the host's request of the
        latest round is answered with the task, and what the call asks from now on is read with ``tasks/get``."""
        self.escalated = True
        self._news.set()

    def failed(self, error: Exception) -> None:
        """The request failed: the host's request of the latest round is answered with ``error``."""
        self.error = error
        self._news.set()

    def answer(self, responses: types.InputResponses) -> None:
        """The host's answers of its latest round (keys it was not asked are ignored)."""
        for key, response in responses.items():
            question = self._sent.pop(key, None)
            if question is not None:
                question.answer = response
                question.answered.set()

    def open_questions(self) -> dict[str, types.InputRequest]:
        """The questions put to the host and not answered yet, those asked since the last look put to it now (a
        task's ``inputRequests``: read by polling, never waited for)."""
        self._sent.update((question.key, question) for question in self._pending)
        self._pending.clear()
        return {key: question.request for key, question in self._sent.items()}

    async def next_round(self) -> types.Result:
        """The call's result, or the questions it waits on now (an input-required round), or :data:`ESCALATED`
        once the call has become a host's task; its failure raised."""
        while True:
            while self.result is None and self.error is None and not self._pending and not self.escalated:
                self._news = anyio.Event()
                await self._news.wait()
            if self.escalated:  # what it asks, how it ends: read from the task from now on
                return ESCALATED
            if self.error is not None:
                raise self.error
            if self.result is not None:
                return self.result
            # the backend asked several things in one round of its own: the host is asked them in one round too
            coming = [q.together for q in self._pending if q.together is not None and not q.together.settled.is_set()]
            if not coming:
                break
            await coming[0].settled.wait()
        asked = {question.key: question.request for question in self._pending}
        self._sent.update((question.key, question) for question in self._pending)
        self._pending.clear()
        self.round += 1
        return types.InputRequiredResult(input_requests=asked, request_state=f"{self.token}.{self.round}")


class Servings:
    """The task groups of the servings of a server (each lifespan's) owning the work that runs between a host's
    requests: the newest starts what begins; each, as it ends, cancels what it started."""

    def __init__(self) -> None:
        self._groups: list[TaskGroup] = []

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Work may be started within the block (a serving: the server's lifespan); at its end, what it started
        and is still running is cancelled."""
        async with anyio.create_task_group() as group:
            self._groups.append(group)
            try:
                yield
            finally:
                self._groups.remove(group)
                group.cancel_scope.cancel()

    def __bool__(self) -> bool:
        """Whether work can be started now (a serving is running)."""
        return bool(self._groups)

    def start_soon(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start ``work`` in the newest serving's task group."""
        self._groups[-1].start_soon(work)


class InputRounds:
    """The host calls running across rounds, owned for the server's lifespan (:meth:`running`)."""

    def __init__(self, answer_window: float = ANSWER_WINDOW) -> None:
        self._answer_window = answer_window  # seconds a question waits for the host's next request
        self._calls: dict[str, RoundsCall] = {}
        self._owners = Servings()  # one task group per serving of the server (the newest starts the calls)
        self._mark = secrets.token_hex(6)  # begins every token given here: this process's, not another's

    def running(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Calls may run across rounds within the block (a serving of the server: its lifespan); at its end, those
        it started and still running are cancelled."""
        return self._owners.running()

    @property
    def available(self) -> bool:
        """Whether calls can run across rounds now (the server's lifespan was entered)."""
        return bool(self._owners)

    async def call(
        self,
        tool: str,
        params: types.CallToolRequestParams | types.GetPromptRequestParams | types.ReadResourceRequestParams,
        ctx: Any,
        run: Callable[[RoundsCall], Awaitable[R]],
        *,
        is_tool: bool = True,
    ) -> R | types.InputRequiredResult:
        """The first round of a call (``run`` starts it) or a later one (``params`` carry the host's answers).
        ``tool`` names what is called (a tool, or ``prompts/get <name>``: a round names one); a call that is not a
        tool's (``is_tool=False``) fails as a request when cancelled or refused, not as a tool's error result."""
        if params.request_state is None:
            call = self._start(tool, run, is_tool)
        else:
            call = self._resumed(tool, params.request_state)
            call.answer(params.input_responses or {})
        call.ctx = ctx
        call.answering = True
        try:
            outcome = await call.next_round()
        except BaseException:
            call.scope.cancel()  # the host gave up the round's request: the call ends with it
            call.collected.set()
            raise
        finally:
            call.answering = False
        if isinstance(outcome, types.InputRequiredResult):
            return outcome
        call.collected.set()
        return outcome  # type: ignore[return-value]  # what run returned: an R

    def _start(self, tool: str, run: Callable[[RoundsCall], Awaitable[types.Result]], is_tool: bool) -> RoundsCall:
        if not self._owners:
            raise protocol_error(types.INTERNAL_ERROR, "kavalai serve is not running: no call can take input rounds")
        call = RoundsCall(f"{self._mark}.{secrets.token_urlsafe(24)}", tool, self._answer_window)
        self._calls[call.token] = call

        async def running() -> None:
            try:
                with call.scope:
                    try:
                        call.ended(await run(call))
                    except Exception as exc:  # a prompt or resource refused: the host's request fails with it
                        call.failed(exc)
                    finally:
                        if call.result is None and call.error is None and is_tool:
                            call.ended(_ended())
                        elif call.result is None and call.error is None:
                            call.failed(_cancelled())
                with anyio.move_on_after(self._answer_window):  # the result waits for the host's next request
                    await call.collected.wait()
            finally:
                self._calls.pop(call.token, None)

        self._owners.start_soon(running)
        return call

    def _resumed(self, tool: str, state: str) -> RoundsCall:
        return resumed(self._calls.get, self._mark, tool, state)


def resumed(find: Callable[[str], RoundsCall | None], mark: str, tool: str, state: str) -> RoundsCall:
    """The call a host's later round of ``tool`` names by its ``requestState`` (``find``: a call by its token;
    ``mark``: what begins the tokens of this process), refused when it is unknown, ended, another process's, of
    another tool, or its round was answered already."""
    token, _, round_ = state.rpartition(".")
    call = find(token)
    begins, dot, _ = token.partition(".")
    if call is None and dot and begins != mark:
        raise protocol_error(types.INVALID_PARAMS, ELSEWHERE.format(tool=tool))
    if call is None or call.tool != tool or call.escalated:
        raise protocol_error(types.INVALID_PARAMS, f"Unknown or ended requestState for {tool}")
    if call.answering or round_ != str(call.round):
        raise protocol_error(
            types.INVALID_PARAMS, f"This round of {tool} was answered already: only one request may answer a round"
        )
    return call


def _ended() -> types.CallToolResult:
    return tool_error_result("The call was cancelled.")


def _cancelled() -> Exception:
    return protocol_error(types.INTERNAL_ERROR, "The request was cancelled.")
