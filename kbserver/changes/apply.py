"""The write engine: apply one call's file changes to a tree, all or nothing (CONTRACT.md §3)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, assert_never

from kbserver.changes.secrets import new_secret, scan_secrets
from kbserver.core.errors import (
    AlreadyExists,
    AmbiguousMatch,
    InvalidRequest,
    NoMatch,
    NotFound,
    SecretDetected,
    Stale,
    TooLarge,
)
from kbserver.core.model import Append, Create, Delete, Edit, FileChange, Limits, Overwrite
from kbserver.core.paths import case_key, check_path, parent_dirs

__all__ = ["Applied", "Tree", "apply", "sha256_hex"]


class Tree(Protocol):
    """The files a write starts from (one version of a KB), read-only."""

    def read(self, path: str) -> bytes | None:
        """The file's bytes; None when there is no file at `path`."""
        ...

    def is_dir(self, path: str) -> bool:
        """True when `path` is a folder (has files under it)."""
        ...

    def case_twins(self, folder: str, name: str) -> list[str]:
        """The names of the files and folders directly in `folder` ("" for the top) whose
        `core.paths.case_key` equals `name`'s, `name` itself included when it is there, in any
        order; [] when `folder` is no folder. (`core.paths.case_twins` computes it from a listing.)"""
        ...


