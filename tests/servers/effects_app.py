"""A REST service with side effects that honours ``Idempotency-Key``, for the durable-run tests.

``POST /charge`` records one effect per new key and answers a repeated key with the answer it gave the first time,
as payment APIs do. ``GET /effects`` shows every effect; ``GET /requests`` every request with its key (repeats
included), so a test can tell "sent twice, done once" from "done twice".

``kill_during="C"`` makes the service kill the caller (``SIGKILL`` to the process named by the request's ``X-Pid``
header) the first time it receives a charge of order ``C``, after recording it and before answering: a crash
during the HTTP call, for the fault matrix.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import urllib.request
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import FastAPI, Header
from pydantic import BaseModel

__all__ = ["create_app", "post_charge"]


class Charge(BaseModel):
    """A charge to make."""

    order: str
    amount: int


def create_app(
    *,
    delay: float = 0.0,
    kill_during: str | None = None,
    kill_signal: int = signal.SIGKILL,
    on_charge: Callable[[str], None] | None = None,
    honour_keys: bool = True,
    worker_delay: Mapping[str, float] | None = None,
) -> FastAPI:
    """A fresh app with empty records; each charge takes ``delay`` seconds after it is recorded (a slow API);
    the first charge of order ``kill_during`` kills its caller before the answer (see the module docstring; with
    ``kill_signal``, SIGKILL by default);
    ``on_charge(order)`` is called after each charge is recorded, before the answer (a fault injected mid-step);
    ``honour_keys=False`` makes a service that ignores ``Idempotency-Key`` (each request is an effect);
    ``worker_delay`` adds seconds to the answers to the workers it names (their ``X-Worker`` header): a worker
    that must still be mid-run when a test kills it."""
    app = FastAPI()
    lock = threading.Lock()
    effects: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    answers: dict[str, dict[str, Any]] = {}

    @app.post("/charge")
    async def charge(
        body: Charge,
        idempotency_key: Annotated[str | None, Header()] = None,
        x_worker: Annotated[str | None, Header()] = None,
        x_pid: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        with lock:
            first = not any(r["order"] == body.order for r in requests)
            requests.append({"order": body.order, "key": idempotency_key, "worker": x_worker})
            answer = answers.get(idempotency_key) if idempotency_key is not None and honour_keys else None
            if answer is None:
                effects.append({"order": body.order, "amount": body.amount, "key": idempotency_key})
                answer = {"charge": len(effects), "order": body.order, "amount": body.amount}
                if idempotency_key is not None:
                    answers[idempotency_key] = answer
            if first and body.order == kill_during and x_pid:
                os.kill(int(x_pid), kill_signal)  # the caller dies while its request is being answered
        if on_charge is not None:
            await asyncio.to_thread(on_charge, body.order)
        wait = delay + (worker_delay or {}).get(x_worker or "", 0.0)
        if wait:
            await asyncio.sleep(wait)
        return answer

    @app.get("/effects")
    def list_effects() -> list[dict[str, Any]]:
        with lock:
            return list(effects)

    @app.get("/requests")
    def list_requests() -> list[dict[str, Any]]:
        with lock:
            return list(requests)

    return app


def post_charge(shop: str, order: str) -> dict[str, Any]:
    """Charge ``order`` (amount 1) at the shop at ``shop`` with no idempotency key, blocking; its answer."""
    body = json.dumps({"order": order, "amount": 1}).encode()
    request = urllib.request.Request(f"{shop}/charge", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer
