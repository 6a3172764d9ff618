"""Path rules as the write engine applies them: the contract's rules and git's .git aliases."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from kbserver.changes import apply
from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Create, Limits
from kbserver.core.paths import MAX_SEGMENT_BYTES, PATH_PATTERN, check_path

Make = Callable[..., Any]

BAD_PATHS = [
    "/etc/passwd",  # leading slash
    "a\\b.md",  # backslash
    "..",
    "../a.md",
    "a/../b.md",
    "a/..",
    ".",
    "./a.md",
    "a/./b.md",
    "a//b.md",  # empty segment
    "a/",  # trailing slash: empty segment
    "a\x00b",  # control characters
    "a\nb",
    "a\tb",
    "a\x7fb",
    "a\x85b",  # C1 control
    "a\u2028b",  # line separator
    "/".join(["x" * 255] * 3 + ["x" * 254, "yz"]),  # 1025 bytes in all
    "/".join(["é" * 127] * 4) + "/ééx",  # 1025 bytes in 515 characters
    # .git in any case, and the names NTFS and HFS+ read as .git
    ".git",
    ".git/config",
    "a/.git/hooks/x",
    ".GIT",
    ".Git/x",
    ".git.",
    ".git..",
    ".git ",
    ".git. .",
    "git~1",
    "GIT~1/config",
    ".git:stream",
    ".git::$INDEX_ALLOCATION",
    ".git .:x",
    "git~1:$DATA",
    ".g\u200cit",
    "\u200d.git",
    ".gi\ufefft/config",
    ".G\u200eI\u206aT",
    # .gitmodules and .gitattributes in any case, and their NTFS aliases
    ".gitmodules",
    "sub/.GitModules",
    ".gitmodules .",
    ".gitmodules::$DATA",
    "gitmod~1",
    "GI7EBA~1",
    ".gitattributes",
    "a/.GITATTRIBUTES",
    "gitatt~2",
    "gi7d29~1",
    # a segment over 255 bytes (ext4, NTFS and APFS refuse it; git clone fails)
    "x" * 256,
    "a/" + "é" * 128,
    "x" * 1021,
    # bidirectional overrides and other format characters
    "evil\u202egnp.md",
    "a\u200bb.md",
    "a\u2066b.md",
    "\ufeffREADME.md",
    "a\u00adb.md",
    # Windows device names, with or without an extension, in any case
    "CON",
    "con",
    "aux.txt",
    "notes/NUL.md",
    "Com1",
    "lpt9.log",
    "prn.tar.gz",
    "CONIN$",
    "com\u00b9",
    "aux .txt",
    # segments ending in a dot or a space (Windows drops them)
    "trail. ",
    "trailing dot.",
    "...",
    "dir./a.md",
    "space /a.md",
    "end ",
]

GOOD_PATHS = [
    "README.md",
    "a/b/c.md",
    "log/2026-11.md",
    ".gitignore",
    ".github/workflows/ci.yml",
    "git/notes.md",
    "a.git",
    "x.git/y",
    "git~1.md",
    "git~2",
    ".hidden",
    "with space.md",
    "笔记/会议.md",
    "emoji 🙂.md",
    "x" * 255,
    "é" * 127 + "x",
    "/".join(["x" * 255] * 3 + ["x" * 254, "y"]),  # 1024 bytes in all
    "a:b.md",
    "console.md",
    "auxiliary/con1.md",
    "com10",
    "lpt.md",
    ".gitmodules.md",
    "gitmodules",
    ".gitattributes-notes/a.md",
    "gitmod~5",
    "a.b",
    " leading space.md",
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_bad_path_is_rejected(tree: Make, change: Make, path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        apply(tree(), [change(path=path, mode="create", content="x")], Limits())
    assert info.value.details["path"] == path


@pytest.mark.parametrize("path", BAD_PATHS)
def test_bad_path_is_rejected_in_every_mode(tree: Make, change: Make, path: str) -> None:
    with pytest.raises(InvalidRequest):
        apply(tree({"ok.md": "x"}), [change(path=path, mode="delete")], Limits())


@pytest.mark.parametrize("path", GOOD_PATHS)
def test_good_path_is_accepted(tree: Make, change: Make, path: str) -> None:
    [out] = apply(tree(), [change(path=path, mode="create", content="x")], Limits())
    assert out.path == path


def test_path_with_a_lone_surrogate(tree: Make) -> None:
    # Request parsing already refuses it (Path has min_length); the engine copes anyway.
    path = "lone\ud800surrogate"
    with pytest.raises(InvalidRequest) as info:
        apply(tree(), [Create.model_construct(path=path, mode="create", content="x")], Limits())
    assert info.value.details == {"path": path}


def test_a_bad_path_later_in_the_call_rejects_it_all(tree: Make, change: Make) -> None:
    files = [
        change(path="ok.md", mode="create", content="x"),
        change(path=".GIT/x", mode="create", content="y"),
    ]
    with pytest.raises(InvalidRequest) as info:
        apply(tree(), files, Limits())
    assert info.value.details == {"path": ".GIT/x"}


@pytest.mark.parametrize("size", [1, 254, 255, 256, 700])
@pytest.mark.parametrize("where", ["{s}", "notes/{s}", "{s}/a.md"])
def test_the_published_pattern_bounds_a_segment_as_the_rule_does(size: int, where: str) -> None:
    """`/openapi.json` states the 255-byte segment limit for one-byte characters, so a
    schema-valid path is never refused for its length (schemathesis found the gap)."""
    path = where.format(s="a" * size)
    admitted = re.fullmatch(PATH_PATTERN, path) is not None
    assert admitted == (size <= MAX_SEGMENT_BYTES)
    if admitted:
        assert check_path(path) == path
    else:
        with pytest.raises(InvalidRequest, match="at most 255"):
            check_path(path)
