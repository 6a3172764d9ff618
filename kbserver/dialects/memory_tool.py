"""The `memory_tool` tool set: Anthropic's client-side memory tool, served by kbserver.

One tool `memory(command, ...)` with the memory tool's commands and argument names: `view`, `create`,
`str_replace`, `insert`, `delete`, `rename`. Paths are under `/memories`, which is the KB folder
`memory-tool/` (`/memories/notes.md` is `memory-tool/notes.md`). An application that receives the
model's memory-tool calls forwards them unchanged and gets versioned, reviewable, stale-safe memory:
each command that changes files is one version, read and written with expected_sha256, so a
concurrent change is never overwritten. Results are the memory tool's own texts; errors start with
the contract's code (`not_found: The path /memories/x does not exist. ...`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from kbserver.core.errors import AlreadyExists, AmbiguousMatch, InvalidRequest, NoMatch, NotFound
from kbserver.core.model import Create, Delete, Edit, FileChange, Overwrite
from kbserver.core.paths import check_path
from kbserver.dialects.registry import Dialect
from kbserver.dialects.results import MemoryToolResult, Proposal
from kbserver.dialects.session import Current, DialectCall, retry_stale

__all__ = [
    "COMMANDS",
    "DIALECT",
    "FOLDER",
    "ROOT",
    "TOOLS",
    "Outcome",
    "format_size",
    "kb_path",
    "listing",
    "memory",
    "numbered",
]

TOOLS = ("memory",)
ROOT = "/memories"
FOLDER = "memory-tool"
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
_SNIPPET_LINES = 2


@dataclass(frozen=True)
class Outcome:
    """What a command answers: the memory tool's text, and the version it made (None for view)."""

    text: str
    kb: str
    version: str | None = None
    proposal: Proposal | None = None

    def result(self, command: str) -> MemoryToolResult:
        """`{kb, result}`, plus `version` (and `proposal`) for a command that changes files."""
        out = MemoryToolResult(kb=self.kb, result=self.text, proposal=self.proposal)
        return out if command == "view" else out.model_copy(update={"version": self.version})


# -- pure mapping ---------------------------------------------------------------------------------
def kb_path(path: object) -> str:
    """The KB path of a memory path: `/memories` -> `memory-tool`, `/memories/a/b` -> `memory-tool/a/b`.

    Raises InvalidRequest for anything outside /memories (escapes included).
    """
    if not isinstance(path, str) or not path:
        raise InvalidRequest("path must be a path under /memories, e.g. /memories/notes.md", path=path)
    outside = InvalidRequest(
        f"The path {path} is outside {ROOT}; every memory path starts with {ROOT}/", path=path
    )
    trimmed = path.rstrip("/") if path != "/" else path
    if trimmed == ROOT:
        return FOLDER
    if not trimmed.startswith(ROOT + "/"):
        raise outside
    rest = trimmed[len(ROOT) + 1 :]
    for segment in rest.split("/"):
        decoded = unquote(segment)  # %2e%2e is no way out either
        if segment in ("", ".", "..") or decoded in (".", "..") or "/" in decoded or "\\" in decoded:
            raise outside
    return check_path(f"{FOLDER}/{rest}")


def memory_path(kb: str) -> str:
    """The memory path of a KB path under memory-tool/."""
    return ROOT if kb == FOLDER else ROOT + kb[len(FOLDER) :]


def format_size(size: int) -> str:
    """Human-readable size as the memory tool shows it: `0B`, `812B`, `4K`, `1.5K`, `2.3M`."""
    if size <= 0:
        return "0B"
    value, unit = float(size), "B"
    for unit in ("B", "K", "M", "G"):
        if value < 1024 or unit == "G":
            break
        value /= 1024
    text = str(int(value)) if value == int(value) else f"{value:.1f}"
    return text + unit


