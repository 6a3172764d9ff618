"""Data models shared by every layer: write requests, results, versions, callers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from kbserver.core.messages import MAX_MESSAGE_BYTES
from kbserver.core.paths import MAX_PATH_BYTES, PATH_PATTERN, normalize

__all__ = [
    "AGENT_PATTERN",
    "ROLES",
    "SHA256_PATTERN",
    "SLUG_PATTERN",
    "VERSION_PATTERN",
    "Append",
    "Caller",
    "Create",
    "Delete",
    "Edit",
    "FileChange",
    "FileEntry",
    "FileResult",
    "Limits",
    "Message",
    "Overwrite",
    "Permission",
    "Role",
    "VersionInfo",
    "WriteRequest",
    "WriteResult",
    "utc_iso",
]


def utc_iso(ts: float) -> str:
    """A Unix time as the API shows times: `2026-11-29T23:25:44Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


SHA256_PATTERN = r"^[0-9a-f]{64}$"
SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
AGENT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
VERSION_PATTERN = r"^[0-9a-f]{40}$"

Permission = Literal["read", "read_write", "read_write_ask"]
# A person's role (CONTRACT.md section 8): owner = everything, reviewer = decides on some KBs, viewer = reads.
Role = Literal["owner", "reviewer", "viewer"]
ROLES: tuple[Role, ...] = ("owner", "reviewer", "viewer")
Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN, description="lowercase hex SHA-256 of the file")]
Path = Annotated[
    str,
    Field(
        min_length=1,
        description="relative, /-separated path inside the KB (CONTRACT.md §3 Paths: at most 255 bytes "
        "a segment, 1024 in all; no Windows device names, no .git, .gitmodules or .gitattributes)",
        # published, not enforced here: check_path enforces it with messages that name the rule
        json_schema_extra={"pattern": PATH_PATTERN, "maxLength": MAX_PATH_BYTES},
    ),
    AfterValidator(normalize),  # NFC on every request: café in NFC and NFD is one file
]


# A caller's commit message, as /openapi.json states it: core.messages.check_message enforces it
# (at most 4 KiB of UTF-8, so at most that many characters; no control characters but newline and
# tab; no `Kb-…:` line, which no JSON Schema pattern can say).
Message = Annotated[
    str,
    Field(
        max_length=MAX_MESSAGE_BYTES,
        json_schema_extra={"pattern": "^[^\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f]*$"},
    ),
]

# File text: UTF-8 without NUL (published; the write engine refuses a NUL with a clear message).
Text = Annotated[str, Field(json_schema_extra={"pattern": "^[^\\u0000]*$"})]


class _Change(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: Path


class Create(_Change):
    """Create a new file; fails with already_exists if it exists."""

    mode: Literal["create"]
    content: Text


class Append(_Change):
    """Add content at the end of an existing file."""

    mode: Literal["append"]
    content: Text
    expected_sha256: Sha256 | None = None


class Edit(_Change):
    """Replace old_string, which must occur exactly once, by new_string."""

    mode: Literal["edit"]
    old_string: Annotated[Text, Field(min_length=1)]
    new_string: Text
    expected_sha256: Sha256 | None = None


class Overwrite(_Change):
    """Replace the whole content of an existing file."""

    mode: Literal["overwrite"]
    content: Text
    expected_sha256: Sha256 | None = None


class Delete(_Change):
    """Delete an existing file."""

    mode: Literal["delete"]
    expected_sha256: Sha256 | None = None


FileChange = Annotated[Create | Append | Edit | Overwrite | Delete, Field(discriminator="mode")]


class WriteRequest(BaseModel):
    """One write: all of its files change in one version, or none does."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    message: Message | None = None
    run_id: str | None = Field(default=None, max_length=100)
    files: list[FileChange] = Field(min_length=1)


class FileResult(BaseModel):
    path: str
    mode: str
    sha256: str | None


class WriteResult(BaseModel):
    version: str
    parent: str | None
    files: list[FileResult]


class FileEntry(BaseModel):
    path: str
    size: int
    sha256: str


class VersionInfo(BaseModel):
    version: str
    parent: str | None
    author: str
    kind: str
    message: str
    time: str
    paths: list[str]
    run: str | None = None


class Limits(BaseModel):
    """Per-KB limits of a write (defaults from the contract)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_file_bytes: int = Field(default=256 * 1024, ge=1)
    max_files: int = Field(default=20, ge=1)


@dataclass(frozen=True)
class Caller:
    """Who is calling: the admin, an agent with its links (slug -> permission), or a person.

    A person has a `role`; an owner is `is_admin` too (everything the admin token may), a reviewer
    decides on the KBs in `reviews`, a viewer only reads. Versions name the person, never `admin`.
    """

    name: str
    is_admin: bool = False
    links: dict[str, Permission] = field(default_factory=dict)
    tools: tuple[str, ...] = ("context",)
    parent: str | None = None
    auto_record: bool = False
    person: str | None = None  # the person's name when a person calls (their token or session)
    role: Role | None = None
    reviews: frozenset[str] = frozenset()  # the KBs a reviewer decides on
    agent_id: str | None = None  # an agent's identity (kbserver.control.AgentRow.id), not its name

    @property
    def actor(self) -> str:
        """How versions name this caller: `admin`, `person:NAME` or `agent:NAME`."""
        if self.person is not None:
            return f"person:{self.person}"
        return "admin" if self.is_admin else f"agent:{self.name}"

    def made(self, agent: str, agent_id: str | None) -> bool:
        """Whether a run or proposal of agent `agent` (identity `agent_id`) is this agent's: the same
        name and the same identity, so an agent deleted and made again under its name has none of the
        old one's runs and proposals."""
        return agent == self.name and agent_id == self.agent_id and not self.is_human

    @property
    def is_person(self) -> bool:
        return self.person is not None

    @property
    def is_human(self) -> bool:
        """The admin or a person: sees every KB and every agent's memories (what they may change
        is their role's); an agent sees its links and its own private memories."""
        return self.is_admin or self.person is not None

    def may_review(self, slug: str) -> bool:
        """Whether this caller may decide on KB `slug` (approve, reject, revert, undo, publish, edit,
        mark reviewed): the admin and owners on every KB, a reviewer on their own KBs."""
        return self.is_admin or (self.role == "reviewer" and slug in self.reviews)
