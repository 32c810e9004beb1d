"""The origin rule (issue 35, fault case 5): a step's idempotency key protects a repeat only at the server that saw
it, so a step found sent after a crash whose tool's server has since moved (its URL changed in the configuration
between the crash and the resume) is in doubt, never sent to the new origin, whatever its tool says. Counted at two
local shop services, the old origin and the new one: each charge made once in all.

Cases, written before any was run:

1. DBOS on SQLite: a keyed REST charge B sent, the journal away past the run's patience (interrupted); the shop's
   URL changed; the resume ends in doubt at B naming the step, the old origin and the new one; B charged once at
   the old shop, nothing at the new one.
2. The same on DBOS Postgres (stopped ``-m immediate`` mid-charge, started again), under ``-m faults``.
3. The same with the server's ``on_doubt: replay``: still in doubt (a replay elsewhere is not a replay).
4. The same URL written another way (upper-case host, the default port written out, a trailing slash, a path):
   the same origin, so B is sent again with its key, where it went (charged once: the shop honours the key).
5. A URL with userinfo: the journal's sent mark holds the origin without it.
6. Temporal: the worker SIGKILLed during charge C, the resuming worker's shop URL changed: C's retried activity
   finds the server moved, the run ends in doubt at C naming both origins; C charged once, nothing at the new shop.
7. A stdio MCP server's origin is its command line with secrets masked (and its working directory).
8. DBOS, the tool's policy ``ask`` and the server moved: the run asks (the question names both origins); ``--retry``
   sends B to the new origin, once.
"""

