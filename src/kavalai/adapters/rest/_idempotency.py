"""The form in which a call's idempotency key travels in the ``Idempotency-Key`` header.

A key is any Python text (a durable run's key begins with its run id, which may be ``заказ-№1``), but an HTTP field
value is visible ASCII, spaces and tabs (RFC 9110 5.5; other bytes are ``obs-text``, read as ISO-8859-1 if at all):
sent as UTF-8 bytes, a server reads some other text or refuses the request. So the key is sent percent-encoded
(RFC 3986, UTF-8): every character but visible ASCII and the space, and ``%`` itself so that two keys never share a
form. A key of visible ASCII without ``%`` (every key of a run id in ASCII without one) is sent as it is. The form
depends on the key alone, so every attempt of a step sends the same header and the server still tells repeats
apart; a server that wants the key back calls ``urllib.parse.unquote``.
"""

from __future__ import annotations

import string
from typing import Final
from urllib.parse import quote

__all__ = ["header_key"]

#: What a field value carries as it is (RFC 9110 ``field-vchar`` and the space), less ``%``, the escape's own mark.
_AS_IS: Final = "".join(c for c in string.printable if c not in "%\t\n\r\x0b\x0c")
#: The characters :data:`_AS_IS` holds (for the common case: a key that needs no escape is returned as it is).
_PLAIN: Final = frozenset(_AS_IS)


def header_key(key: str) -> str:
    """``key`` as the ``Idempotency-Key`` header sends it: itself when it holds only visible ASCII and spaces and no
    ``%``, else percent-encoded UTF-8 (a lone surrogate as its ``surrogatepass`` bytes: the form stays one per key)."""
    if _PLAIN.issuperset(key):
        return key
    return quote(key.encode("utf-8", "surrogatepass"), safe=_AS_IS)
