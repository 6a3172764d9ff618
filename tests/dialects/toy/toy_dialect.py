"""A toy dialect: the `toy` tool set, one tool `toy_note(text)` that keeps each note as toy/{n}.md.

The whole declaration of a dialect is the `DIALECT` below; the package's entry point in the group
`kbserver.dialects` names it, and kbserver derives the tool-set name, the API's `ToolSet`, the MCP
binding, the folders shown as records and the reserved files from it.
"""

from __future__ import annotations

from typing_extensions import TypedDict

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Create
from kbserver.dialects.registry import Dialect, Reserved
from kbserver.dialects.session import DialectCall, retry_stale

FOLDER = "toy/"


class NoteResult(TypedDict):
    """What toy_note answers."""

    path: str
    version: str | None


def toy_note(call: DialectCall, text: str, kb: str | None = None) -> NoteResult:
    """Keeps `text` as the next toy/{n}.md, as one version of the KB."""
    if not text.strip():
        raise InvalidRequest("text must not be blank")
    slug = call.kb(kb)

    def attempt() -> NoteResult:
        path = f"{FOLDER}{len(call.paths(slug, FOLDER)) + 1}.md"
        written = call.write(
            slug, [Create(path=path, mode="create", content=text.strip() + "\n")], "toy: a note", "toy"
        )
        return {"path": path, "version": written.version}

    return retry_stale(attempt)


DIALECT = Dialect(
    name="toy",
    tools=("toy_note",),
    bind="toy_dialect_mcp:tools",
    results={"toy_note": NoteResult},
    folders=(FOLDER,),
    reserved=Reserved(lambda path: path.startswith(FOLDER), "{path} is a toy note; only toy_note writes it"),
)
