"""Hostile review round 9 (issue 34, tests/hostile/CASES_round9.md case 40, held): a URL learned from a server (an
OAuth metadata's token endpoint) in the spellings IDNA and the URL parser fold into an address the gate refuses is
refused before any connect: full-width digits and ideographic full stops (folded to 169.254.169.254), an enclosed
alphanumeric ``localhost``, a trailing dot, upper-case IPv4-mapped IPv6, the unspecified addresses, NAT64 and 6to4
forms of the metadata address."""

from __future__ import annotations

import pytest
from yarl import URL

from kavalai.errors import OutboundRefusedError
from kavalai.http._outbound import Outbound


@pytest.mark.parametrize(
    "url",
    [
        "http://\uff11\uff16\uff19.\uff12\uff15\uff14.\uff11\uff16\uff19.\uff12\uff15\uff14/latest",
        "http://169\u3002254\u3002169\u3002254/",
        "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3/",
        "http://169.254.169.254./",
        "HTTP://[::FFFF:A9FE:A9FE]/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::]/",
    ],
)
def test_a_learned_url_in_a_folded_spelling_is_refused(url: str) -> None:
    outbound = Outbound("auth", ["https://issuer.example.com/"], kind="MCP server")
    outbound.learn(url, "the token_endpoint")
    with pytest.raises(OutboundRefusedError, match="the URL came from the token_endpoint"):
        outbound.check(URL(url))
