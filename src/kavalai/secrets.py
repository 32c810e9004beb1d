"""Masking secret values in text that may reach a message, a log line or a traceback.

One :class:`Redactor` per origin of secrets (a REST server's credentials, an MCP server's env and headers). Every
error message or body excerpt that could carry a secret goes through :meth:`Redactor.redact`, and a foreign
exception whose text holds one is dropped rather than kept as a ``__cause__`` (:meth:`Redactor.holds`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["MASK", "Redactor"]

#: What a secret value is replaced by.
MASK: Final = "***"


class Redactor:
    """Masks a fixed set of secret values.

    Args:
        secrets: the secret strings; empty ones are ignored.
        min_length: values shorter than this are not masked (an MCP server's env holds flags such as ``"1"``,
            and masking every ``1`` would make messages unreadable rather than safer).
    """

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str], *, min_length: int = 1) -> None:
        kept = {secret for secret in secrets if secret and len(secret) >= min_length}
        # Longest first: a secret that contains another is masked whole, not leaving its tail visible.
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def holds(self, text: object) -> bool:
        """Whether ``str(text)`` contains one of the secret values."""
        value = str(text)
        return any(secret in value for secret in self._secrets)

    def redact(self, text: object) -> str:
        """``str(text)`` with every secret value replaced by :data:`MASK`."""
        value = str(text)
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def __repr__(self) -> str:
        return f"<Redactor of {len(self._secrets)} secret(s)>"
