"""The path rules of the contract: what a KB file may be called so that every clone can hold it.

A path is checked and NFC-normalised on every request, reads and writes alike; besides git's own
dangerous names (`.git`, `.gitmodules`, `.gitattributes` and their NTFS and HFS+ aliases) it must
be a name that Windows, macOS and Linux file systems can all hold (`kbserver mount`, clones).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from kbserver.core.errors import InvalidRequest

__all__ = [
    "MAX_PATH_BYTES",
    "MAX_SEGMENT_BYTES",
    "PATH_PATTERN",
    "case_key",
    "case_twins",
    "check_path",
    "check_prefix",
    "normalize",
    "parent_dirs",
]

MAX_PATH_BYTES = 1024
MAX_SEGMENT_BYTES = 255  # the name limit of ext4, NTFS, APFS (git clone fails past it)

# The part of the rules a JSON Schema can state (published in /openapi.json): no control, format
# or separator characters, no leading `/`, no empty segment, no segment ending in `.` or a space
# (so no `.` or `..` either), no segment over 255 characters (a schema counts characters, the rule
# counts UTF-8 bytes: the bound is the rule's where every character is one byte). `check_path`
# enforces all of it and the rest (lengths in bytes, device names, git's names).
_BAD_CHARS = r"\\\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
_SEGMENT = f"[^/{_BAD_CHARS}]{{0,{MAX_SEGMENT_BYTES - 1}}}[^/. {_BAD_CHARS}]"
PATH_PATTERN = f"^{_SEGMENT}(?:/{_SEGMENT})*$"

# Code points that HFS+ ignores when comparing names, so ".g\u200cit" is ".git" there. (All are
# format characters, refused anyway; kept so the alias check stands on its own.)
_HFS_IGNORED = frozenset(
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)
# git's is_ntfs_dotgit/dotgitmodules/dotgitattributes: the 8.3 short names NTFS may give them.
_GIT_NAMES = frozenset((".git", ".gitmodules", ".gitattributes"))
_SHORT_NAMES = re.compile(r"git~1|gitmod~[1-4]|gi7eba~\d|gitatt~[1-4]|gi7d29~\d")
# Names Windows reserves for devices, with or without an extension (aux.txt is AUX).
_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$"]
    + [f"{d}{n}" for d in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"]
)


def _is_git_alias(segment: str) -> bool:
    folded = "".join(ch for ch in segment if ch not in _HFS_IGNORED).lower()
    # NTFS reads "name:stream" as name and drops trailing dots and spaces, so ".git .:x" is ".git"
    # there (git's is_ntfs_dotgit).
    name = folded.split(":", 1)[0].rstrip(". ")
    return name in _GIT_NAMES or _SHORT_NAMES.fullmatch(name) is not None


def _is_device(segment: str) -> bool:
    stem = segment.split(".", 1)[0].split(":", 1)[0].rstrip(" ")
    return stem.upper() in _DEVICES


def normalize(path: str) -> str:
    """`path` in Unicode NFC, the one form the KB stores (macOS hands out NFD names)."""
    return unicodedata.normalize("NFC", path)


def check_path(path: str) -> str:
    """`path` in NFC if it is a valid KB file path.

    Raises InvalidRequest naming the broken rule.
    """
    if not isinstance(path, str) or not path:
        raise InvalidRequest("path must be a non-empty string", path=path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("path is not valid UTF-8", path=path) from None
    path = normalize(path)
    size = len(path.encode("utf-8"))
    if size > MAX_PATH_BYTES:
        raise InvalidRequest(f"path is {size} bytes; at most {MAX_PATH_BYTES} are allowed", path=path)
    if path.startswith("/"):
        raise InvalidRequest("path must be relative (no leading /)", path=path)
    if "\\" in path:
        raise InvalidRequest("path must use / as separator, not \\", path=path)
    for ch in path:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cs") or ch in "\u2028\u2029":
            raise InvalidRequest("path must not contain control characters", path=path)
        if category == "Cf":
            raise InvalidRequest(
                f"path must not contain format characters such as U+{ord(ch):04X} (bidirectional "
                "overrides, zero-width joiners): they make a name look like another",
                path=path,
            )
    for segment in path.split("/"):
        _check_segment(path, segment)
    return path


def _check_segment(path: str, segment: str) -> None:
    if segment in ("", ".", ".."):
        raise InvalidRequest("path must not have empty, '.' or '..' segments", path=path)
    if _is_git_alias(segment):
        raise InvalidRequest(
            "path must not contain a segment named .git, .gitmodules or .gitattributes (in any case)",
            path=path,
        )
    size = len(segment.encode("utf-8"))
    if size > MAX_SEGMENT_BYTES:
        raise InvalidRequest(
            f"a path segment is {size} bytes; at most {MAX_SEGMENT_BYTES} are allowed per segment",
            path=path,
        )
    if segment.endswith((".", " ")):
        raise InvalidRequest(
            f"path segment {segment!r} ends in a dot or a space, which Windows drops", path=path
        )
    if _is_device(segment):
        raise InvalidRequest(
            f"path segment {segment!r} is a Windows device name (CON, PRN, AUX, NUL, COM1, LPT1, ...)",
            path=path,
        )


def check_prefix(prefix: str | None) -> str:
    """A listing or search prefix in NFC ("" for none). Raises InvalidRequest for a bad one."""
    if prefix is None or prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise InvalidRequest("prefix must be a string", prefix=prefix)
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("prefix is not valid UTF-8", prefix=prefix) from None
    prefix = normalize(prefix)
    if len(prefix.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidRequest(f"prefix is over {MAX_PATH_BYTES} bytes", prefix=prefix)
    return prefix


def case_key(name: str) -> str:
    """What a case-insensitive file system (macOS, Windows) compares: NFC, case-folded."""
    return normalize(name).casefold()


def case_twins(name: str, siblings: Iterable[str]) -> list[str]:
    """The siblings whose `case_key` equals `name`'s (`name` itself included when it is one)."""
    key = case_key(name)
    return [sibling for sibling in siblings if case_key(sibling) == key]


def parent_dirs(path: str) -> list[str]:
    """The folders that contain `path`, outermost first: a/b/c.md -> [a, a/b]."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
