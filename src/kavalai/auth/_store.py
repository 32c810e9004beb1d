"""Where OAuth tokens are kept: the :class:`TokenStore` protocol, in memory (the default) or in a file.

A store keeps one :class:`OAuthRecord` per protected resource (the server's URL) and identity: the tokens, the
client registration the tokens were issued to, and the authorization server they came from (so a token read back
after a restart is refreshed at the server that issued it, never sent elsewhere).

Why kavalai has its own stores rather than the MCP SDK's ``TokenStorage``: that protocol holds one server's tokens
for one user, while ours is keyed by resource and identity, so one store serves every server and identity of a
kernel (and is adapted to the SDK's protocol per flow, see :mod:`kavalai.auth._flow`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kavalai.errors import ConfigurationError
from kavalai.secrets import get_logger

if sys.platform != "win32":
    import fcntl

__all__ = ["FileTokenStore", "MemoryTokenStore", "OAuthRecord", "StoredTokens", "TokenStore"]

logger = get_logger("kavalai.auth")

_FILE_VERSION = 1


class StoredTokens(BaseModel):
    """The tokens an authorization server issued (the values never show in a repr).

    Attributes:
        access_token: the bearer token sent to the server.
        refresh_token: the token that gets a new access token, if one was issued.
        token_type: ``"Bearer"``.
        scope: the scopes granted, space-separated.
        expires_in: the lifetime the server gave the access token, in seconds.
        expires_at: when the access token expires (seconds since the epoch), ``None`` if the server said nothing.
    """

    model_config = ConfigDict(extra="ignore")

    access_token: str = Field(repr=False)
    refresh_token: str | None = Field(default=None, repr=False)
    token_type: str = "Bearer"
    scope: str | None = None
    expires_in: int | None = None
    expires_at: float | None = None

    def expired(self, margin: float = 0.0) -> bool:
        """Whether the access token has expired, or will within ``margin`` seconds."""
        return self.expires_at is not None and time.time() + margin >= self.expires_at


class OAuthRecord(BaseModel):
    """What a :class:`TokenStore` keeps for one resource and identity.

    Attributes:
        tokens: the current tokens, or ``None`` before the first authorization.
        client: the client registration the tokens belong to (dynamic registration's answer, or a client ID
            metadata document's URL), as the authorization server described it; it may hold a client secret.
        authorization_server: the issuer URL of the authorization server that issued the tokens.
        server_metadata: that server's metadata (RFC 8414), so a refresh after a restart goes to its token endpoint.
        resource_metadata: the protected resource's metadata (RFC 9728) found by discovery.
    """

    model_config = ConfigDict(extra="ignore")

    tokens: StoredTokens | None = None
    client: dict[str, Any] | None = Field(default=None, repr=False)
    authorization_server: str | None = None
    server_metadata: dict[str, Any] | None = Field(default=None, repr=False)
    resource_metadata: dict[str, Any] | None = Field(default=None, repr=False)


@runtime_checkable
class TokenStore(Protocol):
    """Keeps an :class:`OAuthRecord` per protected resource (a server's URL) and identity.

    Implement these three coroutines to keep tokens elsewhere (a keyring, a database, a secrets manager). A store
    must keep each identity's record apart: a record saved for one identity is never loaded for another.
    """

    async def load(self, resource: str, identity: str) -> OAuthRecord | None:
        """The record of ``resource`` for ``identity``, or ``None`` if there is none."""
        ...

    async def save(self, resource: str, identity: str, record: OAuthRecord) -> None:
        """Keep ``record`` as the record of ``resource`` for ``identity``, replacing any earlier one."""
        ...

    async def delete(self, resource: str, identity: str) -> None:
        """Forget the record of ``resource`` for ``identity`` (nothing happens if there is none)."""
        ...


class MemoryTokenStore:
    """Keeps records in memory, for the life of the process (the default store of :class:`~kavalai.auth.OAuth`)."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], OAuthRecord] = {}

    async def load(self, resource: str, identity: str) -> OAuthRecord | None:
        """The record of ``resource`` for ``identity``, or ``None``."""
        record = self._records.get((resource, identity))
        return record.model_copy(deep=True) if record is not None else None

    async def save(self, resource: str, identity: str, record: OAuthRecord) -> None:
        """Keep a copy of ``record``."""
        self._records[(resource, identity)] = record.model_copy(deep=True)

    async def delete(self, resource: str, identity: str) -> None:
        """Forget the record, if any."""
        self._records.pop((resource, identity), None)

    def __repr__(self) -> str:
        return f"MemoryTokenStore({len(self._records)} record(s))"


# One lock per file for the threads of this process; another process is kept out by flock on a lock file.
_FILE_LOCKS: dict[Path, threading.Lock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


class FileTokenStore:
    """Keeps records in one JSON file that only its owner may read or write (mode ``0600``).

    Every change is written to a new file in the same folder (created ``0600``), flushed to disk and moved over the
    old one, so the file is never seen half-written and a crash leaves either the old records or the new ones. A
    folder that does not exist is created ``0700``. Writers in this process and in others take turns (a lock file
    beside it, ``flock``), and each change re-reads the file first, so two kernels sharing a file lose nothing.

    A file another user could read is a leak already; it is narrowed to ``0600`` when read, with a warning.

    Args:
        path: the file (``~`` is expanded), for example ``~/.config/kavalai/tokens.json``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser().absolute()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    async def load(self, resource: str, identity: str) -> OAuthRecord | None:
        """The record of ``resource`` for ``identity``, or ``None``.

        Raises:
            ConfigurationError: the file is not a token file this store wrote (it is not overwritten).
        """
        records = await anyio.to_thread.run_sync(self._read_locked)
        raw = records.get(resource, {}).get(identity)
        if raw is None:
            return None
        try:
            return OAuthRecord.model_validate(raw)
        except ValidationError:
            raise ConfigurationError(
                f"The token file {str(self.path)!r} holds an unreadable record; delete it to authorize again."
            ) from None

    async def save(self, resource: str, identity: str, record: OAuthRecord) -> None:
        """Keep ``record`` (the file is rewritten atomically)."""
        data = record.model_dump(mode="json", exclude_none=True)
        await anyio.to_thread.run_sync(self._update, resource, identity, data)

    async def delete(self, resource: str, identity: str) -> None:
        """Forget the record, if any (the file is rewritten atomically)."""
        await anyio.to_thread.run_sync(self._update, resource, identity, None)

    # -------------------------------------------------------------------------------------- in a worker thread

    def _read_locked(self) -> dict[str, dict[str, Any]]:
        with self._locked():
            return self._read()

    def _update(self, resource: str, identity: str, data: dict[str, Any] | None) -> None:
        with self._locked():
            records = self._read()
            if data is None:
                mine = records.get(resource)
                if mine is None or identity not in mine:
                    return
                del mine[identity]
                if not mine:
                    del records[resource]
            else:
                records.setdefault(resource, {})[identity] = data
            self._write({"version": _FILE_VERSION, "records": records})

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return {}
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            logger.warning(
                "The token file %s could be read by other users (mode %o); narrowing it to 0600.",
                self.path,
                stat.S_IMODE(mode),
            )
            os.chmod(self.path, 0o600)
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(
                f"Cannot read the token file {str(self.path)!r} ({type(exc).__name__}); fix or delete it."
            ) from None
        records = document.get("records") if isinstance(document, dict) else None
        if not isinstance(records, dict) or document.get("version") != _FILE_VERSION:
            raise ConfigurationError(
                f"{str(self.path)!r} is not a kavalai token file (version {_FILE_VERSION}); fix or delete it."
            )
        return {key: value for key, value in records.items() if isinstance(value, dict)}

    def _write(self, document: dict[str, Any]) -> None:
        folder = self.path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps(document, indent=1, sort_keys=True)
        # mkstemp creates the file 0600 (O_EXCL, never an existing file), so the secrets are never readable by others.
        fd, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _fsync_folder(folder)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _FILE_LOCKS_GUARD:
            lock = _FILE_LOCKS.setdefault(self.path, threading.Lock())
        with lock:
            if sys.platform == "win32":  # pragma: no cover - no flock: only this process's threads take turns
                yield
                return
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing the descriptor releases the lock


def _fsync_folder(folder: Path) -> None:
    """Flush the folder's entry of the renamed file to disk (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - file systems that refuse fsync on folders
        pass
    finally:
        os.close(fd)
