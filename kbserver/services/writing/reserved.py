"""Files the write path reserves for one tool set, e.g. `memory/{agent}/MEMORY.md` for `auto`.

- A dialect declares the files it reserves (a `Reserved`, kbserver.dialects.registry), which are
  registered here at start. Agents change such a file only through that set's tools: a plain write
  (`write_context`, `POST /write`) or another set's on it is `forbidden`. The admin may still edit it.
- Whoever writes it, a change may not take it over AUTO_MEMORY_MAX_BYTES. A change that does not make
  it bigger (shortening or removing an entry of a file that grew too large outside, by a revert or
  git) is always allowed, so an oversized file can be brought back under the cap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kbserver.changes import Applied, Tree
from kbserver.core.errors import Forbidden, TooLarge
from kbserver.core.model import Caller

__all__ = [
    "AUTO_MEMORY",
    "AUTO_MEMORY_MAX_BYTES",
    "Reserved",
    "auto_memory_path",
    "check_caps",
    "check_owner",
    "is_auto_memory",
    "register",
]

AUTO_MEMORY_MAX_BYTES = 2000


@dataclass(frozen=True)
class Reserved:
    """Files one tool set owns: `owns(path)` says which; `refusal` (with `{path}`) says why a write of
    another set is refused."""

    owns: Callable[[str], bool]
    refusal: str


_OWNERS: dict[str, Reserved] = {}
"""Tool set -> the files it reserves, as the dialects declared them."""


def register(tool_set: str, files: Reserved) -> None:
    """Reserves `files` for `tool_set` (registering the same again is a no-op)."""
    _OWNERS[tool_set] = files


def auto_memory_path(agent: str) -> str:
    """The `auto` memory file of `agent`."""
    return f"memory/{agent}/MEMORY.md"


def is_auto_memory(path: str) -> bool:
    """True for `memory/*/MEMORY.md` in any case (a case variant would clash with the real file)."""
    parts = path.split("/")
    return len(parts) == 3 and parts[0].casefold() == "memory" and parts[2].casefold() == "memory.md"


AUTO_MEMORY = Reserved(
    is_auto_memory,
    "{path} is an agent's MEMORY.md; only the auto tools add_memory and edit_memory change it "
    "(an admin may edit it in the web admin)",
)
"""The files the `auto` dialect reserves (it declares them; the cap below is the write path's)."""


def check_owner(caller: Caller, paths: Iterable[str], tool_set: str) -> None:
    """Raises Forbidden when an agent writes a reserved file through another tool set than its owner."""
    if caller.is_human:
        return
    others = [files for owner, files in _OWNERS.items() if owner != tool_set]
    for path in paths:
        for files in others:
            if files.owns(path):
                raise Forbidden(files.refusal.format(path=path), path=path)


def too_large(path: str, old_size: int, new_size: int) -> TooLarge:
    """The refusal of a change that would take an auto memory file over the cap."""
    left = max(0, AUTO_MEMORY_MAX_BYTES - old_size)
    return TooLarge(
        f"{path} would be {new_size} bytes, over its cap of {AUTO_MEMORY_MAX_BYTES}; it holds {old_size} "
        f"bytes, so {left} bytes are left. Remove or shorten an entry first (edit_memory with an empty "
        "new_string removes one), then try again",
        path=path,
        size=new_size,
        max_bytes=AUTO_MEMORY_MAX_BYTES,
        bytes_left=left,
    )


def check_caps(tip: Tree, applied: Sequence[Applied]) -> list[Applied]:
    """`applied`, unless it grows an auto memory file over the cap (raises TooLarge)."""
    for a in applied:
        if a.content is None or not is_auto_memory(a.path) or len(a.content) <= AUTO_MEMORY_MAX_BYTES:
            continue
        old = tip.read(a.path)
        old_size = len(old) if old is not None else 0
        if len(a.content) > old_size:
            raise too_large(a.path, old_size, len(a.content))
    return list(applied)
