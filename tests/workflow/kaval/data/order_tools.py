"""Python tools of orders.yaml (test data: deterministic checks a model must not make)."""

from __future__ import annotations

from typing import Any

from kavalai import pythontool

SAVED: list[dict[str, Any]] = []


@pythontool
def check_order(order: dict[str, Any] | None) -> dict[str, Any]:
    """Every line needs a quantity."""
    lines = (order or {}).get("lines") or []
    missing = [f"quantity of {line['product']}" for line in lines if line.get("quantity") is None]
    if not lines:
        missing.append("what to order")
    return {"ok": not missing, "missing": missing}


@pythontool
def save_order(order: dict[str, Any]) -> dict[str, str]:
    """Store the order and return its id."""
    SAVED.append(order)
    return {"order_id": f"ord-{len(SAVED)}"}


@pythontool
def reply(intent: str, draft: dict[str, Any], verdict: dict[str, Any] | None, order_id: str | None) -> dict[str, Any]:
    """The answer: the status is decided here from what ran, never by a model."""
    if intent != "order":
        status = "not_an_order"
    elif verdict is not None and verdict["ok"] and order_id is not None:
        status = "stored"
    else:
        status = "needs_details"
    return {"status": status, "order_id": order_id, "body": draft["body"]}
