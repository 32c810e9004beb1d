"""The servers ``kavalai demo`` and the docs run: a stdio MCP server (``python -m kavalai.demo.mcp_server``), a REST
app (:mod:`kavalai.demo.rest_app`) and an OAuth-protected MCP server with its authorization server
(:mod:`kavalai.demo.oauth`). They are examples to run, not part of the library: the CLI imports them when a command
needs one, and nothing else in kavalai imports them."""
