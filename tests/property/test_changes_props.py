"""Properties of the write engine: it agrees with a plain reference model, and paths are safe."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from kbserver.changes import apply
from kbserver.core.errors import InvalidRequest, KBError
from kbserver.core.model import FileChange, Limits
from kbserver.core.paths import check_path
from tests.helpers import DictTree

_CHANGE: TypeAdapter[FileChange] = TypeAdapter(FileChange)
SECRET = "AKIA" + "Z3Q7EXAMPLE0KEY1"  # the one credential the generated texts may hold
_AWS_KEY = re.compile(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}")  # detect-secrets' pattern


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- the reference model ------------------------------------------------------------------------


def _occurrences(text: str, old: str) -> int:
    return sum(text.startswith(old, i) for i in range(len(text)))


def _keys(data: bytes) -> set[str]:
    """The AWS access key ids in `data` (the one credential format the generated texts can form)."""
    return set(_AWS_KEY.findall(data.decode("utf-8", "replace")))


def _is_text(s: str) -> bool:
    return "\x00" not in s and not any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def reference(files: dict[str, bytes], changes: list[dict[str, Any]], limits: Limits) -> Any:
    """The error code the call must fail with, or its results as (path, mode, content) tuples."""
    if len(changes) > limits.max_files:
        return "too_large"
    paths: list[str] = []
    for c in changes:
        if c["path"] in INVALID_PATHS or c["path"] in paths:
            return "invalid_request"
        paths.append(c["path"])
    if any(q.startswith(p + "/") for p in paths for q in paths):
        return "invalid_request"
    out: list[tuple[str, str, bytes | None]] = []
    for c in changes:
        path, mode = c["path"], c["mode"]
        parts = path.split("/")
        if any(f.startswith(path + "/") for f in files):
            return "invalid_request"
        if any("/".join(parts[:i]) in files for i in range(1, len(parts))):
            return "invalid_request"
        old = files.get(path)
        if mode == "create":
            if old is not None:
                return "already_exists"
        else:
            if old is None:
                return "not_found"
            if c.get("expected_sha256") and c["expected_sha256"] != _sha(old):
                return "stale"
        if mode == "delete":
            out.append((path, mode, None))
            continue
        if mode in ("append", "edit"):
            try:
                text = (old or b"").decode("utf-8")
            except UnicodeDecodeError:
                return "invalid_request"
        if mode == "edit":
            n = _occurrences(text, c["old_string"])
            if n != 1:
                return "no_match" if n == 0 else "ambiguous_match"
        introduced = c["new_string"] if mode == "edit" else c["content"]
        if not _is_text(introduced):
            return "invalid_request"
        if mode == "edit":
            new = text.replace(c["old_string"], introduced).encode()
        elif mode == "append":
            new = (old or b"") + introduced.encode()
        else:
            new = introduced.encode()
        if len(new) > limits.max_file_bytes:
            return "too_large"
        # the whole new file is scanned (an edit may join pieces into a new key); a credential the
        # file held already does not count
        if _keys(new) - _keys(old or b""):
            return "secret_detected"
        out.append((path, mode, new))
    return out


# --- strategies --------------------------------------------------------------------------------

SAFE_PATHS = ["a.md", "b.md", "c/d.md", "c/e.md", "f/g/h.md", "中/é.md"]
CLASH_PATHS = ["c", "a.md/x", "f/g"]  # a folder of SAFE_PATHS, or inside one of their files
INVALID_PATHS = ["../a", ".git/x", "a//b", "/a", ".GIT"]
CLEAN = ["x", "y", "xx", "xy", "é", "中", "\n", " "]
BAD = ["\x00", "\ud800", SECRET]  # refused when a call brings them in
clean_texts = st.lists(st.sampled_from(CLEAN), max_size=6).map("".join)
bad_texts = st.lists(st.sampled_from(CLEAN + BAD), min_size=1, max_size=6).map("".join)
# What a file may already hold: anything valid, even a NUL or a credential.
initial_texts = st.lists(st.sampled_from([*CLEAN, "\x00", SECRET]), max_size=6).map("".join)

# Each way to fail is drawn now and then, so that most calls get far and many succeed.


def _rarely(data: st.DataObject, one_in: int = 10) -> bool:
    return data.draw(st.integers(1, one_in)) == 1


def _text(data: st.DataObject) -> str:
    return data.draw(bad_texts if _rarely(data, 8) else clean_texts)


def _initial_content(data: st.DataObject) -> bytes:
    return b"x\xffy" if _rarely(data, 15) else data.draw(initial_texts).encode()


def _draw_paths(data: st.DataObject) -> list[str]:
    paths = data.draw(st.lists(st.sampled_from(SAFE_PATHS), min_size=1, max_size=4, unique=True))
    if _rarely(data, 8):  # a clash, a bad path or a duplicate
        extra = data.draw(st.sampled_from(CLASH_PATHS + INVALID_PATHS + paths))
        paths.insert(data.draw(st.integers(0, len(paths))), extra)
    return paths


def _draw_change(data: st.DataObject, files: dict[str, bytes], path: str) -> dict[str, Any]:
    if (path in files) == _rarely(data):  # mostly create what is missing and change what exists
        mode = "create"
    else:
        mode = data.draw(st.sampled_from(["append", "edit", "edit", "overwrite", "delete"]))
    c: dict[str, Any] = {"path": path, "mode": mode}
    if mode in ("create", "append", "overwrite"):
        c["content"] = _text(data)
    if mode == "edit":
        current = files.get(path, b"").decode("utf-8", "replace")
        substrings = [current[i:j] for i in range(len(current)) for j in range(i + 1, len(current) + 1)]
        if substrings and not _rarely(data, 4):
            c["old_string"] = data.draw(st.sampled_from(substrings))
        else:
            c["old_string"] = data.draw(st.sampled_from(["x", "xx", "y", "zz"]))
        c["new_string"] = _text(data)
    if mode != "create":
        actual = _sha(files.get(path, b""))
        c["expected_sha256"] = _sha(b"other") if _rarely(data) else data.draw(st.sampled_from([None, actual]))
    return c


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_apply_agrees_with_the_reference_model(data: st.DataObject) -> None:
    initial = data.draw(st.lists(st.sampled_from(SAFE_PATHS * 3 + CLASH_PATHS), unique=True))
    files = {p: _initial_content(data) for p in initial}
    # Keep the starting tree consistent: no file is also a folder.
    files = {p: c for p, c in files.items() if not any(q.startswith(p + "/") for q in files)}
    for _ in range(data.draw(st.integers(1, 5))):
        limits = Limits(
            max_file_bytes=data.draw(st.integers(1, 30)) if _rarely(data) else 200,
            max_files=data.draw(st.integers(1, 3)) if _rarely(data) else 20,
        )
        paths = _draw_paths(data)
        changes = [_draw_change(data, files, p) for p in paths]
        requests = [_CHANGE.validate_python(c) for c in changes]
        before = dict(files)
        want = reference(files, changes, limits)
        try:
            got: Any = [(a.path, a.mode, a.content) for a in apply(DictTree(files), requests, limits)]
        except KBError as e:
            got = e.code
        assert got == want
        assert files == before  # the tree is never changed, whatever happened
        if isinstance(got, list):
            for path, _, content in got:
                if content is None:
                    del files[path]
                else:
                    files[path] = content


@given(st.text(alphabet="ab\n", max_size=12), st.data(), st.text("xy"))
def test_edit_replaces_the_only_occurrence_or_refuses(text: str, data: st.DataObject, new: str) -> None:
    substrings = [text[i:j] for i in range(len(text)) for j in range(i + 1, min(i + 4, len(text)) + 1)]
    old = data.draw(st.sampled_from(substrings) if substrings else st.just("a"))
    edit = _CHANGE.validate_python({"path": "a.md", "mode": "edit", "old_string": old, "new_string": new})
    want = reference({"a.md": text.encode()}, [edit.model_dump()], Limits())
    try:
        got: Any = [
            (a.path, a.mode, a.content) for a in apply(DictTree({"a.md": text.encode()}), [edit], Limits())
        ]
    except KBError as e:
        got = e.code
    assert got == want


@given(st.lists(st.sampled_from(SAFE_PATHS + CLASH_PATHS), min_size=1, max_size=5, unique=True))
def test_sha256_of_every_result_is_of_its_content(paths: list[str]) -> None:
    files = [_CHANGE.validate_python({"path": p, "mode": "create", "content": p * 3}) for p in paths]
    try:
        results = apply(DictTree({}), files, Limits())
    except InvalidRequest:
        return  # a path and a path inside it
    for r in results:
        assert r.content is not None and r.sha256 == _sha(r.content)


# --- paths -------------------------------------------------------------------------------------

_HFS_IGNORABLE = {0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF}


def _git_is_hfs_dotgit(segment: str) -> bool:
    """git's is_hfs_dotgit (utf8.c): ".git" once HFS+'s ignorable code points are dropped."""
    chars = [c for c in segment if ord(c) not in _HFS_IGNORABLE]
    return (
        len(chars) == 4
        and chars[0] == "."
        and all(ord(c) < 128 for c in chars)
        and ("".join(chars[1:]).lower() == "git")
    )


def _git_is_ntfs_dotgit(segment: str) -> bool:
    """git's is_ntfs_dotgit (path.c): .git or git~1, then only dots and spaces up to the end or a ':'."""
    lowered = segment.lower()
    if lowered.startswith(".git"):
        rest = segment[4:]
    elif lowered.startswith("git~1"):
        rest = segment[5:]
    else:
        return False
    for c in rest:
        if c in ":\\/":
            return True
        if c not in ". ":
            return False
    return True


