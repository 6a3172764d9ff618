"""Control plane: agents, people, token hashes, links, KB metadata, runs, proposals, idempotency keys and
the retrieval counters of memories.

`ControlStore` is the protocol services use; `SqliteControlStore` implements it in one SQLite file
(WAL), `PostgresControlStore` in a PostgreSQL database several nodes share. Sits beside store and
index: imports only kbserver.core. Tokens are never stored in clear.

The PostgreSQL parts are imported on first use: psycopg and its pool cost a process memory
(docs/performance.md) that one on SQLite never needs.
"""

import importlib
from typing import TYPE_CHECKING, Any

from kbserver.control.people import email_key
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

if TYPE_CHECKING:
    from kbserver.control.pg_heads import HeadListener, PostgresHeads
    from kbserver.control.postgres import PostgresControlStore, safe_url

_POSTGRES = {
    "HeadListener": "pg_heads",
    "PostgresHeads": "pg_heads",
    "PostgresControlStore": "postgres",
    "safe_url": "postgres",
}

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


def __getattr__(name: str) -> Any:
    """A PostgreSQL part, its module imported now (PEP 562)."""
    module = _POSTGRES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"kbserver.control.{module}"), name)
