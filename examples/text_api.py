"""A small REST API for the example workflows: ``POST /reading-time`` estimates how long a text takes to read.

``document_report.yaml`` names :func:`create_app` under ``rest_servers: [{app: ...}]``, so the workflow engine
serves it on a free 127.0.0.1 port while it is connected: nothing to start by hand. To run it on its own (and
point a workflow at it with ``url:`` instead)::

    python examples/text_api.py --port 8765
"""

from __future__ import annotations

import argparse
import math

from aiohttp import web


async def reading_time(request: web.Request) -> web.Response:
    """``{"words": 420, "wpm": 200}`` -> ``{"minutes": 3, "words": 420}``."""
    try:
        body = await request.json()
    except ValueError:
        return web.json_response({"detail": "the body must be JSON"}, status=400)
    words, wpm = body.get("words"), body.get("wpm", 200)
    if not isinstance(words, int) or not isinstance(wpm, int) or words < 0 or wpm <= 0:
        return web.json_response({"detail": "words must be a non-negative integer and wpm a positive one"}, status=422)
    return web.json_response({"minutes": max(1, math.ceil(words / wpm)), "words": words})


def create_app() -> web.Application:
    """The API as a fresh aiohttp application."""
    app = web.Application()
    app.router.add_post("/reading-time", reading_time)
    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve the example text API on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8765)
    web.run_app(create_app(), host="127.0.0.1", port=parser.parse_args().port)
