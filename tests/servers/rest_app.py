"""A real FastAPI application for the ``rest://`` tests, served by ``tests.servers.uvicorn_server.serve``.

It covers every method, path parameters, query and body, each auth kind (checked by the server), error
statuses, a slow endpoint, non-JSON, empty and large responses, echo endpoints that show exactly what a request
carried, and a recursive model (a circular ``$ref`` in its ``/openapi.json``).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
from typing import Annotated, Any

from fastapi import FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from pydantic import BaseModel, Field

__all__ = ["API_KEY", "BASIC_PASSWORD", "BASIC_USER", "BEARER_TOKEN", "Item", "create_app"]

BASIC_USER = "alice"
BASIC_PASSWORD = "s3cret-basic-pw"
BEARER_TOKEN = "tok-bearer-0123456789"
API_KEY = "key-api-9876543210"


class ItemIn(BaseModel):
    """An item to create."""

    name: str = Field(description="The item's name.")
    price: float = Field(ge=0, description="Price in euros.")
    tags: list[str] = Field(default_factory=list)


class Item(ItemIn):
    """A stored item."""

    id: int


class ItemPatch(BaseModel):
    """Fields to change."""

    name: str | None = None
    price: float | None = None


class Node(BaseModel):
    """A tree node; its schema refers to itself."""

    label: str
    children: list[Node] = Field(default_factory=list)


def _unauthorized(scheme: str) -> HTTPException:
    return HTTPException(status_code=401, detail=f"{scheme} credentials missing or wrong")


def create_app() -> FastAPI:
    """A fresh application with its own item store (three items to start with)."""
    app = FastAPI(title="kavalai test shop", version="1.0")
    items: dict[int, Item] = {
        i: Item(id=i, name=name, price=price, tags=tags)
        for i, (name, price, tags) in enumerate(
            [("apple", 0.5, ["fruit"]), ("bread", 2.25, ["bakery"]), ("cheese", 7.0, [])], start=1
        )
    }

    @app.get("/items", tags=["items"], summary="List items")
    async def list_items(limit: int = 10, tag: str | None = None) -> list[Item]:
        """Items in id order, optionally only those with a tag."""
        found = [item for item in items.values() if tag is None or tag in item.tags]
        return found[:limit]

    @app.get("/items/{item_id}", tags=["items"], summary="Get an item")
    async def get_item(item_id: int) -> Item:
        if item_id not in items:
            raise HTTPException(status_code=404, detail=f"item {item_id} not found")
        return items[item_id]

    @app.post("/items", tags=["items"], status_code=201, summary="Create an item")
    async def create_item(item: ItemIn) -> Item:
        new = Item(id=max(items, default=0) + 1, **item.model_dump())
        items[new.id] = new
        return new

    @app.put("/items/{item_id}", tags=["items"], summary="Replace an item")
    async def replace_item(item_id: int, item: ItemIn) -> Item:
        items[item_id] = Item(id=item_id, **item.model_dump())
        return items[item_id]

    @app.patch("/items/{item_id}", tags=["items"], summary="Change an item")
    async def patch_item(item_id: int, patch: ItemPatch) -> Item:
        if item_id not in items:
            raise HTTPException(status_code=404, detail=f"item {item_id} not found")
        changed = items[item_id].model_copy(update=patch.model_dump(exclude_unset=True))
        items[item_id] = changed
        return changed

    @app.delete("/items/{item_id}", tags=["items"], status_code=204, summary="Delete an item")
    async def delete_item(item_id: int) -> Response:
        items.pop(item_id, None)
        return Response(status_code=204)

    @app.head("/items/{item_id}", tags=["items"], include_in_schema=False)
    async def head_item(item_id: int) -> Response:
        return Response(status_code=200 if item_id in items else 404, headers={"X-Exists": "1"})

    @app.get("/echo/query", tags=["echo"])
    async def echo_query(request: Request) -> dict[str, list[str]]:
        """Every query parameter as received, repeated keys included."""
        result: dict[str, list[str]] = {}
        for key, value in request.query_params.multi_items():
            result.setdefault(key, []).append(value)
        return result

    @app.post("/echo/body", tags=["echo"])
    async def echo_body(request: Request) -> dict[str, Any]:
        """The raw JSON body and content type, plus the query and path as received."""
        raw = await request.body()
        return {
            "json": await request.json() if raw else None,
            "content_type": request.headers.get("content-type"),
            "query": dict(request.query_params),
        }

    @app.post("/echo/form", tags=["echo"], include_in_schema=False)
    async def echo_form(request: Request) -> dict[str, Any]:
        """The form fields as received, in order and repeated keys included, and the content type."""
        form = await request.form()
        return {"form": [[k, v] for k, v in form.multi_items()], "content_type": request.headers.get("content-type")}

    @app.get("/echo/path/{value:path}", tags=["echo"])
    async def echo_path(request: Request, value: str) -> dict[str, str]:
        """The raw path as received (so percent-encoding can be checked) and the decoded value."""
        return {"raw_path": request.scope["raw_path"].decode("ascii"), "value": value}

    @app.get("/echo/headers", tags=["echo"])
    async def echo_headers(request: Request) -> dict[str, str]:
        return dict(request.headers)

    @app.get("/echo/header-list", tags=["echo"])
    async def echo_header_list(request: Request) -> list[list[str]]:
        """Every header line as received, repeats and case kept."""
        return [[name.decode("latin-1"), value.decode("latin-1")] for name, value in request.headers.raw]

    @app.get("/auth/basic", tags=["auth"])
    async def auth_basic(authorization: Annotated[str | None, Header()] = None) -> dict[str, str]:
        expected = base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
        if authorization != f"Basic {expected}":
            raise _unauthorized("basic")
        return {"user": BASIC_USER}

    @app.get("/gzip-bomb", tags=["misc"])
    async def gzip_bomb(mb: int = 50) -> Response:
        """``mb`` MiB of JSON zeros, gzip-compressed to a few hundred KiB on the wire."""
        body = gzip.compress(b"[" + b"0," * (mb * 512 * 1024) + b"0]", compresslevel=9)
        return Response(content=body, media_type="application/json", headers={"Content-Encoding": "gzip"})

    @app.get("/auth_check", tags=["auth"])
    async def auth_check(authorization: Annotated[str | None, Header()] = None) -> dict[str, str]:
        """Basic auth at a one-segment path, as Kaval.AI 1.0's ad-hoc calls reach it."""
        return await auth_basic(authorization)

    @app.get("/auth/bearer", tags=["auth"])
    async def auth_bearer(authorization: Annotated[str | None, Header()] = None) -> dict[str, str]:
        if authorization != f"Bearer {BEARER_TOKEN}":
            raise _unauthorized("bearer")
        return {"auth": "bearer"}

    @app.get("/auth/header-key", tags=["auth"])
    async def auth_header_key(x_api_key: Annotated[str | None, Header()] = None) -> dict[str, str]:
        if x_api_key != API_KEY:
            raise _unauthorized("api key header")
        return {"auth": "header-key"}

    @app.get("/auth/query-key", tags=["auth"])
    async def auth_query_key(api_key: str | None = None) -> dict[str, str]:
        if api_key != API_KEY:
            raise _unauthorized("api key query")
        return {"auth": "query-key"}

    @app.get("/auth/echo-secret", tags=["auth"])
    async def auth_echo_secret(authorization: Annotated[str | None, Header()] = None) -> Response:
        """A badly behaved server that puts the credentials it got into its error body."""
        return PlainTextResponse(f"denied for {authorization}", status_code=403)

    @app.get("/auth/echo-secret-after", tags=["auth"])
    async def auth_echo_secret_after(
        pad: int, fill: str = "a", authorization: Annotated[str | None, Header()] = None
    ) -> Response:
        """The same, the credentials after ``pad`` copies of ``fill`` (a 4-byte character puts them across the
        byte bound of what a client reads of an error body while within its character bound)."""
        return PlainTextResponse(f"{fill * pad}{authorization}", status_code=500)

    @app.get("/redirect", tags=["misc"])
    async def redirect(to: str) -> RedirectResponse:
        """Send the client elsewhere (307), to check what follows it across origins."""
        return RedirectResponse(to, status_code=307)

    @app.get("/loop", tags=["misc"])
    async def loop() -> RedirectResponse:
        """A redirect to itself, forever (the client gives up)."""
        return RedirectResponse("/loop", status_code=307)

    @app.get("/status/{code}", tags=["errors"])
    async def status(code: int) -> Response:
        return JSONResponse({"error": f"status {code} as asked"}, status_code=code)

    @app.get("/crash", tags=["errors"])
    async def crash() -> Response:
        return PlainTextResponse("Internal Server Error: " + "x" * 5000, status_code=500)

    @app.get("/slow", tags=["misc"])
    async def slow(delay: float = 5.0) -> dict[str, float]:
        await asyncio.sleep(delay)
        return {"slept": delay}

    @app.get("/text", tags=["misc"])
    async def text() -> PlainTextResponse:
        return PlainTextResponse("plain old text")

    @app.get("/empty", tags=["misc"], status_code=204)
    async def empty() -> Response:
        return Response(status_code=204)

    @app.get("/large", tags=["misc"])
    async def large(n: Annotated[int, Query(ge=0, le=200_000)] = 50_000) -> list[dict[str, Any]]:
        return [{"i": i, "name": f"row-{i}"} for i in range(n)]

    @app.get("/bad-json", tags=["misc"])
    async def bad_json() -> Response:
        return Response(content=b"{not json", media_type="application/json")

    @app.post("/tree/count", tags=["tree"], operation_id="count_nodes")
    async def count_nodes(root: Node) -> int:
        """Count the nodes of a tree."""

        def count(node: Node) -> int:
            return 1 + sum(count(child) for child in node.children)

        return count(root)

    @app.post("/numbers/sum", tags=["misc"], operation_id="sum_numbers")
    async def sum_numbers(numbers: list[float]) -> float:
        """Sum a list of numbers (a request body that is an array)."""
        return sum(numbers)

    @app.get("/search", tags=["misc"], operation_id="search")
    async def search(
        q: str,
        page: int = 1,
        x_trace: Annotated[str | None, Header()] = None,
        flags: Annotated[list[str] | None, Query()] = None,
    ) -> dict[str, Any]:
        """Search with a query, a page, a header parameter and a repeated query parameter."""
        return {"q": q, "page": page, "trace": x_trace, "flags": flags or []}

    return app
