"""The ``kavalai`` command line: ``kavalai demo`` and ``kavalai run``."""
