"""The rows of the control plane: plain frozen records that every ControlStore hands out."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from kbserver.core.model import Permission, Role

__all__ = [
    "PROPOSAL_STATUSES",
    "AgentRow",
    "CodeRow",
    "GrantRow",
    "IdempotencyRow",
    "KBRow",
    "MemoryAccessRow",
    "OAuthClientRow",
    "PersonRow",
    "ProposalRow",
    "ProposalStatus",
    "RunRow",
    "SessionRow",
    "access_row",
    "agent_rows",
    "grant_row",
    "hash_token",
    "idempotency_row",
    "kb_row",
    "person_row",
    "proposal_row",
    "run_row",
]

# `applying`: an approval claimed the proposal and is committing it right now (or died doing so).
ProposalStatus = Literal["pending", "applying", "approved", "rejected"]
PROPOSAL_STATUSES: tuple[ProposalStatus, ...] = ("pending", "applying", "approved", "rejected")


def hash_token(token: str) -> str:
    """Tokens are random 256-bit secrets, so a plain SHA-256 is a safe, fast lookup key."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class KBRow:
    slug: str
    description: str
    created: float
    limits: dict[str, int]


@dataclass(frozen=True)
class AgentRow:
    name: str
    parent: str | None
    tools: tuple[str, ...]
    auto_record: bool
    created: float
    links: dict[str, Permission]
    id: str = ""  # the agent's identity: a name deleted and made again is another agent, another id


@dataclass(frozen=True)
class PersonRow:
    """A person: `reviews` are the KBs a reviewer decides on; the password only as its argon2id hash."""

    name: str
    email: str
    role: Role
    reviews: tuple[str, ...]
    created: float
    password_hash: str | None = field(default=None, repr=False)
    has_token: bool = False


@dataclass(frozen=True)
class SessionRow:
    """A live web admin session: the person signed in, or None for the admin token's."""

    person: str | None
    expires: float


@dataclass(frozen=True)
class RunRow:
    id: str
    agent: str
    created: float
    expires: float
    interactive: bool
    mounts: dict[str, str]
    agent_id: str | None = None  # the AgentRow.id of its agent (None: an agent since deleted)
    ended: float | None = None  # when POST /runs/{id}/end ended it (None: live until `expires`)
    label: str | None = None  # what the run is for, as its agent named it (the inbox's task)


@dataclass(frozen=True)
class ProposalRow:
    id: str
    slug: str
    agent: str
    run_id: str | None
    created: float
    status: ProposalStatus
    base: str | None
    ref_commit: str
    request: dict[str, Any]
    reason: str | None = None
    decided_by: str | None = None
    decided: float | None = None
    version: str | None = None
    claimed: float | None = None  # when an approval claimed it (status `applying`)
    fence: int = 0  # the fencing token of the last claim: every claim takes a larger one
    agent_id: str | None = None  # the AgentRow.id of its agent (None: an agent since deleted)


@dataclass(frozen=True)
class IdempotencyRow:
    """A write's `Idempotency-Key`, scoped by caller and KB; `result` is None while it runs."""

    caller: str
    slug: str
    key: str
    body_sha256: str
    created: float
    status: int | None
    result: dict[str, Any] | None
    fence: int = 0  # the fencing token of the reservation holding the key


@dataclass(frozen=True)
class MemoryAccessRow:
    """How often a memory of the `semantic` set was retrieved, when last, and its effective importance.

    `importance` is the importance reinforced by use; `base` is the importance of the memory's file it
    was derived from, so a changed file (a new importance, a revert) starts again from the file's.
    """

    slug: str
    id: str
    access_count: int
    last_accessed: float | None
    importance: float
    base: float


@dataclass(frozen=True)
class OAuthClientRow:
    """An OAuth client: registered (RFC 7591) or a Client ID Metadata Document fetched at `fetched`."""

    client_id: str
    info: dict[str, Any]  # the client's metadata as the SDK reads it; never a secret
    metadata_url: bool
    created: float
    fetched: float


