"""``rest://`` tools. Only the configuration is imported here; the adapter (and aiohttp) loads on first use."""

from kavalai.adapters.rest._config import RestServer

__all__ = ["RestServer"]
