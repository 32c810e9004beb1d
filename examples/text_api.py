"""A small REST API for the example workflows: ``POST /reading-time`` estimates how long a text takes to read.

Start it before running ``document_report.yaml``::

    python examples/text_api.py --port 8765
"""

from __future__ import annotations

import argparse
import math

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def reading_time(request: Request) -> JSONResponse:
    """``{"words": 420, "wpm": 200}`` -> ``{"minutes": 3, "words": 420}``."""
    body = await request.json()
    words, wpm = body.get("words"), body.get("wpm", 200)
    if not isinstance(words, int) or not isinstance(wpm, int) or words < 0 or wpm <= 0:
        return JSONResponse({"detail": "words must be a non-negative integer and wpm a positive one"}, 422)
    return JSONResponse({"minutes": max(1, math.ceil(words / wpm)), "words": words})


app = Starlette(routes=[Route("/reading-time", reading_time, methods=["POST"])])

if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port, log_level="warning")
