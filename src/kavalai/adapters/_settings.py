"""How a server setting (``RestServer``, ``McpServer``) reports a bad configuration.

They are pydantic models, so a bad one raises pydantic's ``ValidationError`` like any other model (and as
Kaval.AI 1.0 did: its users catch that). pydantic's own text repeats the model's name and lists each field's
error in its vocabulary; ours is one message that names the server, every field at fault and the fix. So the
error raised is a ``ValidationError`` holding one error of type ``kavalai_configuration`` whose message is ours.
``ValidationError`` is a ``ValueError``, as our ``ConfigurationError`` is: ``except ValueError`` catches both.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from kavalai.errors import ConfigurationError, ToolRegistrationError
from kavalai.kernel import SERVER_NAME_PATTERN
from kavalai.secrets import holds_secret, redact, redact_data

__all__ = ["CONFIGURATION_ERROR_TYPE", "ServerName", "masked_repr_args", "public_name", "settings_error"]

#: The pydantic error type of a server setting's one error.
CONFIGURATION_ERROR_TYPE = "kavalai_configuration"


#: Why a name may not hold a secret: names are identifiers, shown as they are, never masked.
_SECRET_NAME = (
    "holds the value of a secret variable, and a name is shown as it is (in tool URIs, listings and errors, which "
    "models and hosts read)"
)


def _public_name(name: str) -> str:
    """``name``, unless it holds a registered secret: a server's name is not masked where it is shown (its tools'
    URIs and names, which a model and a gateway's host read), so a secret variable's value cannot be one."""
    if holds_secret(name):
        raise ValueError(f"it {_SECRET_NAME}: name the server yourself")
    return name


def public_name(name: str, what: str, fix: str) -> str:
    """``name`` (a tool's name as a configuration or a caller gives it: a REST tool's ``name``, the operationId or
    path an OpenAPI operation is named by, a Python tool's name), unless it holds a registered secret, the rule a
    server's name (:data:`ServerName`) follows: names are identifiers, not secrets. Every adapter that builds a
    tool URI from a configured name calls it first (enumerated by ``tests/test_config_names.py``).

    Raises:
        ToolRegistrationError: ``name`` holds a secret; the message says ``what`` it is and the ``fix``, and
            shows the name masked.
    """
    if holds_secret(name):
        raise ToolRegistrationError(f"Cannot register {what} {redact(name)!r}: the name {_SECRET_NAME}; {fix}")
    return name


#: A server's name (``McpServer.name``, ``RestServer.name``): the URI pattern's, and never a secret's value.
ServerName = Annotated[
    str,
    Field(pattern=f"^{SERVER_NAME_PATTERN}$", description="The server name used in tool URIs."),
    AfterValidator(_public_name),
]


def masked_repr_args(items: Iterable[tuple[str | None, Any]]) -> Iterator[tuple[str | None, Any]]:
    """A server setting's repr fields (pydantic's ``__repr_args__``: ``repr()``, ``str()``, rich) through the secret
    gate: every registered secret masked in every value (a ``${VAR}`` expanded into ``args``, ``cwd`` or a url).
    ``tests/test_secret_gate.py`` finds every setting model and fails when its repr does not pass here."""
    for key, value in items:
        if isinstance(value, str | list | tuple | dict):
            yield key, redact_data(value)
        elif holds_secret(repr(value)):  # a path, a url object: shown by its masked repr
            yield key, _Shown(redact(repr(value)))
        else:
            yield key, value


class _Shown:
    """A value in a repr, shown as the text it was given."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def settings_error(title: str, what: str, exc: ValidationError | ConfigurationError) -> ValidationError:
    """One error for ``exc``: a ValidationError titled ``title``, to raise from a model validator, whose message is
    ``Invalid <what>: <field>: <problem>; ...``.

    A problem found by a model validator (it names the server already) is kept as it is when it is the only one;
    a nested setting's own ``ConfigurationError`` (an auth setting's) is put after ``<what>: ``. Values are never
    shown: a header or an environment value may be a secret.
    """
    if isinstance(exc, ConfigurationError):
        return _error(title, f"{what}: {exc}")
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        where = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            message = "not a setting of this server (misspelt?)"
        problems.append(f"{where}: {message}" if where else message)
    if len(problems) == 1 and not exc.errors()[0]["loc"]:
        text = problems[0]
    else:
        text = f"Invalid {what}: {'; '.join(problems)}."
    return _error(title, text)


def _error(title: str, text: str) -> ValidationError:
    # The text goes in as context, not as the template, so braces in it are never read as placeholders. The
    # input is not kept: `errors()` would otherwise hand every header and environment value to whoever logs it.
    problem = PydanticCustomError(CONFIGURATION_ERROR_TYPE, "{problem}", {"problem": text})
    return ValidationError.from_exception_data(
        title, [InitErrorDetails(type=problem, loc=(), input=_HIDDEN)], hide_input=True
    )


_HIDDEN = "(not shown: it may hold secrets)"
