"""What a dialect tool needs besides its arguments: the caller, its KBs, its run, and the write path.

A `DialectCall` is built by the edge for one tool call. Dialects read through it (the current files)
and write through it: every write is one `writes.submit`, so permissions, limits, secrets, stale
checks, proposals for `read_write_ask` agents and one version per change all apply.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kbserver.core.errors import AlreadyExists, NotFound, Stale
from kbserver.core.model import FileChange, WriteResult
from kbserver.dialects.results import Proposal
from kbserver.services.reading import files
from kbserver.services.session import AgentSession

__all__ = ["STALE_RETRIES", "Current", "DialectCall", "Written", "retry_stale"]

STALE_RETRIES = 8
"""How often a read-compute-write is tried when other writers keep changing the files in between (each
lost race means another write landed, so the KB as a whole always makes progress)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Current:
    """A file as read at the head: its text and sha256 (pass it back as expected_sha256)."""

    content: str
    sha256: str


@dataclass(frozen=True)
class Written:
    """The outcome of a dialect write: a new version, or a pending proposal (read_write_ask)."""

    version: str | None
    proposal: Proposal | None = None
    parent: str | None = None  # the version it was made on (None for a proposal or a first version)
    files: dict[str, str | None] | None = None  # path -> sha256 of each file written (None: deleted)


@dataclass(frozen=True)
class DialectCall(AgentSession):
    """One tool call of a dialect: the agent session (caller, run, default KB, the write path) plus
    reads and writes shaped for dialects."""

    def readable(self) -> list[str]:
        return self.reachable()

    def kb(self, kb: str | None) -> str:
        """`kb`, or the caller's only writable KB. Raises InvalidRequest when that is ambiguous."""
        return self.default_kb(kb, writable=True)

    def kb_to_read(self, kb: str | None) -> str:
        """For a tool that only reads: `kb`, or the caller's only writable KB, or, for an agent that
        can write to none, its only readable KB (the contract's rule names writable KBs only, which
        left read-only agents with no default at all). Raises InvalidRequest when that is ambiguous."""
        if kb is None and not self.writable():
            return self.default_kb(None)
        return self.kb(kb)

    def read(self, slug: str, path: str) -> Current | None:
        """The current file, or None when it does not exist. Raises NotFound (KB), InvalidRequest."""
        try:
            found = files.read(self.services, self.caller, slug, path)
        except NotFound as err:
            if err.details.get("path") == path:
                return None
            raise
        return Current(found.content, found.sha256)

    def entries(self, slug: str, prefix: str) -> dict[str, tuple[int, str]]:
        """`{path: (size, sha256)}` of the current files under `prefix`, in path order. Raises NotFound."""
        listing = files.listing(self.services, self.caller, slug, prefix)
        return {e.path: (e.size, e.sha256) for e in listing.files}

    def paths(self, slug: str, prefix: str) -> list[str]:
        """Paths of the current files under `prefix`, sorted. Raises NotFound."""
        return list(self.entries(slug, prefix))

    def write(self, slug: str, changes: Sequence[FileChange], message: str | None, tool_set: str) -> Written:
        """One version (or proposal) through the write path. Raises every error of `writes.submit`."""
        result = self.submit(slug, changes, message, tool_set)
        if isinstance(result, WriteResult):
            written = {f.path: (None if f.mode == "delete" else f.sha256) for f in result.files}
            return Written(result.version, parent=result.parent, files=written)
        return Written(None, Proposal(id=result.proposal.id, status=result.proposal.status))


def retry_stale(attempt: Callable[[], T]) -> T:
    """Run a read-compute-write `attempt` again when its reads went stale (another writer won the race:
    `stale`, or `already_exists` for a file it meant to create), after a short random pause."""
    for tries in range(1, STALE_RETRIES):
        try:
            return attempt()
        except (Stale, AlreadyExists):
            time.sleep(random.uniform(0.005, 0.02) * tries)  # de-synchronise the racing writers
    return attempt()
