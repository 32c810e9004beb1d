"""The session's streams (kavalai.adapters.mcp._session_streams): the one layer every message of an MCP client
session crosses, and each thing it does there, on real anyio memory streams (a transport's own)."""

from __future__ import annotations

import ast
import contextvars
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp.shared.message import SessionMessage

from kavalai.adapters.mcp._probe_spans import ProbeSpans
from kavalai.adapters.mcp._session_streams import SessionStreams

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[3] / "src" / "kavalai"
#: The SDK's client classes that read and write a session's streams.
_SESSIONS = {"Client", "ClientSession"}


def test_every_session_the_kernel_opens_reads_and_writes_through_the_one_layer() -> None:
    """The crossing points: each construction of the SDK's ``Client`` / ``ClientSession`` in the package (one today,
    in the connection supervisor) is handed ``SessionStreams(...).transport``; a new one that is not fails here."""
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        made = {  # names bound to SessionStreams(...) in this file
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "SessionStreams"
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _SESSIONS):
                continue
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            first = node.args[0] if node.args else None
            given = (
                isinstance(first, ast.Attribute)
                and first.attr == "transport"
                and isinstance(first.value, ast.Name)
                and first.value.id in made
            )
            assert given, f"{where}: an SDK session not given SessionStreams(...).transport"
            found.append(where)
    assert len(found) == 1, found
    assert found[0].startswith("adapters/mcp/_connection.py:"), found


_OPENED: list[Any] = []  # every memory stream a test made, closed after it (an unclosed one warns)


@pytest.fixture(autouse=True)
def _close_streams() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()


def _pair(kind: Any) -> tuple[Any, Any]:
    send, receive = anyio.create_memory_object_stream[kind](10)
    _OPENED.extend((send, receive))
    return send, receive


def _streams(**options: Any) -> tuple[SessionStreams, Any, Any, list[str]]:
    """A SessionStreams over fresh memory streams: it, the server's end of what it reads and of what it writes, and
    the list ``on_end`` appends to."""
    to_session, reads = _pair(Any)
    writes, from_session = _pair(SessionMessage)
    ended: list[str] = []
    options.setdefault("probes", ProbeSpans())
    streams = SessionStreams(reads, writes, on_end=lambda: ended.append("end"), **options)
    return streams, to_session, from_session, ended


def _answer(request_id: int, result: dict[str, Any]) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))


async def test_the_end_of_the_transports_stream_is_reported_and_ends_the_sessions_reading() -> None:
    streams, to_session, _, ended = _streams()
    read, write = await streams.transport.__aenter__()
    assert read is streams
    assert write is streams
    answer = _answer(1, {"content": []})
    await to_session.send(answer)
    to_session.close()
    got = [item async for item in read]
    assert got == [answer]
    assert ended == ["end"]


async def test_a_closed_read_stream_is_reported_and_raised() -> None:
    _, reads = _pair(Any)
    writes, _ = _pair(SessionMessage)
    ended: list[str] = []
    streams = SessionStreams(reads, writes, on_end=lambda: ended.append("end"), probes=ProbeSpans())
    reads.close()
    with pytest.raises(anyio.ClosedResourceError):
        await streams.receive()
    with pytest.raises(anyio.ClosedResourceError):
        await streams.__anext__()
    assert ended == ["end", "end"]


async def test_the_sessions_exit_leaves_the_transports_streams_open() -> None:
    """A late answer (to a call that timed out) waits in the transport's stream instead of hitting a closed one."""
    streams, to_session, from_session, _ = _streams()
    async with streams, streams:  # as the SDK's dispatcher enters and leaves both
        pass
    await streams.aclose()
    await to_session.send(_answer(7, {"content": []}))  # the transport's stream still takes messages
    ping = SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=2, method="ping"))
    await streams.send(ping)
    assert (await from_session.receive()) is ping
    assert (await streams.receive()).message.id == 7


async def test_a_created_legacy_task_is_carried_as_a_call_result_and_any_other_answer_passes_as_it_is() -> None:
    streams, to_session, _, _ = _streams()
    plain = _answer(1, {"content": [{"type": "text", "text": "hi"}]})
    task = {"taskId": "t1", "status": "working"}
    created = _answer(2, {"task": task, "_meta": {"a": 1}})
    with_content = _answer(3, {"task": task, "content": []})  # a result with content is not a created task
    error = SessionMessage(
        mcp_types.JSONRPCError(jsonrpc="2.0", id=4, error=mcp_types.ErrorData(code=-32000, message="no"))
    )
    failure = RuntimeError("a transport's exception, handed to the session")
    for item in (plain, created, with_content, error, failure):
        await to_session.send(item)
    got = [await streams.__anext__() for _ in range(5)]
    assert got[0] is plain
    assert got[2] is with_content
    assert got[3] is error
    assert got[4] is failure
    carried = got[1].message.result
    assert carried == {"content": [], "_meta": {"a": 1, "io.kavalai/created-task": task}}


async def test_the_senders_context_of_each_message_is_passed_on() -> None:
    """The SDK's HTTP transports record each message's sender context on their stream; the dispatcher reads it
    from the stream it is given."""

    class Contextual:
        def __init__(self) -> None:
            self.last_context: contextvars.Context | None = None
            self.queue = [contextvars.copy_context(), contextvars.copy_context()]

        async def receive(self) -> SessionMessage:
            self.last_context = self.queue.pop(0)
            return _answer(1, {"content": []})

    inner = Contextual()
    writes, _ = _pair(SessionMessage)
    streams = SessionStreams(inner, writes, on_end=lambda: None, probes=ProbeSpans())
    assert streams.last_context is None
    await streams.__anext__()
    first = streams.last_context
    await streams.receive()
    assert first is not None
    assert streams.last_context is inner.last_context
    assert streams.last_context is not first


async def test_initialize_offers_the_pinned_version_and_nothing_else_is_changed() -> None:
    streams, _, from_session, _ = _streams(pinned="2025-03-26")
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "k", "version": "1"}}
    initialize = SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=0, method="initialize", params=params))
    call = SessionMessage(
        mcp_types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params={"name": "initialize"})
    )
    note = SessionMessage(mcp_types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
    for item in (initialize, call, note):
        await streams.send(item)
    sent = [await from_session.receive() for _ in range(3)]
    assert sent[0].message.params == {**params, "protocolVersion": "2025-03-26"}
    assert sent[1] is call
    assert sent[2] is note
    unpinned, _, from_unpinned, _ = _streams()
    await unpinned.send(initialize)
    assert (await from_unpinned.receive()) is initialize
