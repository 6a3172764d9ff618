"""One agent session: the rules every MCP tool set shares (the context tools and every dialect).

- A call belongs to a run: the one its `run` argument names (`named_run`: the caller's own, live), or
  the implicit interactive run of its MCP session or stdio process (`start_run`); the admin has none.
- `kb` may be omitted: the context tools then use the only KB the agent can reach, the dialects the
  only KB it can write (`default_kb`).
- Writes go through the one write path (`submit` -> `writes.submit`) and carry the run id only for
  KBs the run mounted; a `read_write_ask` agent outside an interactive run is told how to get one.
- Searches first wait (briefly) for the index to cover the head, so an agent finds its own writes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

from pydantic import ValidationError

from kbserver.core.errors import ApprovalUnavailable, InvalidRequest
from kbserver.core.model import Caller, FileChange, WriteRequest
from kbserver.core.problems import problems
from kbserver.services import kbs
from kbserver.services.context import Services
from kbserver.services.models import SearchResults, WriteOutcome
from kbserver.services.reading import runs, search
from kbserver.services.writing import writes

__all__ = ["INDEX_WAIT_SECONDS", "NO_RUN_HINT", "AgentSession", "SessionRun", "named_run", "start_run"]

log = logging.getLogger(__name__)

INDEX_WAIT_SECONDS = 5.0
"""How long a search waits for the index to cover the KB's head (read-your-writes)."""

_WRITABLE = ("admin", "read_write", "read_write_ask")

NO_RUN_HINT = 'call start_run {"interactive": true} and pass the `run` it returns as `run` in this call'
"""How an MCP agent whose call belongs to no run gets one (the default `no_run_hint`)."""


@dataclass(frozen=True)
class SessionRun:
    """A run as a call sees it: its id, the version of each KB it mounted, whether it is interactive."""

    id: str
    mounts: dict[str, str]
    interactive: bool = True


def start_run(services: Services, caller: Caller) -> SessionRun | None:
    """The one interactive run of a new session, pinning the heads of the caller's KBs (None for the
    admin, whose sessions read the heads)."""
    if caller.is_admin:
        return None
    started = runs.start(services, caller, interactive=True)
    return SessionRun(started.id, dict(started.mounts))


def named_run(services: Services, caller: Caller, run_id: str) -> SessionRun:
    """The caller's live run `run_id`. Raises NotFound (unknown, expired, another agent's, the admin)."""
    row = runs.owned_run(services, caller, run_id)
    return SessionRun(row.id, dict(row.mounts), row.interactive)


@dataclass(frozen=True)
class AgentSession:
    """One call of `caller` within a session; `run_id` and `mounted` come from the session's run."""

    services: Services
    caller: Caller
    run_id: str | None = None
    mounted: frozenset[str] = frozenset()
    interactive: bool = False
    # How an agent without a run gets one; it depends on the edge (None: the write path's own advice).
    no_run_hint: str | None = NO_RUN_HINT

    @classmethod
    def of(cls, services: Services, caller: Caller, run: SessionRun | None) -> Self:
        """The session of `caller` in `run` (None: no run, e.g. a sessionless MCP call or the admin)."""
        if run is None:
            return cls(services, caller)
        return cls(services, caller, run.id, frozenset(run.mounts), run.interactive)

    # -- which KB ---------------------------------------------------------------------------------
    def reachable(self) -> list[str]:
        """Slugs of the KBs the caller can read."""
        return kbs.slugs(self.services, self.caller)

    def writable(self) -> list[str]:
        """Slugs of the KBs the caller may write (the admin: every KB)."""
        return [kb.slug for kb in kbs.visible(self.services, self.caller) if kb.permission in _WRITABLE]

    def default_kb(self, kb: str | None, *, writable: bool = False) -> str:
        """`kb`, or the only KB the caller can reach (`writable`: can write).

        Raises InvalidRequest when there is none or more than one.
        """
        if kb is not None:
            return kb
        found = self.writable() if writable else self.reachable()
        if len(found) == 1:
            return found[0]
        if writable:
            if not found:
                raise InvalidRequest("you cannot write to any KB; ask an admin for read_write on one", kbs=[])
            raise InvalidRequest(
                f"pass `kb`: you can write to {len(found)} KBs: {', '.join(found)}", kbs=found
            )
        if not found:
            raise InvalidRequest("you cannot reach any KB; ask an admin to link you to one", kbs=[])
        raise InvalidRequest(f"pass `kb`: you can reach {len(found)} KBs: {', '.join(found)}", kbs=found)

    # -- the write path ---------------------------------------------------------------------------
    def submit(
        self,
        slug: str,
        changes: Sequence[FileChange],
        message: str | None,
        tool_set: str = "context",
        *,
        idempotency_key: str | None = None,
    ) -> WriteOutcome:
        """One version (or, for `read_write_ask`, one proposal) through `writes.submit`.

        Raises InvalidRequest (a bad request) and every error of `writes.submit`.
        """
        run_id = self.run_id if slug in self.mounted else None  # a run only covers what it mounted
        try:
            req = WriteRequest(files=list(changes), message=message, run_id=run_id)
        except ValidationError as exc:
            first = problems(exc, "write")[0]
            raise InvalidRequest(f"bad write: {first['field']}: {first['problem']}") from None
        try:
            return writes.submit(
                self.services, self.caller, slug, req, tool_set=tool_set, idempotency_key=idempotency_key
            )
        except ApprovalUnavailable as err:
            if self.run_id is None:
                how = self.no_run_hint
            elif slug not in self.mounted:
                how = (
                    f"run {self.run_id} did not mount KB {slug}; call start_run "
                    f'{{"kbs": ["{slug}"], "interactive": true}} and pass its `run`'
                )
            else:
                how = f"run {self.run_id} is not interactive; {NO_RUN_HINT}"
            if how is None:
                raise
            raise ApprovalUnavailable(
                f"your writes to {slug} need an admin's approval, which is only possible inside an "
                f"interactive run: {how}",
                **err.details,
            ) from None

    # -- search -----------------------------------------------------------------------------------
    def search(self, slug: str, query: str, limit: int = 10, prefix: str | None = None) -> SearchResults:
        """Search `slug` once the index covers its head (or INDEX_WAIT_SECONDS passed).

        Raises NotFound, InvalidRequest, Unavailable.
        """
        self.wait_for_index(slug)
        return search.query(self.services, self.caller, slug, query, limit=limit, prefix=prefix)

    def wait_for_index(self, slug: str) -> None:
        """Best effort: let the index catch up with the head before searching (read-your-writes)."""
        status = search.status(self.services, self.caller, slug)
        head = status.head
        if head is None or head == status.indexed_version:
            return
        try:
            search.status(self.services, self.caller, slug, wait_for=head, timeout=INDEX_WAIT_SECONDS)
        except Exception:  # a slow or busy index must not fail the search; results may lag behind
            log.warning("index of KB %s did not catch up before a search", slug, exc_info=True)
