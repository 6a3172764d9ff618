"""What differs between two trees of a KB, path by path, and the unified diff of one file."""

from __future__ import annotations

import io
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dulwich.patch import unified_diff

from kbserver.store.trees import EMPTY, TreeTable, entry_name

__all__ = ["Change", "text_patch", "tree_changes"]


@dataclass(frozen=True)
class Change:
    """One path changed between two versions."""

    path: str
    change: Literal["added", "modified", "deleted"]
    old_blob: str | None
    new_blob: str | None


def tree_changes(
    tree: Callable[[bytes], TreeTable], old_tree: bytes | None, new_tree: bytes | None
) -> list[Change]:
    """Paths that differ between two trees (files only), sorted by path; `tree` reads a tree by id.

    Equal subtrees are skipped by id, and within a folder the differing entries come from a set
    difference of the two entry tables (C speed, not dulwich's entry-by-entry walk). Trees are read
    through the cache, where the writer has just put the trees of a new version.
    """
    out: list[Change] = []
    _diff_trees(tree, old_tree, new_tree, "", out)
    return sorted(out, key=lambda c: c.path)


def _diff_trees(
    tree: Callable[[bytes], TreeTable],
    old_tree: bytes | None,
    new_tree: bytes | None,
    base: str,
    out: list[Change],
) -> None:
    if old_tree == new_tree:
        return
    old = tree(old_tree) if old_tree is not None else EMPTY
    new = tree(new_tree) if new_tree is not None else EMPTY
    for name in {entry_name(chunk) for chunk in set(old.chunks) ^ set(new.chunks)}:
        before, after = old.get(name), new.get(name)
        if before == after:
            continue  # the same entry spelled differently (a non-canonical mode)
        path = base + name.decode("utf-8", "surrogateescape")
        old_dir = before is not None and stat.S_ISDIR(before[0])
        new_dir = after is not None and stat.S_ISDIR(after[0])
        if old_dir or new_dir:
            _diff_trees(
                tree,
                before[1] if before is not None and old_dir else None,
                after[1] if after is not None and new_dir else None,
                path + "/",
                out,
            )
        old_file = before[1].decode() if before is not None and not old_dir else None
        new_file = after[1].decode() if after is not None and not new_dir else None
        if old_file is None and new_file is not None:
            out.append(Change(path, "added", None, new_file))
        elif old_file is not None and new_file is None:
            out.append(Change(path, "deleted", old_file, None))
        elif old_file is not None and new_file is not None:
            out.append(Change(path, "modified", old_file, new_file))


def text_patch(path: str, old: bytes | None, new: bytes | None) -> str:
    """The unified diff from `old` to `new` bytes of `path` (None: the file does not exist)."""
    old_name = f"a/{path}".encode() if old is not None else b"/dev/null"
    new_name = f"b/{path}".encode() if new is not None else b"/dev/null"
    out = io.BytesIO()
    lines = unified_diff(
        (old or b"").splitlines(True), (new or b"").splitlines(True), old_name, new_name, n=3
    )
    for line in lines:
        out.write(line)
        if not line.endswith(b"\n"):
            out.write(b"\n\\ No newline at end of file\n")
    return out.getvalue().decode("utf-8", "replace")