@dataclass(frozen=True)
class GrantRow:
    """A connection: what a person allowed a client to do, as an agent, for a resource (RFC 8707)."""

    id: str
    client_id: str
    client_name: str
    agent: str
    person: str
    resource: str
    scopes: tuple[str, ...]
    created: float
    last_used: float | None = None
    revoked: float | None = None


@dataclass(frozen=True)
class CodeRow:
    """An authorization code (stored as its hash) of a grant, usable once before `expires`."""

    grant: GrantRow
    redirect_uri: str
    redirect_explicit: bool
    code_challenge: str
    expires: float
    used: float | None


# Rows from a database row read by column name (sqlite3.Row, psycopg's dict_row alike).


def access_row(row: Any) -> MemoryAccessRow:
    return MemoryAccessRow(
        slug=row["slug"],
        id=row["id"],
        access_count=int(row["access_count"]),
        last_accessed=row["last_accessed"],
        importance=float(row["importance"]),
        base=float(row["base"]),
    )


def agent_rows(rows: Any) -> list[AgentRow]:
    """Agents from rows of `agents` LEFT JOIN `links` (columns slug, permission), ordered by name."""
    found: dict[str, AgentRow] = {}
    for r in rows:
        row = found.get(r["name"])
        if row is None:
            row = found[r["name"]] = AgentRow(
                name=r["name"],
                parent=r["parent"],
                tools=tuple(t for t in r["tools"].split(",") if t),
                auto_record=bool(r["auto_record"]),
                created=r["created"],
                links={},
                id=r["id"],
            )
        if r["slug"] is not None:
            row.links[r["slug"]] = cast(Permission, r["permission"])
    return list(found.values())


def grant_row(row: Any) -> GrantRow:
    return GrantRow(
        id=row["id"],
        client_id=row["client_id"],
        client_name=row["client_name"],
        agent=row["agent"],
        person=row["person"],
        resource=row["resource"],
        scopes=tuple(s for s in row["scopes"].split(" ") if s),
        created=row["created"],
        last_used=row["last_used"],
        revoked=row["revoked"],
    )


def kb_row(row: Any) -> KBRow:
    return KBRow(row["slug"], row["description"], row["created"], json.loads(row["limits"]))


def proposal_row(row: Any) -> ProposalRow:
    return ProposalRow(
        id=row["id"],
        slug=row["slug"],
        agent=row["agent"],
        run_id=row["run_id"],
        created=row["created"],
        status=row["status"],
        base=row["base"],
        ref_commit=row["ref_commit"],
        request=json.loads(row["request"]),
        reason=row["reason"],
        decided_by=row["decided_by"],
        decided=row["decided"],
        version=row["version"],
        claimed=row["claimed"],
        fence=row["fence"],
        agent_id=row["agent_id"],
    )


def person_row(row: Any) -> PersonRow:
    return PersonRow(
        name=row["name"],
        email=row["email"],
        role=cast(Role, row["role"]),
        reviews=tuple(s for s in row["reviews"].split(",") if s),
        created=row["created"],
        password_hash=row["password_hash"],
        has_token=row["token_hash"] is not None,
    )


def run_row(row: Any) -> RunRow:
    return RunRow(
        id=row["id"],
        agent=row["agent"],
        created=row["created"],
        expires=row["expires"],
        interactive=bool(row["interactive"]),
        mounts=json.loads(row["mounts"]),
        agent_id=row["agent_id"],
        ended=row["ended"],
        label=row["label"],
    )


def idempotency_row(row: Any) -> IdempotencyRow:
    return IdempotencyRow(
        caller=row["caller"],
        slug=row["slug"],
        key=row["key"],
        body_sha256=row["body_sha256"],
        created=row["created"],
        status=row["status"],
        result=json.loads(row["result"]) if row["result"] is not None else None,
        fence=int(row["fence"]),
    )
