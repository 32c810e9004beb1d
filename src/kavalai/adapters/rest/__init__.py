"""``rest://`` tools. Only the configuration is imported here; the adapter (and aiohttp) loads on first use."""

from typing import TYPE_CHECKING

from kavalai.adapters.rest._auth import ApiKeyAuth, BasicAuth, BearerAuth
from kavalai.adapters.rest._config import RestServer

__all__ = ["ApiKeyAuth", "BasicAuth", "BearerAuth", "OpenApiImport", "RestAdapter", "RestServer"]


if TYPE_CHECKING:
    from kavalai.adapters.rest._adapter import OpenApiImport, RestAdapter


def __getattr__(name: str) -> object:
    # The adapter imports its heavy dependencies: loaded when the kernel first needs it.
    if name in ("RestAdapter", "OpenApiImport"):
        from kavalai.adapters.rest import _adapter

        return getattr(_adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
