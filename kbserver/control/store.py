"""The ControlStore protocol: what services need from the control plane, whatever database holds it.

SQLite implements it in one file (`SqliteControlStore`), PostgreSQL for several nodes
(`PostgresControlStore`).
Every method is one short transaction, safe to call from several threads and several processes.
Methods that change a row in a given state are compare-and-set: they return False when the row was
not in that state, so two processes can never both win.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kbserver.control.oauth_sql import NewToken
from kbserver.control.rows import (
    AgentRow,
    CodeRow,
    GrantRow,
    IdempotencyRow,
    KBRow,
    MemoryAccessRow,
    OAuthClientRow,
    PersonRow,
    ProposalRow,
    RunRow,
    SessionRow,
)
from kbserver.core.model import Permission, Role

__all__ = ["ControlStore"]


class ControlStore(Protocol):
    """Agents, people, token hashes, links, KB metadata, runs, proposals, idempotency keys, memory
    retrievals."""

    def close(self) -> None: ...

    def schema_version(self) -> int:
        """The number of the last migration applied to this store."""
        ...

    def ping(self, timeout: float = 2.0) -> None:
        """Raises Unavailable unless the store answers within about `timeout` seconds (for /healthz)."""
        ...

    def integrity_errors(self) -> list[str]: ...

    # -- KBs
    def add_kb(self, slug: str, description: str) -> bool:
        """Record a KB; False when it is recorded already."""
        ...

    def kb(self, slug: str) -> KBRow | None: ...
    def kbs(self) -> list[KBRow]: ...
    def set_limits(self, slug: str, limits: dict[str, int]) -> None: ...

    # -- agents and links
    def add_agent(
        self, name: str, token: str, parent: str | None, tools: tuple[str, ...], auto_record: bool
    ) -> bool:
        """Record an agent with the hash of `token`; False when the name is taken."""
        ...

    def set_token(self, name: str, token: str) -> bool: ...
    def delete_agent(self, name: str) -> bool: ...
    def agent(self, name: str) -> AgentRow | None: ...
    def agent_by_token(self, token: str) -> AgentRow | None: ...
    def agents(self) -> list[AgentRow]: ...
    def link(self, agent: str, slug: str, permission: Permission) -> None: ...
    def unlink(self, agent: str, slug: str) -> bool: ...

    # -- people (CONTRACT.md section 8): the password only as its argon2id hash, the token as SHA-256
    def add_person(
        self, name: str, email: str, role: Role, reviews: Sequence[str], password_hash: str | None
    ) -> bool:
        """Record a person; False when the name, or the email in any case, is taken."""
        ...

    def person(self, name: str) -> PersonRow | None: ...
    def person_by_email(self, email: str) -> PersonRow | None:
        """The person with this email, whatever its case."""
        ...

    def person_by_token(self, token: str) -> PersonRow | None: ...
    def people(self) -> list[PersonRow]:
        """Every person, in name order."""
        ...

    def set_person_token(self, name: str, token: str) -> bool:
        """Replace the person's personal token (the previous one stops working); False when unknown."""
        ...

    def set_person_password(self, name: str, password_hash: str | None) -> bool: ...
    def set_person_role(self, name: str, role: Role, reviews: Sequence[str]) -> bool: ...
    def delete_person(self, name: str) -> bool:
        """Delete the person and end their web sessions (on every node); False when unknown."""
        ...

    # -- runs
    def add_run(self, run: RunRow) -> None:
        """Record a run (and drop the expired ones)."""
        ...

    def run(self, run_id: str) -> RunRow | None: ...
    def end_run(self, run_id: str, at: float) -> RunRow | None:
        """Mark a run ended at `at` (a run ended before keeps its first time); the run, None if unknown."""
        ...

    # -- proposals
    def add_proposal(self, proposal: ProposalRow, key: tuple[str, str, int] | None = None) -> bool:
        """Record a proposal; with `key` (caller, Idempotency-Key, fencing token) only while that
        reservation of the KB's key is current, in the same transaction: False when it was taken over."""
        ...

    def proposal(self, slug: str, proposal_id: str) -> ProposalRow | None: ...
    def proposals(self, slug: str, status: str | None) -> list[ProposalRow]:
        """A KB's proposals (of one status when given), newest first."""
        ...

    def claim_proposal(self, slug: str, proposal_id: str, by: str) -> int | None:
        """pending → applying, before the approval commits: the claim's fencing token, larger than
        every earlier claim's of this proposal; None when it was not pending."""
        ...

    def proposal_fence_current(self, slug: str, proposal_id: str, fence: int) -> bool:
        """Whether the claim holding `fence` still holds the proposal (applying, not taken over)."""
        ...

    def finish_proposal(self, slug: str, proposal_id: str, version: str, fence: int) -> bool:
        """applying → approved as `version`; False when the claim holding `fence` no longer holds it."""
        ...

    def release_proposal(self, slug: str, proposal_id: str, reason: str | None, fence: int) -> bool:
        """applying → pending again (the approval failed, `reason` says why); False as finish_proposal."""
        ...

    def reject_proposal(self, slug: str, proposal_id: str, by: str, reason: str | None) -> bool:
        """pending → rejected in one step; False when it was not pending."""
        ...

    # -- review
    def reviewed(self, slug: str) -> str | None:
        """The KB's "reviewed up to" version, or None before the first review."""
        ...

    def set_reviewed(self, slug: str, version: str, by: str) -> None:
        """Move the KB's "reviewed up to" marker to `version` (reviewed by `by`)."""
        ...

    def reviewed_each(self, slug: str) -> set[str]:
        """The versions of the KB a person marked reviewed one by one (whatever the marker says)."""
        ...

    def add_reviewed_each(self, slug: str, versions: Sequence[str], by: str) -> None:
        """Mark each of `versions` reviewed (by `by`), apart from the marker."""
        ...

    # -- idempotency keys of writes
    def reserve_key(
        self, caller: str, slug: str, key: str, body_sha256: str, now: float, ttl: float, abandon_after: float
    ) -> int | IdempotencyRow:
        """Reserve `key` for a write about to run: the reservation's fencing token when reserved
        now (larger than every earlier reservation's of the key), else the row that holds it.

        Rows older than `ttl` seconds are dropped first, so an expired key is free again. A
        reservation of the same body without a result for `abandon_after` seconds belongs to a
        process that died; it is taken over (reserved again, now, with a larger token).
        """
        ...

    def key_fence_current(self, caller: str, slug: str, key: str, fence: int) -> bool:
        """Whether the reservation holding `fence` still holds `key` (no result, not taken over)."""
        ...

    def finish_key(
        self, caller: str, slug: str, key: str, status: int, result: dict[str, object], fence: int
    ) -> bool:
        """Record the answer of the write that reserved `key` with `fence`; False when taken over."""
        ...

    def release_key(self, caller: str, slug: str, key: str, fence: int) -> None:
        """Free `key` again (the write that reserved it with `fence` changed nothing)."""
        ...

    # -- the web admin's sessions (the cookie holds the id; only its hash is stored) and failed logins
    def add_session(self, sid: str, expires: float, person: str | None = None) -> None:
        """Record a logged-in session until `expires`, of `person` (None: the admin token's), and drop
        the expired ones."""
        ...

    def session_alive(self, sid: str, now: float) -> bool:
        """Whether `sid` was recorded, has not expired at `now` and was not ended."""
        ...

    def session(self, sid: str, now: float) -> SessionRow | None:
        """The session `sid` while alive at `now` (whose it is), else None."""
        ...

    def end_session(self, sid: str) -> None:
        """Log the session out (every node sees it at its next request)."""
        ...

    def login_failed(self, address: str, now: float, window: float) -> int:
        """Count a failed login from `address` at `now`; returns its failures within `window` seconds.

        Failures older than `window` are dropped (of every address), so the table stays small.
        """
        ...

    def login_failures(self, address: str, now: float, window: float) -> int:
        """The failed logins from `address` within `window` seconds before `now`."""
        ...

    def login_succeeded(self, address: str) -> None:
        """Forget the failed logins of `address`."""
        ...

    # -- retrievals of memories (the `semantic` set): counted here, never in git
    def memory_access(self, slug: str, ids: Sequence[str]) -> dict[str, MemoryAccessRow]:
        """The rows of the memories `ids` of `slug` that were ever retrieved (or given an importance)."""
        ...

    def record_memory_access(
        self, slug: str, retrieved: Mapping[str, float], now: float, keep: float
    ) -> dict[str, MemoryAccessRow]:
        """Count one retrieval of each memory in `retrieved` (id -> the importance in its file) at `now`.

        In one transaction per call, so concurrent retrievals in several processes all count: the
        access count grows by one, `last_accessed` becomes `now`, and the importance moves toward 1 as
        `keep * s + (1 - keep)`, where `s` is the stored importance, or the file's when the row was
        derived from another file importance (a new importance, a revert). Returns the new rows.
        """
        ...

    def set_memory_importance(self, slug: str, memory_id: str, importance: float) -> None:
        """Start the memory's effective importance again from `importance` (its file's new one)."""
        ...

    # -- OAuth for MCP clients: clients, connections (grants), codes and tokens (hashes only)
    def oauth_client(self, client_id: str) -> OAuthClientRow | None: ...
    def put_oauth_client(self, client_id: str, info: dict[str, Any], metadata_url: bool, now: float) -> None:
        """Record a client, or replace the cached document of a metadata-URL client."""
        ...

    def add_grant(
        self, grant: GrantRow, code: str, redirect: tuple[str, bool], challenge: str, expires: float
    ) -> None:
        """Record a connection a person allowed, with the authorization code that hands it over."""
        ...

    def oauth_code(self, code: str) -> CodeRow | None: ...
    def exchange_code(self, code: str, now: float, tokens: Sequence[NewToken]) -> bool:
        """Use the code once and record `tokens`; False (and the connection revoked) when it was used
        before, expired, or its connection was revoked."""
        ...

    def oauth_refresh(self, token: str) -> tuple[GrantRow, float, float | None] | None:
        """The connection of a refresh token, its expiry, and when it was used (rotated), if ever."""
        ...

    def rotate_refresh(self, token: str, now: float, tokens: Sequence[NewToken]) -> bool:
        """Use the refresh token once and record `tokens`; False when it was used before (the
        connection is revoked then), expired, or its connection was revoked."""
        ...

    def agent_by_access_token(self, token: str, now: float) -> tuple[AgentRow, GrantRow] | None:
        """The agent an unexpired access token of a live connection acts as (one query)."""
        ...

    def access_grant(self, token: str) -> GrantRow | None: ...
    def touch_grant(self, grant_id: str, now: float) -> None: ...
    def revoke_grant(self, grant_id: str, now: float) -> bool:
        """End a connection; its tokens stop working at their next request, on every node."""
        ...

    def grants(self) -> list[GrantRow]:
        """The connections not revoked, oldest first."""
        ...

    def grant(self, grant_id: str) -> GrantRow | None: ...
