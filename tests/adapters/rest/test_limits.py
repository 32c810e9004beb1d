"""Response bodies are bounded, counted after decompression: a gzip bomb or a 1 GiB body is refused as it arrives."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kavalai import FunctionKernel, ResponseTooLargeError, RestServer


async def test_a_gzip_bomb_is_refused_by_its_inflated_size(kernel: FunctionKernel, shop_url: str) -> None:
    kernel.register_rest_server(RestServer(name="s", url=shop_url, max_response_bytes=4 * 1024 * 1024))
    kernel.register_rest_tool(
        "s", "bomb", "GET", {"type": "object", "properties": {"mb": {"type": "integer"}}}, None, path="/gzip-bomb"
    )
    with pytest.raises(ResponseTooLargeError, match=r"larger than 4,194,304 bytes \(max_response_bytes") as info:
        await kernel.call_tool("rest://s.bomb", {"mb": 50})
    assert info.value.limit == 4 * 1024 * 1024
    assert info.value.uri == "rest://s.bomb"
    small = await kernel.call_tool("rest://s.bomb", {"mb": 1})  # under the limit, inflated and decoded
    assert len(small.result) == 512 * 1024 + 1  # type: ignore[attr-defined]


SERVER = textwrap.dedent(
    """
    import asyncio, sys
    from aiohttp import web

    async def huge(request):
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b"0" * (1024 * 1024)
        try:
            for _ in range(1024):
                await response.write(chunk)
        except (ConnectionResetError, ConnectionError):
            pass
        return response

    async def main():
        app = web.Application()
        app.router.add_get("/huge", huge)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(site._server.sockets[0].getsockname()[1], flush=True)
        await asyncio.sleep(120)

    asyncio.run(main())
    """
)

VICTIM = textwrap.dedent(
    """
    import asyncio, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))
    from kavalai import FunctionKernel, ResponseTooLargeError, RestServer

    def rss(field):
        with open("/proc/self/status") as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
        raise LookupError(field)

    async def main():
        kernel = FunctionKernel()
        kernel.register_rest_server(RestServer(name="s", url=f"http://127.0.0.1:{sys.argv[1]}"))
        kernel.register_rest_tool("s", "huge", "GET")
        await kernel.connect()
        # ru_maxrss survives exec (it would count the forked parent): reset the high-water mark and read it here.
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
        before = rss("VmRSS")
        try:
            await kernel.call_tool("rest://s.huge")
        except ResponseTooLargeError as exc:
            print("refused:", "max_response_bytes" in str(exc))
        await kernel.close()
        peak = rss("VmHWM")
        print(f"peak RSS {peak:.0f} MiB, {peak - before:.0f} MiB more than before the call")

    asyncio.run(main())
    """
)


def test_a_1_gib_body_is_refused_with_peak_memory_under_the_limit_plus_100_mb() -> None:
    # The server and the victim kernel are processes of their own: only the kernel's memory is measured (a server
    # in the same process would count what it buffers), under RLIMIT_AS, so a regression cannot hurt the machine.
    with subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            port = server.stdout.readline().strip()
            done = subprocess.run(
                [sys.executable, "-c", VICTIM, port], capture_output=True, text=True, timeout=120, check=False
            )
        finally:
            server.kill()
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "refused: True"
    growth = float(lines[1].split()[4])
    print(f"1 GiB REST body: {lines[1]} (limit 64 MiB + 100 MB allowed)")
    assert growth < 64 + 100  # what the call added to the process's peak: the 64 MiB limit and at most 100 MB more
