"""The PostgreSQL ControlStore: one short transaction per call on a pooled connection.

Several nodes share one database. The data methods are written once for both SQL stores
(`kbserver.control.sql`); what is PostgreSQL's own (the pool, migrations, `= ANY`) is here and in
`pg_base.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kbserver.control.pg_base import TX_SECONDS, PostgresBase, safe_url
from kbserver.control.pg_heads import PostgresHeads
from kbserver.control.pg_migrations import PG_MIGRATIONS
from kbserver.control.rows import (
    MemoryAccessRow,
    access_row,
)
from kbserver.control.sql import SqlStore

__all__ = ["PostgresControlStore", "safe_url"]


class PostgresControlStore(PostgresBase, SqlStore):
    """The control plane in a PostgreSQL database shared by every node; `heads` is the shared log of
    new heads that the change feed of several nodes reads. The data methods are `SqlStore`'s."""

    placeholder = "%s"

    def __init__(
        self, url: str, *, max_connections: int = 10, wait_seconds: float = TX_SECONDS, migrate: bool = True
    ) -> None:
        super().__init__(url, max_connections=max_connections, wait_seconds=wait_seconds, migrate=migrate)
        self.heads = PostgresHeads(self, url)

    def _select(self, sql: str, args: Sequence[object]) -> list[Any]:
        return self._all(sql, args)

    def integrity_errors(self) -> list[str]:
        problems: list[str] = []
        done = {int(r["version"]) for r in self._all("SELECT version FROM schema_migrations")}
        missing = sorted({n for n, _ in PG_MIGRATIONS} - done)
        if missing:
            problems.append(f"migrations not applied: {missing}; run `kbserver migrate`")
        orphans = self._all(
            "SELECT l.agent, l.slug FROM links l LEFT JOIN agents a ON a.name = l.agent WHERE a.name IS NULL"
        )
        problems += [f"link of a missing agent: {(r['agent'], r['slug'])}" for r in orphans]
        return problems

    # -- retrievals of memories ---------------------------------------------------------------------
    def memory_access(self, slug: str, ids: Sequence[str]) -> dict[str, MemoryAccessRow]:
        rows = self._all(
            "SELECT * FROM memory_access WHERE slug = %s AND id = ANY(%s)", (slug, list(dict.fromkeys(ids)))
        )
        return {r["id"]: access_row(r) for r in rows}
