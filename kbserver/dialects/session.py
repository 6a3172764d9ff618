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

from kbserver.core.errors import AlreadyExists, ApprovalUnavailable, InvalidRequest, NotFound, Stale
from kbserver.core.model import Caller, FileChange, WriteRequest, WriteResult
from kbserver.services import Services, files, kbs, writes

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
    proposal: dict[str, object] | None = None

    def fields(self) -> dict[str, object]:
        """`{version}` or `{version: null, proposal}` for a tool result."""
        if self.proposal is not None:
            return {"version": None, "proposal": self.proposal}
        return {"version": self.version}


@dataclass(frozen=True)
class DialectCall:
    """One tool call of `caller`; `run_id` is the session's run and `mounted` the KBs it pinned, if any.

    `no_run_hint` tells a `read_write_ask` agent without a run how to get one (it depends on the edge).
    """

    services: Services
    caller: Caller
    run_id: str | None = None
    mounted: frozenset[str] = frozenset()
    no_run_hint: str | None = None

    def writable(self) -> list[str]:
        """Slugs of the KBs the caller may write (the admin: every KB)."""
        return [
            kb.slug
            for kb in kbs.visible(self.services, self.caller)
            if kb.permission in ("admin", "read_write", "read_write_ask")
        ]

    def readable(self) -> list[str]:
        return [kb.slug for kb in kbs.visible(self.services, self.caller)]

    def kb(self, kb: str | None) -> str:
        """`kb`, or the caller's only writable KB. Raises InvalidRequest when that is ambiguous."""
        if kb is not None:
            return kb
        writable = self.writable()
        if len(writable) == 1:
            return writable[0]
        if not writable:
            raise InvalidRequest("you cannot write to any KB; ask an admin for read_write on one", kbs=[])
        raise InvalidRequest(
            f"pass `kb`: you can write to {len(writable)} KBs: {', '.join(writable)}", kbs=writable
        )

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
        run_id = self.run_id if slug in self.mounted else None
        try:
            req = WriteRequest(files=list(changes), message=message, run_id=run_id)
        except ValueError as exc:  # pydantic's ValidationError: e.g. a message over the limit
            raise InvalidRequest(f"bad write: {exc}") from None
        try:
            result = writes.submit(self.services, self.caller, slug, req, tool_set=tool_set)
        except ApprovalUnavailable as err:
            how = (
                f"KB {slug} was not mounted when this run started; start a new one"
                if self.run_id is not None
                else self.no_run_hint
            )
            if how is None:
                raise
            raise ApprovalUnavailable(
                f"your writes to {slug} need an admin's approval, which is only possible inside a run: {how}",
                **err.details,
            ) from None
        if isinstance(result, WriteResult):
            return Written(result.version)
        return Written(None, result.proposal.model_dump(mode="json"))


def retry_stale(attempt: Callable[[], T]) -> T:
    """Run a read-compute-write `attempt` again when its reads went stale (another writer won the race:
    `stale`, or `already_exists` for a file it meant to create), after a short random pause."""
    for tries in range(1, STALE_RETRIES):
        try:
            return attempt()
        except (Stale, AlreadyExists):
            time.sleep(random.uniform(0.005, 0.02) * tries)  # de-synchronise the racing writers
    return attempt()