@dataclass(frozen=True)
class Applied:
    """The outcome of one file change: its new bytes and their sha256 (both None after delete)."""

    path: str
    mode: str
    content: bytes | None
    sha256: str | None


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of `data`: the `sha256` of the contract."""
    return hashlib.sha256(data).hexdigest()


def apply(tree: Tree, files: Sequence[FileChange], limits: Limits) -> list[Applied]:
    """All-or-nothing: the new contents of every changed path, in request order, or one KBError.

    Request-wide rules are checked first, then each file in request order; the first broken rule
    wins. Raises InvalidRequest, TooLarge, AlreadyExists, NotFound, Stale, NoMatch, AmbiguousMatch
    and SecretDetected. Pure: reads `tree`, never changes it.
    """
    _check_request(files, limits)
    reader = _Reader(tree)
    return [_apply_one(reader, change, limits) for change in files]


def _check_request(files: Sequence[FileChange], limits: Limits) -> None:
    if not files:
        raise InvalidRequest("a write needs at least one file in `files`", files=0)
    if len(files) > limits.max_files:
        raise TooLarge(
            f"a write may change at most {limits.max_files} files and this one has {len(files)}; "
            "split it into several writes",
            max_files=limits.max_files,
            files=len(files),
        )
    seen: dict[str, None] = {}  # in request order, so the first clash is the one reported
    for change in files:
        path = check_path(change.path)
        if path in seen:
            raise InvalidRequest(
                f"{path} appears more than once in this write; combine its changes into one entry "
                "(e.g. one overwrite)",
                path=path,
            )
        seen[path] = None
        rule = scan_secrets(path)
        if rule is not None:
            raise SecretDetected(
                f"the path {path} holds what looks like a credential ({rule}); choose another name",
                path=path,
                rule=rule,
            )
    names: dict[str, str] = {}
    for path in seen:
        for name in (*parent_dirs(path), path):
            other = names.setdefault(case_key(name), name)
            if other != name:
                raise InvalidRequest(
                    f"{name} and {other} differ only by case in this write; a clone on macOS or "
                    "Windows could hold only one of them, so pick one spelling",
                    path=name,
                    other=other,
                )
    for change in files:
        for folder in parent_dirs(change.path):
            if folder in seen:
                # The outcome would depend on the order of the two changes (e.g. delete `folder`,
                # then create a file inside it), so refuse rather than guess.
                raise InvalidRequest(
                    f"{folder} cannot be a file and the folder of {change.path} in the same write; "
                    "choose another path for one of them",
                    path=folder,
                    inside=change.path,
                )


class _Reader:
    """Reads `tree` once per path, so ancestors shared by several files are read once."""

    def __init__(self, tree: Tree) -> None:
        self._tree = tree
        self._files: dict[str, bytes | None] = {}

    def read(self, path: str) -> bytes | None:
        if path not in self._files:
            self._files[path] = self._tree.read(path)
        return self._files[path]

    def is_dir(self, path: str) -> bool:
        return self._tree.is_dir(path)

    def case_twins(self, folder: str, name: str) -> list[str]:
        return self._tree.case_twins(folder, name)


def _apply_one(reader: _Reader, change: FileChange, limits: Limits) -> Applied:
    path = change.path
    _check_clash(reader, path)
    current = reader.read(path)
    if isinstance(change, Create):
        if current is not None:
            raise AlreadyExists(
                f"{path} already exists; read it, then use mode edit, append or overwrite", path=path
            )
        _check_case(reader, path)
        return _finish(path, change.mode, None, _encode(path, "content", change.content), limits)
    if current is None:
        raise NotFound(
            f"{path} does not exist (mode {change.mode} needs an existing file); list the files to "
            "check the path, or use mode create to make a new file",
            path=path,
        )
    if change.expected_sha256 is not None:
        _check_fresh(path, current, change.expected_sha256)
    match change:
        case Delete():
            return Applied(path, change.mode, None, None)
        case Overwrite():
            return _finish(path, change.mode, current, _encode(path, "content", change.content), limits)
        case Append():
            _decode(path, current, change.mode)
            new = current + _encode(path, "content", change.content)
            return _finish(path, change.mode, current, new, limits)
        case Edit():
            text = _decode(path, current, change.mode)
            _find_once(path, text, change.old_string)
            _encode(path, "new_string", change.new_string)
            new = text.replace(change.old_string, change.new_string, 1).encode("utf-8")
            return _finish(path, change.mode, current, new, limits)
        case _:
            assert_never(change)


def _finish(path: str, mode: str, before: bytes | None, new: bytes, limits: Limits) -> Applied:
    if len(new) > limits.max_file_bytes:
        raise TooLarge(
            f"{path} would be {len(new)} bytes after this change; the limit is {limits.max_file_bytes} "
            "bytes per file, so split the content over several files or shorten it",
            path=path,
            size=len(new),
            max_file_bytes=limits.max_file_bytes,
        )
    # The whole resulting file is scanned (a key split over two appends is still a key), but only
    # credentials it did not hold before count: an old file with something odd in it must not
    # block unrelated edits.
    old_text = before.decode("utf-8", "replace") if before is not None else None
    rule = new_secret(old_text, new.decode("utf-8"))
    if rule is not None:
        raise SecretDetected(
            f"{path} would hold what looks like a credential ({rule}) after this change; remove it "
            "and write again without it (never store secrets, credentials or tokens in a KB)",
            path=path,
            rule=rule,
        )
    return Applied(path, mode, new, sha256_hex(new))


def _check_case(reader: _Reader, path: str) -> None:
    """AlreadyExists when a new file or folder of `path` differs from an existing one only by case."""
    parts = path.split("/")
    for depth, name in enumerate(parts):
        folder = "/".join(parts[:depth])
        twins = reader.case_twins(folder, name)
        if name in twins:
            continue  # this folder exists as spelled; look one level down
        if twins:
            other = twins[0]
            existing = f"{folder}/{other}" if folder else other
            raise AlreadyExists(
                f"{existing} already exists and differs from {path} only by case; a clone on macOS or "
                f"Windows could hold only one of them, so use {existing}",
                path=path,
                existing=existing,
            )
        return  # everything below a new name is new


def _check_clash(reader: _Reader, path: str) -> None:
    if reader.is_dir(path):
        raise InvalidRequest(
            f"{path} is a folder, not a file; write to a file inside it or choose another path", path=path
        )
    for folder in parent_dirs(path):
        if reader.read(folder) is not None:
            raise InvalidRequest(
                f"{folder} is a file, so {path} cannot be inside it; choose another path",
                path=path,
                file=folder,
            )


def _check_fresh(path: str, current: bytes, expected: str) -> None:
    actual = sha256_hex(current)
    if actual != expected:
        raise Stale(
            f"{path} changed since you read it (expected {expected}, now {actual}); read it again and retry",
            path=path,
            expected_sha256=expected,
            actual_sha256=actual,
        )


def _decode(path: str, data: bytes, mode: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(
            f"{path} is not UTF-8 text, so it cannot take mode {mode}; use overwrite or delete instead",
            path=path,
        ) from None


def _encode(path: str, field: str, text: str) -> bytes:
    if "\x00" in text:
        raise InvalidRequest(
            f"{field} for {path} holds a NUL character; KB files are text, so remove it", path=path
        )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidRequest(
            f"{field} for {path} is not valid Unicode text (a lone surrogate at character {e.start}); "
            "send it as proper UTF-8",
            path=path,
        ) from None


def _find_once(path: str, text: str, old: str) -> None:
    first = text.find(old)
    if first == -1:
        raise NoMatch(
            f"old_string does not occur in {path}; read the file again and copy old_string exactly, "
            "including whitespace",
            path=path,
        )
    # Overlapping occurrences count too ("aa" in "aaa"): which one to replace would be a guess.
    if text.find(old, first + 1) != -1:
        count = max(text.count(old), 2)
        raise AmbiguousMatch(
            f"old_string occurs {count} times in {path}; include more of the surrounding text so it "
            "matches exactly once",
            path=path,
            count=count,
        )
