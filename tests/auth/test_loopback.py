"""The loopback redirect listener: codes by state, errors, unknown states, a port already taken."""

from __future__ import annotations

import logging
import socket

import aiohttp
import anyio
import pytest

from kavalai._listen import listening_socket
from kavalai.auth import LoopbackRedirect
from kavalai.auth._loopback import AuthorizationDenied


async def _visit(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as browser, browser.get(url) as answer:
        return answer.status, await answer.text()


async def test_two_flows_wait_for_their_own_state(caplog: pytest.LogCaptureFixture) -> None:
    listener = LoopbackRedirect()
    uri = listener.redirect_uri()
    assert uri.startswith("http://127.0.0.1:")
    assert uri.endswith("/callback")
    assert listener.port
    await listener.expect("state-a")
    await listener.expect("state-b")
    with caplog.at_level(logging.DEBUG):
        assert (await _visit(f"{uri}?code=code-for-b&state=state-b"))[0] == 200
        status, page = await _visit(f"{uri}?code=code-for-a&state=state-a&iss=http%3A%2F%2Fas%2F")
    assert status == 200
    assert "You can close this window" in page
    a = await listener.wait("state-a", 5)
    b = await listener.wait("state-b", 5)
    assert (a.code, a.state, a.iss) == ("code-for-a", "state-a", "http://as/")
    assert (b.code, b.iss) == ("code-for-b", None)
    assert "code-for-a" not in caplog.text  # the request line, which holds the code, is never logged
    with pytest.raises(aiohttp.ClientConnectionError):  # nobody waits any more: the listener is gone
        await _visit(f"{uri}?code=late&state=state-a")


async def test_an_unknown_state_is_refused_and_the_flow_goes_on_waiting() -> None:
    listener = LoopbackRedirect()
    uri = listener.redirect_uri()
    await listener.expect("mine")
    status, page = await _visit(f"{uri}?code=stolen&state=not-mine")
    assert status == 400
    assert "not expected" in page
    await _visit(f"{uri}?code=good&state=mine")
    assert (await listener.wait("mine", 5)).code == "good"


async def test_an_error_from_the_authorization_server_fails_the_wait() -> None:
    listener = LoopbackRedirect()
    uri = listener.redirect_uri()
    await listener.expect("s")
    status, page = await _visit(f"{uri}?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E&state=s")
    assert status == 400  # escaped, never markup of the server's making
    assert "&lt;b&gt;no&lt;/b&gt;" in page
    with pytest.raises(AuthorizationDenied, match="access_denied: <b>no</b>"):
        await listener.wait("s", 5)


async def test_nothing_comes_back_in_time() -> None:
    listener = LoopbackRedirect()
    await listener.expect("s")
    with pytest.raises(TimeoutError):
        await listener.wait("s", 0.05)
    await listener.expect("t")  # the listener starts again for the next flow
    await _visit(f"{listener.redirect_uri()}?code=c&state=t")
    assert (await listener.wait("t", 5)).code == "c"


async def test_a_port_taken_by_another_program() -> None:
    with listening_socket("127.0.0.1", 0) as other:
        port = other.getsockname()[1]
        assert LoopbackRedirect(port=port).redirect_uri() == f"http://127.0.0.1:{port}/callback"
        listener = LoopbackRedirect(port=port)
        with pytest.raises(OSError):
            await listener.expect("s")
        chosen = LoopbackRedirect()
        assert chosen.redirect_uri(preferred_port=port) != f"http://127.0.0.1:{port}/callback"  # taken: another
    free = LoopbackRedirect()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        wanted = probe.getsockname()[1]
    assert free.redirect_uri(preferred_port=wanted) == f"http://127.0.0.1:{wanted}/callback"


async def test_ipv6_loopback() -> None:
    if not socket.has_ipv6:  # pragma: no cover
        pytest.skip("no IPv6")
    listener = LoopbackRedirect(host="::1")
    try:
        await listener.expect("s")
    except OSError:  # pragma: no cover - a machine without ::1
        pytest.skip("::1 is not available")
    uri = listener.redirect_uri()
    assert uri.startswith("http://[::1]:")
    await _visit(f"{uri}?code=c6&state=s")
    with anyio.fail_after(5):
        assert (await listener.wait("s", 5)).code == "c6"
