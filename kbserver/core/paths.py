"""The path rules of the contract plus git's own dangerous names (NTFS and HFS aliases of .git)."""

from __future__ import annotations

import unicodedata

from kbserver.core.errors import InvalidRequest

__all__ = ["MAX_PATH_BYTES", "check_path", "parent_dirs"]

MAX_PATH_BYTES = 1024

# Code points that HFS+ ignores when comparing names, so ".g\u200cit" is ".git" there.
_HFS_IGNORED = frozenset(
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)


def _is_git_alias(segment: str) -> bool:
    folded = "".join(ch for ch in segment if ch not in _HFS_IGNORED).lower()
    # NTFS reads "name:stream" as name and drops trailing dots and spaces, so ".git .:x" is ".git"
    # there (git's is_ntfs_dotgit); "git~1" is the 8.3 short name of ".git".
    name = folded.split(":", 1)[0].rstrip(". ")
    return name in (".git", "git~1")


def check_path(path: str) -> str:
    """Return `path` if it is a valid KB file path.

    Raises InvalidRequest naming the broken rule.
    """
    if not isinstance(path, str) or not path:
        raise InvalidRequest("path must be a non-empty string", path=path)
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequest("path is not valid UTF-8", path=path) from None
    if size > MAX_PATH_BYTES:
        raise InvalidRequest(f"path is {size} bytes; at most {MAX_PATH_BYTES} are allowed", path=path)
    if path.startswith("/"):
        raise InvalidRequest("path must be relative (no leading /)", path=path)
    if "\\" in path:
        raise InvalidRequest("path must use / as separator, not \\", path=path)
    for ch in path:
        if unicodedata.category(ch) in ("Cc", "Cs") or ch in "\u2028\u2029":
            raise InvalidRequest("path must not contain control characters", path=path)
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidRequest("path must not have empty, '.' or '..' segments", path=path)
        if _is_git_alias(segment):
            raise InvalidRequest("path must not contain a segment named .git", path=path)
    return path


def parent_dirs(path: str) -> list[str]:
    """The folders that contain `path`, outermost first: a/b/c.md -> [a, a/b]."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
