"""Fixtures of the bundled-tool tests: a real local HTTP server and a scripted DNS resolver."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping, Sequence

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from tests.servers.tools_app import create_app
from tests.servers.uvicorn_server import serve


class StaticResolver(AbstractResolver):
    """Answers from a fixed table instead of DNS; an unknown name fails like a lookup that found nothing.

    ``answers[name]`` may hold one list of addresses, or several lists used in turn (the last one repeats), to
    play a name whose answer changes between lookups. ``lookups`` records every name asked for.
    """

    def __init__(self, answers: Mapping[str, Sequence[str] | Sequence[Sequence[str]]]) -> None:
        self._answers = {name: _rounds(value) for name, value in answers.items()}
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        rounds = self._answers.get(host)
        if not rounds:
            raise OSError(f"test resolver: no answer for {host!r}")
        addresses = rounds.pop(0) if len(rounds) > 1 else rounds[0]
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in addresses
        ]

    async def close(self) -> None:
        return None


def _rounds(value: Sequence[str] | Sequence[Sequence[str]]) -> list[list[str]]:
    if all(isinstance(item, str) for item in value):
        return [[str(item) for item in value]]
    return [[str(address) for address in item] for item in value]


class LocalServer:
    """The tools test app served on 127.0.0.1."""

    def __init__(self, base_url: str, hits: list[str]) -> None:
        self.base_url = base_url
        self.port = int(base_url.rsplit(":", 1)[1])
        self.hits = hits

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on this server."""
        return f"{self.base_url}{path}"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """The tools test app on a free 127.0.0.1 port, for the whole module."""
    app = create_app()
    with serve(app, lifespan="off") as base_url:
        yield LocalServer(base_url, app.state.hits)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A 127.0.0.1 port that is bound but not listening, so connecting to it is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