def _clean(path: str) -> bool:
    """The contract's path rules, written out independently of kbserver.core.paths."""
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return (
        0 < size <= 1024
        and not path.startswith("/")
        and "\\" not in path
        and not any(unicodedata.category(c) == "Cc" for c in path)
        and all(
            seg not in ("", ".", "..") and not _git_is_hfs_dotgit(seg) and not _git_is_ntfs_dotgit(seg)
            for seg in path.split("/")
        )
    )


_PATH_TOKENS = st.sampled_from(
    [
        ".git",
        ".GiT",
        "git~1",
        "GIT~1",
        "git",
        ".g",
        "it",
        ".",
        "..",
        " ",
        ":",
        "~",
        "1",
        "a",
        "/",
        "\\",
        "\x00",
        "\n",
        "\u200c",
        "\ufeff",
        "\u202e",
    ]
)
path_like = st.lists(_PATH_TOKENS, max_size=8).map("".join)
# Segments close to .git: a name git or NTFS/HFS+ may read as .git, then dots, spaces and a stream.
alias_like = st.tuples(
    st.sampled_from([".git", ".GIT", "git~1", "Git~1", ".g\u200cit", "\ufeff.git", ".gi", "git", "git~2"]),
    st.lists(st.sampled_from([".", " ", "\u200d"]), max_size=3).map("".join),
    st.sampled_from(["", ":", ":x", "::$INDEX_ALLOCATION", "x", ".md", "/a", "\\a"]),
).map("".join)


