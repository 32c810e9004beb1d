"""The fs tools on a real temporary directory: jail escapes refused, reads and writes inside the root, atomicity."""

from __future__ import annotations

import functools
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kavalai import (
    ConfigurationError,
    FunctionKernel,
    ToolExecutionError,
    ToolInputError,
    ToolNotFoundError,
    ToolRegistrationError,
)
from kavalai.tools import _atomic, fs
from kavalai.tools._jail import Jail

READ_TOOLS = ["python://fs.find", "python://fs.ls", "python://fs.read", "python://fs.stat"]
WRITE_TOOLS = ["python://fs.delete", "python://fs.mkdir", "python://fs.write"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``root/`` with a few files and directories, a secret next to it, and links in and out."""
    root = tmp_path / "root"
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "docs" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    (root / "docs" / "deep" / "notes.md").write_text("deep notes", encoding="utf-8")
    (root / "docs" / "deep" / "data.csv").write_text("a,b\n", encoding="utf-8")
    (root / "hello.txt").write_text("hello w\u00f6rld\n", encoding="utf-8")
    (root / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (tmp_path / "secret.txt").write_text("TOP SECRET", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (root / "link_out").symlink_to(tmp_path / "secret.txt")
    (root / "dir_out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "link_in").symlink_to(root / "hello.txt")
    return root


@pytest.fixture
def ro(kernel: FunctionKernel, tree: Path) -> FunctionKernel:
    fs.register(kernel, root=tree)
    return kernel


@pytest.fixture
def rw(kernel: FunctionKernel, tree: Path) -> FunctionKernel:
    fs.register(kernel, root=tree, writable=True, max_write_bytes=1000, max_read_bytes=4096)
    return kernel


async def call(kernel: FunctionKernel, tool: str, **arguments: Any) -> Any:
    return await kernel.call_tool(f"python://fs.{tool}", arguments=arguments)


async def failure(kernel: FunctionKernel, tool: str, exc_type: type[Exception], **arguments: Any) -> str:
    with pytest.raises(ToolExecutionError) as caught:
        await call(kernel, tool, **arguments)
    assert isinstance(caught.value.__cause__, exc_type), caught.value.__cause__
    message = str(caught.value)
    assert "Traceback" not in message
    return message


# ---------------------------------------------------------------------------------------------- registration


async def test_read_only_registration(kernel: FunctionKernel, tree: Path) -> None:
    assert sorted(fs.register(kernel, root=tree)) == READ_TOOLS
    assert kernel.list_tools() == READ_TOOLS
    with pytest.raises(ToolNotFoundError):
        await call(kernel, "write", path="x.txt", content="no")
    assert not (tree / "x.txt").exists()


async def test_writable_registration_adds_the_write_tools(kernel: FunctionKernel, tree: Path) -> None:
    assert sorted(fs.register(kernel, root=tree, writable=True)) == sorted(READ_TOOLS + WRITE_TOOLS)


async def test_a_missing_root_is_a_configuration_error(kernel: FunctionKernel, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="is not an existing directory"):
        fs.register(kernel, root=tmp_path / "nope")


@pytest.mark.parametrize("given", [0, -1, math.nan, True, "5", 2.5])
@pytest.mark.parametrize("limit", ["max_read_bytes", "max_write_bytes", "max_entries"])
def test_a_limit_not_a_whole_number_above_zero_is_a_configuration_error(tree: Path, limit: str, given: object) -> None:
    """``nan`` and ``True`` once passed (``nan <= 0`` is false), ``"5"`` was a ``TypeError``."""
    kernel = FunctionKernel()
    why = re.escape(f"Cannot register the fs tools: {limit} must be a whole number above 0, got {given!r}")
    with pytest.raises(ConfigurationError, match=why):
        fs.register(kernel, root=tree, **{limit: given})
    assert kernel.list_tools() == []


async def test_a_taken_prefix_registers_nothing_and_names_the_fix(kernel: FunctionKernel, tree: Path) -> None:
    fs.register(kernel, root=tree)
    with pytest.raises(ToolRegistrationError) as caught:
        fs.register(kernel, root=tree / "docs", writable=True)
    message = str(caught.value)
    assert "python://fs.ls, python://fs.read, python://fs.stat, python://fs.find are already registered" in message
    assert "prefix='fs2'" in message
    assert caught.value.uri == "python://fs.ls"
    assert kernel.list_tools() == READ_TOOLS  # no write tool slipped in
    assert sorted(fs.register(kernel, root=tree / "docs", prefix="docs")) == [
        uri.replace("fs.", "docs.") for uri in READ_TOOLS
    ]


async def test_the_tools_describe_their_parameters(ro: FunctionKernel) -> None:
    schema = ro.get_input_model("python://fs.read").model_json_schema()
    assert "relative to the root" in schema["properties"]["path"]["description"]
    assert ro.get_tool_definition("python://fs.ls").description.startswith("List a directory")


# ------------------------------------------------------------------------------------------------- jail

ESCAPES = [
    ("../secret.txt", "'..' is not allowed"),
    ("docs/../../secret.txt", "'..' is not allowed"),
    ("/etc/passwd", "it is absolute"),
    ("//server/share/x", "it is absolute"),
    ("link_out", "resolves outside the root"),
    ("dir_out/anything.txt", "resolves outside the root"),
    ("hello.txt\x00.md", "NUL byte"),
    ("docs\\..\\..\\secret.txt", "backslashes are not allowed"),
    ("\\\\server\\share\\secret.txt", "backslashes are not allowed"),
    ("C:/Windows/win.ini", "drive letters are not allowed"),
    ("c:secret.txt", "drive letters are not allowed"),
    ("hello.txt:secret", "NTFS alternate data stream"),
    ("hello.txt::$DATA", "NTFS alternate data stream"),
    ("CON", "reserved Windows device name"),
    ("docs/nul.txt", "reserved Windows device name"),
    ("com1", "reserved Windows device name"),
    ("LPT9.log", "reserved Windows device name"),
    ("hello.txt.", "ends with a dot or a space"),
    ("hello.txt ", "ends with a dot or a space"),
    ("docs./guide.md", "ends with a dot or a space"),
    ("docs/\nguide.md", "control character"),
]


@pytest.mark.parametrize(("path", "why"), ESCAPES, ids=[repr(path) for path, _ in ESCAPES])
@pytest.mark.parametrize("tool", ["read", "stat", "ls"])
async def test_jail_escapes_are_refused(ro: FunctionKernel, tool: str, path: str, why: str) -> None:
    message = await failure(ro, tool, PermissionError, path=path)
    assert f"PermissionError: Refused path {path!r}: " in message
    assert why in message
    assert "TOP SECRET" not in message


@pytest.mark.parametrize(("path", "why"), ESCAPES[:8], ids=[repr(path) for path, _ in ESCAPES[:8]])
async def test_jail_escapes_are_refused_for_writes(rw: FunctionKernel, tree: Path, path: str, why: str) -> None:
    message = await failure(rw, "write", PermissionError, path=path, content="pwned")
    assert why in message
    assert (tree.parent / "secret.txt").read_text() == "TOP SECRET"
    assert not list((tree.parent / "outside").iterdir())


async def test_a_symlink_loop_is_refused(ro: FunctionKernel, tree: Path) -> None:
    (tree / "loop_a").symlink_to(tree / "loop_b")
    (tree / "loop_b").symlink_to(tree / "loop_a")
    message = await failure(ro, "read", PermissionError, path="loop_a")
    assert "Refused path 'loop_a'" in message


async def test_a_symlink_inside_the_root_is_followed(ro: FunctionKernel) -> None:
    result = await call(ro, "read", path="link_in")
    assert result.content == "hello w\u00f6rld\n"
    assert result.path == "hello.txt"


# -------------------------------------------------------------------------------------------------- read


async def test_ls_lists_entries_with_type_size_and_time(ro: FunctionKernel) -> None:
    listing = await call(ro, "ls")
    by_path = {entry.path: entry for entry in listing.entries}
    assert list(by_path) == ["blob.bin", "dir_out", "docs", "hello.txt", "link_in", "link_out"]
    assert by_path["docs"].type == "dir"
    assert by_path["docs"].size is None
    assert by_path["hello.txt"].type == "file"
    assert by_path["hello.txt"].size == len("hello w\u00f6rld\n".encode())
    assert by_path["link_out"].type == "symlink"
    assert by_path["hello.txt"].modified.tzinfo is not None
    assert listing.path == "."
    assert listing.truncated is False


async def test_ls_recursive_with_a_glob_and_a_limit(ro: FunctionKernel) -> None:
    listing = await call(ro, "ls", path="docs", pattern="*.md", recursive=True)
    assert [entry.path for entry in listing.entries] == ["docs/deep/notes.md", "docs/guide.md"]
    limited = await call(ro, "ls", recursive=True, max_entries=2)
    assert len(limited.entries) == 2
    assert limited.truncated is True


async def test_recursion_does_not_follow_links_out(ro: FunctionKernel, tree: Path) -> None:
    (tree.parent / "outside" / "leak.txt").write_text("LEAK")
    listing = await call(ro, "ls", recursive=True)
    assert all("leak" not in entry.path for entry in listing.entries)
    found = await call(ro, "find", pattern="*.txt")
    assert [entry.path for entry in found.matches] == ["hello.txt"]


async def test_ls_on_a_file_says_so(ro: FunctionKernel) -> None:
    message = await failure(ro, "ls", NotADirectoryError, path="hello.txt")
    assert "'hello.txt' is not a directory" in message
    missing = await failure(ro, "find", FileNotFoundError, pattern="*", path="gone")
    assert "'gone' does not exist" in missing


async def test_find_by_name_and_by_path(ro: FunctionKernel) -> None:
    by_name = await call(ro, "find", pattern="*.md")
    assert [entry.path for entry in by_name.matches] == ["docs/deep/notes.md", "docs/guide.md"]
    by_path = await call(ro, "find", pattern="docs/**/*.csv")
    assert [entry.path for entry in by_path.matches] == ["docs/deep/data.csv"]
    below = await call(ro, "find", pattern="deep/[!d]*", path="docs")
    assert [entry.path for entry in below.matches] == ["docs/deep/notes.md"]
    message = await failure(ro, "find", PermissionError, pattern="../*")
    assert "must be relative and must not contain '..'" in message


async def test_read_text_with_an_encoding(ro: FunctionKernel, tree: Path) -> None:
    result = await call(ro, "read", path="hello.txt")
    assert result.content == "hello w\u00f6rld\n"
    assert result.encoding == "utf-8"
    assert result.truncated is False
    assert result.next_offset is None
    (tree / "latin.txt").write_bytes("caf\u00e9".encode("latin-1"))
    latin = await call(ro, "read", path="latin.txt", encoding="latin-1")
    assert latin.content == "caf\u00e9"
    utf16 = tree / "wide.txt"
    utf16.write_text("wide", encoding="utf-16")
    assert (await call(ro, "read", path="wide.txt", encoding="utf-16")).content == "wide"


async def test_read_in_parts_never_splits_a_character(ro: FunctionKernel, tree: Path) -> None:
    (tree / "multi.txt").write_text("a\u00e9b\u00e9c", encoding="utf-8")  # 7 bytes
    first = await call(ro, "read", path="multi.txt", max_bytes=2)
    assert first.content == "a"
    assert first.truncated is True
    assert first.next_offset == 1
    parts = [first.content]
    offset = first.next_offset
    while offset is not None:
        part = await call(ro, "read", path="multi.txt", offset=offset, max_bytes=3)
        parts.append(part.content)
        offset = part.next_offset
    assert "".join(parts) == "a\u00e9b\u00e9c"


async def test_an_offset_inside_a_character_says_so(ro: FunctionKernel, tree: Path) -> None:
    (tree / "multi.txt").write_text("a\u00e9b", encoding="utf-8")  # the \u00e9 takes bytes 1 and 2
    message = await failure(ro, "read", ValueError, path="multi.txt", offset=2)
    assert "(byte 0xa9 at offset 2); offset 2 may fall inside a character: continue from a read's next_offset" in (
        message
    )


async def test_the_group_byte_limit_caps_a_read(kernel: FunctionKernel, tree: Path) -> None:
    fs.register(kernel, root=tree, max_read_bytes=5)
    result = await call(kernel, "read", path="hello.txt", max_bytes=1000)
    assert result.content == "hello"
    assert result.size == 13
    assert result.truncated is True


async def test_a_binary_file_is_refused(ro: FunctionKernel) -> None:
    message = await failure(ro, "read", ValueError, path="blob.bin")
    assert "Refused to read 'blob.bin': it looks like a binary file (it contains NUL bytes)" in message


async def test_undecodable_bytes_are_refused_with_their_offset(ro: FunctionKernel, tree: Path) -> None:
    (tree / "bad.txt").write_bytes(b"abc\xff\xfe")
    message = await failure(ro, "read", ValueError, path="bad.txt")
    assert "is not valid utf-8 text (byte 0xff at offset 3)" in message


async def test_read_errors_name_the_relative_path_only(ro: FunctionKernel, tree: Path) -> None:
    missing = await failure(ro, "read", FileNotFoundError, path="nope.txt")
    assert "'nope.txt'" in missing
    assert str(tree) not in missing
    directory = await failure(ro, "read", IsADirectoryError, path="docs")
    assert "use fs.ls" in directory
    unknown = await failure(ro, "read", ValueError, path="hello.txt", encoding="klingon")
    assert "Unknown text encoding 'klingon'" in unknown


async def test_stat_reports_existence_type_and_mode(ro: FunctionKernel, tree: Path) -> None:
    (tree / "hello.txt").chmod(0o640)
    info = await call(ro, "stat", path="hello.txt")
    assert (info.exists, info.type, info.size, info.mode) == (True, "file", 13, "0o640")
    folder = await call(ro, "stat", path="docs/")
    assert (folder.path, folder.type, folder.size) == ("docs", "dir", None)
    missing = await call(ro, "stat", path="docs/none.md")
    assert (missing.exists, missing.type, missing.path) == (False, None, "docs/none.md")


# ------------------------------------------------------------------------------------------------- write


async def test_write_creates_and_replaces_files(rw: FunctionKernel, tree: Path) -> None:
    created = await call(rw, "write", path="out/new.txt", content="first \u00e9")
    assert (created.path, created.created, created.bytes_written) == ("out/new.txt", True, 8)
    replaced = await call(rw, "write", path="out/new.txt", content="second")
    assert replaced.created is False
    assert (tree / "out" / "new.txt").read_text() == "second"
    assert sorted(os.listdir(tree / "out")) == ["new.txt"]  # no temporary file left


async def test_write_keeps_an_existing_files_permissions(rw: FunctionKernel, tree: Path) -> None:
    (tree / "hello.txt").chmod(0o600)
    await call(rw, "write", path="hello.txt", content="new")
    assert (tree / "hello.txt").stat().st_mode & 0o777 == 0o600


async def test_write_refusals(rw: FunctionKernel, tree: Path) -> None:
    too_big = await failure(rw, "write", ValueError, path="big.txt", content="x" * 1001)
    assert "1001 bytes is more than the 1000-byte limit (max_write_bytes)" in too_big
    exists = await failure(rw, "write", FileExistsError, path="hello.txt", content="x", overwrite=False)
    assert "it exists and overwrite is false" in exists
    no_parent = await failure(rw, "write", FileNotFoundError, path="a/b.txt", content="x", make_parents=False)
    assert "pass make_parents=true" in no_parent
    unencodable = await failure(rw, "write", ValueError, path="a.txt", content="\u20ac", encoding="ascii")
    assert "character '\u20ac' at position 0 cannot be encoded as ascii" in unencodable
    directory = await failure(rw, "write", IsADirectoryError, path="docs", content="x")
    assert "it is a directory" in directory
    assert not (tree / "big.txt").exists()
    assert (tree / "hello.txt").read_text() == "hello w\u00f6rld\n"


async def test_a_failure_mid_write_keeps_the_old_content_and_no_temp_file(
    rw: FunctionKernel, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen_at_failure: dict[str, bytes] = {}

    def failing_fsync(fd: int) -> None:
        # The new bytes are in a temporary file next to the target when the disk "fills up".
        for name in os.listdir(tree):
            if name.startswith(".hello.txt."):
                seen_at_failure[name] = (tree / name).read_bytes()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_atomic.os, "fsync", failing_fsync)
    message = await failure(rw, "write", OSError, path="hello.txt", content="NEW CONTENT")
    assert "No space left on device" in message
    assert str(tree) not in message
    assert list(seen_at_failure.values()) == [b"NEW CONTENT"]
    assert (tree / "hello.txt").read_text() == "hello w\u00f6rld\n"
    assert [name for name in os.listdir(tree) if name.startswith(".hello.txt.")] == []


async def test_a_write_through_an_inner_link_replaces_the_target(rw: FunctionKernel, tree: Path) -> None:
    result = await call(rw, "write", path="link_in", content="via link")
    assert result.path == "hello.txt"
    assert (tree / "hello.txt").read_text() == "via link"
    assert (tree / "link_in").is_symlink()


async def test_mkdir(rw: FunctionKernel, tree: Path) -> None:
    made = await call(rw, "mkdir", path="x/y/z")
    assert (made.path, made.created) == ("x/y/z", True)
    again = await call(rw, "mkdir", path="x/y/z")
    assert again.created is False
    assert (tree / "x" / "y" / "z").is_dir()
    on_file = await failure(rw, "mkdir", FileExistsError, path="hello.txt")
    assert "a file exists there" in on_file
    await failure(rw, "mkdir", FileNotFoundError, path="p/q", parents=False)
    refused = await failure(rw, "mkdir", PermissionError, path="dir_out/sub")
    assert "resolves outside the root" in refused
    assert not (tree.parent / "outside" / "sub").exists()


async def test_delete_files_links_and_directories(rw: FunctionKernel, tree: Path) -> None:
    assert (await call(rw, "delete", path="hello.txt")).type == "file"
    assert not (tree / "hello.txt").exists()
    link = await call(rw, "delete", path="link_out")
    assert link.type == "symlink"
    assert (tree.parent / "secret.txt").read_text() == "TOP SECRET"  # the link went, not its target
    not_empty = await failure(rw, "delete", OSError, path="docs")
    assert "the directory is not empty; pass recursive=true" in not_empty
    assert (await call(rw, "delete", path="docs", recursive=True)).type == "dir"
    assert not (tree / "docs").exists()
    missing = await failure(rw, "delete", FileNotFoundError, path="docs")
    assert "'docs'" in missing


async def test_delete_refuses_the_root_and_paths_outside(rw: FunctionKernel, tree: Path) -> None:
    root = await failure(rw, "delete", PermissionError, path=".")
    assert "Refused to delete the root directory itself" in root
    (tree.parent / "outside" / "keep.txt").write_text("keep")
    escaped = await failure(rw, "delete", PermissionError, path="dir_out/keep.txt")
    assert "resolves outside the root" in escaped
    await failure(rw, "delete", PermissionError, path="../secret.txt")
    assert (tree.parent / "outside" / "keep.txt").exists()
    assert (tree.parent / "secret.txt").exists()


# ------------------------------------------------------------------------------------- hardening (review)


async def test_a_backtracking_glob_is_answered_at_once(ro: FunctionKernel, tree: Path) -> None:
    # A regex built naively from this pattern backtracks for hours on a long name of 'a's; the test would time out.
    (tree / ("a" * 200)).write_text("x")
    pattern = "*a" * 40 + "b"
    assert (await call(ro, "find", pattern=pattern)).matches == []
    assert (await call(ro, "find", pattern=f"**/{pattern}")).matches == []
    assert (await call(ro, "ls", pattern=pattern)).entries == []
    found = await call(ro, "find", pattern="*a" * 40)
    assert [entry.path for entry in found.matches] == ["a" * 200]
    with pytest.raises(ToolInputError, match="pattern"):
        await call(ro, "find", pattern="*" * 1001)
    too_many = await failure(ro, "find", ValueError, pattern="/".join(["*"] * 65))
    assert "The pattern has 65 parts; at most 64 are allowed." in too_many
    merged = await call(ro, "find", pattern="/".join(["**"] * 200) + "/notes.md")  # runs of '**' count once
    assert [entry.path for entry in merged.matches] == ["docs/deep/notes.md"]


async def test_double_star_parts_span_directories(ro: FunctionKernel) -> None:
    async def paths(pattern: str, path: str = ".") -> list[str]:
        return [entry.path for entry in (await call(ro, "find", pattern=pattern, path=path)).matches]

    assert await paths("**/notes.md") == ["docs/deep/notes.md"]
    assert await paths("**/hello.txt") == ["hello.txt"]  # '**' may span no directory at all
    assert await paths("docs/**") == ["docs/deep", "docs/deep/data.csv", "docs/deep/notes.md", "docs/guide.md"]
    assert await paths("docs/*/*.md") == ["docs/deep/notes.md"]
    assert await paths("./*.txt") == ["hello.txt"]
    assert await paths("deep/**/*.csv", path="docs") == ["docs/deep/data.csv"]
    assert await paths("*.MD") == []  # case-sensitive, as the file system is


async def test_an_ls_pattern_with_a_slash_points_to_find(ro: FunctionKernel) -> None:
    message = await failure(ro, "ls", ValueError, pattern="docs/*.md")
    assert "The ls pattern 'docs/*.md' matches names, which have no '/'; use fs.find for paths." in message


async def test_ls_max_depth_limits_the_recursion(ro: FunctionKernel) -> None:
    one = await call(ro, "ls", path="docs", recursive=True, max_depth=1)
    assert [entry.path for entry in one.entries] == ["docs/deep", "docs/guide.md"]
    two = await call(ro, "ls", path="docs", recursive=True, max_depth=2)
    assert [entry.path for entry in two.entries] == [
        "docs/deep",
        "docs/deep/data.csv",
        "docs/deep/notes.md",
        "docs/guide.md",
    ]
    flat = await call(ro, "ls", path="docs", max_depth=5)  # without recursive, one level
    assert [entry.path for entry in flat.entries] == ["docs/deep", "docs/guide.md"]


async def test_a_very_deep_tree_is_made_and_walked_without_recursion(rw: FunctionKernel, tree: Path) -> None:
    depth = 1100  # deeper than Python's recursion limit (pathlib's and os's makedirs recurse, so does rmtree)
    deep = "/".join(["d"] * depth)
    try:
        assert (await call(rw, "mkdir", path=deep)).created is True
        found = await call(rw, "find", pattern="d", path=".", max_results=1000)
        assert len(found.matches) == 1000
        assert found.truncated is True
        assert found.matches[-1].path == "/".join(["d"] * 1000)
        if sys.version_info >= (3, 13):  # shutil.rmtree no longer recurses: the whole tree goes in one call
            assert (await call(rw, "delete", path="d", recursive=True)).type == "dir"
            assert not (tree / "d").exists()
        else:  # before 3.13 it recurses: a clear error, never a RecursionError
            message = await failure(rw, "delete", OSError, path="d", recursive=True)
            assert "Cannot delete 'd' in one call: the tree is nested too deeply" in message
    finally:
        _remove_without_recursion(tree)  # pytest's own clean-up recurses, and would fail on this tree


def _remove_without_recursion(top: Path) -> None:
    directories: list[str] = []
    pending = [str(top)]
    while pending:
        directory = pending.pop()
        directories.append(directory)
        with os.scandir(directory) as scan:
            for entry in scan:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    os.unlink(entry.path)
    for directory in reversed(directories):
        os.rmdir(directory)


@pytest.mark.parametrize(
    ("tool", "arguments", "exc_type", "expected"),
    [
        ("stat", {"path": "hello.txt/x"}, NotADirectoryError, "Not a directory: 'hello.txt/x'"),
        ("read", {"path": "hello.txt/x"}, NotADirectoryError, "Not a directory: 'hello.txt/x'"),
        ("stat", {"path": "n" * 300}, OSError, "File name too long"),
        ("write", {"path": "n" * 300, "content": "x"}, OSError, "File name too long"),
        ("write", {"path": "hello.txt/x", "content": "x"}, NotADirectoryError, "a part of its path is a file"),
        ("write", {"path": "hello.txt/x/y", "content": "x"}, NotADirectoryError, "a part of its path is a file"),
        ("mkdir", {"path": "hello.txt/x"}, NotADirectoryError, "a part of its path is a file"),
        ("delete", {"path": "hello.txt/x"}, NotADirectoryError, "Not a directory: 'hello.txt/x'"),
    ],
)
async def test_os_errors_never_show_the_absolute_root(
    rw: FunctionKernel, tree: Path, tool: str, arguments: dict[str, Any], exc_type: type[Exception], expected: str
) -> None:
    message = await failure(rw, tool, exc_type, **arguments)
    assert expected in message
    assert str(tree) not in message


async def test_a_symlink_loop_message_does_not_show_the_root(ro: FunctionKernel, tree: Path) -> None:
    (tree / "loop_a").symlink_to(tree / "loop_b")
    (tree / "loop_b").symlink_to(tree / "loop_a")
    message = await failure(ro, "stat", PermissionError, path="loop_a")
    assert "Refused path 'loop_a': it cannot be resolved (" in message
    assert str(tree) not in message


@pytest.mark.parametrize("encoding", ["base64", "rot13", "zlib", "hex", "uu"])
async def test_non_text_codecs_are_refused(rw: FunctionKernel, encoding: str) -> None:
    read = await failure(rw, "read", ValueError, path="hello.txt", encoding=encoding)
    assert f"Unknown text encoding {encoding!r}; use a text encoding such as 'utf-8'" in read
    written = await failure(rw, "write", ValueError, path="new.txt", content="abc", encoding=encoding)
    assert f"Unknown text encoding {encoding!r}" in written


async def test_a_text_codec_error_that_is_not_a_decode_error_is_a_clear_refusal(ro: FunctionKernel, tree: Path) -> None:
    (tree / "puny.txt").write_bytes(b"abc-\xff")
    message = await failure(ro, "read", ValueError, path="puny.txt", encoding="punycode")
    assert "Refused to read 'puny.txt': it is not valid punycode text" in message


async def test_a_dangling_link_out_of_the_root_is_refused_for_every_write_tool(rw: FunctionKernel, tree: Path) -> None:
    (tree / "dangling").symlink_to(tree.parent / "created-outside")
    for tool, arguments in [("write", {"content": "pwned"}), ("mkdir", {})]:
        message = await failure(rw, tool, PermissionError, path="dangling", **arguments)
        assert "resolves outside the root" in message
    assert not (tree.parent / "created-outside").exists()
    assert (await call(rw, "delete", path="dangling")).type == "symlink"  # the link itself may go
    assert not (tree / "dangling").is_symlink()


async def test_concurrent_writes_to_one_file_leave_one_whole_version(rw: FunctionKernel, tree: Path) -> None:
    versions = [f"version {index} ".encode() * 40 for index in range(12)]  # 400-odd bytes each, under the limit
    async with anyio.create_task_group() as group:
        for data in versions:
            group.start_soon(functools.partial(call, rw, "write", path="shared.txt", content=data.decode()))
    assert (tree / "shared.txt").read_bytes() in versions
    assert [name for name in os.listdir(tree) if name.endswith(".tmp")] == []


@pytest.fixture(scope="module")
def fuzz_jail(tmp_path_factory: pytest.TempPathFactory) -> Jail:
    """A root with links that lead out (to a file, a directory, a dangling target) and links that stay in."""
    base = tmp_path_factory.mktemp("fuzz")
    root = base / "root"
    (root / "a" / "b").mkdir(parents=True)
    (base / "out").mkdir()
    (root / "up").symlink_to(base, target_is_directory=True)
    (root / "a" / "out").symlink_to(base / "out", target_is_directory=True)
    (root / "a" / "gone").symlink_to(base / "missing")
    (root / "a" / "in").symlink_to(root / "a" / "b", target_is_directory=True)
    return Jail(root)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "up", "out", "gone", "in", "..", ".", "", "x:y", "c\\d", "\x00", "CON"])).map(
        "/".join
    )
)
def test_no_path_leaves_the_jail(fuzz_jail: Jail, path: str) -> None:
    for follow_last in (True, False):
        try:
            resolved = fuzz_jail.resolve(path, follow_last=follow_last)
        except PermissionError as exc:
            assert str(exc).startswith(f"Refused path {path!r}: ")
            continue
        assert resolved == fuzz_jail.root or resolved.is_relative_to(fuzz_jail.root)
        if follow_last:
            assert resolved.resolve() == resolved  # nothing left to follow
