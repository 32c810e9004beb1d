"""``rest://`` tools. Only the configuration is imported here; the adapter (and aiohttp) loads on first use."""

from kavalai.adapters.rest._auth import ApiKeyAuth, BasicAuth, BearerAuth
from kavalai.adapters.rest._config import RestServer

__all__ = ["ApiKeyAuth", "BasicAuth", "BearerAuth", "RestServer"]