def _accepted(path: str) -> bool:
    try:
        # check_path answers the NFC form (U+2F800 丽 becomes U+4E3D 丽), which is what gets stored.
        assert check_path(path) == unicodedata.normalize("NFC", path)
    except InvalidRequest:
        return False
    return True


@settings(max_examples=500)
@given(st.one_of(st.text(max_size=40), path_like, alias_like, st.text(min_size=1020, max_size=1030)))
def test_an_accepted_path_breaks_no_rule(path: str) -> None:
    if _accepted(path):
        assert _clean(path), path


@settings(max_examples=200)
@given(st.one_of(st.text(max_size=40), path_like))
def test_apply_rejects_exactly_the_paths_check_path_rejects(path: str) -> None:
    accepted = _accepted(path)
    try:
        apply(
            DictTree({}),
            [_CHANGE.validate_python({"path": path, "mode": "create", "content": "x"})],
            Limits(),
        )
    except InvalidRequest:
        assert not accepted
    except ValueError:
        assert path == ""  # refused by request parsing before the engine sees it
    else:
        assert accepted


_SAFE_SEGMENT = st.text(alphabet="abcxyz0123456789_-é中", min_size=1, max_size=12)


@given(st.lists(_SAFE_SEGMENT, min_size=1, max_size=6).map("/".join), st.sampled_from(["", ".md", ".txt"]))
def test_ordinary_paths_are_accepted(path: str, suffix: str) -> None:
    assert _accepted(path + suffix)