def numbered(lines: Sequence[str], start: int) -> str:
    """Lines with their numbers, right-aligned in 6 characters and a tab, as the memory tool shows them."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start))


def listing(folder: str, files: Sequence[tuple[str, int]]) -> str:
    """The view of a folder: up to 2 levels deep, hidden items and node_modules left out.

    `files` are (path relative to the folder, size) of every file under it.
    """
    sizes: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for rel, size in files:
        parts = rel.split("/")
        if any(p.startswith(".") or p == "node_modules" for p in parts[:2]):
            continue
        for depth in (1, 2):
            if len(parts) < depth:
                break
            key = "/".join(parts[:depth])
            sizes[key] = sizes.get(key, 0) + size
            kinds[key] = "file" if len(parts) == depth else "dir"
    total = sum(size for _, size in files)
    lines = [f"{format_size(total)}\t{folder}"]
    for key in sorted(sizes, key=lambda k: k.split("/")):
        suffix = "/" if kinds[key] == "dir" else ""
        lines.append(f"{format_size(sizes[key])}\t{folder}/{key}{suffix}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {folder}, excluding hidden items and "
        "node_modules:"
    )
    return header + "\n" + "\n".join(lines)


def _view_range(view_range: Sequence[int] | None, count: int) -> tuple[int, int]:
    if view_range is None:
        return 1, count
    if len(view_range) != 2:
        raise InvalidRequest("view_range must be [start_line, end_line] (end_line -1: to the end)")
    start, end = view_range
    end = count if end == -1 else end
    if start < 1 or start > max(count, 1) or end < start or end > count:
        raise InvalidRequest(
            f"Invalid view_range {list(view_range)}: lines are numbered 1 to {count}; end_line -1 reads "
            "to the end",
            view_range=list(view_range),
        )
    return start, end


def _line_numbers(content: str, needle: str) -> list[int]:
    out, at = [], content.find(needle)
    while at >= 0:
        out.append(content.count("\n", 0, at) + 1)
        at = content.find(needle, at + 1)
    return out


# -- commands -------------------------------------------------------------------------------------
class _Memory:
    def __init__(self, call: DialectCall, slug: str) -> None:
        self.call = call
        self.slug = slug

    def under(self, kb: str) -> list[str]:
        """Files under the folder `kb` (empty when it is not a folder)."""
        return self.call.paths(self.slug, kb + "/")

    def write(self, changes: Sequence[FileChange], what: str) -> Outcome:
        written = self.call.write(self.slug, changes, f"memory tool: {what}", "memory_tool")
        return Outcome("", self.slug, written.version, written.proposal)

    def view(self, path: str, view_range: Sequence[int] | None) -> Outcome:
        kb = kb_path(path)
        shown = memory_path(kb)
        current = self.call.read(self.slug, kb) if kb != FOLDER else None
        if current is None:
            inside = self.under(kb)
            if not inside and kb != FOLDER:
                raise NotFound(f"The path {shown} does not exist. Please provide a valid path.", path=path)
            entries = self.call.entries(self.slug, kb + "/")
            rel = [(p[len(kb) + 1 :], entries[p][0]) for p in inside]
            return Outcome(listing(shown, rel), self.slug)
        if view_range is not None and not isinstance(view_range, list | tuple):
            raise InvalidRequest("view_range must be [start_line, end_line]")
        lines = current.content.split("\n")
        start, end = _view_range(view_range, len(lines))
        text = f"Here's the content of {shown} with line numbers:\n" + numbered(lines[start - 1 : end], start)
        return Outcome(text, self.slug)

    def create(self, path: str, file_text: str) -> Outcome:
        kb = kb_path(path)
        shown = memory_path(kb)
        if kb == FOLDER or self.call.read(self.slug, kb) is not None or self.under(kb):
            raise AlreadyExists(f"Error: File {shown} already exists", path=path)
        out = self.write([Create(path=kb, mode="create", content=file_text)], f"create {shown}")
        return _with(out, f"File created successfully at: {shown}")

    def str_replace(self, path: str, old_str: str, new_str: str) -> Outcome:
        kb = kb_path(path)
        shown = memory_path(kb)

        def attempt() -> Outcome:
            current = self._file(kb, path)
            found = _line_numbers(current.content, old_str) if old_str else []
            if not found:
                raise NoMatch(
                    f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {shown}.",
                    path=path,
                )
            if len(found) > 1:
                raise AmbiguousMatch(
                    f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: "
                    f"{', '.join(map(str, found))}. Please ensure it is unique",
                    path=path,
                    lines=found,
                )
            edit = Edit(
                path=kb, mode="edit", old_string=old_str, new_string=new_str, expected_sha256=current.sha256
            )
            out = self.write([edit], f"str_replace in {shown}")
            after = current.content.replace(old_str, new_str, 1).split("\n")
            first = max(0, found[0] - 1 - _SNIPPET_LINES)
            last = min(len(after), found[0] + new_str.count("\n") + _SNIPPET_LINES)
            snippet = numbered(after[first:last], first + 1)
            return _with(
                out,
                "The memory file has been edited. Here is the snippet showing the change (with line "
                "numbers):\n" + snippet,
            )

        return retry_stale(attempt)

    def insert(self, path: str, insert_line: int, insert_text: str) -> Outcome:
        kb = kb_path(path)
        shown = memory_path(kb)

        def attempt() -> Outcome:
            current = self._file(kb, path)
            lines = current.content.split("\n")
            if not 0 <= insert_line <= len(lines):
                raise InvalidRequest(
                    f"Error: Invalid `insert_line` parameter: {insert_line}. It should be within the range "
                    f"of lines of the file: [0, {len(lines)}]",
                    insert_line=insert_line,
                )
            text = insert_text[:-1] if insert_text.endswith("\n") else insert_text
            lines[insert_line:insert_line] = [text]
            change = Overwrite(
                path=kb, mode="overwrite", content="\n".join(lines), expected_sha256=current.sha256
            )
            return _with(self.write([change], f"insert into {shown}"), f"The file {shown} has been edited.")

        return retry_stale(attempt)

    def delete(self, path: str) -> Outcome:
        kb = kb_path(path)
        shown = memory_path(kb)
        if kb == FOLDER:
            raise InvalidRequest(f"Error: Cannot delete the {ROOT} directory itself", path=path)

        def attempt() -> Outcome:
            targets = self._targets(kb, path)
            changes = [Delete(path=p, mode="delete", expected_sha256=sha) for p, sha in targets]
            return _with(self.write(changes, f"delete {shown}"), f"Successfully deleted {shown}")

        return retry_stale(attempt)

    def rename(self, old_path: str, new_path: str) -> Outcome:
        old_kb, new_kb = kb_path(old_path), kb_path(new_path)
        old_shown, new_shown = memory_path(old_kb), memory_path(new_kb)
        if old_kb == FOLDER:
            raise InvalidRequest(f"Error: Cannot rename the {ROOT} directory itself", path=old_path)
        if new_kb == FOLDER or new_kb.startswith(old_kb + "/"):
            raise InvalidRequest(f"Error: Cannot rename {old_shown} to {new_shown}", path=new_path)

        def attempt() -> Outcome:
            targets = self._targets(old_kb, old_path)
            if self.call.read(self.slug, new_kb) is not None or self.under(new_kb):
                raise AlreadyExists(f"Error: The destination {new_shown} already exists", path=new_path)
            changes: list[FileChange] = []
            for p, sha in targets:
                current = self.call.read(self.slug, p)
                assert current is not None
                changes.append(Create(path=new_kb + p[len(old_kb) :], mode="create", content=current.content))
                changes.append(Delete(path=p, mode="delete", expected_sha256=sha))
            out = self.write(changes, f"rename {old_shown} to {new_shown}")
            return _with(out, f"Successfully renamed {old_shown} to {new_shown}")

        return retry_stale(attempt)

    def _file(self, kb: str, path: str) -> Current:
        current = self.call.read(self.slug, kb) if kb != FOLDER else None
        if current is None:
            raise NotFound(
                f"The path {memory_path(kb)} does not exist. Please provide a valid path.", path=path
            )
        return current

    def _targets(self, kb: str, path: str) -> list[tuple[str, str]]:
        """(path, sha256) of the file `kb`, or of every file in the folder `kb`. Raises NotFound."""
        current = self.call.read(self.slug, kb)
        if current is not None:
            return [(kb, current.sha256)]
        inside = self.under(kb)
        if not inside:
            raise NotFound(
                f"The path {memory_path(kb)} does not exist. Please provide a valid path.", path=path
            )
        entries = self.call.entries(self.slug, kb + "/")
        return [(p, entries[p][1]) for p in inside]


def _with(out: Outcome, text: str) -> Outcome:
    if out.proposal is not None:
        text += " (pending: an admin must approve this change before it is part of the KB)"
    return Outcome(text, out.kb, out.version, out.proposal)


def _need(command: str, **args: object) -> None:
    missing = [name for name, value in args.items() if value is None]
    if missing:
        raise InvalidRequest(f"{command} needs {', '.join(missing)}", command=command, missing=missing)


def memory(
    call: DialectCall,
    command: str,
    *,
    path: str | None = None,
    view_range: Sequence[int] | None = None,
    file_text: str | None = None,
    old_str: str | None = None,
    new_str: str | None = None,
    insert_line: int | None = None,
    insert_text: str | None = None,
    old_path: str | None = None,
    new_path: str | None = None,
    kb: str | None = None,
) -> Outcome:
    """Run one memory-tool command. Raises InvalidRequest, NotFound, AlreadyExists, NoMatch,
    AmbiguousMatch and every error of the write path."""
    mem = _Memory(call, call.kb_to_read(kb) if command == "view" else call.kb(kb))
    if command == "view":
        _need(command, path=path)
        assert path is not None
        return mem.view(path, view_range)
    if command == "create":
        _need(command, path=path, file_text=file_text)
        assert path is not None and file_text is not None
        return mem.create(path, file_text)
    if command == "str_replace":
        _need(command, path=path, old_str=old_str)
        assert path is not None and old_str is not None
        return mem.str_replace(path, old_str, new_str or "")
    if command == "insert":
        _need(command, path=path, insert_line=insert_line, insert_text=insert_text)
        assert path is not None and insert_line is not None and insert_text is not None
        return mem.insert(path, insert_line, insert_text)
    if command == "delete":
        _need(command, path=path)
        assert path is not None
        return mem.delete(path)
    if command == "rename":
        _need(command, old_path=old_path, new_path=new_path)
        assert old_path is not None and new_path is not None
        return mem.rename(old_path, new_path)
    raise InvalidRequest(f"unknown command {command!r}; use one of {', '.join(COMMANDS)}", command=command)


DIALECT = Dialect(
    name="memory_tool",
    tools=TOOLS,
    bind="kbserver.mcp.binders.memory_tool:tools",
    results={"memory": MemoryToolResult},
    folders=(FOLDER + "/",),
)
