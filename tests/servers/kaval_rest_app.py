"""A real FastAPI application answering as the REST server of Kaval.AI 1.0's ``test_call_rest_tool`` does.

One path per method (``/get_item``, ``/create_item``, ``/update_item``, ``/patch_item``, ``/delete_item``), and
``/auth_check``, which answers 401 unless the request carries Basic auth for ``KAVAL_USER``/``KAVAL_PASSWORD``.
Served by ``tests.servers.uvicorn_server.serve``.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, HTTPException

__all__ = ["KAVAL_PASSWORD", "KAVAL_USER", "create_app"]

KAVAL_USER = "kaval-user"
KAVAL_PASSWORD = "kaval-pass-2468"


def create_app() -> FastAPI:
    """The application: a fixed answer per method, and a Basic-auth check."""
    app = FastAPI()

    @app.get("/get_item")
    async def get_item(id: int) -> dict[str, Any]:
        return {"name": "item", "value": id * 100}

    @app.post("/create_item")
    async def create_item(item: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
        return {"name": item.get("name", "?"), "value": 100}

    @app.put("/update_item")
    async def update_item(item: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
        return {"name": "updated", "value": item.get("id", 0) * 200}

    @app.patch("/patch_item")
    async def patch_item(item: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
        return {"name": "patched", "value": item.get("id", 0) * 300}

    @app.delete("/delete_item")
    async def delete_item(id: int) -> dict[str, Any]:
        return {"status": "deleted", "id": id}

    @app.get("/auth_check")
    async def auth_check(authorization: Annotated[str | None, Header()] = None) -> dict[str, str]:
        expected = base64.b64encode(f"{KAVAL_USER}:{KAVAL_PASSWORD}".encode()).decode()
        if authorization != f"Basic {expected}":
            raise HTTPException(status_code=401, detail="credentials missing or wrong")
        return {"status": "authenticated"}

    return app
