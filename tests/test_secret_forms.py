"""A secret written in another form passes the secret gate masked too (issue 34): registered with the one registry,
a secret's encoded forms are registered with it (``kavalai.secrets.encoded_forms``).

The cases, written before any was run, each through the log, an exception's message and the CLI's stderr:
1. URL-percent-encoded, upper-case escapes (``quote(token, safe="")``); 2. the same with lower-case escapes;
3. ``quote_plus`` (a query value); 4. base64 alone; 5. URL-safe base64 without padding;
6-8. a Basic ``Authorization`` value ``base64(user + ":" + token)`` for users whose ``user:`` is 3, 4 and 5 bytes
(the token starting at each place of a 3-byte group); 9. JSON-escaped (a quote and a backslash in the token);
10. JSON-escaped with ``ensure_ascii`` (a non-ASCII letter in the token).
Not masked, by the rule: a form under 8 characters; the token split across two writes.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from kavalai.errors import FunctionKernelException
from kavalai.secrets import MASK, MIN_FORM_LENGTH, Redactor, encoded_forms, get_logger, register_secret
from tests.cli.test_boundary import kavalai

TOKEN = 's3cr/t+T0k"en\\=9é'  # every character an encoding changes: / + " \ = and a non-ASCII letter


def _lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda escape: escape.group().lower(), text)


FORMS: dict[str, Callable[[str], str]] = {
    "percent": lambda token: quote(token, safe=""),
    "percent-lower": lambda token: _lower_escapes(quote(token, safe="")),
    "quote-plus": quote_plus,
    "base64": lambda token: base64.b64encode(token.encode()).decode(),
    "base64-url-unpadded": lambda token: base64.urlsafe_b64encode(token.encode()).decode().rstrip("="),
    "basic-al": lambda token: "Basic " + base64.b64encode(f"al:{token}".encode()).decode(),
    "basic-bob": lambda token: "Basic " + base64.b64encode(f"bob:{token}".encode()).decode(),
    "basic-user": lambda token: "Basic " + base64.b64encode(f"user:{token}".encode()).decode(),
    "json": lambda token: json.dumps({"token": token}, ensure_ascii=False),
    "json-ascii": lambda token: json.dumps({"token": token}),
}


def _secret(form: str) -> str:
    """A token of this test's own (the registry is the process's): TOKEN with the form's name in it."""
    return f"{TOKEN}-{form}"


def _revealed(text: str, token: str) -> list[str]:
    """The forms of ``token`` (and the token) still readable in ``text``."""
    return [name for name, write in FORMS.items() if write(token) in text] + ([token] if token in text else [])


def _core(form: str, token: str) -> str:
    """What of the encoded token must not be readable: the form without the words around it."""
    if form.startswith("json"):
        return json.dumps(token, ensure_ascii=form == "json-ascii")[1:-1]
    return FORMS[form](token).removeprefix("Basic ")


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_log_record_holding_a_secrets_encoded_form_is_masked(form: str) -> None:
    token = _secret(form)
    register_secret(token)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    for logger in (get_logger("kavalai.forms"), logging.getLogger("aiohttp.forms")):  # ours, and a dependency's
        logger.addHandler(handler)
        try:
            logger.warning("the server said no to %s", FORMS[form](token))
        finally:
            logger.removeHandler(handler)
    written = stream.getvalue()
    assert written.count(MASK) == 2, written
    assert _core(form, token) not in written


@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_exception_holding_a_secrets_encoded_form_is_masked(form: str) -> None:
    token = _secret(form)
    register_secret(token)
    error = FunctionKernelException(f"the server said no to {FORMS[form](token)}")
    assert MASK in str(error)
    assert _core(form, token) not in str(error) + repr(error)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_redactor_masks_the_encoded_forms_of_its_secrets(form: str) -> None:
    token = _secret(form)
    text = Redactor([token]).redact(f"said {FORMS[form](token)}")
    assert MASK in text
    assert _core(form, token) not in text


TOOL = '''import base64, json, os
from urllib.parse import quote, quote_plus


def leak(form: str) -> str:
    """Fail with the token written in ``form``."""
    token = os.environ["KV_FORMS_TOKEN"]
    raise ValueError("the server said no to " + {
        "percent": lambda: quote(token, safe=""),
        "quote-plus": lambda: quote_plus(token),
        "base64": lambda: base64.b64encode(token.encode()).decode(),
        "basic-user": lambda: "Basic " + base64.b64encode(("user:" + token).encode()).decode(),
        "json": lambda: json.dumps({"token": token}),
    }[form]())
'''
CONFIG = """python_functions: [kt_forms.leak]
rest_servers:
  - name: api
    url: http://127.0.0.1:9/
    headers: {Authorization: "Bearer ${KV_FORMS_TOKEN}"}
"""


@pytest.mark.parametrize("form", ["percent", "quote-plus", "base64", "basic-user", "json"])
def test_the_cli_stderr_masks_a_secrets_encoded_form(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real command: the token is secret because a configuration expands it (``${KV_FORMS_TOKEN}`` in a header);
    a tool fails with the token encoded in its message, which the CLI prints on stderr."""
    (tmp_path / "kt_forms.py").write_text(TOOL, encoding="utf-8")
    (tmp_path / "tools.yaml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv("KV_FORMS_TOKEN", TOKEN)
    result = kavalai("tools", "call", "-c", "tools.yaml", "python://leak", f"form={form}", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "the server said no to" in result.stderr
    assert MASK in result.stderr, result.stderr
    assert _core("json-ascii" if form == "json" else form, TOKEN) not in result.stderr


def test_every_form_is_long_enough_and_differs_from_the_secret() -> None:
    forms = encoded_forms(TOKEN)
    assert forms, forms
    assert TOKEN not in forms
    assert all(len(form) >= MIN_FORM_LENGTH for form in forms)
    assert encoded_forms("abcdef") == {"YWJjZGVm"}  # a 6-character secret: its base64 alone (8); the rest shorter
    # Nothing to escape: the percent and JSON forms are the secret itself, so only base64 forms are added.
    assert all(re.fullmatch(r"[A-Za-z0-9+/=_-]+", form) for form in encoded_forms("plain-token"))


def test_a_secret_split_across_two_writes_is_not_masked() -> None:
    """Masking is by value (and form): a secret written in two pieces passes, as with any value redactor."""
    token = _secret("split")
    register_secret(token)
    head, tail = token[:5], token[5:]
    assert _revealed(FunctionKernelException(head).message + FunctionKernelException(tail).message, token) == [token]
