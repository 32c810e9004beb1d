"""Token stores: memory, and the 0600 file written atomically, shared safely by writers in threads."""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
from pathlib import Path

import anyio
import pytest

from kavalai import ConfigurationError
from kavalai.auth import FileTokenStore, MemoryTokenStore, OAuthRecord, StoredTokens, TokenStore

SECRET = "access-token-4f7c1e"
REFRESH = "refresh-token-9a2b"


def _record(access: str = SECRET, refresh: str | None = REFRESH) -> OAuthRecord:
    return OAuthRecord(
        tokens=StoredTokens(access_token=access, refresh_token=refresh, expires_in=60, expires_at=1e10),
        client={"client_id": "abc", "client_secret": "client-secret-77", "redirect_uris": ["http://127.0.0.1:1/cb"]},
        authorization_server="http://as.example/",
    )


@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_a_store_keeps_each_resource_and_identity_apart(kind: str, tmp_path: Path) -> None:
    store: TokenStore = MemoryTokenStore() if kind == "memory" else FileTokenStore(tmp_path / "tokens.json")
    assert isinstance(store, TokenStore)
    await store.save("http://a/mcp", "alice", _record("alice-token"))
    await store.save("http://a/mcp", "bob", _record("bob-token"))
    await store.save("http://b/api", "alice", _record("alice-b-token"))

    alice = await store.load("http://a/mcp", "alice")
    bob = await store.load("http://a/mcp", "bob")
    assert alice is not None
    assert alice.tokens is not None
    assert alice.tokens.access_token == "alice-token"
    assert bob is not None
    assert bob.tokens is not None
    assert bob.tokens.access_token == "bob-token"
    assert await store.load("http://b/api", "bob") is None
    assert await store.load("http://a/mcp", "carol") is None

    await store.delete("http://a/mcp", "alice")
    await store.delete("http://a/mcp", "nobody")  # nothing to forget: no error
    assert await store.load("http://a/mcp", "alice") is None
    assert await store.load("http://a/mcp", "bob") is not None


async def test_the_memory_store_hands_out_copies() -> None:
    store = MemoryTokenStore()
    record = _record()
    await store.save("r", "i", record)
    assert record.tokens is not None
    record.tokens.access_token = "changed"
    loaded = await store.load("r", "i")
    assert loaded is not None
    assert loaded.tokens is not None
    assert loaded.tokens.access_token == SECRET


async def test_the_file_is_0600_in_a_0700_folder_and_survives_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "new" / "tokens.json"
    await FileTokenStore(path).save("http://a/mcp", "alice", _record())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == [".tokens.json.lock", "tokens.json"]  # no temp files

    again = await FileTokenStore(path).load("http://a/mcp", "alice")
    assert again == _record()
    assert json.loads(path.read_text())["version"] == 1


async def test_a_file_readable_by_others_is_narrowed_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens.json"
    store = FileTokenStore(path)
    await store.save("r", "i", _record())
    os.chmod(path, 0o644)
    with caplog.at_level(logging.WARNING, logger="kavalai.auth"):
        assert await store.load("r", "i") is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "could be read by other users" in caplog.text
    assert SECRET not in caplog.text


async def test_writes_replace_the_file_atomically(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    store = FileTokenStore(path)
    await store.save("r", "i", _record())
    before = path.stat().st_ino
    await store.save("r", "j", _record("second"))
    assert path.stat().st_ino != before  # a new file moved over the old one, never rewritten in place
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    stores = [FileTokenStore(path) for _ in range(4)]  # separate instances, as two kernels would have

    async def write(n: int) -> None:
        await stores[n % 4].save(f"http://server-{n % 3}/", f"user-{n}", _record(f"token-{n}"))

    async with anyio.create_task_group() as tg:
        for n in range(24):
            tg.start_soon(write, n)
    for n in range(24):
        loaded = await FileTokenStore(path).load(f"http://server-{n % 3}/", f"user-{n}")
        assert loaded is not None
        assert loaded.tokens is not None
        assert loaded.tokens.access_token == f"token-{n}"


def test_writers_in_threads_take_turns(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"

    def write(n: int) -> None:
        anyio.run(FileTokenStore(path).save, "r", f"user-{n}", _record(f"token-{n}"))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    records = json.loads(path.read_text())["records"]["r"]
    assert sorted(records) == sorted(f"user-{n}" for n in range(8))


async def test_a_file_that_is_not_a_token_file_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"something": "else"}')
    os.chmod(path, 0o600)
    store = FileTokenStore(path)
    with pytest.raises(ConfigurationError, match="not a kavalai token file"):
        await store.load("r", "i")
    with pytest.raises(ConfigurationError, match="not a kavalai token file"):
        await store.save("r", "i", _record())
    assert path.read_text() == '{"something": "else"}'
    path.write_text("{not json")
    with pytest.raises(ConfigurationError, match="Cannot read the token file") as caught:
        await store.load("r", "i")
    assert "not json" not in str(caught.value)


def test_no_secret_in_reprs(tmp_path: Path) -> None:
    record = _record()
    shown = f"{record!r} {record.tokens!r} {FileTokenStore(tmp_path / 't.json')!r} {MemoryTokenStore()!r}"
    for secret in (SECRET, REFRESH, "client-secret-77"):
        assert secret not in shown
    assert "expires_at" in shown


def test_expiry() -> None:
    assert not StoredTokens(access_token="x").expired()  # no expiry given: valid until refused
    assert StoredTokens(access_token="x", expires_at=1.0).expired()
    assert not StoredTokens(access_token="x", expires_at=1e12).expired(margin=60)
