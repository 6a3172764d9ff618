"""The write engine: every mode, every error with its details, limits and file/folder clashes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kbserver.changes import Applied, apply, sha256_hex
from kbserver.core.errors import (
    AlreadyExists,
    AmbiguousMatch,
    InvalidRequest,
    KBError,
    NoMatch,
    NotFound,
    SecretDetected,
    Stale,
    TooLarge,
)
from kbserver.core.model import Edit, Limits

Make = Callable[..., Any]
LIMITS = Limits()
AWS_KEY = "AKIA" + "Q7RZ3EXAMPLE4KEY"  # built here so this file holds no key-shaped literal


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _raises(exc: type[KBError], tree: Any, files: list[Any], limits: Limits = LIMITS) -> KBError:
    with pytest.raises(exc) as info:
        apply(tree, files, limits)
    assert type(info.value) is exc
    return info.value


# --- modes -------------------------------------------------------------------------------------


def test_create(tree: Make, change: Make) -> None:
    [out] = apply(tree(), [change(path="notes/a.md", mode="create", content="# A\n")], LIMITS)
    assert out == Applied("notes/a.md", "create", b"# A\n", _sha(b"# A\n"))


def test_create_empty_file(tree: Make, change: Make) -> None:
    [out] = apply(tree(), [change(path="empty.md", mode="create", content="")], LIMITS)
    assert out.content == b"" and out.sha256 == _sha(b"")


def test_append_adds_exactly_the_content(tree: Make, change: Make) -> None:
    t = tree({"log.md": "one"})
    [out] = apply(t, [change(path="log.md", mode="append", content="two\n")], LIMITS)
    assert out == Applied("log.md", "append", b"onetwo\n", _sha(b"onetwo\n"))


def test_edit_replaces_once(tree: Make, change: Make) -> None:
    t = tree({"README.md": "Hello world.\nBye.\n"})
    [out] = apply(t, [change(path="README.md", mode="edit", old_string="world", new_string="KB")], LIMITS)
    assert out.content == b"Hello KB.\nBye.\n"
    assert out.mode == "edit" and out.sha256 == _sha(out.content)


def test_edit_with_empty_new_string_deletes_text(tree: Make, change: Make) -> None:
    t = tree({"a.md": "keep drop keep"})
    [out] = apply(t, [change(path="a.md", mode="edit", old_string=" drop", new_string="")], LIMITS)
    assert out.content == b"keep keep"


def test_edit_keeps_non_ascii_text(tree: Make, change: Make) -> None:
    t = tree({"笔记.md": "会议记录：周一\n"})
    [out] = apply(t, [change(path="笔记.md", mode="edit", old_string="周一", new_string="周二")], LIMITS)
    assert out.content == "会议记录：周二\n".encode()


def test_overwrite(tree: Make, change: Make) -> None:
    t = tree({"a.md": "old"})
    [out] = apply(t, [change(path="a.md", mode="overwrite", content="new")], LIMITS)
    assert out == Applied("a.md", "overwrite", b"new", _sha(b"new"))


def test_overwrite_replaces_a_file_that_is_not_utf8(tree: Make, change: Make) -> None:
    t = tree({"a.md": b"\xff\xfe"})
    [out] = apply(t, [change(path="a.md", mode="overwrite", content="text")], LIMITS)
    assert out.content == b"text"


def test_delete(tree: Make, change: Make) -> None:
    t = tree({"a.md": "x"})
    assert apply(t, [change(path="a.md", mode="delete")], LIMITS) == [Applied("a.md", "delete", None, None)]


def test_results_follow_request_order(tree: Make, change: Make) -> None:
    t = tree({"z.md": "z", "a.md": "a"})
    files = [
        change(path="z.md", mode="delete"),
        change(path="m.md", mode="create", content="m"),
        change(path="a.md", mode="append", content="!"),
    ]
    assert [(o.path, o.mode, o.content) for o in apply(t, files, LIMITS)] == [
        ("z.md", "delete", None),
        ("m.md", "create", b"m"),
        ("a.md", "append", b"a!"),
    ]


def test_apply_only_reads_the_tree(tree: Make, change: Make) -> None:
    t = tree({"a.md": "x"})
    apply(t, [change(path="a.md", mode="overwrite", content="y")], LIMITS)
    assert t.files == {"a.md": b"x"}


def test_sha256_hex() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# --- expected_sha256 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "append", "content": "!"},
        {"mode": "edit", "old_string": "old", "new_string": "new"},
        {"mode": "overwrite", "content": "new"},
        {"mode": "delete"},
    ],
)
def test_matching_expected_sha256_passes(tree: Make, change: Make, fields: dict[str, str]) -> None:
    t = tree({"README.md": "old"})
    [out] = apply(t, [change(path="README.md", expected_sha256=_sha(b"old"), **fields)], LIMITS)
    assert out.mode == fields["mode"]


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "append", "content": "!"},
        {"mode": "edit", "old_string": "old", "new_string": "new"},
        {"mode": "overwrite", "content": "new"},
        {"mode": "delete"},
    ],
)
def test_stale(tree: Make, change: Make, fields: dict[str, str]) -> None:
    t = tree({"README.md": "old"})
    want = _sha(b"what I read")
    err = _raises(Stale, t, [change(path="README.md", expected_sha256=want, **fields)])
    assert err.details == {"path": "README.md", "expected_sha256": want, "actual_sha256": _sha(b"old")}
    assert err.message == (
        f"README.md changed since you read it (expected {want}, now {_sha(b'old')}); read it again and retry"
    )


def test_stale_in_a_later_file_rejects_the_whole_call(tree: Make, change: Make) -> None:
    t = tree({"a.md": "a", "b.md": "b"})
    files = [
        change(path="a.md", mode="overwrite", content="A"),
        change(path="b.md", mode="overwrite", content="B", expected_sha256=_sha(b"not b")),
    ]
    assert _raises(Stale, t, files).details["path"] == "b.md"


# --- missing and existing files ----------------------------------------------------------------


def test_create_of_an_existing_file(tree: Make, change: Make) -> None:
    err = _raises(AlreadyExists, tree({"a.md": "x"}), [change(path="a.md", mode="create", content="y")])
    assert err.details == {"path": "a.md"}
    assert "edit, append or overwrite" in err.message


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "append", "content": "!"},
        {"mode": "edit", "old_string": "a", "new_string": "b"},
        {"mode": "overwrite", "content": "new"},
        {"mode": "delete"},
        {"mode": "delete", "expected_sha256": "0" * 64},
    ],
)
def test_missing_file(tree: Make, change: Make, fields: dict[str, str]) -> None:
    err = _raises(NotFound, tree({"b.md": "x"}), [change(path="a.md", **fields)])
    assert err.details == {"path": "a.md"}
    assert "create" in err.message


# --- edit matching -----------------------------------------------------------------------------


def test_no_match(tree: Make, change: Make) -> None:
    t = tree({"a.md": "Hello"})
    err = _raises(NoMatch, t, [change(path="a.md", mode="edit", old_string="hello", new_string="x")])
    assert err.details == {"path": "a.md"}
    assert "read the file again" in err.message


def test_ambiguous_match(tree: Make, change: Make) -> None:
    t = tree({"a.md": "- [ ] one\n- [ ] two\n- [ ] three\n"})
    err = _raises(AmbiguousMatch, t, [change(path="a.md", mode="edit", old_string="- [ ]", new_string="x")])
    assert err.details == {"path": "a.md", "count": 3}
    assert "occurs 3 times" in err.message


def test_overlapping_occurrences_are_ambiguous(tree: Make, change: Make) -> None:
    t = tree({"a.md": "aaa"})
    err = _raises(AmbiguousMatch, t, [change(path="a.md", mode="edit", old_string="aa", new_string="b")])
    assert err.details == {"path": "a.md", "count": 2}


@pytest.mark.parametrize("fields", [{"mode": "append", "content": "!"}, {"mode": "edit", "old_string": "a"}])
def test_existing_file_that_is_not_utf8(tree: Make, change: Make, fields: dict[str, str]) -> None:
    fields = {"new_string": "b", **fields} if fields["mode"] == "edit" else fields
    err = _raises(InvalidRequest, tree({"a.md": b"a\xff"}), [change(path="a.md", **fields)])
    assert err.details == {"path": "a.md"}
    assert "overwrite or delete" in err.message


# --- content -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "create", "path": "new.md", "content": "a\x00b"},
        {"mode": "append", "content": "\x00"},
        {"mode": "overwrite", "content": "x\x00"},
        {"mode": "edit", "old_string": "old", "new_string": "n\x00l"},
        {"mode": "create", "path": "new.md", "content": "lone \ud800 surrogate"},
        {"mode": "append", "content": "\udfff"},
        {"mode": "overwrite", "content": "\ud83d"},
        {"mode": "edit", "old_string": "old", "new_string": "\udc80"},
    ],
)
def test_content_must_be_text(tree: Make, change: Make, fields: dict[str, str]) -> None:
    path = fields.pop("path", "a.md")
    err = _raises(InvalidRequest, tree({"a.md": "old"}), [change(path=path, **fields)])
    assert err.details == {"path": path}


def test_nul_already_in_a_file_does_not_block_an_edit(tree: Make, change: Make) -> None:
    t = tree({"a.md": "a\x00b c"})
    [out] = apply(t, [change(path="a.md", mode="edit", old_string="c", new_string="d")], LIMITS)
    assert out.content == b"a\x00b d"


def test_old_string_with_a_lone_surrogate_does_not_match(tree: Make) -> None:
    # Request parsing already refuses it (min_length needs a valid string); the engine copes anyway.
    edit = Edit.model_construct(path="a.md", mode="edit", old_string="\ud800", new_string="y")
    _raises(NoMatch, tree({"a.md": "x"}), [edit])


# --- limits ------------------------------------------------------------------------------------


def test_default_limits_follow_the_contract() -> None:
    assert (LIMITS.max_file_bytes, LIMITS.max_files) == (256 * 1024, 20)


def test_too_many_files(tree: Make, change: Make) -> None:
    files = [change(path=f"f{i}.md", mode="create", content="x") for i in range(21)]
    err = _raises(TooLarge, tree(), files)
    assert err.details == {"max_files": 20, "files": 21}
    assert len(apply(tree(), files[:20], LIMITS)) == 20


def test_too_many_files_with_a_kb_limit(tree: Make, change: Make) -> None:
    files = [change(path=f"f{i}.md", mode="create", content="x") for i in range(3)]
    err = _raises(TooLarge, tree(), files, Limits(max_files=2))
    assert err.details == {"max_files": 2, "files": 3}


def test_no_files(tree: Make) -> None:
    _raises(InvalidRequest, tree(), [])


def test_file_size_limit_is_inclusive(tree: Make, change: Make) -> None:
    limits = Limits(max_file_bytes=10)
    [out] = apply(tree(), [change(path="a.md", mode="create", content="é" * 5)], limits)
    assert len(out.content or b"") == 10
    err = _raises(TooLarge, tree(), [change(path="a.md", mode="create", content="é" * 5 + "x")], limits)
    assert err.details == {"path": "a.md", "size": 11, "max_file_bytes": 10}


def test_default_file_size_limit(tree: Make, change: Make) -> None:
    big = "x" * (256 * 1024)
    assert apply(tree(), [change(path="a.md", mode="create", content=big)], LIMITS)[0].content == big.encode()
    err = _raises(TooLarge, tree(), [change(path="a.md", mode="create", content=big + "x")])
    assert err.details == {"path": "a.md", "size": 256 * 1024 + 1, "max_file_bytes": 256 * 1024}


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "append", "content": "6789"},
        {"mode": "edit", "old_string": "5", "new_string": "56789"},
        {"mode": "overwrite", "content": "0123456789"},
    ],
)
def test_size_after_the_change_counts(tree: Make, change: Make, fields: dict[str, str]) -> None:
    err = _raises(
        TooLarge, tree({"a.md": "012345"}), [change(path="a.md", **fields)], Limits(max_file_bytes=9)
    )
    assert err.details == {"path": "a.md", "size": 10, "max_file_bytes": 9}


def test_shrinking_edit_of_an_oversized_file_is_still_too_large(tree: Make, change: Make) -> None:
    t = tree({"a.md": "x" * 20})
    change_ = change(path="a.md", mode="edit", old_string="xx", new_string="")
    _raises(AmbiguousMatch, t, [change_], Limits(max_file_bytes=5))
    t = tree({"a.md": "y" + "x" * 20})
    _raises(
        TooLarge,
        t,
        [change(path="a.md", mode="edit", old_string="y", new_string="")],
        Limits(max_file_bytes=5),
    )
    assert apply(t, [change(path="a.md", mode="delete")], Limits(max_file_bytes=5))[0].content is None


# --- request-level path rules ------------------------------------------------------------------


def test_duplicate_path(tree: Make, change: Make) -> None:
    files = [change(path="a.md", mode="create", content="x"), change(path="a.md", mode="append", content="y")]
    err = _raises(InvalidRequest, tree(), files)
    assert err.details == {"path": "a.md"}


@pytest.mark.parametrize(
    "paths", [("a.md", "A.md"), ("notes/a.md", "Notes/b.md"), ("x/ß.md", "x/SS.md"), ("É.md", "e\u0301.md")]
)
def test_paths_that_differ_only_in_case_in_one_write(
    tree: Make, change: Make, paths: tuple[str, str]
) -> None:
    files = [change(path=p, mode="create", content="x") for p in paths]
    err = _raises(InvalidRequest, tree(), files)
    assert "only by case" in err.message


@pytest.mark.parametrize(
    ("existing", "new", "clash"),
    [
        ("case.md", "Case.md", "case.md"),
        ("Notes/a.md", "notes/b.md", "Notes"),
        ("Notes/a.md", "Notes/A.MD", "Notes/a.md"),
        ("x/y/Deep.md", "x/Y/z.md", "x/y"),
        ("caf\u00e9.md", "CAFE\u0301.md", "caf\u00e9.md"),  # NFD and upper case
    ],
)
def test_a_create_differing_only_by_case_from_an_existing_path(
    tree: Make, change: Make, existing: str, new: str, clash: str
) -> None:
    err = _raises(AlreadyExists, tree({existing: "x"}), [change(path=new, mode="create", content="y")])
    assert err.details["existing"] == clash


def test_nfd_and_nfc_are_one_file(tree: Make, change: Make) -> None:
    nfd, nfc = "cafe\u0301.md", "caf\u00e9.md"
    assert change(path=nfd, mode="create", content="x").path == nfc
    _raises(AlreadyExists, tree({nfc: "x"}), [change(path=nfd, mode="create", content="y")])
    [out] = apply(tree({nfc: "x"}), [change(path=nfd, mode="append", content="y")], LIMITS)
    assert out.path == nfc and out.content == b"xy"


def test_same_spelling_deeper_is_fine(tree: Make, change: Make) -> None:
    [out] = apply(tree({"Notes/a.md": "x"}), [change(path="Notes/b.md", mode="create", content="y")], LIMITS)
    assert out.path == "Notes/b.md"


@pytest.mark.parametrize("order", [("a", "a/b.md"), ("a/b.md", "a"), ("x/a", "x/a/b/c.md")])
def test_a_path_and_a_path_inside_it(tree: Make, change: Make, order: tuple[str, str]) -> None:
    files = [change(path=p, mode="create", content="x") for p in order]
    err = _raises(InvalidRequest, tree(), files)
    assert err.details["path"] == min(order, key=len)


def test_siblings_sharing_a_prefix_are_fine(tree: Make, change: Make) -> None:
    files = [change(path="a", mode="create", content="x"), change(path="ab/c.md", mode="create", content="y")]
    assert len(apply(tree(), files, LIMITS)) == 2


def test_request_rules_come_before_file_rules(tree: Make, change: Make) -> None:
    # The missing file comes first, but the bad path in the same call is reported.
    files = [change(path="missing.md", mode="delete"), change(path="../x.md", mode="create", content="x")]
    _raises(InvalidRequest, tree(), files)


# --- file/folder clashes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "create", "content": "x"},
        {"mode": "append", "content": "x"},
        {"mode": "overwrite", "content": "x"},
        {"mode": "edit", "old_string": "a", "new_string": "b"},
        {"mode": "delete"},
    ],
)
def test_path_is_a_folder(tree: Make, change: Make, fields: dict[str, str]) -> None:
    err = _raises(InvalidRequest, tree({"notes/a.md": "a"}), [change(path="notes", **fields)])
    assert err.details == {"path": "notes"}
    assert "is a folder" in err.message


@pytest.mark.parametrize("path", ["a.md/b.md", "a.md/deeper/b.md"])
def test_path_inside_a_file(tree: Make, change: Make, path: str) -> None:
    err = _raises(InvalidRequest, tree({"a.md": "a"}), [change(path=path, mode="create", content="x")])
    assert err.details == {"path": path, "file": "a.md"}


def test_creating_a_file_next_to_a_folder_with_a_similar_name(tree: Make, change: Make) -> None:
    t = tree({"notes/a.md": "a"})
    [out] = apply(t, [change(path="notes.md", mode="create", content="x")], LIMITS)
    assert out.path == "notes.md"


# --- ordering: first broken rule wins ----------------------------------------------------------


def test_stale_wins_over_a_later_no_match(tree: Make, change: Make) -> None:
    t = tree({"a.md": "a"})
    files = [change(path="a.md", mode="edit", old_string="zzz", new_string="b", expected_sha256="0" * 64)]
    _raises(Stale, t, files)


def test_first_file_error_wins(tree: Make, change: Make) -> None:
    t = tree({"a.md": "a"})
    files = [change(path="b.md", mode="delete"), change(path="a.md", mode="create", content="x")]
    _raises(NotFound, t, files)


def test_size_is_checked_before_secrets(tree: Make, change: Make) -> None:
    files = [change(path="a.md", mode="create", content=AWS_KEY)]
    _raises(TooLarge, tree(), files, Limits(max_file_bytes=5))


# --- secrets -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "create", "path": "new.md", "content": f"aws: {AWS_KEY}\n"},
        {"mode": "append", "content": f"\n{AWS_KEY}"},
        {"mode": "overwrite", "content": AWS_KEY},
        {"mode": "edit", "old_string": "old", "new_string": f"key {AWS_KEY}"},
    ],
)
def test_secret_in_new_text(tree: Make, change: Make, fields: dict[str, str]) -> None:
    path = fields.pop("path", "a.md")
    err = _raises(SecretDetected, tree({"a.md": "old"}), [change(path=path, **fields)])
    assert err.details == {"path": path, "rule": "AWS Access Key"}
    assert AWS_KEY not in err.message  # never echo the credential back


def test_a_secret_already_in_the_file_does_not_block_other_changes(tree: Make, change: Make) -> None:
    t = tree({"a.md": f"legacy {AWS_KEY}\nstatus: draft\n"})
    files = [change(path="a.md", mode="edit", old_string="draft", new_string="done")]
    assert b"status: done" in (apply(t, files, LIMITS)[0].content or b"")
    assert apply(t, [change(path="a.md", mode="append", content="more\n")], LIMITS)[0].content
    assert apply(t, [change(path="a.md", mode="delete")], LIMITS)[0].content is None


def test_edit_that_removes_a_secret_passes(tree: Make, change: Make) -> None:
    t = tree({"a.md": f"key {AWS_KEY}\n"})
    [out] = apply(t, [change(path="a.md", mode="edit", old_string=AWS_KEY, new_string="<redacted>")], LIMITS)
    assert out.content == b"key <redacted>\n"


# --- threads -----------------------------------------------------------------------------------


def test_concurrent_calls_agree_with_sequential_ones(tree: Make, change: Make) -> None:
    t = tree({"a.md": "hello\n"})
    calls = [
        [change(path="a.md", mode="append", content=f"line {i}\n")]
        if i % 3
        else [change(path="a.md", mode="append", content=f"{AWS_KEY}\n")]
        for i in range(60)
    ]

    def run(files: list[Any]) -> object:
        try:
            return apply(t, files, LIMITS)
        except KBError as e:
            return (e.code, e.details)

    expected = [run(files) for files in calls]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(run, calls)) == expected
