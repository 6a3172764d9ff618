"""Control plane: agents, people, token hashes, links, KB metadata, runs, proposals, idempotency keys and
the retrieval counters of memories.

`ControlStore` is the protocol services use; `SqliteControlStore` implements it in one SQLite file
(WAL), `PostgresControlStore` in a PostgreSQL database several nodes share. Sits beside store and
index: imports only kbserver.core. Tokens are never stored in clear.
"""

from kbserver.control.people import email_key
from kbserver.control.pg_heads import HeadListener, PostgresHeads
from kbserver.control.postgres import PostgresControlStore, safe_url
from kbserver.control.rows import (
    PROPOSAL_STATUSES,
    AgentRow,
    CodeRow,
    GrantRow,
    IdempotencyRow,
    KBRow,
    MemoryAccessRow,
    PersonRow,
    ProposalRow,
    ProposalStatus,
    RunRow,
    SessionRow,
    hash_token,
)
from kbserver.control.sqlite import SqliteControlStore
from kbserver.control.store import ControlStore

__all__ = [
    "PROPOSAL_STATUSES",
    "AgentRow",
    "CodeRow",
    "ControlStore",
    "GrantRow",
    "HeadListener",
    "IdempotencyRow",
    "KBRow",
    "MemoryAccessRow",
    "PersonRow",
    "PostgresControlStore",
    "PostgresHeads",
    "ProposalRow",
    "ProposalStatus",
    "RunRow",
    "SessionRow",
    "SqliteControlStore",
    "email_key",
    "hash_token",
    "safe_url",
]
