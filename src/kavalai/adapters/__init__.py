"""Tool kinds: one adapter per URI scheme (``python://``, ``rest://``, ``mcp://``)."""
