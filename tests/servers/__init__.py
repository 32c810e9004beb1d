"""Real servers the tests run against: MCP servers (stdio and HTTP) and HTTP applications on 127.0.0.1."""
