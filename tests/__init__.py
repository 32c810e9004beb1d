"""The test suite (a package so that tests can import the servers in tests/servers)."""
